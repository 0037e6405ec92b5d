"""A person's word outranks an absence of log lines: a verified fix a person says did not help is not counted as
verified, and its problem is worked on again (issue 41, point 3).

A fix verdict (gep/learning/resolved.py) calls a change verified when the code that failed ran again and wrote no
line of its problem. A change that swallows a failure and returns a made-up value writes no line either: the
logs and the checks cannot tell it from a fix, only a person can (``gep feedback EVENT not_helpful``, a review, a
correction in a session that names what the change touched: gep/learning/corrections.py). So, with feedback on:

* :func:`overruled`: for selection, a verified change whose person's latest word is ``not_helpful`` counts as a
  fix that did not hold (and its implicit ``used`` signal is not counted: :func:`without_overruled_credit`); a
  later ``helpful`` from a person takes that back.
* :func:`reopened`: the problem such a change was verified on goes back to the front of the cycle's signals, so
  a cycle works on it again. Bounded, because a person is sometimes wrong (a not_helpful on a real fix sends the
  agent back to rewrite it): once per word (not after a cycle since the word already had it among its signals),
  not when a newer committed change touched the same functions (that change answered it, and the person has
  not judged it yet), and not for words older than :data:`PERSONS_WORD_DAYS` days.
* :func:`rejections`: across problems, how many more of a gene's changes people rejected than approved; the
  cycle's select stage leaves a gene out at :data:`REJECTED_NET` while a gene people rejected less matches the
  problem the cycle leads with (the selector's step 3b does this per situation; here every problem has its own
  situation, and a gene that silences failures silences them everywhere).

Pure: events, feedback signals, fix records and signals in; events, feedback and signals out. Nothing stored is
changed: a later word changes what these return.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from gep.core.learned import FeedbackKind, FeedbackSignal, Observation, Resolution, is_specific
from gep.core.models import EvolutionEvent
from gep.learning.memory_graph import event_time
from gep.learning.resolved import signal_identity

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


def _answered(res: Resolution, fixes: Sequence[Resolution]) -> bool:
    """A newer committed change touched a function (or file) this one touched."""
    mine = set(res.touched) | set(res.touched_files)
    return any(other.committed_at > res.committed_at and mine & (set(other.touched) | set(other.touched_files))
               for other in fixes)


def reopened(signals: Sequence[str], feedback: Sequence[FeedbackSignal], fixes: Sequence[Resolution],
             events: Sequence[EvolutionEvent], now: datetime) -> tuple[list[str], list[str]]:
    """``signals`` with the problems of verified fixes a person said did not help first, and those problems.
    Each is re-opened once per word (see the module's docstring)."""
    word = persons_last_word(feedback, now)
    since = now - timedelta(days=PERSONS_WORD_DAYS)
    present = {signal_identity(s) for s in signals}
    back: list[str] = []
    for res in sorted(fixes, key=lambda r: r.committed_at, reverse=True):
        said = word.get(res.event_id)
        if res.status != "verified" or said is None or said.kind != FeedbackKind.not_helpful \
                or said.created_at < since or not res.touched or _answered(res, fixes):
            continue
        problems = [s for s in res.signals if is_specific(s) and signal_identity(s) not in present]
        worked = any((at := event_time(e)) is not None and at > said.created_at and set(problems) & set(e.signals)
                     for e in events)
        if problems and not worked:
            back += [s for s in problems if s not in back]
    return back + list(signals), back



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
