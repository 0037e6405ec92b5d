"""The reference's outputs on a fixed set of generated inputs, checked on every run (no node needed).

``fixtures/signals_golden.json.gz`` holds the inputs of ``signals_cases.golden_cases()`` and what the
reference's ``extractSignals`` returned for each under node (see docs/signals.md for the version).
"""

from __future__ import annotations

import gzip
import json
from typing import Any

import pytest
from signals_cases import GOLDEN, golden_cases, mismatches


@pytest.fixture(scope="module")
def golden() -> dict[str, Any]:
    return json.loads(gzip.decompress(GOLDEN.read_bytes()))


def test_golden_inputs_are_the_generators(golden: dict[str, Any]) -> None:
    # The file must hold what the generator makes, so it can be rewritten from the reference.
    assert golden["cases"] == golden_cases()


def test_matches_the_reference_outputs(golden: dict[str, Any]) -> None:
    bad = mismatches(golden["cases"], golden["expected"])
    assert not bad, f"{len(bad)} of {len(golden['cases'])} differ; first: {bad[0]}"


def test_the_golden_set_covers_every_family(golden: dict[str, Any]) -> None:
    seen = {s.split(":", 1)[0].split("(", 1)[0] for out in golden["expected"] for s in out}
    seen = {
        s if not s.startswith("consecutive_failure_streak_") else "consecutive_failure_streak" for s in seen
    }
    families = {
        "log_error", "errsig", "recurring_error", "recurring_errsig", "memory_missing", "user_missing",
        "integration_key_missing", "session_logs_missing", "unsupported_input_type", "user_feature_request",
        "user_improvement_suggestion", "perf_bottleneck", "capability_gap", "high_tool_usage",
        "repeated_tool_usage", "evolution_stagnation_detected", "repair_loop_detected",
        "force_innovation_after_repair_loop", "empty_cycle_loop_detected", "evolution_saturation",
        "force_steady_state", "consecutive_failure_streak", "failure_loop_detected", "ban_gene",
        "high_failure_ratio", "stable_success_plateau",
    }  # fmt: skip
    assert families <= seen, sorted(families - seen)
