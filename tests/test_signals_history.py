"""History rules of seed 002 on crafted event lists, each threshold at its boundary."""

from __future__ import annotations

from typing import Any

import pytest

from gep.core.models import BlastRadius, EvolutionEvent, Outcome
from gep.signals.rules import analyze_recent_history, extract_signals, is_empty_cycle, top_gene


def ev(
    intent: str = "innovate",
    signals: list[str] | None = None,
    genes: list[str] | None = None,
    files: int = 1,
    lines: int = 5,
    status: str = "success",
    meta: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "intent": intent,
        "signals": signals or [],
        "genes_used": genes or [],
        "blast_radius": {"files": files, "lines": lines},
        "outcome": {"status": status},
        "meta": meta or {},
    }


def run(events: list[Any], text: str = "") -> list[str]:
    return extract_signals(recent_session_transcript=text, recent_events=events)


# ---------------------------------------------------------------- suppression (3 of the last 8)


def test_signal_seen_in_three_of_last_eight_is_suppressed() -> None:
    two = [ev(signals=["perf_bottleneck"])] * 2 + [ev()] * 6
    assert run(two, "it is slow") == ["perf_bottleneck"]
    three = [ev(signals=["perf_bottleneck"])] * 3 + [ev()] * 5
    assert run(three, "it is slow") == ["evolution_stagnation_detected", "stable_success_plateau"]


def test_suppression_only_looks_at_the_last_eight() -> None:
    old = [ev(signals=["perf_bottleneck"])] * 3 + [ev()] * 8
    assert run(old, "it is slow") == ["perf_bottleneck"]


def test_suppression_normalises_snippet_signals() -> None:
    hist = [ev(signals=["errsig:A"]), ev(signals=["errsig:B"]), ev(signals=["errsig:C"])]
    assert run(hist, "Error: new one") == ["log_error"]
    hist = [ev(signals=[f"user_feature_request:{i}"]) for i in range(3)]
    assert run(hist, "please add csv export support") == [
        "evolution_stagnation_detected",
        "stable_success_plateau",
    ]


def test_nothing_suppressed_and_nothing_found_is_a_plain_plateau() -> None:
    hist = [ev(signals=["perf_bottleneck"])] * 3
    assert run(hist, "") == ["stable_success_plateau"]


# ---------------------------------------------------------------- repair loop (3 consecutive)


def test_repair_loop_boundary() -> None:
    two = [ev()] + [ev(intent="repair")] * 2
    assert run(two, "Error: x") == ["log_error", "errsig:Error: x"]
    three = [ev()] + [ev(intent="repair")] * 3
    assert run(three, "Error: x") == [
        "repair_loop_detected",
        "stable_success_plateau",
        "force_innovation_after_repair_loop",
    ]
    # A non-repair event at the end breaks the streak.
    assert run([ev(intent="repair")] * 3 + [ev()], "Error: x") == ["log_error", "errsig:Error: x"]


def test_repair_loop_keeps_other_signals() -> None:
    three = [ev(intent="repair")] * 3
    assert run(three, "Error: x\nit is slow") == ["perf_bottleneck", "force_innovation_after_repair_loop"]


# ---------------------------------------------------------------- empty cycles and saturation


def test_empty_cycle_loop_boundary() -> None:
    three = [ev(files=0, lines=0)] * 3 + [ev(), ev()] + [ev(files=0, lines=0)] * 0 + [ev()] * 3
    assert "empty_cycle_loop_detected" not in run(three)
    four = [ev(files=0, lines=0), ev()] * 4
    assert run(four, "Error: x") == ["empty_cycle_loop_detected", "stable_success_plateau"]


def test_saturation_thresholds() -> None:
    def tail_empties(n: int) -> list[dict[str, Any]]:
        return [ev()] * (8 - n) + [ev(files=0, lines=0)] * n

    assert run(tail_empties(2)) == ["stable_success_plateau"]
    assert run(tail_empties(3)) == ["evolution_saturation"]  # a signal, so no plateau fallback
    assert run(tail_empties(4)) == [
        "empty_cycle_loop_detected",
        "stable_success_plateau",
        "evolution_saturation",
    ]
    assert run(tail_empties(5)) == [
        "empty_cycle_loop_detected",
        "stable_success_plateau",
        "force_steady_state",
        "evolution_saturation",
    ]


def test_empty_cycle_definition() -> None:
    assert is_empty_cycle(ev(files=0, lines=0))
    assert is_empty_cycle(ev(files=3, lines=9, meta={"empty_cycle": True}))
    assert not is_empty_cycle(ev(files=0, lines=1))
    assert not is_empty_cycle({"intent": "repair"})  # no blast radius recorded: not known to be empty
    assert not is_empty_cycle({"blast_radius": {"files": "0", "lines": 0}})  # strict, as ===
    model = EvolutionEvent(id="evt_1", blast_radius=BlastRadius(files=2, lines=3), meta={"empty_cycle": True})
    assert is_empty_cycle(model)


# ---------------------------------------------------------------- failures


def test_failure_streak_boundaries_and_gene_ban() -> None:
    def failing(n: int) -> list[dict[str, Any]]:
        return [ev(genes=["g_ok"])] * 3 + [ev(status="failed", genes=["g_bad"])] * n

    assert "consecutive_failure_streak_2" not in run(failing(2))
    assert run(failing(3))[:1] == ["consecutive_failure_streak_3"]
    four = run(failing(4))
    assert "failure_loop_detected" not in four
    five = run(failing(5))
    assert five[:3] == ["consecutive_failure_streak_5", "failure_loop_detected", "ban_gene:g_bad"]


def test_ban_gene_tie_goes_to_the_first_key_integer_keys_first() -> None:
    hist = [ev(status="failed", genes=["zeta"]), ev(status="failed", genes=["7"])] * 2 + [
        ev(status="failed", genes=["zeta", "7"])
    ]
    assert "ban_gene:7" in run(hist)


def test_high_failure_ratio_boundary() -> None:
    five_of_eight = [ev(status="failed"), ev()] * 3 + [ev(status="failed")] * 2
    assert analyze_recent_history(five_of_eight).recent_failure_ratio == 5 / 8
    assert "high_failure_ratio" not in run(five_of_eight)
    six_of_eight = [ev(), ev(status="failed"), ev(), ev(status="failed")] + [ev(status="failed")] * 4
    out = run(six_of_eight)
    assert out[-2:] == ["high_failure_ratio", "force_innovation_after_repair_loop"]


# ---------------------------------------------------------------- analysis model


def test_analysis_fields() -> None:
    events = [
        EvolutionEvent(
            id=f"e{i}",
            intent="repair",
            signals=["log_error", "errsig:x"],
            genes_used=["g1"],
            blast_radius=BlastRadius(files=0, lines=0),
            outcome=Outcome(status="failed"),
        )
        for i in range(12)
    ]
    h = analyze_recent_history(events)
    assert h.consecutive_repair_count == 10
    assert h.empty_cycle_count == 8
    assert h.consecutive_empty_cycles == 10
    assert h.consecutive_failure_count == 10
    assert h.recent_failure_ratio == 1.0
    assert h.signal_freq == {"log_error": 8, "errsig": 8}
    assert h.gene_freq == {"g1": 8}
    assert h.suppressed_signals == ["log_error", "errsig"]
    assert h.recent_intents == ["repair"] * 10
    assert top_gene(h) == "g1"


@pytest.mark.parametrize("events", [None, [], ()])
def test_no_history(events: Any) -> None:
    h = analyze_recent_history(events)
    assert h.consecutive_repair_count == 0 and h.suppressed_signals == [] and h.recent_failure_ratio == 0.0


def test_models_and_dicts_agree() -> None:
    dicts = [
        ev(intent="repair", status="failed", genes=["g"], files=0, lines=0, signals=["perf_bottleneck"])
    ] * 6
    models = [EvolutionEvent(id=f"e{i}", **{k: v for k, v in d.items()}) for i, d in enumerate(dicts)]
    assert run(dicts, "slow\nError: x") == run(models, "slow\nError: x")
