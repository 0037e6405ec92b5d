"""Issue 15 on real cycles (real git repositories, real stores, no Prefect): verified fixes, reverts, feedback
in selection, lessons in the prompt, synthesis of conflicting lessons."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from pathlib import Path

import pytest
from conftest import git
from learning_helpers import (
    REPAIR,
    agent_workspace,
    committed_fix,
    cycle,
    finish,
    later,
    log_again,
    log_ok,
    store_of,
    venv_first,
)
from typer.testing import CliRunner

from gep import CycleRequest, run_cycle
from gep.cli.root import app
from gep.core.event_ids import short_id
from gep.core.models import EvolutionEvent, Outcome, utc_now
from gep.core.workspace_id import HOME_FILE
from gep.cycle.record_learning import learn_outcome
from gep.learning.feedback import FeedbackKind, Observation, feedback_stats
from gep.learning.human_verdicts import give_feedback
from gep.learning.lessons import LessonCategory
from gep.learning.resolved import signal_identity

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    venv_first(monkeypatch)
    return agent_workspace(tmp_path / "ws")


def test_a_fixed_error_is_not_repaired_from_old_lines_and_is_again_when_it_recurs(ws: Path) -> None:
    fixed = committed_fix(ws)

    # cycle 2: the same log, every error line written before the commit: nothing to repair. The engine reads
    # only lines written since the change landed (gep/signals/unread.py, issue 41), so the old error never
    # reaches the signals; the fix is not judged while nothing ran since it (issue 44)
    idle = cycle(ws, 2)
    assert not any(s.startswith("errsig") or s == "log_error" for s in idle.signals), idle.signals
    assert idle.meta.fix_checks is None
    assert idle.outcome.status == "empty"  # nothing new to act on: no gene, nothing asked of anyone
    log_ok(ws, later(1))  # the report ran again, without the error
    second = cycle(ws, 2)
    assert second.genes_used != [REPAIR], second.meta.selector
    assert not any(s.startswith("errsig") or s == "log_error" for s in second.signals), second.signals
    assert not second.meta.resolved
    assert [(c.event_id, c.verdict) for c in second.meta.fix_checks or []] == [(fixed.id, "verified")]
    assert second.outcome.status == "empty"  # nothing new to act on: no gene, nothing asked of anyone

    # the error comes back after the commit: cycle 3 repairs, and the fix did not hold
    log_again(ws, later(2))
    third = cycle(ws, 3)
    assert third.genes_used == [REPAIR]
    assert any(s.startswith("errsig") for s in third.signals) and "log_error" in third.signals
    # the new line's own error signature (its time differs): the same problem
    assert {signal_identity(r.signal) for r in third.meta.live_again or []} == {
        signal_identity(s) for s in fixed.signals}
    assert [(c.event_id, c.verdict) for c in third.meta.fix_checks or []] == [(fixed.id, "did_not_hold")]
    with store_of(ws) as store:
        judged = store.get_event(fixed.id)
        capsule = store.get_capsule(judged.capsule_id or "")
        kinds = [(f.origin, f.kind) for f in store.list_feedback(REPAIR)]
        lessons = store.list_lessons(REPAIR)
    assert judged is not None and judged.meta.fix_verdict == "did_not_hold"
    assert capsule is not None and (capsule.model_extra or {}).get("fix_verdict") == "did_not_hold"
    assert kinds == [(Observation.fix_verified, FeedbackKind.used), (Observation.fix_did_not_hold, FeedbackKind.ignored)]
    assert [x.category for x in lessons] == [LessonCategory.success, LessonCategory.fix_verified,
                                             LessonCategory.fix_did_not_hold]
    assert lessons[2].supersedes == lessons[1].id and lessons[1].supersedes == lessons[0].id

    # the prompt names the try once, with its verdict and its change (its recent outcome line; the lesson about the
    # same try is not repeated, issue 41); gep history shows the verdict
    prompt = Path(third.meta.mutator_result.prompt_file).read_text()  # type: ignore[union-attr]
    outcomes = prompt.split("## Recent outcomes", 1)[1].split("\n## ", 1)[0]
    line = next(x for x in outcomes.splitlines() if fixed.id in x)
    assert "fix did not hold" in line and "changed: stats.py mean():" in line, line
    assert f"{REPAIR}'s fix for [" not in prompt and not third.meta.lessons_recalled
    table = CliRunner().invoke(app, ["history", "--workspace", str(ws)], env={"COLUMNS": "250"})
    row = next(line for line in table.stdout.splitlines() if short_id(fixed.id) in line)  # the id people type
    assert "did not hold" in row, table.stdout
    shown = json.loads(CliRunner().invoke(app, ["history", "--workspace", str(ws), "--json"]).stdout)
    assert {e["id"]: e["meta"].get("fix_verdict") for e in shown}[fixed.id] == "did_not_hold"


def test_a_change_that_failed_its_checks_and_was_rolled_back_is_ignored(ws: Path) -> None:
    """The agent's change breaks the example's tests: the cycle fails, its change is discarded, and the gene it
    used gets the implicit ``ignored`` (0.5) of an abandoned change (docs/learning.md)."""
    breaking = "import pathlib, sys; sys.stdin.read(); pathlib.Path('stats.py').write_text('def mean(:\\n')"
    event = run_cycle(CycleRequest(workspace=ws, mutator="command", seed=1,
                                   agent_cmd=shlex.join([sys.executable, "-c", breaking])), env=dict(os.environ))
    assert event is not None and event.outcome.status == "failed" and not event.is_empty_cycle, event.meta
    assert event.genes_used == [REPAIR] and event.meta.failure_reasons
    assert "def mean(:" not in (ws / "stats.py").read_text()  # rolled back
    with store_of(ws) as store:
        signals = store.list_feedback(REPAIR)
    assert [(s.origin, s.kind, s.confidence, s.event_id) for s in signals] == [
        (Observation.rolled_back, FeedbackKind.ignored, 0.5, event.id)]


def test_a_persons_revert_of_a_gep_commit_is_found_and_scored(ws: Path) -> None:
    fixed = committed_fix(ws)
    git(ws, "revert", "--no-edit", "HEAD")
    git(ws, "commit", "-q", "--allow-empty", "-m", "unrelated work")
    cycle(ws, 2)
    cycle(ws, 3, abandon_pending=True)  # scanned again from the new head: found once
    with store_of(ws) as store:
        reverts = [f for f in store.list_feedback() if f.origin == Observation.reverted]
        stats = {s.gene_id: s for s in feedback_stats(store.list_feedback(), utc_now())}
        lessons = [x for x in store.list_lessons(REPAIR) if x.category == LessonCategory.person]
    assert [(f.event_id, f.gene_id, f.kind, f.author) for f in reverts] == [
        (fixed.id, REPAIR, FeedbackKind.not_helpful, "Test")]
    assert reverts[0].note and reverts[0].note.startswith('Revert "gep(repair): Fix the mean"')
    assert stats[REPAIR].counts.not_helpful == 1 and stats[REPAIR].score < 0.5
    assert len(lessons) == 1 and "reverted in" in lessons[0].content and lessons[0].stance.value == "fails"


TWIN = "gene_repair_twin"


def _history_of_both(root: Path) -> Path:
    """A workspace where gene A (the seed repair gene) and B (its twin, after it in gene order) each ran one
    cycle on the example's error and changed nothing: they stand equal."""
    twin = {"type": "Gene", "id": TWIN, "category": "repair", "signals_match": ["log_error", "errsig"],
            "strategy": ["fix it"], "validation": ["python -m pytest -q"]}
    ws = agent_workspace(root / "base", {f".gep/genes/{TWIN}.json": json.dumps(twin)})
    for seed, gene in ((1, REPAIR), (2, TWIN)):
        assert cycle(ws, seed).genes_used == [gene]
        assert finish(ws).outcome.status == "empty"
    return ws


def same_workspace_copy(src: Path, dst: Path) -> Path:
    """A copy of ``src`` that is the same workspace (its history with it): a backup restored elsewhere. A plain
    copy is a new workspace and starts with no history (gep/core/workspace_id.py), so its id's home record goes."""
    ws = Path(shutil.copytree(src, dst, symlinks=True))
    (ws / ".git" / "gep" / HOME_FILE).unlink(missing_ok=True)
    return ws


def _pick_rate(base: Path, root: Path, seeds: range) -> float:
    """How often A is picked by the next cycle from ``base``, one seeded cycle per copy of it."""
    picks = []
    for seed in seeds:
        ws = same_workspace_copy(base, root / f"seed{seed}")
        picks.append(cycle(ws, seed).genes_used)
    assert {tuple(p) for p in picks} <= {(REPAIR,), (TWIN,)}, picks
    return picks.count([REPAIR]) / len(picks)


def test_not_helpful_on_a_genes_events_lowers_its_pick_rate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    venv_first(monkeypatch)
    base = _history_of_both(tmp_path)
    steered = same_workspace_copy(base, tmp_path / "steered")
    with store_of(steered) as store:
        [a_event] = [e for e in store.list_events(10) if e.genes_used == [REPAIR]]
        give_feedback(store, a_event.id, "not_helpful", now=utc_now(), note="not what we needed")
    seeds = range(10, 22)
    silent_rate = _pick_rate(base, tmp_path / "silent", seeds)
    steered_rate = _pick_rate(steered, tmp_path / "steered_runs", seeds)
    assert silent_rate >= 0.6, silent_rate  # equal records: A wins the tie unless drift picks otherwise
    assert steered_rate <= silent_rate / 2, (steered_rate, silent_rate)


def _conflicting_lessons(ws: Path, signals: list[str]) -> list[str]:
    """Four finished cycles of the repair gene on these signals, alternately a success and a failure."""
    ids = []
    with store_of(ws) as store:
        for k, status in enumerate(["success", "failed", "success", "failed"]):
            event = EvolutionEvent(id=f"evt_past_{k}", genes_used=[REPAIR], signals=signals,
                                   outcome=Outcome(status=status, score=0.5))
            learn_outcome(store, event, utc_now())
        ids = [x.id for x in store.list_lessons(REPAIR) if x.conflicts_with]
    return ids


def test_synthesis_is_asked_after_three_conflicts_and_the_next_lesson_resolves_them(ws: Path) -> None:
    (ws / "gep.toml").write_text('learning_on = ["lessons"]\n')  # the gene's own lessons: experimental (issue 41)
    git(ws, "add", "gep.toml")
    git(ws, "commit", "-q", "-m", "lessons on")
    first = cycle(ws, 1)
    finish(ws)  # closed empty: nothing was changed
    conflicted = _conflicting_lessons(ws, first.signals)
    assert len(conflicted) == 3

    asked = cycle(ws, 2)
    assert asked.genes_used == [REPAIR]
    prompt = Path(asked.meta.mutator_result.prompt_file).read_text()  # type: ignore[union-attr]
    section = prompt.split("## Conflicting lessons: reconcile them first", 1)[1].split("\n## ", 1)[0]
    assert "contradict each other" in section and all(i in section for i in conflicted)
    assert "[works]" in section and "[fails]" in section
    assert set(conflicted) <= set(asked.meta.synthesis_of or [])

    (ws / "stats.py").write_text((ws / "stats.py").read_text().replace("(len(values) - 1)", "len(values)"))
    done = finish(ws, "Divide by n: the conflicting fixes handled one-element lists differently")
    assert done.outcome.status == "success"
    with store_of(ws) as store:
        lessons = {x.id: x for x in store.list_lessons(REPAIR)}
    synthesis = [x for x in lessons.values() if x.category == LessonCategory.synthesis]
    assert len(synthesis) == 1 and synthesis[0].synthesis_source_ids == asked.meta.synthesis_of
    assert all(lessons[i].conflict_resolved and lessons[i].resolved_by == synthesis[0].id for i in conflicted)
    # the next cycles catch up on outcomes nobody learned from: the synthesis was learned, once
    cycle(ws, 3)
    with store_of(ws) as store:
        assert [x.id for x in store.list_lessons(REPAIR) if x.category == LessonCategory.synthesis] == [synthesis[0].id]
