"""Differential check against the reference's signals.js (runs only when node and a copy exist).

Set ``GEP_REFERENCE_SIGNALS_JS`` to a copy of the reference's ``src/gep/signals.js`` (docs/signals.md
says which version and how to rebuild it). The host-specific ``protocol_drift`` and
``path_outside_workspace`` pushes are removed from the copy at load time, as ``gep.signals.rules`` leaves
them out. Without node, ``test_signals_golden.py`` checks a fixed set of these inputs.
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path
from typing import Any

import pytest
from signals_cases import case, history_case, mismatches, run_reference, stress_case

REFERENCE = os.environ.get("GEP_REFERENCE_SIGNALS_JS", "")
# Extra rounds while changing gep/signals/rules.py: more cases and other seeds than the default run.
CASES = int(os.environ.get("GEP_SIGNALS_DIFF_CASES", "3000"))
SEED = int(os.environ.get("GEP_SIGNALS_DIFF_SEED", "20240501"))

pytestmark = pytest.mark.skipif(
    not (REFERENCE and Path(REFERENCE).is_file() and shutil.which("node")),
    reason="set GEP_REFERENCE_SIGNALS_JS to a copy of the reference signals.js (and install node)",
)


def _compare(cases: list[dict[str, Any]], tmp: Path) -> None:
    bad = mismatches(cases, run_reference(os.path.abspath(REFERENCE), cases, tmp))
    assert not bad, f"{len(bad)} of {len(cases)} differ; first: {bad[0]}"


def test_matches_the_reference_on_generated_inputs(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    _compare([case(rng) for _ in range(CASES)], tmp_path)


def test_matches_the_reference_on_long_astral_heavy_inputs(tmp_path: Path) -> None:
    rng = random.Random(SEED + 1)
    _compare([stress_case(rng) for _ in range(max(50, CASES // 10))], tmp_path)


def test_matches_the_reference_on_histories_of_any_json(tmp_path: Path) -> None:
    rng = random.Random(SEED + 2)
    _compare([history_case(rng) for _ in range(max(200, CASES // 2))], tmp_path)
