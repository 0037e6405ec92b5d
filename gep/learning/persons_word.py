"""A person's word outranks an absence of log lines: a verified fix a person says did not help is not counted as
verified, and a gene people keep rejecting is left out (issue 41, point 3).

A fix verdict (gep/learning/resolved.py) calls a change verified when the code that failed ran again and wrote no
line of its problem. A change that swallows a failure and returns a made-up value writes no line either: the
logs and the checks cannot tell it from a fix, only a person can (``gep feedback EVENT not_helpful``, a review, a
correction in a session that names what the change touched: gep/learning/corrections.py). So, with feedback on:

* :func:`overruled`: for selection, a verified change whose person's latest word is ``not_helpful`` counts as a
  fix that did not hold (and its implicit ``used`` signal is not counted: :func:`without_overruled_credit`); a
  later ``helpful`` from a person takes that back.
* :func:`rejections`: across problems, how many more of a gene's changes people rejected than approved; the
  cycle's select stage leaves a gene out at :data:`REJECTED_NET` while a gene people rejected less matches the
  problem the cycle leads with (the selector's step 3b does this per situation; here every problem has its own
  situation, and a gene that silences failures silences them everywhere).

Not done, measured (docs/learning.md, "A person's word where it is the only sign"): sending the next cycle back
to the problem of such a change. A person is wrong one time in five in the bench's worlds, and a not_helpful on a
real fix sent the agent back to rewrite it; it cost more fixes than it gained.

Pure: events and feedback signals in; events, feedback and counts out. Nothing stored is changed: a later word
changes what these return.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from gep.core.learned import FeedbackKind, FeedbackSignal, Observation
from gep.core.models import EvolutionEvent

PERSONS_WORD_DAYS = 7


def persons_last_word(feedback: Sequence[FeedbackSignal], now: datetime | None = None) -> dict[str, FeedbackSignal]:
    """Event id -> a person's newest ``helpful`` / ``not_helpful`` on it (no later than ``now`` when given)."""
    out: dict[str, FeedbackSignal] = {}
    for s in sorted(feedback, key=lambda s: (s.created_at, s.id)):
        if s.event_id and s.origin == Observation.person and (now is None or s.created_at <= now):
            out[s.event_id] = s
    return out


def overruled_ids(events: Sequence[EvolutionEvent], feedback: Sequence[FeedbackSignal]) -> set[str]:
    """The verified changes whose person's latest word is ``not_helpful``."""
    word = persons_last_word(feedback)
    return {e.id for e in events if e.meta.fix_verdict == "verified"
            and (w := word.get(e.id)) is not None and w.kind == FeedbackKind.not_helpful}


def overruled(events: Sequence[EvolutionEvent], feedback: Sequence[FeedbackSignal]) -> list[EvolutionEvent]:
    """``events`` as selection counts them once people spoke: an overruled verified fix did not hold (a copy)."""
    ids = overruled_ids(events, feedback)
    if not ids:
        return list(events)
    return [e.model_copy(update={"meta": e.meta.model_copy(update={"fix_verdict": "did_not_hold"})})
            if e.id in ids else e for e in events]


def without_overruled_credit(feedback: Sequence[FeedbackSignal], ids: set[str]) -> list[FeedbackSignal]:
    """The feedback signals but the implicit ``used`` of an overruled verified fix."""
    return [s for s in feedback if not (s.event_id in ids and s.origin == Observation.fix_verified)]


REJECTED_NET = 2  # a gene's changes people called not helpful, over those they called helpful, to leave it out


def rejections(feedback: Sequence[FeedbackSignal], now: datetime) -> dict[str, int]:
    """Gene id -> its changes a person's latest word called ``not_helpful`` less those it called ``helpful``,
    over every problem, words of the last :data:`PERSONS_WORD_DAYS` days."""
    since = now - timedelta(days=PERSONS_WORD_DAYS)
    out: dict[str, int] = {}
    for said in persons_last_word(feedback, now).values():
        if said.created_at >= since and said.kind in (FeedbackKind.helpful, FeedbackKind.not_helpful):
            out[said.gene_id] = out.get(said.gene_id, 0) + (1 if said.kind == FeedbackKind.not_helpful else -1)
    return out
