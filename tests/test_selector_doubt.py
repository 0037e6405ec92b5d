"""Loop rules in proportion to doubt (issue 41, point 5). Drift: the seed's intensity while the best two
candidates are a toss-up, less as their records tell them apart; an explicit drift request keeps the seed's
intensity. Bans: two failed checks in a row do not ban a gene whose record here says it mostly succeeds."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from gep.core.config import Settings
from gep.core.models import BlastRadius, EvolutionEvent, FailedCapsule, Gene, Outcome, iso
from gep.genes.selector import drift_intensity, select_gene_and_capsule

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SIGNALS = ["log_error", "errsig:TypeError: x is undefined"]
# four genes in the pool (the seed's intensity 1/sqrt(4) = 0.5), two of them match
GENES = [Gene(id="gene_good", signals_match=["log_error"]), Gene(id="gene_weak", signals_match=["log_error"]),
         Gene(id="gene_perf", signals_match=["perf_bottleneck"]), Gene(id="gene_tool", signals_match=["tool"])]
DRAWS = 200


def _event(i: int, gene_id: str, ok: bool) -> EvolutionEvent:
    return EvolutionEvent(id=f"evt_{i:04d}", signals=SIGNALS, genes_used=[gene_id],
                          outcome=Outcome(status="success" if ok else "failed", score=0.85 if ok else 0.2),
                          blast_radius=BlastRadius(files=1, lines=5), meta={"at": iso(NOW - timedelta(hours=40 - i))})


def _drift_share(events: list[EvolutionEvent], drift: bool = False) -> tuple[float, float]:
    """(share of DRAWS selections made under drift, the drift probability the decision reports)."""
    modes, gates = [], set()
    for seed in range(DRAWS):
        sel = select_gene_and_capsule(genes=GENES, capsules=[], failed_capsules=[], signals=SIGNALS,
                                      recent_events=events, settings=Settings(), rng=random.Random(seed), now=NOW,
                                      drift=drift)
        modes.append(sel.decision.drift_mode == "drift")
        gates.add(sel.decision.drift_intensity)
    assert len(gates) == 1
    return sum(modes) / DRAWS, gates.pop()


def _records(good: tuple[int, int], weak: tuple[int, int]) -> list[EvolutionEvent]:
    """Interleaved outcomes: (successes, failures) of gene_good and of gene_weak."""
    outcomes = [("gene_good", True)] * good[0] + [("gene_good", False)] * good[1] \
        + [("gene_weak", True)] * weak[0] + [("gene_weak", False)] * weak[1]
    random.Random(3).shuffle(outcomes)
    return [_event(i, g, ok) for i, (g, ok) in enumerate(outcomes)]


def test_drift_falls_when_the_records_tell_the_best_two_apart() -> None:
    seeds = drift_intensity(len(GENES), False)
    share, gate = _drift_share(_records((8, 0), (2, 3)))
    assert gate < seeds / 4  # 8 of 8 against 2 of 5: hardly a doubt left
    assert share < seeds / 4  # the seed's fixed intensity drifts half the time here
    closer, closer_gate = _drift_share(_records((5, 3), (4, 4)))
    assert gate < closer_gate <= seeds  # closer records, more doubt, more drift
    assert closer > share


def test_drift_is_half_the_seeds_intensity_when_nothing_tells_them_apart() -> None:
    seeds = drift_intensity(len(GENES), False)
    share, gate = _drift_share([])
    assert gate == round(seeds / 2, 4)  # the seed's intensity times the runner-up's chance, a toss-up
    assert abs(share - seeds / 2) < 0.1
    tied, tied_gate = _drift_share(_records((4, 2), (4, 2)))
    assert tied_gate > 0.8 * seeds / 2 and abs(tied - tied_gate) < 0.1


def test_a_drift_request_keeps_the_seeds_intensity_plus_its_bonus() -> None:
    share, gate = _drift_share(_records((8, 0), (2, 3)), drift=True)
    assert gate == round(drift_intensity(len(GENES), True), 4)
    assert abs(share - gate) < 0.1


def _failing_lately(gene_id: str, successes: int) -> tuple[list[EvolutionEvent], list[FailedCapsule]]:
    """``successes`` of ``gene_id`` (gene_weak's one failure among them), then two failed checks of it in a
    row, each leaving a failed capsule."""
    events = [_event(i, gene_id, True) for i in range(successes)] + [_event(successes, "gene_weak", False)]
    failed = []
    for k in (1, 2):
        events.append(_event(successes + k, gene_id, False))
        failed.append(FailedCapsule(id=f"fail_{k}", gene=gene_id, trigger=SIGNALS, failure_reason="checks failed",
                                    created_at=events[-1].meta.at))
    return events, failed


def _bans(events: list[EvolutionEvent], failed: list[FailedCapsule]) -> dict[str, str]:
    sel = select_gene_and_capsule(genes=GENES, capsules=[], failed_capsules=failed, signals=SIGNALS,
                                  recent_events=events, settings=Settings(), rng=random.Random(0), now=NOW)
    return {b.gene_id: b.source for b in sel.decision.bans_applied}


def test_two_failed_checks_do_not_ban_a_gene_whose_record_says_it_mostly_succeeds() -> None:
    assert "gene_good" not in _bans(*_failing_lately("gene_good", 10))  # 10 of 12 here
    assert _bans(*_failing_lately("gene_good", 2)) == {"gene_good": "failed_capsules"}  # 2 of 4: no record yet
