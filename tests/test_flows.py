"""The cycle as Prefect flow runs, against the session's one Prefect server (tests/live_prefect.py)."""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
import threading
import time
import traceback
import typing
from pathlib import Path

import pytest
from conftest import git, init_repo

from gep.core.models import EvolutionEvent
from gep.core.request import CycleRequest
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

@pytest.fixture(scope="session")
def prefect_server(live_prefect):
    """The end-to-end tests' server, for flows called in this process (as Prefect's test harness sets it up,
    threads included; its logs and events are sent before the server stops)."""
    import prefect.context
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker
    from prefect.settings import temporary_settings

    with temporary_settings(updates={"api.url": live_prefect.api_url}), \
            prefect.context._temporary_global_settings_context(prefect.context.get_settings_context()):
        yield live_prefect
        APILogWorker.drain_all()
        EventsWorker.drain_all()


def run_state(flow_fn, **params):
    """A flow called as the CLI calls it: to its final state. A cycle flow gets ``params`` as its request's
    fields (checked into the request as the JSON of a run from a deployment would be)."""
    if getattr(flow_fn, "request_model", None) is not None and "request" not in params:
        params = {"request": params}
    result = flow_fn(**params, return_state=True)
    return asyncio.run(result) if asyncio.iscoroutine(result) else result


def cycle(**params) -> EvolutionEvent | None:
    """One evolution_cycle run: the event its final state carries (failed cycles included)."""
    from flows.cycle import evolution_cycle
    from flows.states import event_of

    return event_of(run_state(evolution_cycle, **params))


def solidify(**params) -> EvolutionEvent | None:
    from flows.solidify import solidify_pending
    from flows.states import event_of

    return event_of(run_state(solidify_pending, **params))


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


def paused_run(ws: Path, cycle_thread: threading.Thread, deadline_s: float = 120) -> str:
    """The id of the workspace's running cycle once its flow run pauses for review; failing, where the cycle's
    thread was (a run that never paused once in a loaded CI run: the stack says which stage held it)."""
    deadline = time.time() + deadline_s
    while time.time() < deadline and cycle_thread.is_alive():
        running = [e for e in events(ws) if e.outcome.status == "running"]
        if running and running[0].meta.flow_run_id and flow_run(running[0].meta.flow_run_id).state_name == "Paused":
            return running[0].meta.flow_run_id
        time.sleep(0.25)  # asked again soon: the test goes on as soon as the run pauses
    frame = sys._current_frames().get(cycle_thread.ident or -1)
    where = "".join(traceback.format_stack(frame)[-12:]) if frame else "the cycle's thread had ended"
    states = [(e.id, e.outcome.status.value, e.meta.flow_run_id) for e in events(ws)][:3]
    pytest.fail(f"the flow never paused for review; events {states}; the cycle's thread:\n{where}")


def task_run_states(flow_run_id: str, until, timeout_s: float = 30) -> dict[str, tuple[str, str | None]]:
    """Each task run of the flow run, by stage name: its state's type and message, as the server has them
    (task runs reach it as events, a bit after the flow returned: read until ``until`` holds and all ended)."""
    from prefect import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    found: dict[str, tuple[str, str | None]] = {}
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with get_client(sync_client=True) as client:
            runs = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])))
        found = {r.name.rsplit("-", 1)[0]: (r.state.type.value, r.state.message) for r in runs if r.state}
        if until(found) and all(t in ("COMPLETED", "FAILED") for t, _ in found.values()):
            break
        time.sleep(0.5)
    return found


def artifacts(key: str):
    from prefect import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    with get_client(sync_client=True) as client:
        return client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])))


def test_prompt_cycle_then_solidify(prefect_server, example_ws: Path):
    from flows.reporting import workspace_key

    event = cycle(workspace=str(example_ws), mutator="prompt")
    assert event.outcome.status == "awaiting_changes"
    assert event.genes_used == ["gene_repair_from_errors"]
    assert "log_error" in event.signals
    run = flow_run(event.meta.flow_run_id)
    assert run.name.startswith("cycle-0001 repair gene_repair_from_errors")
    assert {"intent:repair", "gene:gene_repair_from_errors", "outcome:awaiting_changes",
            f"workspace:{example_ws.name}"} <= set(run.tags)
    assert run.state.type.value == "COMPLETED" and run.state_name == "Awaiting changes"
    prompt_file = Path(event.meta.mutator_result.prompt_file)
    assert prompt_file.is_file() and "stats" in prompt_file.read_text()
    key = workspace_key(example_ws)
    assert artifacts(f"gep-{key}-cycle"), "markdown artifact missing"
    assert artifacts(f"gep-{key}-prompt"), "prompt artifact missing"

    # a second cycle refuses while this one awaits changes
    from flows.cycle import evolution_cycle
    from gep.core.errors import PendingCycleError

    with pytest.raises(PendingCycleError):
        asyncio.run(evolution_cycle(request=CycleRequest(workspace=example_ws, mutator="prompt")))

    # the human makes the change, then solidify commits it
    stats = example_ws / "stats.py"
    stats.write_text(stats.read_text().replace("(len(values) - 1)", "len(values)"))
    done = solidify(workspace=str(example_ws), summary="Divide the mean by n, not n-1")
    assert done.id == event.id and done.outcome.status == "success", done.meta.failure_reasons
    log = git(example_ws, "log", "-1", "--format=%B")
    assert log.startswith("gep(repair): Divide the mean by n, not n-1\n")
    assert f"GEP-Event: {event.id}" in log
    assert git(example_ws, "status", "--porcelain").strip() == ""
    # validation left nothing behind either (no .pytest_cache, no __pycache__): only the engine's own .gep/
    assert git(example_ws, "status", "--porcelain", "--ignored").split() == ["!!", ".gep/"]
    stored = {e.id: e for e in events(example_ws)}
    assert stored[event.id].outcome.status == "success"

    # the run that started the cycle now tells its real outcome; the solidify run points at it
    original = flow_run(event.meta.flow_run_id)
    assert "outcome:success" in original.tags and "outcome:awaiting_changes" not in original.tags
    assert original.state_name == "Success" and original.state.type.value == "COMPLETED"
    [cycle_artifact] = [a for a in artifacts(f"gep-{key}-cycle") if a.flow_run_id == original.id]
    assert cycle_artifact.data.startswith(f"# {event.id}: success"), cycle_artifact.data[:200]
    solid = flow_run(done.meta.solidify_flow_run_id)
    assert solid.name.startswith("solidify cycle-0001 repair") and f"cycle-run:{original.id}" in solid.tags
    assert solid.state_name == "Success"


def test_the_run_keeps_the_parameters_it_was_called_with(prefect_server, example_ws: Path):
    """The parameters the server records (the UI shows them, a rerun reuses them) are the call's, with
    their JSON types (flows/flowdef.py sends JSON values without Prefect's FastAPI encoder)."""
    from flows.cycle import evolution_cycle
    from flows.states import event_of

    event = event_of(run_state(evolution_cycle, request=CycleRequest(workspace=example_ws, mutator="prompt", seed=11)))
    assert event.meta.seed == 11
    recorded = flow_run(event.meta.flow_run_id).parameters["request"]
    # the Run form's fields; those left unset (agent command, branch) are omitted, so a rerun can reuse them
    assert recorded == {"workspace": str(example_ws), "mutator": "prompt", "strategy": "auto",
                        "abandon_pending": False, "review": False, "seed": 11, "llm_signals": False}
    assert type(recorded["seed"]) is int and type(recorded["review"]) is bool


def test_command_agent_fix_commits(prefect_server, example_ws: Path, tmp_path: Path):
    event = cycle(workspace=str(example_ws), mutator="command", agent_cmd=agent(tmp_path, "fix", FIX_AGENT))
    assert event.outcome.status == "success", event.meta.failure_reasons
    head = git(example_ws, "log", "-1", "--format=%H%n%B")
    assert event.meta.commit in head
    assert f"GEP-Event: {event.id}" in head and "GEP-Gene: gene_repair_from_errors" in head
    assert "fixed the mean" in event.meta.mutator_result.output
    run = flow_run(event.meta.flow_run_id)
    assert run.state_name == "Success" and "outcome:success" in run.tags
    assert run.state.message.startswith(f"{event.id}: gene_repair_from_errors committed")


def test_command_agent_that_breaks_tests_is_discarded_and_saved(prefect_server, example_ws: Path, tmp_path: Path,
                                                               caplog):
    from flows.cycle import evolution_cycle
    from flows.states import CycleFailedError

    (example_ws / "my_notes.txt").write_text("mine, untracked\n")
    (example_ws / "README.md").write_text("my uncommitted edit\n")  # a dirty tree no longer blocks a cycle
    before = git(example_ws, "rev-parse", "HEAD")
    original = (example_ws / "stats.py").read_bytes()
    state = run_state(evolution_cycle, workspace=str(example_ws), mutator="command",
                      agent_cmd=agent(tmp_path, "brk", BREAK_AGENT))
    # a failed cycle is a Failed run whose message is the one-line reason (automations on failure fire)
    assert state.is_failed() and state.name == "Failed"
    event = state.result(raise_on_failure=False).event
    assert event.outcome.status == "failed"
    assert any(r.startswith("validation") for r in event.meta.failure_reasons)
    assert state.message == " ".join(event.meta.failure_reasons[-1].split())  # one line
    run = flow_run(event.meta.flow_run_id)
    assert run.state.type.value == "FAILED" and run.state.message == state.message
    assert "outcome:failed" in run.tags
    # the timeline's bars: the stage that settled the failure is red with its reason, the recording green
    tasks = task_run_states(event.meta.flow_run_id, until=lambda found: {"solidify", "record"} <= found.keys())
    assert tasks["solidify"] == ("FAILED", state.message), tasks
    assert tasks["record"][0] == "COMPLETED" and tasks["apply"][0] == "COMPLETED", tasks
    # ... and the terminal shows what it did before: the flow's one error line, no task lines about it
    assert not [r.getMessage() for r in caplog.records if r.name == "prefect.task_runs" and r.levelno >= 30]
    with pytest.raises(CycleFailedError) as raised:  # called directly, the failure carries its event
        state.result()
    assert raised.value.event.id == event.id
    assert git(example_ws, "rev-parse", "HEAD") == before
    assert (example_ws / "stats.py").read_bytes() == original
    assert not (example_ws / "notes_from_agent.txt").exists()
    assert (example_ws / "my_notes.txt").read_text() == "mine, untracked\n"
    assert (example_ws / "README.md").read_text() == "my uncommitted edit\n"
    patch = Path(event.meta.rescued_patch)
    assert "return ordered[0]" in patch.read_text() and patch.parent == example_ws / ".gep" / "rescued"
    assert event.meta.sandbox == "bwrap" and event.meta.mutator == "command"
    with Store.for_workspace(example_ws) as store:
        report = store.get_validation_report(event.validation_report_id)
        failed = store.list_failed_capsules()
    assert report is not None and not report.overall_ok
    assert any("failed" in (r.stdout + r.stderr).lower() for r in report.results)
    assert failed and failed[-1].gene == "gene_repair_from_errors"


def test_stage_failure_fails_run_and_records_event(prefect_server, example_ws: Path, monkeypatch):
    import gep.cycle.stages
    from flows.cycle import evolution_cycle

    def broken(*_a, **_k):
        raise RuntimeError("mutator exploded")

    monkeypatch.setattr(gep.cycle.stages, "get_mutator", broken)
    state = run_state(evolution_cycle, workspace=str(example_ws), mutator="prompt")
    assert state.is_failed() and state.message == "RuntimeError: mutator exploded"
    [ev] = events(example_ws)
    assert ev.outcome.status == "failed"
    assert "RuntimeError: mutator exploded" in ev.meta.failure_reasons[0]
    assert git(example_ws, "status", "--porcelain").strip() == ""
    assert flow_run(ev.meta.flow_run_id).state.message == "RuntimeError: mutator exploded"


@pytest.mark.parametrize("module, name", [("gep.cycle.stages", "collect_sources"), ("gep.cycle.stages", "extract_signals"),
                                           ("gep.cycle.stages", "select_gene_and_capsule")])
def test_failure_in_an_early_stage_is_recorded_too(prefect_server, example_ws: Path, monkeypatch, module: str,
                                                   name: str):
    import importlib

    from flows.cycle import evolution_cycle

    def broken(*_a, **_k):
        raise RuntimeError(f"{name} exploded")

    monkeypatch.setattr(importlib.import_module(module), name, broken)
    state = run_state(evolution_cycle, workspace=str(example_ws), mutator="prompt")
    assert state.is_failed()
    [ev] = events(example_ws)
    assert ev.outcome.status == "failed" and ev.meta.flow_run_id == str(state.state_details.flow_run_id)
    assert f"RuntimeError: {name} exploded" in ev.meta.failure_reasons[0]
    assert git(example_ws, "status", "--porcelain").strip() == ""


def test_scheduled_ticks_skip_under_steady_state(prefect_server, example_ws: Path):
    from flows.cycle import scheduled_cycle

    with Store.for_workspace(example_ws) as store:
        for i in range(6):
            store.add_event(EvolutionEvent(
                id=f"evt_empty_{i}", intent="optimize", signals=["stable_success_plateau"],
                genes_used=["gene_optimize_code_quality"], outcome={"status": "empty", "score": 0.0},
                meta={"empty_cycle": True, "at": f"2026-11-2{i}T00:00:00.000Z"}))
    results = [run_state(scheduled_cycle, workspace=str(example_ws), mutator="prompt") for _ in range(3)]
    skipped = [s for s in results if (s.message or "").startswith("skipped")]
    assert len(skipped) >= 2, [s.message for s in results]
    for s in skipped:  # a Completed run named for what happened, with a readable name and the workspace tag
        assert s.is_completed() and s.name == "Skipped"
        run = flow_run(s.state_details.flow_run_id)
        assert run.name == f"skipped tick {example_ws.name}", run.name
        assert {f"workspace:{example_ws.name}", "outcome:skipped"} <= set(run.tags)
    # a manual trigger still runs
    manual = cycle(workspace=str(example_ws), mutator="prompt", abandon_pending=True)
    assert manual.outcome.status in {"awaiting_changes", "empty"}


@pytest.mark.parametrize("approve", [False, True])
def test_review_mode_waits_for_approval(prefect_server, example_ws: Path, tmp_path: Path, approve: bool):
    from prefect.flow_runs import resume_flow_run

    result: dict[str, EvolutionEvent] = {}

    def run() -> None:
        result["event"] = cycle(workspace=str(example_ws), mutator="command", review=True,
                                agent_cmd=agent(tmp_path, "fix", FIX_AGENT))

    t = threading.Thread(target=run, daemon=True)  # daemon: a run that never pauses cannot hold the session
    t.start()
    run_id = paused_run(example_ws, t)
    assert git(example_ws, "log", "-1", "--format=%s").strip() == "initial"  # nothing committed yet
    # while it waits, the run is already named for its gene (an agent or review cycle takes a while)
    assert flow_run(run_id).name.startswith("cycle-0001 repair gene_repair_from_errors")
    resume_flow_run(run_id, run_input={"decision": "approve" if approve else "reject", "note": "reviewed"})
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

    fake = FakeAnthropic()
    fake.start()
    try:
        fake.script = fixing_session()
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-a-real-key-000000000000")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
        monkeypatch.setenv("GEP_MODEL", "claude-sonnet-4-6")
        event = cycle(workspace=str(example_ws))  # mutator auto: anthropic, since a key is set
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

    from gep.cli.root import app

    result = CliRunner().invoke(app, ["cycle", "--workspace", str(example_ws), "--mutator", "prompt", "--json"])
    assert result.exit_code == 0, result.stderr
    event = json.loads(result.stdout)  # the whole of stdout is one JSON object
    assert event["type"] == "EvolutionEvent" and event["outcome"]["status"] == "awaiting_changes"
    again = CliRunner().invoke(app, ["cycle", "--workspace", str(example_ws), "--mutator", "prompt"])
    assert again.exit_code != 0 and "awaiting changes" in again.stderr
    assert "Traceback" not in again.stderr


def test_a_run_with_the_old_flat_parameters_still_runs(prefect_server, example_ws: Path):
    """A run a deployment or schedule made before the request was one parameter carries the flat fields, with
    "" and -1 for "not set": the flow folds them into the request and runs the cycle, as a worker would."""
    from prefect import get_client
    from prefect.flow_engine import run_flow

    from flows.cycle import evolution_cycle, scheduled_cycle
    from flows.states import event_of

    old = {"workspace": str(example_ws), "mutator": "prompt", "strategy": "auto", "agent_cmd": "",
           "abandon_pending": False, "branch": "", "review": False, "seed": -1, "llm_signals": False}
    with get_client(sync_client=True) as client:
        run = client.create_flow_run(evolution_cycle, parameters=old)
        assert run.parameters == old
    state = asyncio.run(run_flow(evolution_cycle, flow_run=run, return_type="state"))
    event = event_of(state)
    assert event is not None and event.outcome.status == "awaiting_changes" and event.meta.seed is not None
    assert event.meta.flow_run_id == str(run.id)
    with get_client(sync_client=True) as client:  # an old scheduled tick: skipped while the cycle awaits
        tick = client.create_flow_run(scheduled_cycle, parameters={"workspace": str(example_ws), "mutator": "prompt",
                                                                   "strategy": "auto", "agent_cmd": ""})
    state = asyncio.run(run_flow(scheduled_cycle, flow_run=tick, return_type="state"))
    assert state.is_completed() and state.name == "Skipped", state


def test_a_bad_request_is_refused_in_one_line():
    from flows.cycle import evolution_cycle, scheduled_cycle
    from gep.core.errors import ConfigError
    from gep.core.request import ScheduledRequest

    checked = evolution_cycle.validate_parameters({"request": {"workspace": "/srv/ws", "mutator": " Prompt ",
                                                               "strategy": "repair_only", "branch": " "}})
    assert checked["request"] == CycleRequest(workspace=Path("/srv/ws"), mutator="prompt", strategy="repair-only")
    # an old run's flat fields win over the request a new deployment gives by default
    folded = evolution_cycle.validate_parameters({"request": {"workspace": "/srv/ws"}, "mutator": "command",
                                                  "seed": -1, "agent_cmd": "my-agent"})
    assert folded["request"] == CycleRequest(workspace=Path("/srv/ws"), mutator="command", agent_cmd="my-agent")
    same = evolution_cycle.validate_parameters({"request": {"workspace": "/srv/ws", "mutator": "prompt"},
                                                "workspace": "/srv/ws/", "mutator": "PROMPT", "review": True})
    assert same["request"] == CycleRequest(workspace=Path("/srv/ws"), mutator="prompt", review=True)
    assert isinstance(scheduled_cycle.validate_parameters({"workspace": "/srv/ws"})["request"], ScheduledRequest)
    for bad, words in [({"request": {"workspace": "/srv/ws", "mutator": "claude"}}, "unknown mutator 'claude'"),
                       ({"workspace": "/srv/ws", "strategy": "fast"}, "unknown strategy 'fast'"),
                       ({"request": {"workspace": "/srv/ws", "seed": -2}}, "parameter 'seed': Input should be greater"),
                       ({"request": {"workspace": "{{ $GEP_WORKSPACE }}"}}, "parameter 'workspace' is empty"),
                       ({}, "parameter 'request' is missing"),
                       # a new fleet's request for workspace b, merged with an old deployment's flat default a
                       ({"request": {"workspace": "/srv/b"}, "workspace": "/srv/a"}, "'workspace' is given twice")]:
        with pytest.raises(ConfigError, match=words) as caught:
            evolution_cycle.validate_parameters(bad)
        assert "\n" not in str(caught.value), str(caught.value)


def test_gep_cycle_opens_the_workspace_and_reads_its_settings_once(prefect_server, example_ws: Path,
                                                                   tmp_path: Path, monkeypatch):
    """The CLI checks the request before Prefect starts; the flow's run takes over what the check opened
    instead of opening the repository and reading gep.toml again (git probes and file reads counted)."""
    from typer.testing import CliRunner

    import gep.core.config
    import gep.git.repo
    from gep.cli.root import app

    (example_ws / "gep.toml").write_text('validation = ["python -m compileall -q ."]\n')
    probes: list[Path] = []
    reads: list[Path] = []
    probe, from_toml = gep.git.repo._probe, gep.core.config._from_toml
    monkeypatch.setattr(gep.git.repo, "_probe", lambda p: probes.append(p) or probe(p))
    monkeypatch.setattr(gep.core.config, "_from_toml", lambda p: reads.append(p) or from_toml(p))
    result = CliRunner().invoke(app, ["cycle", "--workspace", str(example_ws), "--mutator", "command",
                                      "--agent-cmd", agent(tmp_path, "fix", FIX_AGENT)])
    assert result.exit_code == 0, (result.stdout, result.stderr)
    [event] = events(example_ws)
    assert event.outcome.status == "success"
    assert probes == [example_ws.resolve()] and reads == [example_ws.resolve() / "gep.toml"], (probes, reads)


@pytest.fixture
def opens_and_identities(monkeypatch) -> list[str]:
    """Each store open (each runs the migrations) and each workspace identity worked out in this process,
    counted around the real functions (every module's reference to workspace_identity is wrapped)."""
    import gep.core.workspace_id
    from gep.store.base import StoreBase

    calls: list[str] = []
    real_open, real_identity = StoreBase.open.__func__, gep.core.workspace_id.workspace_identity

    def counted_open(cls, url):
        calls.append("open")
        return real_open(cls, url)

    def counted_identity(workspace):
        calls.append("identity")
        return real_identity(workspace)

    monkeypatch.setattr(StoreBase, "open", classmethod(counted_open))
    for module in [m for m in sys.modules.values() if getattr(m, "workspace_identity", None) is real_identity]:
        monkeypatch.setattr(module, "workspace_identity", counted_identity)
    return calls


def test_a_cycle_opens_its_store_once_and_works_out_its_identity_once(prefect_server, example_ws: Path,
                                                                       opens_and_identities: list[str]):
    """`gep cycle` and `gep solidify` check before Prefect starts and hand what they opened to the flow run
    (gep/cycle/handoff.py): one store open, one identity, for the check, the slot, the cycle and its report.
    A run started without a hand-off (a deployment's) opens its own store once and works out the identity
    once too."""
    from typer.testing import CliRunner

    from flows.cycle import evolution_cycle
    from gep.cli.root import app

    result = CliRunner().invoke(app, ["cycle", "--workspace", str(example_ws), "--mutator", "prompt"])
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert sorted(opens_and_identities) == ["identity", "open"]
    stats = example_ws / "stats.py"
    stats.write_text(stats.read_text().replace("(len(values) - 1)", "len(values)"))
    opens_and_identities.clear()
    result = CliRunner().invoke(app, ["solidify", "--workspace", str(example_ws), "-m", "Divide by n"])
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert "success" in result.stdout and sorted(opens_and_identities) == ["identity", "open"]
    opens_and_identities.clear()
    event = event_of_run(run_state(evolution_cycle, request=CycleRequest(workspace=example_ws, mutator="prompt")))
    assert event is not None and event.outcome.status == "empty"  # the fix above left nothing to do
    assert sorted(opens_and_identities) == ["identity", "open"]


def test_gep_cycle_hands_the_real_agent_command_to_its_run_and_prefect_keeps_it_redacted(
        prefect_server, example_ws: Path, tmp_path: Path):
    """The run's parameters (kept by Prefect) carry the agent command redacted; the agent gets the real one,
    handed over in this process (gep/cycle/handoff.py)."""
    from typer.testing import CliRunner

    from gep.cli.root import app

    secret = "s3cr3t-Value-0123456789"
    script = agent(tmp_path, "token", "import sys\n"
                   f"assert sys.argv[1:] == ['--token={secret}'], sys.argv\n" + FIX_AGENT)
    result = CliRunner().invoke(app, ["cycle", "--workspace", str(example_ws), "--mutator", "command",
                                      "--agent-cmd", f"{script} --token={secret}"])
    assert result.exit_code == 0, (result.stdout, result.stderr)
    [event] = events(example_ws)
    assert event.outcome.status == "success", event.meta.failure_reasons
    recorded = flow_run(event.meta.flow_run_id).parameters["request"]["agent_cmd"]
    assert recorded.startswith(script) and secret not in recorded


def event_of_run(state):
    from flows.states import event_of

    return event_of(state)


def test_cli_failed_cycle_prints_the_event_and_exits_1(prefect_server, example_ws: Path, tmp_path: Path):
    from typer.testing import CliRunner

    from gep.cli.root import app

    result = CliRunner().invoke(app, ["cycle", "--workspace", str(example_ws), "--mutator", "command",
                                      "--agent-cmd", agent(tmp_path, "brk", BREAK_AGENT)])
    assert result.exit_code == 1, (result.stdout, result.stderr)
    [event] = events(example_ws)
    assert event.id in result.stdout and "failed" in result.stdout and "reason: validation" in result.stdout
    assert f"flow run: {prefect_server.url}/runs/flow-run/{event.meta.flow_run_id}" in result.stdout


def test_cli_reads_a_recorded_outcome_when_prefect_fails_after_it(prefect_server, example_ws: Path,
                                                                   monkeypatch):
    """The server going away after the cycle recorded its outcome does not turn it into a failure."""
    from prefect.client.orchestration import PrefectClient
    from typer.testing import CliRunner

    from gep.cli.root import app

    real = PrefectClient.set_flow_run_state

    async def server_gone(self, flow_run_id, state, **kw):
        if state.is_final():
            raise ConnectionError("the Prefect server went away")
        return await real(self, flow_run_id, state, **kw)

    monkeypatch.setattr(PrefectClient, "set_flow_run_state", server_gone)
    result = CliRunner().invoke(app, ["cycle", "--workspace", str(example_ws), "--mutator", "prompt"])
    assert result.exit_code == 0, (result.stdout, result.stderr)
    [event] = events(example_ws)
    assert event.outcome.status == "awaiting_changes" and event.id in result.stdout
    assert "its outcome is read from the store" in result.stderr


def test_empty_workspace_parameter_is_refused(prefect_server):
    from flows.cycle import evolution_cycle
    from gep.core.errors import ConfigError

    for bad in ("", "  ", "{{ $GEP_WORKSPACE }}"):
        with pytest.raises(ConfigError, match="workspace"):
            asyncio.run(evolution_cycle(request={"workspace": bad, "mutator": "prompt"}))


def test_scheduled_tick_skips_while_a_cycle_awaits_changes(prefect_server, example_ws: Path):
    from flows.cycle import scheduled_cycle

    first = cycle(workspace=str(example_ws), mutator="prompt")
    assert first.outcome.status == "awaiting_changes"
    state = run_state(scheduled_cycle, workspace=str(example_ws), mutator="prompt")
    assert state.is_completed() and state.name == "Skipped" and "awaiting changes" in state.message
    assert [e.id for e in events(example_ws)] == [first.id]


def test_abandoning_a_pending_cycle_updates_the_run_that_started_it(prefect_server, example_ws: Path):
    first = cycle(workspace=str(example_ws), mutator="prompt")
    second = cycle(workspace=str(example_ws), mutator="prompt", abandon_pending=True)
    assert second.id != first.id
    stored = {e.id: e for e in events(example_ws)}
    assert stored[first.id].outcome.status == "abandoned"
    original = flow_run(first.meta.flow_run_id)
    assert "outcome:abandoned" in original.tags and "outcome:awaiting_changes" not in original.tags
    assert original.state_name == "Abandoned"


def test_refused_request_fails_the_run_with_the_reason_and_records_nothing(prefect_server, example_ws: Path):
    from prefect import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    from flows.cycle import evolution_cycle
    from flows.solidify import solidify_pending
    from gep.core.errors import ConfigError, WorkspaceError

    # the Run form offers only the valid mutators and strategies; anything else fails validation at once
    state = run_state(evolution_cycle, workspace=str(example_ws), mutator="claude")
    assert state.is_failed() and "mutator" in state.message
    with pytest.raises(ConfigError, match="agent command"):
        asyncio.run(evolution_cycle(request=CycleRequest(workspace=example_ws, mutator="command")))
    state = run_state(evolution_cycle, workspace=str(example_ws), mutator="command")
    assert state.is_failed() and state.name == "Failed" and "agent command" in state.message
    run = flow_run(state.state_details.flow_run_id)
    assert run.name == f"refused {example_ws.name}" and {f"workspace:{example_ws.name}", "outcome:refused"} <= set(run.tags)
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all()  # logs go to the server in batches
    with get_client(sync_client=True) as client:
        logs = client.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[run.id])))
    assert any("agent command" in log.message for log in logs)
    assert not any("Traceback" in log.message for log in logs), [log.message for log in logs]
    assert events(example_ws) == []  # a typo is not a failed cycle: no gene pays for it
    state = run_state(solidify_pending, workspace=str(example_ws))
    assert state.is_failed() and "no cycle is awaiting changes" in state.message
    with pytest.raises(WorkspaceError):
        asyncio.run(solidify_pending(workspace=str(example_ws)))


def test_the_run_form_offers_choices_and_no_null_toggles():
    """What the UI's Run form is built from: the cycle flows' one parameter, the request, with dropdowns for
    mutator and strategy, a description for every field, no "None" type toggles, no field only the engine
    sets (scheduled, the flow run's id, the commit subject), and none of the old flat parameters."""
    from prefect.utilities.callables import parameter_schema

    from flows.cycle import Mutator, Strategy, evolution_cycle, scheduled_cycle
    from flows.fleet import evolve_fleet
    from gep.genes.strategy import PRESETS
    from gep.mutators import MUTATORS

    assert set(typing.get_args(Mutator)) == {"auto", *MUTATORS}
    assert set(typing.get_args(Strategy)) == {"auto", *PRESETS}
    fields = {}
    for fn in (evolution_cycle, scheduled_cycle, evolve_fleet):
        schema = parameter_schema(fn).model_dump_for_openapi()
        text = json.dumps(schema)
        assert '"null"' not in text and "anyOf" not in text, (fn.name, text)
        props = schema["properties"]
        if fn is not evolve_fleet:
            assert list(props) == ["request"], props  # the old flat parameters are bound, not shown
            assert schema["required"] == ["request"] and "default" not in props["request"]
            model = schema["definitions"][props["request"]["$ref"].split("/")[-1]]
            props = fields[fn] = model["properties"]
            assert model["required"] == ["workspace"]
            assert all(p.get("description") for p in props.values()), props
        for name in ("mutator", "strategy"):
            prop = props[name]
            choices = prop.get("enum") or schema["definitions"][prop["$ref"].split("/")[-1]]["enum"]
            assert "prompt" in choices or "balanced" in choices
            assert prop["default"] == "auto"
    assert set(fields[scheduled_cycle]) == {"workspace", "mutator", "strategy", "agent_cmd"}
    assert set(fields[evolution_cycle]) == {"workspace", "mutator", "strategy", "agent_cmd", "abandon_pending",
                                            "branch", "review", "seed", "llm_signals"}
    assert fields[evolution_cycle]["seed"]["type"] == "integer" and fields[evolution_cycle]["review"]["type"] == "boolean"


def test_a_cycle_waits_for_the_workspace_slot_and_gives_up_cancelled(prefect_server, example_ws: Path,
                                                                      monkeypatch):
    from prefect.concurrency.sync import concurrency

    import flows.cycle
    from flows.slot import ensure_limit, slot_name

    name = slot_name(example_ws)
    ensure_limit(name)
    monkeypatch.setattr(flows.cycle, "SLOT_TIMEOUT_S", 3)
    with concurrency(name, occupy=1, strict=True):  # another cycle holds this repository
        state = run_state(flows.cycle.evolution_cycle, workspace=str(example_ws), mutator="prompt")
    assert state.is_cancelled() and "did not start" in state.message
    assert events(example_ws) == []
    # the slot is free again: the next run goes through
    assert cycle(workspace=str(example_ws), mutator="prompt").outcome.status == "awaiting_changes"


def test_one_slot_per_workspace_whatever_path_names_it(tmp_path: Path):
    from flows.slot import slot_name

    ws = init_repo(tmp_path / "ws")
    (tmp_path / "link").symlink_to(ws)
    assert slot_name(ws) == slot_name(tmp_path / "link") == slot_name(Path(f"{ws}/")) == \
        slot_name(tmp_path / "ws" / ".." / "ws")
    assert slot_name(ws).startswith("gep-workspace-ws-")


def test_the_flow_runs_the_engines_stage_list(prefect_server, example_ws: Path, monkeypatch):
    """flows/cycle.py does not restate the order: each stage of gep.cycle.pipeline.STAGES is one task run, and a
    stage removed from that list is gone from the flow too."""
    from prefect import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    from gep.cycle import pipeline

    monkeypatch.setattr(pipeline, "STAGES", [s for s in pipeline.STAGES if s.name != "extract signals"])
    event = cycle(workspace=str(example_ws), mutator="prompt")
    assert event.signals == [] and event.outcome.status == "empty"
    expected = {"collect sources", "analyse history", "gate", "select", "build mutation", "record"}
    names: set[str] = set()
    deadline = time.monotonic() + 30
    while names != expected and time.monotonic() < deadline:  # task runs reach the server as events, a bit later
        with get_client(sync_client=True) as client:
            runs = client.read_task_runs(
                flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[event.meta.flow_run_id])))
        names = {r.name.rsplit("-", 1)[0] for r in runs}
        if names != expected:
            time.sleep(0.5)
    assert names == expected
    assert flow_run(event.meta.flow_run_id).state_name == "Empty"


def test_cli_prints_where_the_change_went_and_history_shows_the_merge_command(prefect_server, example_ws: Path,
                                                                            tmp_path: Path):
    from typer.testing import CliRunner

    from gep.cli.root import app

    stats = example_ws / "stats.py"
    stats.write_text(stats.read_text() + "# my own edit, uncommitted\n")  # the agent's file: never overwritten
    key = "sk-ant-api03-" + "K" * 40
    cmd = agent(tmp_path, "fix", FIX_AGENT) + f" --api-key {key}"  # a key on the agent's command line
    result = CliRunner().invoke(app, ["cycle", "-w", str(example_ws), "--mutator", "command", "--agent-cmd", cmd])
    assert result.exit_code == 0, result.stderr
    [event] = events(example_ws)
    branch = f"gep/{event.id}"
    assert (event.meta.delivery, event.meta.branch) == ("kept", branch)
    # the merge command would fail over the person's edit: the hint names it first (issue 44)
    assert (f"merge it with: commit or stash your edits to stats.py first, then: git -C {example_ws} merge "
            f"{branch}") in result.stdout
    assert stats.read_text().endswith("# my own edit, uncommitted\n")
    sid = event.id.rsplit("_", 1)[1]
    assert f"or land it with: gep land {sid}" in result.stdout
    history = CliRunner().invoke(app, ["history", "-w", str(example_ws)], env={"COLUMNS": "200"})
    assert (f"{sid} kept on {branch}: `gep land {sid}` lands it\n  (commit or stash your edits to stats.py "
            "first)") in history.stdout, history.stdout
    # the key stays out of the flow run's parameters, the event and the run record
    params = flow_run(event.meta.flow_run_id).parameters
    assert key not in str(params) and "--api-key [REDACTED]" in params["request"]["agent_cmd"]
    assert key not in event.model_dump_json() and "[REDACTED]" in event.meta.mutator_result.rationale
    from sqlalchemy import text

    with Store.for_workspace(example_ws) as store, store.engine.begin() as conn:
        assert key not in str(conn.execute(text("SELECT data FROM runs")).all())


def test_cli_solidify_keeps_a_failed_change_then_abandon_saves_it(prefect_server, example_ws: Path):
    from typer.testing import CliRunner

    from gep.cli.root import app

    assert CliRunner().invoke(app, ["cycle", "-w", str(example_ws), "--mutator", "prompt"]).exit_code == 0
    stats = example_ws / "stats.py"
    attempt = stats.read_text().replace("return ordered[mid]", "return ordered[0]")
    stats.write_text(attempt)
    failed = CliRunner().invoke(app, ["solidify", "-w", str(example_ws)])
    assert failed.exit_code == 1 and stats.read_text() == attempt  # the person's edit stays
    # (Prefect's own log handler may complain on stderr about CliRunner's closed streams: only gep's lines count)
    lines = [line for line in failed.stderr.splitlines() if line.startswith("gep:")]
    assert len(lines) == 1 and lines[0].startswith("gep: validation failed (attempt 1); your edits are kept")
    assert "reason: validation:" in failed.stdout
    again = CliRunner().invoke(app, ["solidify", "-w", str(example_ws)])
    assert again.exit_code == 1 and "(attempt 2)" in again.stderr
    gave_up = CliRunner().invoke(app, ["solidify", "-w", str(example_ws), "--abandon"])
    assert gave_up.exit_code == 0, gave_up.stderr
    [event] = events(example_ws)
    assert event.outcome.status == "abandoned" and "ordered[mid]" in stats.read_text()  # its paths put back
    assert f"bring it back with: git -C {example_ws} apply {event.meta.rescued_patch}" in gave_up.stdout
    git(example_ws, "apply", event.meta.rescued_patch)
    assert stats.read_text() == attempt  # the printed line brings the change back


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
    [charts] = artifacts(f"gep-{key}-report")  # gep report's charts (flows/report_artifact.py)
    assert "# GEP report: 0 cycles" in charts.data and (ws / ".gep" / "report.html").is_file()
    again = distill_genes(workspace=str(ws))
    assert again.status == "skipped" and again.reasons[0].startswith("last distillation attempt")


def test_an_explicit_flat_parameter_wins_over_the_deployments_default_request(prefect_server, example_ws: Path,
                                                                             monkeypatch):
    """Issue 44: `prefect deployment run ... --param workspace=/path` on a deployment whose default request
    names another (or no) workspace runs on /path; a run's request wins over an old deployment's flat
    default. Which one the caller gave is told by the deployment's own parameters."""
    from prefect import get_client

    from flows.cycle import evolution_cycle
    from gep.core.errors import ConfigError

    # the deployment's template left unrendered (GEP_WORKSPACE unset when deploying), or blank: no value
    for blank in ("{{ $GEP_WORKSPACE }}", ""):
        folded = evolution_cycle.validate_parameters({"request": {"workspace": blank}, "workspace": "/srv/mine"})
        assert folded["request"].workspace == Path("/srv/mine")
    with get_client(sync_client=True) as client:
        flow_id = client.create_flow(evolution_cycle)
        new = client.create_deployment(flow_id, "issue44-new", parameters={"request": {"workspace": "/srv/default"}})
        old = client.create_deployment(flow_id, "issue44-old", parameters={"workspace": "/srv/old-default"})
        run_new = client.create_flow_run_from_deployment(new, parameters={"workspace": "/srv/mine"})
        run_old = client.create_flow_run_from_deployment(old, parameters={"request": {"workspace": "/srv/mine"}})
    for run in (run_new, run_old):
        assert len(run.parameters) == 2, run.parameters  # the server merged the deployment's default in
        monkeypatch.setenv("PREFECT__FLOW_RUN_ID", str(run.id))  # as a worker names the run it starts
        assert evolution_cycle.validate_parameters(run.parameters)["request"].workspace == Path("/srv/mine")
    monkeypatch.delenv("PREFECT__FLOW_RUN_ID")  # no deployment to tell which one was given: refused as before
    with pytest.raises(ConfigError, match="'workspace' is given twice"):
        evolution_cycle.validate_parameters(run_new.parameters)
    # run by the flow engine as a worker would (PREFECT__FLOW_RUN_ID names the run): the cycle runs on it
    from prefect.flow_engine import run_flow

    from flows.states import event_of

    with get_client(sync_client=True) as client:
        run = client.create_flow_run_from_deployment(new, parameters={"workspace": str(example_ws),
                                                                      "mutator": "prompt"})
    monkeypatch.setenv("PREFECT__FLOW_RUN_ID", str(run.id))
    state = asyncio.run(run_flow(evolution_cycle, flow_run=run, return_type="state"))
    event = event_of(state)
    assert event is not None and event.outcome.status == "awaiting_changes", state
    assert event.meta.flow_run_id == str(run.id) and events(example_ws) == [event]
