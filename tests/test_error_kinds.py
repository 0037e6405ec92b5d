"""A gene's record on one problem counts, weighed below, on another problem of the same kind (issue 41 point 3,
families suite): the same exception class and message shape in another function, with names, quoted values and
numbers taken out. Real code bases repeat a kind of bug (a missing config key, an int parse of "12.0") in
several functions; before, what a gene did on one reached the next only through its record everywhere."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from gep.core.models import BlastRadius, EvolutionEvent, Gene, Outcome, iso
from gep.learning.memory_graph import memory_advice, summarize
from gep.learning.problem_key import error_kind

NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)
GENES = [Gene(id=g, signals_match=["log_error"]) for g in ("gene_guard", "gene_convert", "gene_new")]


def _err(line: str) -> list[str]:
    return ["log_error", f"errsig:2026-03-01T09:00:00Z ERROR {line}"]


def test_one_kind_across_functions_another_across_classes() -> None:
    a = error_kind("2026-03-01 10:00:01,5 - app.users - ERROR - KeyError: 'region' in app.users.load_rate")
    b = error_kind("Mar  1 10:00:01 host app[12]: KeyError: 'currency' in app.billing.total_invoice")
    assert a == b == "KeyError: <q> in <name>"
    c = error_kind("ValueError: invalid literal for int() with base 10: '12.0' in app.ingest.read_score")
    assert c is not None and c.startswith("ValueError") and c == error_kind(
        "ValueError: invalid literal for int() with base 10: '7.5' in app.sync.parse_limit")
    assert error_kind("TimeoutError: app.a.fetch timed out after 5s") == \
        error_kind("TimeoutError: app.b.read_all timed out after 12.5s")
    assert error_kind("WARNING app.ingest: fetch_order returned no result") is None  # no exception class


def _history() -> list[EvolutionEvent]:
    """gene_guard fixed a KeyError in one function and failed on ValueErrors in two others; gene_convert the
    other way round. Each record sits on its own problem (no two errors alike by their learning key)."""
    out: list[EvolutionEvent] = []
    for signals, gene_id, ok in (
            (_err("KeyError: 'region' in app.users.load_rate"), "gene_guard", True),
            (_err("ValueError: invalid literal for int() with base 10: '12.0' in app.ingest.read_score"),
             "gene_guard", False),
            (_err("ValueError: invalid literal for int() with base 10: '1.5' in app.ingest.read_limit"),
             "gene_guard", False),
            (_err("KeyError: 'retries' in app.sync.lookup_entry"), "gene_convert", False),
            (_err("ValueError: invalid literal for int() with base 10: '12.0' in app.sync.parse_limit"),
             "gene_convert", True),
            (_err("KeyError: 'currency' in app.export.first_entry"), "gene_convert", False)):
        out.append(EvolutionEvent(id=f"evt_{len(out):03d}", signals=signals, genes_used=[gene_id],
                                  outcome=Outcome(status="success" if ok else "failed", score=0.85 if ok else 0.2),
                                  blast_radius=BlastRadius(files=1, lines=5),
                                  meta={"at": iso(NOW - timedelta(hours=10 - len(out)))}))
    return out


def _expected(signals: list[str], events: list[EvolutionEvent], folded: bool = False) -> dict[str, float]:
    adv = (memory_advice(events=[], summaries=summarize(events, ref=NOW), signals=signals, genes=GENES, now=NOW)
           if folded else memory_advice(events=events, signals=signals, genes=GENES, now=NOW))
    return {s.gene_id: s.expected for s in adv.genes}


def test_what_fixed_a_kind_in_one_function_ranks_first_for_that_kind_in_another() -> None:
    # before: both genes had one success and two failures elsewhere: the same prior on any new error, under a
    # gene never tried; counted with its failures on the other kind, a gene's success on this kind ranked 0.5
    history = _history()
    key_error = _err("KeyError: 'retries' in app.billing.resolve_order")
    value_error = _err("ValueError: invalid literal for int() with base 10: '3.0' in app.report.total_batch")
    for folded in (False, True):  # the store's folded summaries keep the kinds
        k, v = _expected(key_error, history, folded), _expected(value_error, history, folded)
        assert k["gene_guard"] > k["gene_new"] > k["gene_convert"], (folded, k)
        assert v["gene_convert"] > v["gene_new"] > v["gene_guard"], (folded, v)


def test_the_problems_own_record_weighs_more_than_its_kind() -> None:
    history = _history()
    here = _err("KeyError: 'retries' in app.billing.resolve_order")
    failed_here = EvolutionEvent(id="evt_100", signals=here, genes_used=["gene_guard"],
                                 outcome=Outcome(status="failed", score=0.2), blast_radius=BlastRadius(files=1, lines=5),
                                 meta={"at": iso(NOW - timedelta(minutes=5))})
    after = _expected(here, [*history, failed_here])
    assert after["gene_guard"] < after["gene_new"]  # its own failure here outweighs its success on the kind
