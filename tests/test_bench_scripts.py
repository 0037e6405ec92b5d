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
