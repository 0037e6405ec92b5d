"""People steering from the command line (`gep feedback`, `gep lessons`), the assets that carry what a
workspace learned, the token budget, prune after each cycle and where a reused capsule came from."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from conftest import ROOT
from fake_anthropic import FakeAnthropic, message, text_block, tool_use
from learning_helpers import (
    REPAIR,
    agent_workspace,
    committed_fix,
    cycle,
    finish,
    log_again,
    store_of,
    venv_first,
)
from test_mutator_anthropic import fixing_session
from typer.testing import CliRunner

from gep import CycleRequest, run_cycle
from gep.assets.gene_files import ASSET_FILES
from gep.cli.root import app
from gep.core.models import BlastRadius, EvolutionEvent, Outcome
from gep.core.workspace_id import workspace_identity
from gep.learning.feedback import FeedbackKind, Observation
from gep.learning.memory_graph import MEMORY_FOLD
from gep.learning.resolved import Resolution
from gep.store import Store

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    venv_first(monkeypatch)
    return agent_workspace(tmp_path / "ws")


def gep(*args: str) -> subprocess.CompletedProcess[str]:
    """The console script in its own process; these are store commands: they must not import Prefect."""
    code = ("import sys, runpy; sys.argv = ['gep', *sys.argv[1:]]\n"
            "try:\n    runpy.run_module('gep.cli.root', run_name='__main__')\n"
            "finally:\n    assert 'prefect' not in sys.modules, 'a store command imported prefect'")
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(ROOT), "PATH": os.environ["PATH"], "USER": "ana",
                               "HOME": "/nonexistent"})


def one_line_error(done: subprocess.CompletedProcess[str], says: str) -> None:
    assert done.returncode == 2, done
    assert done.stderr.count("\n") == 1 and says in done.stderr and "Traceback" not in done.stderr, done.stderr


# ------------------------------------------------------------------ gep feedback / gep lessons


def test_gep_feedback_records_a_verdict_with_its_note_and_stats_show_it(ws: Path) -> None:
    fixed = committed_fix(ws)
    done = gep("feedback", fixed.id, "not_helpful", "--note", "broke the weekly report", "--workspace", str(ws))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"recorded not_helpful on {fixed.id} ({REPAIR})")
    with store_of(ws) as store:
        [signal] = [f for f in store.list_feedback() if f.origin == Observation.person]
        [lesson] = [x for x in store.list_lessons(REPAIR) if x.category.value == "person"]
    assert (signal.kind, signal.note, signal.author, signal.event_id) == (
        FeedbackKind.not_helpful, "broke the weekly report", "Test", fixed.id)  # the workspace's git user.name
    assert "not helpful: broke the weekly report" in lesson.content

    stats = json.loads(gep("feedback", "stats", "--workspace", str(ws), "--json").stdout)
    [repair] = [g for g in stats if g["gene_id"] == REPAIR]
    assert repair["counts"]["not_helpful"] == 1 and repair["score"] == pytest.approx(0.4, abs=1e-3)
    assert repair["situations"] and repair["situations"][0]["counts"]["not_helpful"] == 1
    table = gep("feedback", "stats", "--workspace", str(ws)).stdout
    assert REPAIR in table  # the columns' names are short, to fit 80 columns: ignored, helpful, not helpful
    assert table.splitlines()[0].split()[3:9] == ["score", "used", "ign.", "help", "not", "last"]

    one_line_error(gep("feedback", "evt_nope", "helpful", "--workspace", str(ws)), "no event 'evt_nope'")
    one_line_error(gep("feedback", fixed.id, "great", "--workspace", str(ws)), "helpful or not_helpful")


def test_lessons_list_and_an_audited_delete(ws: Path) -> None:
    committed_fix(ws)
    listed = gep("lessons", "list", "--workspace", str(ws), "--json")
    assert listed.returncode == 0, listed.stderr
    [lesson] = json.loads(listed.stdout)
    assert lesson["category"] == "success" and lesson["gene_id"] == REPAIR
    shown = gep("lessons", "list", "--workspace", str(ws), "--topic", lesson["topic"]).stdout
    assert lesson["id"] in shown and "memory from" in shown
    assert "no lessons on gene_other" in gep("lessons", "list", "--workspace", str(ws), "--topic", "gene_other").stdout

    one_line_error(gep("lessons", "delete", lesson["id"], "--workspace", str(ws)), "needs a reason")
    done = gep("lessons", "delete", lesson["id"], "--reason", "taught on a broken test fixture", "--workspace",
               str(ws))
    assert done.returncode == 0, done.stderr
    assert json.loads(gep("lessons", "list", "--workspace", str(ws), "--json").stdout) == []
    with store_of(ws) as store:
        [audit] = store.list_deletions()
    assert (audit.lesson_id, audit.deleted_by, audit.reason) == (lesson["id"], "ana", "taught on a broken test fixture")
    assert audit.lesson.content == lesson["content"]  # the deleted content, whole
    one_line_error(gep("lessons", "delete", lesson["id"], "--reason", "again", "--workspace", str(ws)), "no lesson")


# ------------------------------------------------------------------ export / import


def test_lessons_and_feedback_travel_with_the_assets(ws: Path, tmp_path: Path) -> None:
    fixed = committed_fix(ws)
    with store_of(ws) as store:
        from gep.core.models import utc_now
        from gep.learning.human_verdicts import give_feedback

        give_feedback(store, fixed.id, "helpful", now=utc_now(), note="exactly right")
        gone = store.list_lessons()[0]
        store.delete_lesson(gone.id, who="ana", why="duplicate", at=utc_now())
        want = ([x.model_dump() for x in store.list_lessons()], [f.model_dump() for f in store.list_feedback()],
                [d.model_dump() for d in store.list_deletions()])
    runner = CliRunner()
    out_a, out_b = tmp_path / "a", tmp_path / "b"
    assert runner.invoke(app, ["export", str(out_a), "--workspace", str(ws)]).exit_code == 0
    other = agent_workspace(tmp_path / "other")
    result = runner.invoke(app, ["import", str(out_a), "--workspace", str(other)])
    assert result.exit_code == 0 and "lessons: 1 new" in result.stdout and "feedback: 1 new" in result.stdout
    assert runner.invoke(app, ["export", str(out_b), "--workspace", str(other)]).exit_code == 0
    for name in ASSET_FILES:  # the reference's four files: byte for byte
        assert (out_a / name).read_bytes() == (out_b / name).read_bytes(), name
    for name in ("lessons.jsonl", "lesson_deletions.jsonl", "feedback.jsonl"):
        assert (out_a / name).read_bytes() == (out_b / name).read_bytes(), name
    with store_of(other) as store:
        got = ([x.model_dump() for x in store.list_lessons()], [f.model_dump() for f in store.list_feedback()],
               [d.model_dump() for d in store.list_deletions()])
    assert got == want
    again = runner.invoke(app, ["import", str(out_a), "--workspace", str(other)])
    assert "lessons: 0 new, 0 updated, 1 unchanged" in again.stdout  # nothing written twice


# ------------------------------------------------------------------ the daily token budget


def finishing_without_change() -> list[dict]:
    return [message(text_block("Nothing worth changing."),
                    tool_use("finish", {"summary": "No change needed", "rationale": "the code is fine"}))]


def test_the_daily_token_budget_skips_claude_cycles_until_the_next_utc_day(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    venv_first(monkeypatch)
    ws = agent_workspace(tmp_path / "ws", {"gep.toml": "[gep]\ndaily_token_budget = 20000\n"})
    day = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
    with FakeAnthropic() as fake:
        env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test-not-a-real-key-000000000000", "ANTHROPIC_BASE_URL": fake.url,
               "GEP_MODEL": "claude-sonnet-4-6"}

        def claude(at: datetime) -> EvolutionEvent:
            event = run_cycle(CycleRequest(workspace=ws, mutator="anthropic", seed=1), env=env, clock=lambda: at)
            assert event is not None
            return event

        fake.script = fixing_session()
        spent = claude(day)
        assert spent.outcome.status == "success" and spent.meta.mutator_result.metrics.total_tokens == 21540
        asked = len(fake.requests)
        skipped = claude(day + timedelta(hours=5))
        assert skipped.outcome.status == "skipped" and len(fake.requests) == asked  # Claude was not called
        assert skipped.meta.skip_reason == ("daily token budget spent: Claude used 21540 of 20000 tokens on "
                                            "2026-11-23 (UTC); Claude-driven cycles run again from "
                                            "2026-11-24T00:00:00.000Z")
        assert skipped.genes_used == [] and skipped.meta.mutator_result is None
        log_again(ws, day + timedelta(hours=5, minutes=30))  # the job fails again (only new lines are read)
        prompt_mode = cycle(ws, 2, clock=lambda: day + timedelta(hours=6))  # spends no tokens: runs
        assert prompt_mode.outcome.status == "awaiting_changes"
        finish(ws, clock=lambda: day + timedelta(hours=6))
        fake.script = finishing_without_change()
        next_day = claude(day + timedelta(days=1, seconds=5))
        assert next_day.outcome.status != "skipped" and len(fake.requests) > asked
    shown = CliRunner().invoke(app, ["history", "--workspace", str(ws)], env={"COLUMNS": "250"}).stdout
    from gep.core.event_ids import short_id  # history shows the id people type

    assert any(line.startswith(short_id(skipped.id)) and "skipped" in line for line in shown.splitlines()), shown


# ------------------------------------------------------------------ prune after each cycle, capsule origin


def test_each_cycle_prunes_as_set_and_lessons_and_feedback_stay(ws: Path) -> None:
    (ws / "gep.toml").write_text("[gep]\nprune_keep_events = 0\n")  # keep only what must stay (the newest 500)
    from conftest import git

    git(ws, "add", "gep.toml")
    git(ws, "commit", "-qm", "prune every cycle")
    old = datetime(2026, 1, 1, tzinfo=UTC)
    with store_of(ws) as store:
        store.add_events(EvolutionEvent(id=f"evt_old_{i}", genes_used=["gene_retired"], signals=["log_error"],
                                        outcome=Outcome(status="empty", score=0.0)) for i in range(700))
        from gep.cycle.record_learning import learn_outcome

        learn_outcome(store, store.get_event("evt_old_0"), old)  # type: ignore[arg-type]
        lessons, feedback = store.list_lessons(), store.list_feedback()
        # an old fix cycles still check (verified, and it may yet not hold): its event stays for the verdict
        store.save_resolution(Resolution(event_id="evt_old_1", signals=["errsig:KeyError in a module long gone"],
                                         commit_sha="0" * 40, committed_at=old, status="verified"))
    assert lessons
    event = cycle(ws, 1)  # whatever it does, the record stage prunes afterwards
    with store_of(ws) as store:
        assert store.get_event("evt_old_0") is None and store.get_event(event.id) is not None
        assert store.get_event("evt_old_1") is not None
        assert len(store.list_events(limit=2000)) == 501
        assert {x.id for x in lessons} <= {x.id for x in store.list_lessons()}
        assert {f.id for f in feedback} <= {f.id for f in store.list_feedback()}


def test_a_capsule_from_another_workspace_records_where_it_came_from(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    venv_first(monkeypatch)
    shared = f"[gep]\ndatabase_url = \"sqlite:///{tmp_path / 'fleet.db'}\"\nshare_capsules = true\n"
    a = agent_workspace(tmp_path / "team-a", {"gep.toml": shared})
    b = agent_workspace(tmp_path / "team-b", {"gep.toml": shared})
    fixed = committed_fix(a)
    reused = cycle(b, 1)
    assert reused.genes_used == [REPAIR] and reused.meta.capsule_reused == fixed.capsule_id
    origin = reused.meta.capsule_origin
    assert origin is not None and not origin.own
    assert (origin.workspace_id, origin.workspace_name) == (workspace_identity(a).id, "team-a")
    with Store.open(f"sqlite:///{tmp_path / 'fleet.db'}") as admin:
        assert admin.scoped(workspace_identity(b).id).get_event(reused.id) is not None


def test_selection_remembers_pruned_history_through_the_memory_summaries(ws: Path) -> None:
    """600 failures of the repair gene on the example's error, then 600 unrelated cycles; after a prune only the
    memory graph's summaries remember the failures, and the cycle's selection still bans the gene for it."""
    first = cycle(ws, 1)  # the example's own signals
    assert first.genes_used == [REPAIR]
    finish(ws)
    failures = [EvolutionEvent(id=f"evt_fail_{i}", intent="repair", genes_used=[REPAIR], signals=first.signals,
                               outcome=Outcome(status="failed", score=0.2)) for i in range(600)]
    others = [EvolutionEvent(id=f"evt_other_{i}", intent="optimize", genes_used=["gene_elsewhere"],
                             signals=["user_improvement_suggestion:faster"], outcome=Outcome(status="success", score=0.85),
                             blast_radius=BlastRadius(files=1, lines=4)) for i in range(600)]
    with store_of(ws) as store:
        store.add_events([*failures, *others])
        store.prune(fold=MEMORY_FOLD, keep_events=0)
        assert store.get_event("evt_fail_599") is None and store.memory_history(MEMORY_FOLD).summaries
    again = cycle(ws, 2)
    assert again.genes_used != [REPAIR], again.meta.selector
    assert any(b.gene_id == REPAIR and b.source == "memory" for b in again.meta.selector.bans_applied), (again.signals, again.meta.selector)  # type: ignore[union-attr]
