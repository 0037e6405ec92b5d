"""The holdout (``holdout`` in gep.toml, GEP_HOLDOUT): its draw for cycles and sessions, its marks on events, in
`gep history` and in the injection log, and what `gep report` measures from it."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from learning_helpers import REPAIR, agent_workspace, committed_fix, later, log_again, venv_first
from rich.console import Console
from test_cli import run

from gep import CycleRequest, run_cycle
from gep.cli.history_cmd import HistoryView
from gep.cli.history_table import print_history
from gep.core.holdout import held_out
from gep.core.models import EvolutionEvent
from gep.cycle.context import open_cycle
from gep.cycle.outcomes import event_base
from gep.eval.effect import MIN_GROUP_CYCLES, learning_effect
from gep.eval.stats import difference_sequence
from gep.learning.context_cache import LOG, answer_from_cache, write
from gep.sessions.session_start import session_start
from gep.store import Store

pytestmark = pytest.mark.timeout(300)
NOW = datetime(2026, 12, 1, tzinfo=UTC)


class Fixed(random.Random):
    """An rng whose every draw is ``value`` (the injected rng of a session)."""

    def __init__(self, value: float) -> None:
        super().__init__(0)
        self.value = value

    def random(self) -> float:
        return self.value


def test_the_draw_takes_its_share_and_nothing_at_zero():
    rng = random.Random(5)
    state = rng.getstate()
    assert not held_out(0.0, rng) and rng.getstate() == state  # no number drawn: other draws unchanged
    draws = [held_out(0.1, random.Random(i)) for i in range(5000)]
    assert 0.08 < sum(draws) / len(draws) < 0.12
    assert held_out(1.0, rng) and held_out(0.5, Fixed(0.49)) and not held_out(0.5, Fixed(0.5))


def _opened(ws: Path, seed: int, env: dict[str, str]) -> tuple[bool | None, str, EvolutionEvent]:
    ctx, state = open_cycle(CycleRequest(workspace=ws, seed=seed, mutator="prompt"), env=env)
    try:
        return ctx.holdout, ctx.settings.learning, event_base(ctx, state)
    finally:
        ctx.close()


def test_a_cycle_is_drawn_with_its_seed_runs_with_learning_off_and_is_marked(repo: Path):
    seen = []
    for seed in range(4):  # drawn: True, False, True, False
        held, learning, event = _opened(repo, seed, {"GEP_HOLDOUT": "0.5"})
        assert held is held_out(0.5, random.Random(f"{seed}:holdout"))  # the context's rng, from the seed
        assert learning == ("off" if held else "on")
        assert event.meta.holdout is held and event.model_dump(mode="json")["meta"]["holdout"] is held
        seen.append(held)
    assert True in seen and False in seen
    held, learning, event = _opened(repo, 1, {})  # the default: no holdout, no draw, no mark
    assert held is None and learning == "on" and "holdout" not in event.model_dump(mode="json")["meta"]
    held, _, event = _opened(repo, 1, {"GEP_HOLDOUT": "1", "GEP_LEARNING": "off"})  # off already: nothing drawn
    assert held is None and event.meta.holdout is None
    (repo / "gep.toml").write_text("holdout = 1.0\n")
    assert _opened(repo, 1, {})[0] is True


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    venv_first(monkeypatch)
    return agent_workspace(tmp_path / "ws")


def test_a_held_out_cycle_gets_no_lessons_in_its_prompt(ws: Path):
    committed_fix(ws)
    log_again(ws, later(2))  # the fix did not hold: the next cycle has a lesson to show
    held = run_cycle(CycleRequest(workspace=ws, seed=3, mutator="prompt"), env={"GEP_HOLDOUT": "1"})
    assert held is not None and held.genes_used == [REPAIR] and held.meta.holdout is True
    assert held.meta.mutator_result is not None and held.meta.mutator_result.prompt_file
    prompt = Path(held.meta.mutator_result.prompt_file).read_text()
    assert "## Lessons from earlier cycles" not in prompt and not held.meta.lessons_recalled


def _event(i: int, *, holdout: bool | None, status: str = "success", verdict: str | None = None) -> EvolutionEvent:
    meta: dict[str, object] = {"at": (NOW + timedelta(hours=i)).isoformat(), "cycle": i + 1}
    if holdout is not None:
        meta["holdout"] = holdout
    if verdict:
        meta["fix_verdict"] = verdict
    return EvolutionEvent(id=f"evt_{1000 + i}_aaaaaa", genes_used=["gene_gep_repair_from_errors"],
                          outcome={"status": status, "score": 0.5}, meta=meta)


def _store(ws: Path, learned: tuple[int, int, int], holdout: tuple[int, int, int]) -> None:
    """(cycles, of which failed, of which verified fixes) in each group, interleaved, and 3 unmarked cycles."""
    events, i = [], 0
    for mark, (n, failed, verified) in ((False, learned), (True, holdout)):
        for k in range(n):
            status = "failed" if k < failed else "success" if k < failed + verified + 2 else "empty"
            events.append(_event(i, holdout=mark, status=status,
                                 verdict="verified" if failed <= k < failed + verified else None))
            i += 1
    events += [_event(i + k, holdout=None, verdict="verified") for k in range(3)]  # before the holdout: left out
    random.Random(1).shuffle(events)
    with Store.for_workspace(ws) as store:
        store.add_events(events)


def test_the_report_measures_the_effect_on_a_store_with_known_groups(repo: Path, tmp_path: Path):
    _store(repo, learned=(200, 6, 100), holdout=(60, 4, 6))
    result = run("report", "-w", str(repo), "--json")
    assert result.exit_code == 0, result.stderr
    effect = json.loads(result.stdout)["workspaces"][0]["learning_effect"]
    assert effect["learned"] == {"cycles": 200, "attempts": 6 + 102, "verified_fixes": 100,
                                 "verified_fixes_per_cycle": 0.5, "attempts_per_verified_fix": 1.08}
    assert effect["holdout"] == {"cycles": 60, "attempts": 4 + 8, "verified_fixes": 6,
                                 "verified_fixes_per_cycle": 0.1, "attempts_per_verified_fix": 2.0}
    lo, hi = difference_sequence(100, 200, 6, 60)
    assert effect["difference"] == [lo, hi] and 0 < lo < 0.4 < hi
    assert effect["enough"] and effect["verdict"] == "learning helps here"
    page = tmp_path / "page.html"
    result = run("report", "-w", str(repo), "--out", str(page))
    assert "learning effect (holdout): learning helps here" in result.stdout
    # every line fits 80 columns but the one naming the page's path, as long as the path is
    assert all(len(line) <= 80 for line in result.stdout.splitlines() if not line.startswith("wrote "))
    assert "Learning effect" in page.read_text()


def test_too_few_cycles_say_so_plainly(repo: Path):
    _store(repo, learned=(30, 2, 20), holdout=(MIN_GROUP_CYCLES - 1, 1, 0))
    effect = json.loads(run("report", "-w", str(repo), "--json").stdout)["workspaces"][0]["learning_effect"]
    assert effect["verdict"] == "not enough cycles yet" and effect["difference"] is None
    assert effect["holdout"]["cycles"] == MIN_GROUP_CYCLES - 1
    result = run("report", "-w", str(repo), "--out", str(repo / ".gep" / "r.html"))
    assert "learning effect (holdout): not enough cycles yet" in result.stdout


def test_an_effect_that_is_not_there_is_not_shown():
    events = [_event(i, holdout=i % 2 == 0, verdict="verified" if i % 3 == 0 else None) for i in range(200)]
    effect = learning_effect(events)
    assert effect.enough and effect.verdict == "no difference shown yet"


def test_gep_history_marks_the_held_out_cycles_in_80_columns(repo: Path):
    with Store.for_workspace(repo) as store:
        store.add_event(_event(0, holdout=True))
        store.add_event(_event(1, holdout=False))
        events = store.list_events(limit=20)
    view = HistoryView.load(repo, events, limit=20, include_runs=False)
    console = Console(width=80, record=True)
    print_history(console, view.rows, events, wide=False)
    lines = console.export_text().splitlines()
    assert all(len(line) <= 80 for line in lines), lines
    rows = [ln for ln in lines if " repair " in ln]
    assert len(rows) == 2 and sum("success*" in r for r in rows) == 1, lines
    assert any(ln.startswith("* holdout:") for ln in lines)
    assert json.loads(run("show", "evt_1000", "-w", str(repo)).stdout)["meta"]["holdout"] is True


def test_a_session_drawn_into_the_holdout_gets_nothing_and_is_marked(repo: Path):
    (repo / "gep.toml").write_text("holdout = 0.5\n")
    assert session_start(repo, "sess-0", NOW, rng=Fixed(0.2)) == "" and not (repo / ".gep").exists()  # no store yet
    Store.for_workspace(repo).close()
    assert session_start(repo, "sess-1", NOW, rng=Fixed(0.2)) == ""
    marks = [json.loads(line) for line in (repo / LOG).read_text().splitlines()]
    assert marks == [{"type": "holdout", "at": NOW.isoformat(), "session": "sess-1", "holdout": True}]
    # the hook's fast path: a cached answer is drawn with the share the cache kept
    write(repo, paths=[], stamp=[], day=NOW.date().isoformat(), text="learned: x", items=[], holdout=0.5)
    assert answer_from_cache(repo, "sess-2", NOW, rng=Fixed(0.7)) and len((repo / LOG).read_text().splitlines()) == 1
    assert answer_from_cache(repo, "sess-3", NOW, rng=Fixed(0.3)) == ""
    assert json.loads((repo / LOG).read_text().splitlines()[-1])["session"] == "sess-3"
