"""A person's correction that names what a GEP change touched counts as ``not_helpful`` for that change's gene.

The counterpart of approval.py (issue 41): when a person in an agent session corrects the agent ("No, that's
wrong: total_invoice in app/billing.py now swallows the error") and the message names a function or a file
that a change the engine committed touched (its fix record: ``Resolution.touched`` and ``touched_files``),
made at most :data:`CORRECTION_WINDOW` before, the person is saying that change did not help. The newest such
change gets one ``not_helpful`` from the person (:data:`AUTHOR`), as ``gep feedback <event> not_helpful``
would record it; the id depends on the change only, so however many corrections name it and however often a
transcript is read, it counts once. A correction that names nothing the engine changed says nothing about a
gene. The message is matched in memory only: what is stored is the feedback and a fixed note, and the lesson a
person's label would leave (the next prompt on the change's problem tells that a person said it did not help,
with the note and the change).

A function the message names decides before a file: "total_invoice in app/billing.py" is about the change that
touched ``total_invoice``, not a newer change to another function of app/billing.py (a file holds many
functions; naming the file first gave the word to whichever change touched the file last). A message that
names a function some recorded change touched, but none in the window, is not given to a change by its file.

:func:`reopened_by_corrections`: a correction said since the last cycle that names a function a committed
change touched is a problem report about that function: the problem that change addressed goes first among
the cycle's signals again (the verdicts cannot see it when the change made the failure silent).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import cast

from gep.core.learned import Resolution, is_specific
from gep.core.models import EvolutionEvent, OutcomeStatus
from gep.core.records import ApprovalFeedback
from gep.learning.approval import feedback_repository
from gep.learning.feedback import FeedbackKind, FeedbackSignal, explicit_signal
from gep.learning.human_verdicts import person_lesson
from gep.learning.lessons import LessonLog
from gep.learning.memory_graph import parse_at
from gep.learning.resolved import signal_identity
from gep.signals.behavior import iso
from gep.signals.behavior_cues import correction_kind
from gep.signals.sources import TranscriptExchange

CORRECTION_WINDOW = timedelta(hours=24)
AUTHOR = "behavioural signal (correction)"
_NAME_MIN = 4  # a shorter function name ("get", "run") is named by too many messages


def is_correction(exchange: TranscriptExchange) -> bool:
    """Whether the user turn corrects the agent turn before it (the behavioural rules of seed 000)."""
    return correction_kind(exchange.user, exchange.agent) is not None


def _named_function(text: str, functions: Sequence[str]) -> str | None:
    """The first of ``functions`` the message names as a word (too short a name is named by too much)."""
    for fn in functions:
        if len(fn) >= _NAME_MIN and fn.isidentifier() and re.search(rf"(?<!\w){re.escape(fn)}(?!\w)", text):
            return fn
    return None


def _named_file(text: str, res: Resolution) -> str | None:
    """A file the change changed that the message names (its path, or its base name as a word)."""
    for path in res.touched_files:
        base = path.replace("\\", "/").rsplit("/", 1)[-1]
        if path in text or (len(base) >= _NAME_MIN and re.search(rf"(?<![\w/]){re.escape(base)}(?!\w)", text)):
            return path
    return None


def _changes(events: Sequence[EvolutionEvent], fixes: Sequence[Resolution]) -> list[
        tuple[datetime, EvolutionEvent, Resolution]]:
    by_event = {r.event_id: r for r in fixes}
    out = []
    for e in events:
        res = by_event.get(e.id)
        at = parse_at(e.meta.solidified_at or e.meta.at)
        if res is not None and at is not None and e.genes_used and e.outcome.status == OutcomeStatus.success:
            out.append((at, e, res))
    return sorted(out, key=lambda c: c[0])


def corrected_changes(corrections: Sequence[TranscriptExchange], events: Sequence[EvolutionEvent],
                      fixes: Sequence[Resolution]) -> list[tuple[TranscriptExchange, EvolutionEvent, str]]:
    """Each committed change with the first correction said after it (within the window) that names what it
    touched, and what it named. A correction goes to the newest change to a function it names, else (naming no
    function any change touched) to the newest change to a file it names (:func:`_attribute`)."""
    changes = _changes(events, fixes)
    every_function = sorted({fn for res in fixes for fn in res.touched})
    found: dict[str, tuple[TranscriptExchange, EvolutionEvent, str]] = {}
    for ex in sorted((c for c in corrections if c.ts is not None), key=lambda c: c.ts or datetime.min):
        hit = _attribute(ex, changes, every_function)
        if hit is not None:
            found.setdefault(hit[0].id, (ex, *hit))
    return list(found.values())


def _attribute(ex: TranscriptExchange, changes: Sequence[tuple[datetime, EvolutionEvent, Resolution]],
               every_function: Sequence[str]) -> tuple[EvolutionEvent, str] | None:
    """The newest change in the window that touched a function the message names, else (when it names no
    function any recorded change touched) the newest that changed a file it names."""
    assert ex.ts is not None
    ts = ex.ts
    window = [(e, r) for at, e, r in reversed(changes) if at <= ts and ts - at <= CORRECTION_WINDOW]
    for event, res in window:
        fn = _named_function(ex.user, res.touched)
        if fn is not None:
            return event, fn
    if _named_function(ex.user, every_function) is not None:
        return None  # about a function whose change is not in the window: not a newer change's, by its file
    for event, res in window:
        path = _named_file(ex.user, res)
        if path is not None:
            return event, path
    return None


def reopened_by_corrections(signals: Sequence[str], corrections: Sequence[TranscriptExchange],
                            events: Sequence[EvolutionEvent], fixes: Sequence[Resolution],
                            since: datetime | None) -> tuple[list[str], list[str]]:
    """``signals`` with the problems corrections said since ``since`` are about first, and those problems.

    A correction counts when it names a function a committed change touched (a file alone is too wide to send
    the agent back to) and no change committed after it touched that function again. The problem is the
    change's own error lines that name the function (all its error lines when none does)."""
    new = [c for c in corrections if c.ts is not None and (since is None or c.ts >= since)]
    by_event = {r.event_id: r for r in fixes}
    present = {signal_identity(s) for s in signals}
    back: list[str] = []
    for ex, event, named in corrected_changes(new, events, fixes):
        res = by_event.get(event.id)
        if res is None or named not in res.touched or _answered(named, ex, fixes):
            continue
        problems = [s for s in res.signals if is_specific(s) and signal_identity(s) not in present]
        about = [s for s in problems if named in s] or problems
        back += [s for s in about if s not in back]
    return back + [s for s in signals if s not in back], back


def _answered(function: str, ex: TranscriptExchange, fixes: Sequence[Resolution]) -> bool:
    """A change committed after the correction touched the function again (that change answered it)."""
    return ex.ts is not None and any(r.committed_at > ex.ts and function in r.touched for r in fixes)


def not_helpful_signal(ex: TranscriptExchange, event: EvolutionEvent, named: str) -> FeedbackSignal:
    assert ex.ts is not None
    return explicit_signal(event_id=event.id, gene_id=event.used_gene, signals=event.signals,
                           kind=FeedbackKind.not_helpful.value, at=ex.ts, author=AUTHOR,
                           note=f"a person corrected the agent about {named}, which this change touched")


def record_corrections(store: object, corrections: Sequence[TranscriptExchange], events: Sequence[EvolutionEvent],
                       fixes: Sequence[Resolution]) -> list[ApprovalFeedback]:
    """Count each correction that names a recent change as ``not_helpful`` for its gene; what was newly
    recorded (a change already counted is not listed again)."""
    repo = feedback_repository(store)
    out: list[ApprovalFeedback] = []
    for ex, event, named in corrected_changes(corrections, events, fixes):
        signal = not_helpful_signal(ex, event, named)
        if repo is not None and not repo.add_feedback(signal):
            continue  # counted when a cycle first read it
        assert ex.ts is not None
        if callable(getattr(store, "append_lesson", None)):  # the next prompt on its problem tells it, as a label's
            person_lesson(cast(LessonLog, store), event, "not_helpful", signal.note, ex.ts)
        out.append(ApprovalFeedback(event_id=event.id, gene_id=event.used_gene, at=iso(ex.ts),
                                    recorded=repo is not None))
    return out
