"""A person's verdict on a cycle's change (`gep feedback`, the feedback flow, a review, a revert): the explicit
feedback signal and the lesson it teaches. Kept apart from gep/cycle/record_learning.py (the cycle's learning) so that
`gep feedback EVENT helpful` writes them without loading the cycle's machinery or SQLAlchemy."""

from __future__ import annotations

import getpass
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from gep.learning.feedback import FeedbackError, FeedbackRepository, FeedbackSignal, explicit_signal
from gep.learning.lessons import LessonInput, LessonLog, build_lesson, record_lesson
from gep.learning.problem_key import outcome_signals

SPECIFIC_SIGNALS = ("errsig:", "recurring_errsig", "user_feature_request:", "user_improvement_suggestion:")

if TYPE_CHECKING:
    from datetime import datetime

    from gep.core.models import EvolutionEvent


class VerdictStore(FeedbackRepository, LessonLog, Protocol):
    """What recording a verdict reads and writes: the full store, or gep/store/quick_write.py's writer."""

    def get_event(self, event_id: str) -> EvolutionEvent | None: ...


def worked_on(event: EvolutionEvent) -> list[str]:
    """The signals a person's word on a cycle is filed under: the problems its change was judged on or credited
    with (gep/learning/problem_key.py: a fix made in a ``perf_bottleneck`` cycle worked on the error it fixed),
    then its trigger signals; so the next cycle on that problem recalls it, whatever triggered this one."""
    about = [s for s in outcome_signals(event) or [] if s.startswith(SPECIFIC_SIGNALS)]
    return list(dict.fromkeys([*about, *event.signals]))


def person_lesson(store: LessonLog, event: EvolutionEvent, verdict: Literal["helpful", "not_helpful"],
                  note: str | None, now: datetime) -> None:
    gene = event.used_gene
    inp = LessonInput(event_id=event.id, gene_id=gene, signals=worked_on(event), outcome=event.outcome.status,
                      person_verdict=verdict, note=note, change=event.meta.change_excerpt or "")
    record_lesson(store, build_lesson(inp, store.list_lessons(gene), now))


def default_author() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no login name (a container without a passwd entry)
        return "unknown"


def person(workspace: Path) -> str:
    """Who gives feedback with `gep feedback` here: the workspace's git identity (``user.name``, as git would
    sign their commits; else ``user.email``, which redaction hides), else the OS login name. One verdict per
    person and event."""
    for key in ("user.name", "user.email"):
        try:
            done = subprocess.run(["git", "config", "--get", key], cwd=workspace, capture_output=True, timeout=30,
                                  check=False)
        except (OSError, subprocess.SubprocessError):
            break
        found = done.stdout.decode("utf-8", "replace").strip()
        if done.returncode == 0 and found:
            return found
    return default_author()


def give_feedback(store: VerdictStore, event_id: str, verdict: str, *, now: datetime, note: str | None = None,
                  author: str | None = None) -> FeedbackSignal:
    """A person's ``helpful`` / ``not_helpful`` on one of the workspace's events, with their note (redacted).

    Counted once per person (``author``) and event: when they gave a verdict on it already, nothing is written
    and their first verdict is returned (its ``created_at`` is not ``now``)."""
    event = store.get_event(event_id)
    if event is None:
        raise FeedbackError(f"no event {event_id!r} in this workspace (see `gep history`)")
    signal = explicit_signal(event_id=event.id, gene_id=event.gene_id,
                             signals=worked_on(event), kind=verdict, at=now, note=note, author=author or default_author())
    if store.add_feedback(signal):
        person_lesson(store, event, "helpful" if verdict == "helpful" else "not_helpful", signal.note, now)
        return signal
    return next((s for s in store.list_feedback(signal.gene_id) if s.id == signal.id), signal)


def record_review(store: VerdictStore, event_id: str, *, approved: bool, note: str, now: datetime,
                  author: str = "reviewer") -> FeedbackSignal:
    """A review-mode decision: approve is ``helpful``, reject ``not_helpful``, the note kept with it."""
    return give_feedback(store, event_id, "helpful" if approved else "not_helpful", now=now, note=note,
                         author=author)
