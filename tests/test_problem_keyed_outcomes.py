"""The memory graph and the ban on fixes that did not hold follow the problem a change addressed (issue 28):
the errors it was judged on (gep/learning/problem_key.py ``outcome_signals``), not the signals that triggered
its cycle. Events recorded before fixes were credited keep their trigger signals."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from gep.core.config import Settings
from gep.core.models import BlastRadius, EventMeta, EvolutionEvent, Gene, Outcome, iso
from gep.core.records import FixCreditRecord
from gep.genes.selector import active_bans
from gep.learning.memory_graph import memory_advice, summarize

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
FIXER, OTHER = "gene_fixer", "gene_other"
GENES = [Gene(id=FIXER, signals_match=["log_error", "perf_bottleneck"]),
         Gene(id=OTHER, signals_match=["log_error", "perf_bottleneck"])]
GENERIC = ["perf_bottleneck"]


def _line(day: int, error: str = "ZeroDivisionError: division by zero in app.billing.total_invoice") -> str:
    return f"errsig:2026-11-{day:02d}T0{day % 10}:12:13.{day}24Z [ERROR] billing: {error}"


def _fix(k: int, verdict: str | None, judged: list[str] | None, signals: list[str],
         credited: bool = True) -> EvolutionEvent:
    """A committed change of FIXER in a cycle triggered by ``signals``, judged on ``judged``."""
    credit = FixCreditRecord(addressed=judged or [], judged=judged) if credited else None
    meta = EventMeta(at=iso(NOW - timedelta(hours=10 - k)), changed_files=["app/billing.py"], fix_verdict=verdict,
                     fix_credit=credit, commit=f"{k:040x}")
    return EvolutionEvent(id=f"evt_{k}", genes_used=[FIXER], signals=signals, blast_radius=BlastRadius(files=1, lines=2),
                          outcome=Outcome(status="success", score=0.85), meta=meta)


def _stats(events: list[EvolutionEvent], signals: list[str]):  # type: ignore[no-untyped-def]
    return memory_advice(events=events, signals=signals, genes=GENES, now=NOW).stats(FIXER)


def _banned(events: list[EvolutionEvent], signals: list[str]) -> dict[str, str]:
    bans = active_bans(recent_events=events, signals=signals, settings=Settings(ban_cycles=8))
    return {b.gene_id: b.source for b in bans}


def test_a_fix_made_in_a_generic_cycle_teaches_the_memory_graph_about_the_error_it_fixed() -> None:
    fixed = _fix(1, "verified", [_line(12)], GENERIC)
    # the same error at another time, whatever generic signals come with it: the fix's success counts there
    here = _stats([fixed], ["log_error", _line(20)])
    assert (here.successes, here.failures) == (1, 0) and here.expected > 0.5, here
    # the generic situation that triggered the cycle learns nothing from it, nor does another error
    assert _stats([fixed], GENERIC).successes == 0
    assert _stats([fixed], ["log_error", _line(20, "KeyError: 'currency' in app.config.load")]).successes == 0


def test_a_fix_that_did_not_hold_counts_against_its_gene_on_its_error_only() -> None:
    unheld = _fix(1, "did_not_hold", [_line(12)], GENERIC)
    on_error = _stats([unheld], ["log_error", _line(20)])
    assert (on_error.successes, on_error.failures) == (0, 1), on_error
    assert _stats([unheld], GENERIC).failures == 0


def test_two_unheld_fixes_ban_the_gene_on_the_problem_they_were_judged_on_not_on_their_trigger() -> None:
    events = [_fix(1, "did_not_hold", [_line(12)], GENERIC), _fix(2, "did_not_hold", [_line(13)], GENERIC)]
    assert _banned(events, ["log_error", _line(20), "unsupported_input_type"]) == {FIXER: "fix_did_not_hold"}
    # the generic trigger is not the problem: the gene stays free there, and on another error
    assert _banned(events, GENERIC) == {}
    assert _banned(events, ["log_error", _line(20, "KeyError: 'currency' in app.config.load")]) == {}
    # a later fix of the error that held lifts the ban, wherever it was triggered
    held = _fix(3, "verified", [_line(14)], ["unsupported_input_type"])
    assert _banned([*events, held], ["log_error", _line(20)]) == {}


def test_events_recorded_before_fixes_were_credited_keep_their_trigger_signals() -> None:
    old = [_fix(1, "did_not_hold", None, ["log_error", _line(12)], credited=False),
           _fix(2, "did_not_hold", None, ["log_error", _line(13)], credited=False)]
    assert _banned(old, ["log_error", _line(20), "perf_bottleneck"]) == {FIXER: "fix_did_not_hold"}
    assert _stats(old, ["log_error", _line(20)]).failures == 2
    # a summary folded from old events (stored before this change) still counts for the same error
    folded = summarize(old, ref=NOW)
    again = memory_advice(events=[], signals=[_line(21), "perf_bottleneck"], genes=GENES, now=NOW,
                          summaries=folded).stats(FIXER)
    assert again.failures == 2


def test_a_change_credited_with_none_of_its_trigger_errors_teaches_nothing_about_them_until_judged() -> None:
    missed = _fix(1, None, None, ["log_error", _line(12)])  # addressed nothing: it touched another function
    assert _stats([missed], ["log_error", _line(20)]).successes == 0
