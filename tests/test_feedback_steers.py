"""A person's word steers selection (issue 41, point 5): with two equally matching genes, a person calling one's
changes not helpful and the other's helpful during 12 cycles moves at least 4 of the next 12 picks, compared with
the same cycles without feedback, whatever the loop rules (drift, dominance cap) do. The real selector
(gep.cycle.stages.select_from_store) over a real store, feedback given as `gep feedback` gives it."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gep.core.config import Settings
from gep.core.models import BlastRadius, EvolutionEvent, Gene, Outcome, iso
from gep.cycle.record_learning import learn_outcome
from gep.cycle.stages import select_from_store
from gep.genes.selector import Selection, select_gene_and_capsule
from gep.learning.feedback import FeedbackIndex, FeedbackSignal, explicit_signal
from gep.learning.human_verdicts import give_feedback
from gep.store import Store

GENES = [Gene(id="gene_a", category="repair", signals_match=["log_error"]),
         Gene(id="gene_b", category="repair", signals_match=["log_error"])]
SIGNALS = ["log_error", "errsig:TypeError: add() takes 2 positional arguments but 3 were given"]
START = datetime(2026, 3, 2, tzinfo=UTC)
JUDGED, AFTER = 12, 12


def picks(tmp: Path, seed: int, *, feedback: bool, disliked: str = "gene_a", whole: bool = False) -> list[str]:
    """The genes picked over ``JUDGED + AFTER`` cycles in which every change succeeds alike; with ``feedback`` a
    person calls ``disliked``'s changes not helpful and the other gene's helpful during the first ``JUDGED``."""
    out: list[str] = []
    with Store.open(f"sqlite:///{tmp}/{seed}-{feedback}.db") as store:
        for t in range(JUDGED + AFTER):
            now = START + timedelta(hours=t)
            sel, _ = select_from_store(store, genes=GENES, signals=SIGNALS, settings=Settings(),
                                       rng=random.Random(f"{seed}:{t}"), now=now)
            assert sel.gene is not None, sel.decision.reasons
            event = EvolutionEvent(id=f"evt_{t:04d}", signals=SIGNALS, genes_used=[sel.gene.id], intent="repair",
                                   outcome=Outcome(status="success", score=0.85),
                                   blast_radius=BlastRadius(files=1, lines=4), meta={"at": iso(now)})
            store.add_event(event)
            learn_outcome(store, event, now)
            if feedback and t < JUDGED:
                verdict = "not_helpful" if sel.gene.id == disliked else "helpful"
                give_feedback(store, event.id, verdict, now=now + timedelta(minutes=30), note="judged", author="ana")
            out.append(sel.gene.id)
    return out if whole else out[JUDGED:]


@pytest.mark.parametrize("seed", [1, 2])  # 20 seeds: docs/learning.md
def test_a_persons_verdicts_move_at_least_4_of_the_next_12_picks(tmp_path: Path, seed: int) -> None:
    """The person rejects the gene the loop would go on picking (the one it picks most of the next 12 without
    feedback): those picks must move, whatever drift and the dominance cap would do with them."""
    without = picks(tmp_path, seed, feedback=False, whole=True)  # no feedback: ``disliked`` plays no part
    disliked = max(("gene_a", "gene_b"), key=without[JUDGED:].count)
    judged = picks(tmp_path, seed, feedback=True, disliked=disliked, whole=True)
    assert {"gene_a", "gene_b"} == set(judged[:JUDGED])  # a person said not_helpful on one, helpful on the other
    moved = sum(a != b for a, b in zip(without[JUDGED:], judged[JUDGED:], strict=True))
    assert moved >= 4, (without, judged)
    assert judged[JUDGED:].count(disliked) == 0, (without, judged)  # left out while the other one matches


def _select(feedback: list[FeedbackSignal], seed: int = 0) -> Selection:
    return select_gene_and_capsule(genes=GENES, capsules=[], failed_capsules=[], signals=SIGNALS, recent_events=[],
                                   settings=Settings(), rng=random.Random(seed), now=START,
                                   feedback=FeedbackIndex(feedback))


def _said(gene: str, kind: str, minutes: int) -> FeedbackSignal:
    return explicit_signal(event_id=f"evt_{gene}_{minutes}", gene_id=gene, signals=SIGNALS, kind=kind,
                           at=START - timedelta(minutes=minutes), author="ana")


def test_a_rejected_gene_stays_when_every_gene_was_rejected_and_a_later_helpful_lets_it_back() -> None:
    assert {_select([_said("gene_a", "not_helpful", 60)], s).gene.id for s in range(20)} == {"gene_b"}  # type: ignore[union-attr]
    both = [_said("gene_a", "not_helpful", 60), _said("gene_b", "not_helpful", 50)]
    assert {_select(both, s).gene.id for s in range(20)} <= {"gene_a", "gene_b"}  # type: ignore[union-attr]
    assert all(_select(both, s).gene is not None for s in range(20))  # never starved: all stay
    again = [_said("gene_a", "not_helpful", 60), _said("gene_a", "helpful", 30)]  # the person changed their mind
    reasons = " ".join(_select(again).decision.reasons)
    assert "did not help" not in reasons and _select(again).decision.selected is not None
