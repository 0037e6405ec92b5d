"""A capsule follows the problem's kind (issue 41): when no capsule exists for this problem, the capsule of a
verified fix of another problem of the same kind (the same exception class in another function) is offered,
never one not yet judged, one that did not hold, one of another kind, or one a person rejected
(gep/learning/lessons_by_problem.py, gep.cycle.stages.select_from_store over a real store)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

from gep.core.config import Settings
from gep.core.models import Capsule, EvolutionEvent, Gene, Outcome, iso
from gep.cycle.stages import select_from_store
from gep.learning.human_verdicts import give_feedback
from gep.learning.lessons_by_problem import for_this_problem
from gep.store import Store

NOW = datetime(2026, 3, 2, 9, tzinfo=UTC)
GENES = [Gene(id="gene_repair", category="repair", signals_match=["log_error"])]


def _err(text: str, hour: int = 3) -> str:
    return f"errsig:2026-03-02T0{hour}:20:40.400Z ERROR app.users: {text}"


def _cap(cid: str, line: str, verdict: str | None) -> Capsule:
    extra = {"fix_verdict": verdict} if verdict else {}
    return Capsule(id=cid, gene="gene_repair", trigger=["log_error", line], diff=f"+ fix of {cid}\n", **extra)


TWIN = _err("KeyError: 'retries' in app.users.resolve_score")
NOW_LINE = _err("KeyError: 'timeout_s' in app.users.resolve_profile", 8)


def test_a_verified_fix_of_the_same_kind_is_offered_when_this_problem_has_no_capsule() -> None:
    kinds = [_cap("cap_value", _err("ValueError: invalid literal for int() with base 10: '12.0' in app.b.f"),
                  "verified"),
             _cap("cap_far", _err("KeyError: 'x' raised while loading the nightly export of orders"), "verified"),
             _cap("cap_twin", TWIN, "verified"),
             _cap("cap_pending", TWIN, None),
             _cap("cap_unheld", TWIN, "did_not_hold")]
    signals = ["log_error", NOW_LINE]
    assert [c.id for c in for_this_problem(kinds, signals)] == ["cap_twin"]  # the closest line of the kind
    assert for_this_problem(kinds, signals, rejected={"cap_twin", "cap_far"}) == []
    assert [c.id for c in for_this_problem(kinds[:2], signals)] == ["cap_far"]
    # a capsule of this very problem comes first, as before
    same = _cap("cap_same", _err("KeyError: 'timeout_s' in app.users.resolve_profile", 5), None)
    assert [c.id for c in for_this_problem([*kinds, same], signals)] == ["cap_same"]
    # another kind only: nothing (a ZeroDivisionError's fix is no example for a KeyError)
    assert for_this_problem(kinds[:1], signals) == []


CAPSULES_ON = Settings(learning_on=["capsules"])  # experimental since run 6 (issue 41): on only when named


def _select(store: Store, settings: Settings | None = None) -> str | None:
    sel, _ = select_from_store(store, genes=GENES, signals=["log_error", NOW_LINE], settings=settings or CAPSULES_ON,
                               rng=random.Random(1), now=NOW)
    return sel.capsule.id if sel.capsule else None


def test_a_fix_whose_function_still_complains_in_the_log_is_no_example() -> None:
    """A change that swallowed the error makes its line go (the verdict says verified), and the function then
    says it failed in other words: its capsule is not offered to the twin."""
    swallowed = Capsule(id="cap_swallow", gene="gene_repair", trigger=["log_error", TWIN], fix_verdict="verified",
                        diff=" def resolve_score(cfg):\n-    return cfg['retries']\n+    try:\n+        return "
                             "cfg['retries']\n+    except Exception:\n+        return None\n")
    signals = ["log_error", NOW_LINE]
    quiet = "2026-03-02T08:20:01.000Z INFO app.job: job finished in 3.1s, resolve_score ran 40 times\n"
    assert [c.id for c in for_this_problem([swallowed], signals, log=quiet)] == ["cap_swallow"]
    warned = quiet + "2026-03-02T08:20:02.000Z WARNING app.users: resolve_score returned no result\n"
    assert for_this_problem([swallowed], signals, log=warned) == []


def test_the_cycle_offers_the_twins_verified_capsule_unless_a_person_rejected_it(tmp_path: Path) -> None:
    with Store.open(f"sqlite:///{tmp_path}/g.db") as store:
        event = EvolutionEvent(id="evt_twin", signals=["log_error", TWIN], genes_used=["gene_repair"],
                               intent="repair", capsule_id="cap_twin", outcome=Outcome(status="success", score=0.85),
                               meta={"at": iso(NOW - timedelta(hours=5)), "fix_verdict": "verified"})
        store.add_event(event)
        store.upsert_capsule(_cap("cap_twin", TWIN, "verified"))
        assert _select(store) == "cap_twin"
        assert _select(store, Settings()) is None  # by default capsules are not offered
        give_feedback(store, event.id, "not_helpful", now=NOW - timedelta(hours=1), author="ana")
        assert _select(store) is None


def test_capsules_stay_scoped_to_the_problem_with_problem_memory_off(tmp_path: Path) -> None:
    """Scoping a capsule to its problem (or its kind) belongs to capsules, not to the lessons by problem: with
    ``problem_memory`` off, a capsule of another kind of error is still not offered (it was, before)."""
    other = _cap("cap_other", _err("IndexError: list index out of range in app.users.first_item"), "verified")
    with Store.open(f"sqlite:///{tmp_path}/g.db") as store:
        store.upsert_capsule(other)
        scoped = Settings(learning_on=["capsules"], learning_off=["problem_memory"])
        assert _select(store, scoped) is None
        store.upsert_capsule(_cap("cap_twin", TWIN, "verified"))
        assert _select(store, scoped) == "cap_twin"
        assert _select(store, Settings(learning_on=["capsules"], learning_off=["capsules"])) is None
