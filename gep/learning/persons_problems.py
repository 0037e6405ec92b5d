"""A problem a person said is not fixed goes first among the cycle's live problems (issue 41, point 3).

A person's ``not_helpful`` on a committed change (``gep feedback``, a review, a correction in a session that
names what the change touched: gep/learning/corrections.py) says more than "this gene did not help": the
problem that change worked on is still there, and the person wants it looked at. The engine's signals list
every live problem in the order the logs happen to give them, and a cycle works on one; a problem whose
swallowed error now only warns can wait behind newer errors until the run ends. So, when feedback is on,
a live signal that names a function such a change touched moves to the front of the cycle's signals.

Never more than that, because a person is sometimes wrong: nothing is added (a problem that no longer shows
in what the cycle reads is not re-opened on a person's word alone), nothing is dropped, and a person's word
counts only for the change it was about: the person's latest verdict on it (a later ``helpful`` takes a
``not_helpful`` back), and only until a newer committed change touches the same function (the person has
not judged that one yet). Words older than :data:`PERSONS_WORD_DAYS` days are not acted on.

Pure: signals, feedback signals and fix records in, the reordered signals and the functions named out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timedelta

from gep.core.learned import FeedbackKind, FeedbackSignal, Observation, Resolution

PERSONS_WORD_DAYS = 7
_NAME_MIN = 4  # as corrections and fix verdicts match names: a shorter one is named by too many lines


def _latest_word(signals: Sequence[FeedbackSignal], now: datetime) -> dict[str, FeedbackSignal]:
    """Event id -> the newest person's verdict on it, within the window (reverts are people's too)."""
    since = now - timedelta(days=PERSONS_WORD_DAYS)
    out: dict[str, FeedbackSignal] = {}
    for s in sorted(signals, key=lambda s: (s.created_at, s.id)):
        if s.event_id and s.origin in (Observation.person, Observation.reverted) and since <= s.created_at <= now:
            out[s.event_id] = s
    return out


def flagged_functions(feedback: Sequence[FeedbackSignal], fixes: Sequence[Resolution], now: datetime) -> list[str]:
    """The functions changes touched that a person said did not help, newest word first, but for those a
    newer committed change touched again."""
    word = _latest_word(feedback, now)
    newest_change: dict[str, datetime] = {}
    for res in fixes:
        for fn in res.touched:
            newest_change[fn] = max(newest_change.get(fn, res.committed_at), res.committed_at)
    flagged: list[tuple[datetime, str]] = []
    for res in fixes:
        said = word.get(res.event_id)
        if said is None or said.kind != FeedbackKind.not_helpful:
            continue
        for fn in res.touched:
            if len(fn) >= _NAME_MIN and fn.isidentifier() and newest_change[fn] <= res.committed_at:
                flagged.append((said.created_at, fn))
    return list(dict.fromkeys(fn for _, fn in sorted(flagged, reverse=True)))


def persons_problems_first(signals: Sequence[str], feedback: Sequence[FeedbackSignal],
                           fixes: Sequence[Resolution], now: datetime) -> tuple[list[str], list[str]]:
    """``signals`` with those naming a flagged function first (the newest word's first, else in their order),
    and the functions that moved a signal."""
    names = flagged_functions(feedback, fixes, now)
    if not names:
        return list(signals), []
    first: list[str] = []
    moved: list[str] = []
    for fn in names:
        pattern = re.compile(rf"(?<!\w){re.escape(fn)}(?!\w)")
        hits = [s for s in signals if s not in first and s.startswith("errsig:") and pattern.search(s)]
        if hits:
            first += hits
            moved.append(fn)
    return first + [s for s in signals if s not in first], moved


def rejected_here(signals: Sequence[str], feedback: Sequence[FeedbackSignal], fixes: Sequence[Resolution],
                  now: datetime) -> dict[str, str]:
    """Gene id -> why it is not sent at the problem this cycle works on first (its first ``errsig:``): a person's
    latest word on that gene's change to a function the problem names was ``not_helpful``."""
    lead = next((s for s in signals if s.startswith("errsig:")), None)
    if lead is None:
        return {}
    word = _latest_word(feedback, now)
    out: dict[str, str] = {}
    for res in fixes:
        said = word.get(res.event_id)
        if res.gene_id is None or said is None or said.kind != FeedbackKind.not_helpful:
            continue
        named = [fn for fn in res.touched if len(fn) >= _NAME_MIN and fn.isidentifier()
                 and re.search(rf"(?<!\w){re.escape(fn)}(?!\w)", lead)]
        if named:
            out[res.gene_id] = f"a person said its change to {named[0]} did not help ({res.event_id})"
    return out
