"""The cycle as Prefect flow runs, under Prefect's test harness (one server for the whole session)."""

from __future__ import annotations

import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from conftest import git, init_repo

from gep.models import EvolutionEvent
from gep.store import Store

pytestmark = pytest.mark.timeout(300)

FIX_AGENT = textwrap.dedent("""
    import os, pathlib, sys
    prompt = sys.stdin.read()
    assert "stats" in prompt or os.environ.get("GEP_PROMPT_FILE")
    assert pathlib.Path(os.environ["GEP_PROMPT_FILE"]).is_file()
    p = pathlib.Path("stats.py")
    p.write_text(p.read_text().replace("(len(values) - 1)", "len(values)"))
    print("fixed the mean")
""")

BREAK_AGENT = textwrap.dedent("""
    import pathlib, sys
    sys.stdin.read()
    p = pathlib.Path("stats.py")
    p.write_text(p.read_text().replace("return ordered[mid]", "return ordered[0]"))
    pathlib.Path("notes_from_agent.txt").write_text("temporary")
    print("changed median")
""")

NOOP_AGENT = "import sys; sys.stdin.read(); print('nothing to do')\n"


@pytest.fixture(scope="session")
def prefect_server():
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


def agent(tmp_path: Path, name: str, code: str) -> str:
    script = tmp_path / f"{name}.py"
    script.write_text(code)
    return f"{sys.executable} {script}"


def events(ws: Path) -> list[EvolutionEvent]:
    with Store.for_workspace(ws) as store:
        return store.list_events(limit=50)


def flow_run(run_id: str):
    from prefect import get_client

    with get_client(sync_client=True) as client:
        return client.read_flow_run(run_id)


def artifacts(key: str):
    from prefect import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    with get_client(sync_client=True) as client:
        return client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])))


def test_prompt_cycle_then_solidify(prefect_server, example_ws: Path):
    from flows.cycle import evolution_cycle
    from flows.reporting import workspace_key
    from flows.solidify import solidify_pending

    event = evolution_cycle(workspace=str(example_ws), mutator="prompt")
    assert event.outcome.status == "awaiting_changes"
    assert event.genes_used == ["gene_repair_from_errors"]
    assert "log_error" in event.signals
    run = flow_run(event.meta.flow_run_id)
    assert run.name.startswith("cycle-0001 repair gene_repair_from_errors")
    assert {"intent:repair", "gene:gene_repair_from_errors", "outcome:awaiting_changes"} <= set(run.tags)
    prompt_file = Path(event.meta.mutator_result.prompt_file)
    assert prompt_file.is_file() and "stats" in prompt_file.read_text()
    key = workspace_key(example_ws)
    assert artifacts(f"gep-{key}-cycle"), "markdown artifact missing"
    assert artifacts(f"gep-{key}-prompt"), "prompt artifact missing"

    # a second cycle refuses while this one awaits changes
    from gep.errors import PendingCycleError

    with pytest.raises(PendingCycleError):
        evolution_cycle(workspace=str(example_ws), mutator="prompt")

    # the human makes the change, then solidify commits it
    stats = example_ws / "stats.py"
    stats.write_text(stats.read_text().replace("(len(values) - 1)", "len(values)"))
    done = solidify_pending(workspace=str(example_ws), summary="Divide the mean by n, not n-1")
    assert done.id == event.id and done.outcome.status == "success", done.meta.failure_reasons
    log = git(example_ws, "log", "-1", "--format=%B")
    assert log.startswith("gep(repair): Divide the mean by n, not n-1\n")
    assert f"GEP-Event: {event.id}" in log
    assert git(example_ws, "status", "--porcelain").strip() == ""
    # validation left nothing behind either (no .pytest_cache, no __pycache__): only the engine's own .gep/
    assert git(example_ws, "status", "--porcelain", "--ignored").split() == ["!!", ".gep/"]
    stored = {e.id: e for e in events(example_ws)}
    assert stored[event.id].outcome.status == "success"


def test_command_agent_fix_commits(prefect_server, example_ws: Path, tmp_path: Path):
    from flows.cycle import evolution_cycle

    event = evolution_cycle(workspace=str(example_ws), mutator="command",
                            agent_cmd=agent(tmp_path, "fix", FIX_AGENT))
    assert event.outcome.status == "success", event.meta.failure_reasons
    head = git(example_ws, "log", "-1", "--format=%H%n%B")
    assert event.meta.commit in head
    assert f"GEP-Event: {event.id}" in head and "GEP-Gene: gene_repair_from_errors" in head
    assert "fixed the mean" in event.meta.mutator_result.output
    assert flow_run(event.meta.flow_run_id).state_name == "Completed"


def test_command_agent_that_breaks_tests_is_rolled_back(prefect_server, example_ws: Path, tmp_path: Path):
    from flows.cycle import evolution_cycle

    (example_ws / "my_notes.txt").write_text("mine, untracked\n")
    before = git(example_ws, "rev-parse", "HEAD")
    original = (example_ws / "stats.py").read_bytes()
    event = evolution_cycle(workspace=str(example_ws), mutator="command",
                            agent_cmd=agent(tmp_path, "brk", BREAK_AGENT))
    assert event.outcome.status == "failed"
    assert any(r.startswith("validation") for r in event.meta.failure_reasons)
    assert git(example_ws, "rev-parse", "HEAD") == before
    assert (example_ws / "stats.py").read_bytes() == original
    assert not (example_ws / "notes_from_agent.txt").exists()
    assert (example_ws / "my_notes.txt").read_text() == "mine, untracked\n"
    with Store.for_workspace(example_ws) as store:
        report = store.get_validation_report(event.validation_report_id)
        failed = store.list_failed_capsules()
    assert report is not None and not report.overall_ok
    assert any("failed" in (r.stdout + r.stderr).lower() for r in report.results)
    assert failed and failed[-1].gene == "gene_repair_from_errors"


def test_stage_failure_fails_run_and_records_event(prefect_server, example_ws: Path, monkeypatch):
    import gep.stages
    from flows.cycle import evolution_cycle

    def broken(*_a, **_k):
        raise RuntimeError("mutator exploded")

    monkeypatch.setattr(gep.stages, "get_mutator", broken)
    state = evolution_cycle(workspace=str(example_ws), mutator="prompt", return_state=True)
    assert state.is_failed()
    [ev] = events(example_ws)
    assert ev.outcome.status == "failed"
    assert "RuntimeError: mutator exploded" in ev.meta.failure_reasons[0]
    assert git(example_ws, "status", "--porcelain").strip() == ""


@pytest.mark.parametrize("module, name", [("gep.stages", "collect_sources"), ("gep.stages", "extract_signals"),
                                           ("gep.stages", "select_gene_and_capsule")])
def test_failure_in_an_early_stage_is_recorded_too(prefect_server, example_ws: Path, monkeypatch, module: str,
                                                   name: str):
    import importlib

    from flows.cycle import evolution_cycle

    def broken(*_a, **_k):
        raise RuntimeError(f"{name} exploded")

    monkeypatch.setattr(importlib.import_module(module), name, broken)
    state = evolution_cycle(workspace=str(example_ws), mutator="prompt", return_state=True)
    assert state.is_failed()
    [ev] = events(example_ws)
    assert ev.outcome.status == "failed" and ev.meta.flow_run_id == str(state.state_details.flow_run_id)
    assert f"RuntimeError: {name} exploded" in ev.meta.failure_reasons[0]
    assert git(example_ws, "status", "--porcelain").strip() == ""


def test_scheduled_ticks_skip_under_steady_state(prefect_server, example_ws: Path):
    from flows.cycle import evolution_cycle

    with Store.for_workspace(example_ws) as store:
        for i in range(6):
            store.add_event(EvolutionEvent(
                id=f"evt_empty_{i}", intent="optimize", signals=["stable_success_plateau"],
                genes_used=["gene_optimize_code_quality"], outcome={"status": "empty", "score": 0.0},
                meta={"empty_cycle": True, "at": f"2026-11-2{i}T00:00:00.000Z"}))
    results = [evolution_cycle(workspace=str(example_ws), mutator="prompt", scheduled=True, return_state=True)
               for _ in range(3)]
    skipped = [s for s in results if (s.message or "").startswith("skipped")]
    assert len(skipped) >= 2, [s.message for s in results]
    # a manual trigger still runs
    manual = evolution_cycle(workspace=str(example_ws), mutator="prompt", abandon_pending=True)
    assert manual.outcome.status in {"awaiting_changes", "empty"}


def test_fleet_runs_each_workspace_once_never_interleaved(prefect_server, tmp_path: Path):
    from flows.fleet import evolve_fleet

    a = init_repo(tmp_path / "a", {"logs/app.log": "[ERROR] boom: TypeError: x is not a function\n"})
    b = init_repo(tmp_path / "b", {"logs/app.log": "[ERROR] crash: ValueError: bad\n"})
    cmd = agent(tmp_path, "noop", NOOP_AGENT)
    results = evolve_fleet(workspaces=[str(a), str(b), str(a)], mutator="command", agent_cmd=cmd)
    assert set(results) == {str(a), str(b)}
    evs_a = events(a)
    assert len(evs_a) == 2  # listed twice: two cycles, one after the other
    assert all(e.outcome.status == "empty" for e in evs_a + events(b))
    starts = sorted(e.meta.at for e in evs_a)
    assert starts[0] != starts[1]


@pytest.mark.parametrize("approve", [False, True])
def test_review_mode_waits_for_approval(prefect_server, example_ws: Path, tmp_path: Path, approve: bool):
    from prefect.flow_runs import resume_flow_run

    from flows.cycle import evolution_cycle

    result: dict[str, EvolutionEvent] = {}

    def run() -> None:
        result["event"] = evolution_cycle(workspace=str(example_ws), mutator="command", review=True,
                                          agent_cmd=agent(tmp_path, "fix", FIX_AGENT))

    t = threading.Thread(target=run)
    t.start()
    run_id = None
    deadline = time.time() + 120
    while time.time() < deadline and run_id is None:
        time.sleep(1)
        running = [e for e in events(example_ws) if e.outcome.status == "running"]
        if running and running[0].meta.flow_run_id:
            candidate = running[0].meta.flow_run_id
            if flow_run(candidate).state_name == "Paused":
                run_id = candidate
    assert run_id, "the flow never paused for review"
    assert git(example_ws, "log", "-1", "--format=%s").strip() == "initial"  # nothing committed yet
    resume_flow_run(run_id, run_input={"approve": approve, "note": "reviewed"})
    t.join(120)
    event = result["event"]
    if approve:
        assert event.outcome.status == "success", event.meta.failure_reasons
        assert f"GEP-Event: {event.id}" in git(example_ws, "log", "-1", "--format=%B")
        assert "sum(values) / len(values)" in (example_ws / "stats.py").read_text()
    else:
        assert event.outcome.status == "failed"
        assert any("review" in r for r in event.meta.failure_reasons)
        assert "(len(values) - 1)" in (example_ws / "stats.py").read_text()
        assert git(example_ws, "log", "-1", "--format=%s").strip() == "initial"


def test_claude_driven_cycle_edits_validates_finishes_commits(prefect_server, example_ws: Path, monkeypatch):
    from fake_anthropic import FakeAnthropic
    from test_mutator_anthropic import fixing_session

    from flows.cycle import evolution_cycle

    fake = FakeAnthropic()
    fake.start()
    try:
        fake.script = fixing_session()
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-a-real-key-000000000000")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
        monkeypatch.setenv("GEP_MODEL", "claude-sonnet-4-6")
        event = evolution_cycle(workspace=str(example_ws))  # no --mutator: anthropic, since a key is set
    finally:
        fake.stop()
    assert event.meta.mutator == "anthropic"
    assert event.outcome.status == "success", event.meta.failure_reasons
    subject = git(example_ws, "log", "-1", "--format=%s").strip()
    assert subject == "gep(repair): Fix stats.mean dividing by len-1"
    assert "sum(values) / len(values)" in (example_ws / "stats.py").read_text()
    metrics = event.meta.mutator_result.metrics
    assert metrics.turns == 6 and metrics.input_tokens > 0 and metrics.cache_read_input_tokens > 0
    assert event.meta.prompt_sizes.total > 0
    assert "sk-ant-test" not in event.model_dump_json()
    assert git(example_ws, "status", "--porcelain").strip() == ""


def test_cli_cycle_json_prints_only_the_event(prefect_server, example_ws: Path):
    import json

    from typer.testing import CliRunner

    from gep.cli import app

    result = CliRunner().invoke(app, ["cycle", "--workspace", str(example_ws), "--mutator", "prompt", "--json"])
    assert result.exit_code == 0, result.stderr
    event = json.loads(result.stdout)  # the whole of stdout is one JSON object
    assert event["type"] == "EvolutionEvent" and event["outcome"]["status"] == "awaiting_changes"
    again = CliRunner().invoke(app, ["cycle", "--workspace", str(example_ws), "--mutator", "prompt"])
    assert again.exit_code != 0 and "awaiting changes" in again.stderr
    assert "Traceback" not in again.stderr


def test_empty_workspace_parameter_is_refused(prefect_server):
    from flows.cycle import evolution_cycle
    from gep.errors import ConfigError

    for bad in ("", "  ", "{{ $GEP_WORKSPACE }}"):
        with pytest.raises(ConfigError, match="workspace"):
            evolution_cycle(workspace=bad, mutator="prompt")


def test_scheduled_tick_skips_while_a_cycle_awaits_changes(prefect_server, example_ws: Path):
    from flows.cycle import evolution_cycle

    first = evolution_cycle(workspace=str(example_ws), mutator="prompt")
    assert first.outcome.status == "awaiting_changes"
    state = evolution_cycle(workspace=str(example_ws), mutator="prompt", scheduled=True, return_state=True)
    assert state.is_completed() and "awaiting changes" in state.message
    assert [e.id for e in events(example_ws)] == [first.id]


def test_refused_request_fails_the_run_with_the_reason_and_records_nothing(prefect_server, example_ws: Path):
    from flows.cycle import evolution_cycle
    from flows.solidify import solidify_pending
    from gep.errors import ConfigError, WorkspaceError

    state = evolution_cycle(workspace=str(example_ws), mutator="claude", return_state=True)
    assert state.is_failed() and "unknown mutator 'claude'" in state.message
    with pytest.raises(ConfigError, match="unknown strategy 'fast'"):
        evolution_cycle(workspace=str(example_ws), strategy="fast")
    state = evolution_cycle(workspace=str(example_ws), mutator="command", return_state=True)
    assert state.is_failed() and "agent command" in state.message
    assert events(example_ws) == []  # a typo is not a failed cycle: no gene pays for it
    state = solidify_pending(workspace=str(example_ws), return_state=True)
    assert state.is_failed() and "no cycle is awaiting changes" in state.message
    with pytest.raises(WorkspaceError):
        solidify_pending(workspace=str(example_ws))


def test_a_cycle_waits_for_the_workspace_slot_and_gives_up_cancelled(prefect_server, example_ws: Path,
                                                                      monkeypatch):
    from prefect.concurrency.sync import concurrency

    import flows.cycle
    from flows.reporting import ensure_limit, workspace_key

    name = f"gep-workspace-{workspace_key(example_ws)}"
    ensure_limit(name)
    monkeypatch.setattr(flows.cycle, "SLOT_TIMEOUT_S", 3)
    with concurrency(name, occupy=1, strict=True):  # another cycle holds this repository
        state = flows.cycle.evolution_cycle(workspace=str(example_ws), mutator="prompt", return_state=True)
    assert state.is_cancelled() and "did not start" in state.message
    assert events(example_ws) == []
    # the slot is free again: the next run goes through
    assert flows.cycle.evolution_cycle(workspace=str(example_ws), mutator="prompt").outcome.status == "awaiting_changes"


def test_the_flow_runs_the_engines_stage_list(prefect_server, example_ws: Path, monkeypatch):
    """flows/cycle.py does not restate the order: each stage of gep.pipeline.STAGES is one task run, and a
    stage removed from that list is gone from the flow too."""
    from prefect import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    from flows.cycle import evolution_cycle
    from gep import pipeline as P

    monkeypatch.setattr(P, "STAGES", [s for s in P.STAGES if s.name != "extract signals"])
    event = evolution_cycle(workspace=str(example_ws), mutator="prompt")
    assert event.signals == [] and event.outcome.status == "empty"
    with get_client(sync_client=True) as client:
        runs = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[event.meta.flow_run_id])))
    names = {r.name.rsplit("-", 1)[0] for r in runs}
    assert names == {"collect sources", "analyse history", "gate", "select", "build mutation", "record"}


def test_the_distill_flow_stores_a_gene_and_shows_the_analysis_and_result(prefect_server, tmp_path: Path):
    """flows/distill.py (the daily `distill-genes` deployment): the run's artifacts show the analysis and the
    result; the kept gene is stored; the next run says why it skipped."""
    from distill_cases import python_workspace, repair_capsules

    from flows.distill import distill_genes
    from flows.reporting import workspace_key

    ws = init_repo(python_workspace(tmp_path / "ws"), {})
    with Store.for_workspace(ws) as store:
        for c in repair_capsules(12):
            store.upsert_capsule(c)
    run = distill_genes(workspace=str(ws))
    assert run.status == "kept" and run.gene_id.startswith("gene_distilled_")
    with Store.for_workspace(ws) as store:
        assert store.get_gene(run.gene_id) is not None
    key = workspace_key(ws)
    [report] = artifacts(f"gep-{key}-distill")
    assert report.type == "markdown" and run.gene_id in report.data and "## Analysis" in report.data
    [table] = artifacts(f"gep-{key}-distill-analysis")
    assert "high frequency" in str(table.data) and "gene_repair_from_errors" in str(table.data)
    again = distill_genes(workspace=str(ws))
    assert again.status == "skipped" and again.reasons[0].startswith("last distillation attempt")
