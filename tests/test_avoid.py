"""Avoid-lists (gep/learning/avoid.py): repeated failures of one gene on one problem become a stored "do not" entry,
shown in the prompt, used by selection while another gene matches, retired by a later success."""

from __future__ import annotations

from pathlib import Path

from conftest import init_repo

from gep.core.models import BlastRadius, EventMeta, EvolutionEvent, Gene, Outcome
from gep.core.records import FixCreditRecord, HostFailure
from gep.genes.selector import avoided_genes
from gep.learning.avoid import AVOID_HOLD, AvoidList, avoid_lines, build_avoid_list, refresh_avoid_list
from gep.store import Store

REPAIR, OTHER = "gene_repair", "gene_other"


def _line(day: int, error: str = "AssertionError: mean([2, 4, 6]) returned 6.0") -> str:
    return f"errsig:2026-11-{day:02d}T0{day % 10}:12:13.{day}24Z [ERROR] report: {error}"


def _event(k: int, status: str, gene: str = REPAIR, error: str = "AssertionError: mean([2, 4, 6]) returned 6.0",
           **meta: object) -> EvolutionEvent:
    m = EventMeta(changed_files=["stats.py"], failure_reasons=["validation: E assert 6.0 == 4"], **meta)
    return EvolutionEvent(id=f"evt_{k}", genes_used=[gene], signals=["log_error", _line(10 + k, error)],
                          blast_radius=BlastRadius(files=1, lines=1),
                          outcome=Outcome(status=status, score=0.5), meta=m)


GENES = [Gene(id=REPAIR, signals_match=["log_error"]), Gene(id=OTHER, signals_match=["log_error"])]
NOW = ["log_error", _line(20)]


def test_two_failures_on_one_problem_make_an_entry_shown_and_used_by_selection() -> None:
    avoid = build_avoid_list([_event(1, "failed"), _event(2, "failed")])
    [entry] = avoid.on(NOW)
    assert entry.gene_id == REPAIR and entry.failures == 2 and entry.event_ids == ["evt_1", "evt_2"]
    assert entry.line() == (f"{REPAIR}'s approach failed 2 times on this problem; last change in stats.py; checks "
                            "said: validation: E assert 6.0 == 4: try a different change")
    # with the change kept at record time, the line names the change itself, never "touched <file>" (issue 41)
    shown = build_avoid_list([_event(1, "failed"), _event(2, "failed", change_excerpt="stats.py mean(): + return 0")])
    assert "last change: stats.py mean(): + return 0;" in shown.entries[0].line()
    assert "touched" not in shown.entries[0].line() and "do not" not in shown.entries[0].line()
    assert avoided_genes(avoid, GENES, NOW, {}) == {REPAIR: "avoid: failed 2 times on this problem"}
    # another problem: nothing to avoid
    assert avoid.on(["log_error", _line(20, "ZeroDivisionError: division by zero")]) == []


def test_one_failure_a_host_failure_or_a_fix_that_held_make_no_entry() -> None:
    host = _event(2, "failed")
    host.meta.host_failure = HostFailure(kind="provider", reason="Messages API error 429")
    host = EvolutionEvent.model_validate(host.model_dump())
    assert build_avoid_list([_event(1, "failed"), host]).on(NOW) == []
    assert build_avoid_list([_event(1, "failed"), _event(2, "success"), _event(3, "failed")]).on(NOW) == []


def test_a_fix_that_did_not_hold_counts_and_a_later_success_retires_the_entry() -> None:
    events = [_event(1, "failed"), _event(2, "success", fix_verdict="did_not_hold")]
    assert [e.failures for e in build_avoid_list(events).on(NOW)] == [2]
    retired = build_avoid_list([*events, _event(3, "success")])
    assert retired.on(NOW) == [] and [e.retired_by for e in retired.entries] == ["evt_3"]


def test_the_only_gene_that_matches_is_not_starved() -> None:
    avoid = build_avoid_list([_event(1, "failed"), _event(2, "failed")])
    assert avoided_genes(avoid, GENES[:1], NOW, {}) == {}
    assert avoided_genes(avoid, GENES, NOW, {OTHER: "retired"}) == {}


def test_the_list_is_stored_and_gives_the_prompts_do_not_lines(tmp_path: Path) -> None:
    ws = init_repo(tmp_path / "ws", {"README.md": "x\n"})
    with Store.for_workspace(ws) as store:
        for e in (_event(1, "failed"), _event(2, "failed")):
            store.add_event(e)
        refresh_avoid_list(store)
        stored = store.get_state("learning.avoid", AvoidList)
        lines = avoid_lines(store, NOW)
    assert stored is not None and [e.gene_id for e in stored.entries] == [REPAIR]
    assert len(lines) == 1 and lines[0].startswith("gene_repair's approach failed 2 times")


# ------------------------------------------------------------------ the problem an attempt counts on (issue 28)

GENERIC = ["perf_bottleneck"]
OTHER_ERROR = "ZeroDivisionError: division by zero in app.billing.total_invoice"


def _fix(k: int, verdict: str | None, judged: list[str] | None, signals: list[str],
         addressed: list[str] | None = None, missed: list[str] | None = None) -> EvolutionEvent:
    credit = FixCreditRecord(addressed=addressed if addressed is not None else (judged or []),
                             missed=missed or [], judged=judged)
    m = EventMeta(changed_files=["stats.py"], fix_verdict=verdict, fix_credit=credit)
    return EvolutionEvent(id=f"evt_{k}", genes_used=[REPAIR], signals=signals,
                          blast_radius=BlastRadius(files=1, lines=1),
                          outcome=Outcome(status="success", score=0.8), meta=m)


def test_a_fix_that_did_not_hold_counts_on_the_error_it_was_judged_on_not_its_generic_trigger() -> None:
    error_a = _line(12)
    avoid = build_avoid_list([_fix(1, "did_not_hold", [error_a], GENERIC), _fix(2, "did_not_hold", [error_a], GENERIC)])
    # the gene is not banned on the generic situation that triggered the cycles ...
    assert avoid.on(GENERIC) == [] and avoided_genes(avoid, GENES, [*GENERIC, "log_error"], {}) == {}
    # ... but on error A, whichever signals bring it back
    [entry] = avoid.on(NOW)
    assert entry.failures == 2 and entry.event_ids == ["evt_1", "evt_2"]


def test_a_failure_credited_to_another_error_counts_on_that_error() -> None:
    error_b = _line(13, OTHER_ERROR)
    avoid = build_avoid_list([_fix(1, "did_not_hold", [error_b], NOW), _fix(2, "did_not_hold", [error_b], NOW)])
    assert avoid.on(NOW) == []
    assert [e.failures for e in avoid.on(["log_error", _line(21, OTHER_ERROR)])] == [2]


def test_a_success_credited_to_the_error_retires_its_entry_and_one_that_missed_it_does_not() -> None:
    failures = [_event(1, "failed"), _event(2, "failed")]
    # a pending fix made in a generic cycle that did not touch the error: no success on it
    missed = _fix(3, None, None, GENERIC, addressed=["perf_bottleneck"], missed=[_line(12)])
    assert [e.failures for e in build_avoid_list([*failures, missed]).on(NOW)] == [2]
    # a fix of the error made in a generic cycle, not judged yet, then verified: either retires the entry
    for fix in (_fix(3, None, None, GENERIC, addressed=["perf_bottleneck", _line(12)]),
                _fix(3, "verified", [_line(12)], GENERIC)):
        retired = build_avoid_list([*failures, fix])
        assert retired.on(NOW) == [] and [e.retired_by for e in retired.entries] == ["evt_3"]


def test_an_entry_lifts_after_the_hold_so_the_gene_can_be_tried_again_and_a_new_failure_renews_it() -> None:
    """bench/selection.py --overblocking: an entry that never lifted refused genes that would have worked, since
    only a success of the gene it keeps out could retire it."""
    failures = [_event(1, "failed"), _event(2, "failed")]
    others = [_event(10 + k, "failed", gene=OTHER) for k in range(AVOID_HOLD)]
    assert avoided_genes(build_avoid_list([*failures, *others[:-1]]), GENES, NOW, {}) == {REPAIR: (
        "avoid: failed 2 times on this problem")}
    lifted = build_avoid_list([*failures, *others])
    # still told to the agent, no longer refused by selection
    assert [e.gene_id for e in lifted.on(NOW)] == [REPAIR, OTHER] and avoided_genes(lifted, GENES, NOW, {}) == {
        OTHER: f"avoid: failed {AVOID_HOLD} times on this problem"}
    renewed = build_avoid_list([*failures, *others, _event(30, "failed")])
    assert [e.failures for e in renewed.blocking(NOW) if e.gene_id == REPAIR] == [3]
