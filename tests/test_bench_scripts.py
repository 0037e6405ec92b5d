"""Every bench script starts: it imports what it measures and answers --help (a renamed engine function once
broke bench/selection.py on main without any test noticing)."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.mark.parametrize("script", sorted(p.name for p in BENCH.glob("*.py")))
def test_a_bench_script_imports_and_answers_help(script: str):
    r = subprocess.run([sys.executable, str(BENCH / script), "--help"], capture_output=True, text=True, timeout=120,
                       cwd=BENCH.parent)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "usage:" in r.stdout, r.stdout[-500:]


def test_the_textbook_learner_follows_a_fix_that_stops_holding():
    """The scale the oracle target is read against (docs/learning.md) must itself learn: told each fix's verdict,
    the greedy learner leaves gene_type_fixer once its fixes stop holding."""
    sys.path.insert(0, str(BENCH))
    try:
        import selection as bench
    finally:
        sys.path.remove(str(BENCH))
    import random

    world = random.Random(5)
    sit = next(s for s in bench.SITUATIONS if s.name == "type_error")
    draws = [bench.Draw(sit, world.random(), world.random(), world.random(), 1.0) for _ in range(300)]
    picks = bench.run_textbook_shifting(draws, 150, seed=5, gamma=0.9, drift=0.0)
    before, after = Counter(g for g, _ in picks[100:150]), Counter(g for g, _ in picks[250:])
    assert before.most_common(1)[0][0] == "gene_type_fixer"
    assert after.most_common(1)[0][0] == bench.best_gene(sit, True) == "gene_distilled_errsig"
    # without the verdicts a fix that does not hold still looks like a success: the learner would stay
    assert sum(ok for _, ok in picks[250:]) > 0.6 * 50


def test_the_oracle_obeys_the_dominance_cap():
    """The oracle the engine is judged against follows the engine's rules: after the change one gene is best in
    type_error and timeout, more than the cap allows, and the oracle yields as the engine must (an oracle ignoring
    the cap is printed beside it)."""
    sys.path.insert(0, str(BENCH))
    try:
        import selection as bench
    finally:
        sys.path.remove(str(BENCH))
    import random

    from gep.core.config import Settings

    world = random.Random(3)
    sits = [s for s in bench.SITUATIONS if s.name in ("type_error", "timeout")]
    draws = [bench.Draw(world.choice(sits), world.random(), world.random(), world.random(), 1.0) for _ in range(200)]
    capped = [g for g, _ in bench.run_oracle_shifting(draws, 0)]
    free = [g for g, _ in bench.run_oracle_shifting(draws, 0, capped=False)]
    window, share = Settings().dominance_window, Settings().dominance_share
    assert set(free) == {"gene_distilled_errsig"}  # best in both: without the cap it takes every pick
    assert bench.max_window_share(capped, window) <= share
    assert Counter(capped)["gene_distilled_errsig"] >= share * len(capped) - window  # held at the cap, not below


# end to end (`make test`, not the quick loop): the bench's learning loop through the engine's store, fix
# verdicts and feedback for 120 cycles, 3.3 s of CPU (docs/performance.md)
@pytest.mark.e2e
def test_the_imperfect_labeller_is_late_and_sometimes_wrong(tmp_path: Path):
    """bench/selection.py --labeller imperfect: a person's label comes LABEL_DELAY cycles after the fix's verdict,
    and about LABEL_WRONG of them say the opposite of what happened (the perfect one: at once, always right)."""
    sys.path.insert(0, str(BENCH))
    try:
        import selection as bench
    finally:
        sys.path.remove(str(BENCH))
    from datetime import UTC, datetime, timedelta

    from gep.core.models import EvolutionEvent, Outcome, iso
    from gep.store import Store

    def labels(imperfect: bool, extra: int) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        """60 fixes that held, one verified per cycle, then ``extra`` cycles more: the person's labels after the
        60th cycle and at the end (one run: the labeller is deterministic, so a second run stopped at the 60th
        cycle would give the first list again)."""
        start = datetime(2026, 1, 5, tzinfo=UTC)
        learn = bench.Learning(imperfect)

        def given(store: Store) -> list[tuple[str, str]]:
            return [(f.event_id, str(f.kind)) for f in store.list_feedback() if f.author == "bench"]

        with Store.open(f"sqlite:///{tmp_path}/l{imperfect}{extra}.db") as store:
            for i in range(60 + extra):
                now = start + timedelta(hours=i)
                if i < 60:
                    ev = EvolutionEvent(id=f"evt_{i:04d}", signals=["log_error", f"errsig:e{i}"],
                                        genes_used=["gene_a"], outcome=Outcome(status="success", score=0.85),
                                        meta={"at": iso(now)})
                    store.add_event(ev)
                    learn.pending.append((ev, True, bench.Draw(bench.SITUATIONS[0], 0.0, 1.0, 0.0, 0.0)))
                learn.verify(store, now + timedelta(minutes=30))
                if i == 59:
                    at_60 = given(store)
            return at_60, given(store)

    perfect, _ = labels(False, 0)
    assert len(perfect) == 60 and all("not_helpful" not in k for _, k in perfect)
    at_60, late = labels(True, bench.LABEL_DELAY)
    assert len(at_60) == 60 - bench.LABEL_DELAY  # the last ones are not labelled yet
    wrong = sum("not_helpful" in k for _, k in late)
    assert len(late) == 60 and 0.05 * 60 <= wrong <= 0.4 * 60
