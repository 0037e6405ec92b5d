"""Seed 002's empty cycles as the engine records them: every cycle that changed nothing carries
``meta.empty_cycle`` true, a cycle whose change was made and then undone does not, and the next
cycles' history rules count them (saturation, steady state, the empty-cycle loop)."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import pytest

from gep import CycleRequest, run_cycle
from gep.core.models import EvolutionEvent
from gep.signals.rules import analyze_recent_history
from gep.store import Store

NOOP_AGENT = "import sys; sys.stdin.read(); print('nothing to change')"
CRASHING_AGENT = "import sys; sys.stdin.read(); print('gave up'); sys.exit(3)"
# Edits a file in the cycle's clone, then dies: the clone is discarded, the edit saved as a patch.
EDIT_THEN_CRASH_AGENT = (
    "import sys, pathlib; sys.stdin.read(); p = pathlib.Path('stats.py'); "
    "p.write_text(p.read_text() + '\\n# half done\\n'); sys.exit(3)"
)
# Makes a change the gene's validation rejects (the example's tests still fail).
BREAKING_AGENT = (
    "import sys, pathlib; sys.stdin.read(); p = pathlib.Path('README.md'); "
    "p.write_text(p.read_text() + '\\nmore words\\n'); print('edited the readme')"
)


@pytest.fixture(autouse=True)
def venv_python_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """`python` in gene validation resolves to this interpreter (which has pytest)."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")


def cycle(ws: Path, agent: str) -> EvolutionEvent:
    cmd = shlex.join([sys.executable, "-c", agent])
    return run_cycle(
        CycleRequest(workspace=ws, mutator="command", agent_cmd=cmd, seed=1), env=dict(os.environ)
    )


def stored(ws: Path, event_id: str) -> EvolutionEvent:
    with Store.for_workspace(ws) as store:
        event = store.get_event(event_id)
    assert event is not None
    return event


def test_a_noop_agent_cycle_is_recorded_empty(example_ws: Path) -> None:
    event = stored(example_ws, cycle(example_ws, NOOP_AGENT).id)
    assert event.outcome.status == "empty"
    assert event.meta.empty_cycle is True
    assert (event.blast_radius.files, event.blast_radius.lines) == (0, 0)


def test_a_failed_agent_that_changed_nothing_is_empty(example_ws: Path) -> None:
    event = stored(example_ws, cycle(example_ws, CRASHING_AGENT).id)
    assert event.outcome.status == "failed"
    assert event.meta.empty_cycle is True


def test_a_change_made_then_undone_is_not_empty(example_ws: Path) -> None:
    """Failed validation and an agent that crashed after editing both changed something (then discarded,
    saved as a patch): they count as failures, not as empty cycles, with the blast radius of what was made."""
    before = (example_ws / "stats.py").read_text()
    crashed = stored(example_ws, cycle(example_ws, EDIT_THEN_CRASH_AGENT).id)
    assert crashed.outcome.status == "failed"
    assert (example_ws / "stats.py").read_text() == before  # never touched: the edit was in the clone
    assert "# half done" in Path(crashed.meta.rescued_patch or "").read_text()
    assert crashed.meta.empty_cycle is False
    assert crashed.blast_radius.files == 1 and crashed.blast_radius.lines >= 1
    assert not crashed.is_empty_cycle

    rejected = stored(example_ws, cycle(example_ws, BREAKING_AGENT).id)
    assert rejected.outcome.status == "failed" and rejected.meta.validation_ok is False
    assert rejected.meta.empty_cycle is False and rejected.blast_radius.files == 1


def test_history_rules_count_the_engines_empty_cycles(example_ws: Path) -> None:
    events = [cycle(example_ws, NOOP_AGENT) for _ in range(5)]
    assert all(e.meta.empty_cycle is True for e in events)
    # The 4th cycle saw 3 empty ones, the 5th saw 4 (saturation, then the empty-cycle loop).
    assert "evolution_saturation" in events[3].signals
    assert "force_steady_state" not in events[3].signals
    assert "empty_cycle_loop_detected" in events[4].signals
    with Store.for_workspace(example_ws) as store:
        history = analyze_recent_history(store.recent_events(8))
    assert history.empty_cycle_count == 5 and history.consecutive_empty_cycles == 5
    assert "force_steady_state" in cycle(example_ws, NOOP_AGENT).signals


@pytest.mark.parametrize("edit", [False, True], ids=["untouched", "edited"])
def test_an_abandoned_prompt_cycle_is_empty_only_if_nothing_was_changed(example_ws: Path, edit: bool) -> None:
    pending = run_cycle(CycleRequest(workspace=example_ws, mutator="prompt", seed=1), env=dict(os.environ))
    assert stored(example_ws, pending.id).outcome.status == "awaiting_changes"
    stats = example_ws / "stats.py"
    before = stats.read_text()
    if edit:
        stats.write_text(before + "\n# started, then given up\n")
    new = run_cycle(
        CycleRequest(workspace=example_ws, mutator="prompt", seed=2, abandon_pending=True),
        env=dict(os.environ),
    )
    abandoned = stored(example_ws, pending.id)
    assert abandoned.outcome.status == "abandoned"
    assert stats.read_text() == before  # only the cycle's paths put back ...
    assert abandoned.meta.empty_cycle is (not edit)
    assert abandoned.blast_radius.files == (1 if edit else 0)
    if edit:  # ... after the edit was saved as a patch that brings it back, which the new cycle says
        assert "# started, then given up" in Path(abandoned.meta.rescued_patch or "").read_text()
        assert (f"abandoned {pending.id}: your change is saved in {abandoned.meta.rescued_patch}; bring it back "
                f"with: git -C {example_ws} apply {abandoned.meta.rescued_patch}") in (new.meta.start_notes or [])
    else:
        assert abandoned.meta.rescued_patch is None
