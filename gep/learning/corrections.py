"""A person's correction that names what a GEP change touched counts as ``not_helpful`` for that change's gene.

The counterpart of approval.py (issue 41): when a person in an agent session corrects the agent ("No, that's
wrong: total_invoice in app/billing.py now swallows the error") and the message names a function or a file
that a change the engine committed touched (its fix record: ``Resolution.touched`` and ``touched_files``),
made at most :data:`CORRECTION_WINDOW` before, the person is saying that change did not help. The newest such
change gets one ``not_helpful`` from the person (:data:`AUTHOR`), as ``gep feedback <event> not_helpful``
would record it; the id depends on the change only, so however many corrections name it and however often a
transcript is read, it counts once. A correction that names nothing the engine changed says nothing about a
gene. The message is matched in memory only: what is stored is the feedback and a fixed note.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timedelta

from gep.core.learned import Resolution
from gep.core.models import EvolutionEvent, OutcomeStatus
from gep.core.records import ApprovalFeedback
from gep.learning.approval import feedback_repository
from gep.learning.feedback import FeedbackKind, FeedbackSignal, explicit_signal
from gep.learning.memory_graph import parse_at
from gep.signals.behavior import iso
from gep.signals.behavior_cues import correction_kind
from gep.signals.sources import TranscriptExchange

CORRECTION_WINDOW = timedelta(hours=24)
AUTHOR = "behavioural signal (correction)"
_NAME_MIN = 4  # a shorter function name ("get", "run") is named by too many messages


def is_correction(exchange: TranscriptExchange) -> bool:
    """Whether the user turn corrects the agent turn before it (the behavioural rules of seed 000)."""
    return correction_kind(exchange.user, exchange.agent) is not None


def _names(text: str, res: Resolution) -> str | None:
    """What of the change the message names: a file it changed, else a function it touched (None: nothing)."""
    for path in res.touched_files:
        base = path.replace("\\", "/").rsplit("/", 1)[-1]
        if path in text or (len(base) >= _NAME_MIN and re.search(rf"(?<![\w/]){re.escape(base)}(?!\w)", text)):
            return path
    for fn in res.touched:
        if len(fn) >= _NAME_MIN and fn.isidentifier() and re.search(rf"(?<!\w){re.escape(fn)}(?!\w)", text):
            return fn
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
    touched, and what it named. A correction goes to the newest change it names."""
    changes = _changes(events, fixes)
    found: dict[str, tuple[TranscriptExchange, EvolutionEvent, str]] = {}
    for ex in sorted((c for c in corrections if c.ts is not None), key=lambda c: c.ts or datetime.min):
        assert ex.ts is not None
        for at, event, res in reversed(changes):
            if not (at <= ex.ts and ex.ts - at <= CORRECTION_WINDOW):
                continue
            named = _names(ex.user, res)
            if named is not None:
                found.setdefault(event.id, (ex, event, named))
                break
    return list(found.values())


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
        if repo is not None and not repo.add_feedback(not_helpful_signal(ex, event, named)):
            continue  # counted when a cycle first read it
        assert ex.ts is not None
        out.append(ApprovalFeedback(event_id=event.id, gene_id=event.used_gene, at=iso(ex.ts),
                                    recorded=repo is not None))
    return out
