"""Approval said after a GEP change counts as ``helpful`` feedback for that change's gene (issues 15, 17).

A behavioural ``approval`` signal (praise, thanks) belongs to the newest change a cycle committed before it,
when that change is at most :data:`APPROVAL_WINDOW` older. The feedback is a person's explicit ``helpful``
(gep.learning.feedback.explicit_signal) with an id that depends on the change only: one approval per change counts,
however many follow it and however often they are read.

Where it is recorded: :func:`feedback_repository` is the hook. It returns the store when the store keeps
feedback signals (``add_feedback``, the feedback table of issue 15); until then the approvals are only listed
in the event (``meta.behavior.approvals``, ``recorded: false``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime, timedelta

from gep.core.models import EvolutionEvent, OutcomeStatus
from gep.core.records import ApprovalFeedback
from gep.learning.feedback import FeedbackKind, FeedbackRepository, FeedbackSignal, explicit_signal
from gep.learning.memory_graph import parse_at
from gep.signals.behavior import StoredSignal, iso

APPROVAL_WINDOW = timedelta(hours=24)
AUTHOR = "behavioural signal (approval)"


def _committed_at(event: EvolutionEvent) -> datetime | None:
    if event.outcome.status != OutcomeStatus.success or not event.meta.commit or not event.genes_used:
        return None
    return parse_at(event.meta.solidified_at or event.meta.at)


def approvals_after_changes(approvals: Sequence[StoredSignal], events: Sequence[EvolutionEvent]) -> list[
        tuple[StoredSignal, EvolutionEvent]]:
    """Each GEP change (a committed success) with the first approval said after it, within the window."""
    changes = sorted(((at, e) for e in events if (at := _committed_at(e)) is not None), key=lambda p: p[0])
    found: dict[str, tuple[StoredSignal, EvolutionEvent]] = {}
    for sig in sorted((s for s in approvals if s.type == "approval"), key=lambda s: s.at):
        before = [(at, e) for at, e in changes if at <= sig.at]
        if not before:
            continue
        at, event = before[-1]
        if sig.at - at <= APPROVAL_WINDOW and event.id not in found:
            found[event.id] = (sig, event)
    return list(found.values())


def helpful_signal(approval: StoredSignal, event: EvolutionEvent) -> FeedbackSignal:
    signal = explicit_signal(event_id=event.id, gene_id=event.used_gene, signals=event.signals,
                             kind=FeedbackKind.helpful.value, at=approval.at, author=AUTHOR,
                             note=f"approval after the change: {approval.summary}")
    key = f"{event.id}\x1f{event.used_gene}\x1fapproval"
    return signal.model_copy(update={"id": "fb_" + hashlib.sha256(key.encode()).hexdigest()[:20]})


def feedback_repository(store: object) -> FeedbackRepository | None:
    """The hook: the store when it keeps feedback signals (issue 15's table), else None."""
    return store if callable(getattr(store, "add_feedback", None)) else None  # type: ignore[return-value]


def record_approvals(store: object, approvals: Sequence[StoredSignal],
                     events: Sequence[EvolutionEvent]) -> list[ApprovalFeedback]:
    """Count each approval after a GEP change as ``helpful`` for its gene; what was found, for the event."""
    repo = feedback_repository(store)
    out: list[ApprovalFeedback] = []
    for sig, event in approvals_after_changes(approvals, events):
        if repo is not None:
            repo.add_feedback(helpful_signal(sig, event))
        out.append(ApprovalFeedback(event_id=event.id, gene_id=event.used_gene, at=iso(sig.at),
                                    recorded=repo is not None))
    return out
