"""Per problem family records (issue 41, point 5): in a family every outcome fades all the genes' records there,
so a gene that stopped working in one family loses its rank there as other genes work it, and keeps it in
another family; a similar family's record is the prior of a new one."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from gep.core.config import Settings
from gep.core.models import BlastRadius, EvolutionEvent, Gene, Outcome, iso
from gep.genes.selector import select_gene_and_capsule
from gep.learning.family_record import FamilyOutcome, family_records
from gep.learning.memory_graph import memory_advice

NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)
A = ["log_error", "errsig:TypeError: x is undefined at /app/a.py:12"]
B = ["log_error", "errsig:TimeoutError: upstream timed out after 30s"]
A_TOO = A + ["errsig:KeyError: 'id' at /app/a.py:40"]  # shares A's error: a similar problem, a new family
GENES = [Gene(id="gene_x", signals_match=["log_error"]), Gene(id="gene_y", signals_match=["log_error"])]


def test_every_outcome_in_a_family_fades_that_familys_records_only() -> None:
    outcomes = [FamilyOutcome("a", "gene_x", True, 1.0), FamilyOutcome("b", "gene_x", True, 1.0),
                FamilyOutcome("a", "gene_y", False, 1.0), FamilyOutcome("a", "gene_y", True, 0.5)]
    rec = family_records([("a", "gene_x", 2.0, 1.0)], outcomes, discount=0.5)
    # a's start (2, 1) halved by gene_x's own outcome there, +1 success, then halved by gene_y's two
    assert rec["a"]["gene_x"] == pytest.approx([0.5, 0.125])
    assert rec["a"]["gene_y"] == pytest.approx([0.5, 0.5])  # its failure halved once, then a half-weight success
    assert rec["b"]["gene_x"] == pytest.approx([1.0, 0.0])  # a's outcomes do not touch b


def _history() -> list[EvolutionEvent]:
    """gene_x worked in A and B, then failed twice in A; gene_y then worked A (3 of 4) while gene_x went on
    working B."""
    out: list[EvolutionEvent] = []

    def add(signals: list[str], gene_id: str, ok: bool) -> None:
        i = len(out)
        out.append(EvolutionEvent(id=f"evt_{i:03d}", signals=signals, genes_used=[gene_id],
                                  outcome=Outcome(status="success" if ok else "failed", score=0.85 if ok else 0.2),
                                  blast_radius=BlastRadius(files=1, lines=5),
                                  meta={"at": iso(NOW - timedelta(hours=100 - i))}))

    for _ in range(8):
        add(A, "gene_x", True)
        add(B, "gene_x", True)
    add(A, "gene_x", False)
    add(A, "gene_x", False)
    for k in range(20):
        add(A, "gene_y", k % 4 != 2)
        add(B, "gene_x", True)
    return out


def _expected(signals: list[str]) -> dict[str, float]:
    adv = memory_advice(events=_history(), signals=signals, genes=GENES, now=NOW)
    return {s.gene_id: s.expected for s in adv.genes}


def test_a_gene_that_stopped_working_in_one_family_loses_its_rank_there_not_in_another() -> None:
    # before, gene_x's old successes in A kept it first there (0.71 against 0.69) however long gene_y worked A
    a, b = _expected(A), _expected(B)
    assert a["gene_y"] > a["gene_x"]
    assert b["gene_x"] > 0.85 > b["gene_y"]
    # a new family similar to A takes A's records as its prior
    similar = _expected(A_TOO)
    assert similar["gene_y"] > similar["gene_x"]


def test_selection_follows_the_family_records() -> None:
    events = _history()
    for signals, best in ((A, "gene_y"), (B, "gene_x")):
        sel = select_gene_and_capsule(genes=GENES, capsules=[], failed_capsules=[], signals=signals,
                                      recent_events=events, settings=Settings(dominance_share=1.0),
                                      rng=random.Random(1), now=NOW)
        ranked = sorted(sel.decision.scores, key=lambda c: -c.rank)
        assert ranked[0].gene_id == best


def test_a_situation_naming_several_errors_ranks_genes_for_the_one_it_leads_with() -> None:
    """Issue 41 (kinds suite): a cycle whose signals name three errors works on the first; ranked on all three,
    the record on that one counted for nothing (Jaccard 1/3) and a gene's successes on another error of the set
    picked it for this one."""
    p = "errsig:IndexError: list index out of range in app.users.fetch_record"
    q = "errsig:ValueError: invalid literal for int() with base 10: '12.0' in app.ingest.resolve_entry"
    r = "errsig:app.report.total_batch returned no result"
    out: list[EvolutionEvent] = []
    for gene_id, signal, ok in [("gene_x", p, True), ("gene_x", p, False), ("gene_x", p, True),
                                *[("gene_y", p, False)] * 3, *[("gene_y", q, True)] * 8]:
        out.append(EvolutionEvent(id=f"evt_{len(out):03d}", signals=["log_error", signal], genes_used=[gene_id],
                                  outcome=Outcome(status="success" if ok else "failed", score=0.85 if ok else 0.2),
                                  blast_radius=BlastRadius(files=1, lines=5),
                                  meta={"at": iso(NOW - timedelta(hours=50 - len(out)))}))
    for situation, best in (([p, q, r], "gene_x"), ([q, p, r], "gene_y")):
        adv = memory_advice(events=out, signals=["log_error", *situation], genes=GENES, now=NOW)
        expected = {s.gene_id: s.expected for s in adv.genes}
        assert max(expected, key=lambda g: expected[g]) == best, (situation[0], expected)


def test_a_try_that_fixed_nothing_counts_on_the_problem_it_led_with() -> None:
    """Three failed tries of a cycle whose signals named three errors count against the gene on the first (the
    one worked on), not on the set: keyed on the set, a later cycle on that error alone saw no record."""
    p, q, r = ("errsig:KeyError: 'timeout_s' in app.billing.first_record",
               "errsig:TimeoutError: app.users.average_score timed out after 5s",
               "errsig:app.sync.lookup_order returned no result")
    out = [EvolutionEvent(id=f"evt_{i:03d}", signals=["log_error", p, q, r], genes_used=["gene_y"],
                          outcome=Outcome(status="failed", score=0.2), blast_radius=BlastRadius(files=1, lines=5),
                          meta={"at": iso(NOW - timedelta(hours=5 - i))}) for i in range(3)]
    on_p = memory_advice(events=out, signals=["log_error", p], genes=GENES, now=NOW).stats("gene_y")
    on_q = memory_advice(events=out, signals=["log_error", q], genes=GENES, now=NOW).stats("gene_y")
    assert on_p.evidence_fail > 2.0 and on_p.expected < 0.3
    assert on_q.evidence == 0.0
