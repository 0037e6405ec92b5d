"""What a workspace has learned: feedback signals, lessons (with the audit of deleted ones) and verified fixes.

Backs gep.learning.feedback.FeedbackRepository and gep.learning.lessons.LessonRepository. Feedback signals and lessons are
append-only: a signal whose id is stored is not written again, a lesson id is never rewritten (nor reused
after a delete); the one change an existing lesson sees is its ``conflict_resolved`` flag. Prune keeps them
all (they are small and they are the truth the scores and the prompt read), and keeps the events of the
fixes cycles still check.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TypeVar

from sqlalchemy import delete
from sqlmodel import Session, col, select

from gep.core.learned import (
    FeedbackSignal,
    Lesson,
    LessonDeletion,
    LessonError,
    Resolution,
    deletion_record,
    lesson_exists,
)
from gep.core.models import iso
from gep.store.base import StoreBase
from gep.store.codec import load_by_time
from gep.store.engine import store_errors
from gep.store.prune import PRUNE_HOOKS
from gep.store.rows import feedback_row, lesson_row
from gep.store.tables import FeedbackRow, LessonDeletionRow, LessonRow, ResolutionRow
from gep.store.upsert import insert_new, upsert

T = TypeVar("T", FeedbackSignal, Lesson)
RECENT_RESOLUTIONS = 20  # the fixes a cycle checks its signals against


class LearningMixin(StoreBase):
    # ---------------------------------------------------------------- feedback

    @store_errors
    def add_feedback(self, signal: FeedbackSignal) -> bool:
        """Append a signal; False (nothing written) when its id is stored already."""
        row = feedback_row(self.workspace_id, signal)
        with self.writing() as s:
            return insert_new(s, FeedbackRow, [row], key=("workspace_id", "id"), returning="seq") == 1

    @store_errors
    def list_feedback(self, gene_id: str | None = None) -> list[FeedbackSignal]:
        """Signals, oldest first."""
        return self._by_time(FeedbackRow, FeedbackSignal, gene_id)

    def _by_time(self, row_cls: type[FeedbackRow] | type[LessonRow], cls: type[T], gene_id: str | None) -> list[T]:
        """The workspace's rows (or one gene's) as ``cls``, oldest first (ties by id)."""
        with self.session() as s:
            q = select(row_cls.data).where(row_cls.workspace_id == self.workspace_id)
            if gene_id is not None:
                q = q.where(row_cls.gene_id == gene_id)
            return load_by_time(cls, s.exec(q.order_by(col(row_cls.seq))).all())

    # ---------------------------------------------------------------- lessons

    @store_errors
    def append_lesson(self, lesson: Lesson) -> None:
        """Add a new lesson; LessonError when its id is stored, or was deleted (rows are never rewritten)."""
        row = lesson_row(self.workspace_id, lesson)
        with self.writing() as s:
            if self._deletion(s, lesson.id) is not None or \
                    not insert_new(s, LessonRow, [row], key=("workspace_id", "id"), returning="seq"):
                raise lesson_exists(lesson.id)

    @store_errors
    def list_lessons(self, gene_id: str | None = None) -> list[Lesson]:
        """Lessons, oldest first (all of the workspace's, or one gene's)."""
        return self._by_time(LessonRow, Lesson, gene_id)

    @store_errors
    def lessons_of_events(self, event_ids: Sequence[str]) -> dict[str, list[str]]:
        """Event id -> the categories of the lessons written about it (events without one left out)."""
        out: dict[str, list[str]] = {}
        if not event_ids:
            return out
        with self.session() as s:
            for eid, cat in s.exec(select(LessonRow.event_id, LessonRow.category).where(
                    LessonRow.workspace_id == self.workspace_id, col(LessonRow.event_id).in_(list(event_ids)))):
                out.setdefault(eid or "", []).append(cat)
        return out

    @store_errors
    def mark_conflicts_resolved(self, lesson_ids: Sequence[str], by: str) -> None:
        """Set ``conflict_resolved`` and ``resolved_by`` (the only change an existing lesson ever sees)."""
        with self.writing() as s:
            for row in s.exec(select(LessonRow).where(LessonRow.workspace_id == self.workspace_id,
                                                      col(LessonRow.id).in_(list(lesson_ids)))).all():
                lesson = Lesson.model_validate_json(row.data)
                row.data = lesson.model_copy(update={"conflict_resolved": True, "resolved_by": by}).model_dump_json()
                s.add(row)

    @store_errors
    def delete_lesson(self, lesson_id: str, *, who: str, why: str, at: datetime) -> LessonDeletion:
        """Remove a lesson, keeping the audit record (LessonError without a reason or for an unknown id)."""
        with self.writing() as s:
            row = s.exec(select(LessonRow).where(LessonRow.workspace_id == self.workspace_id,
                                                 LessonRow.id == lesson_id)).first()
            if row is None:
                raise LessonError(f"no lesson {lesson_id!r} in this workspace (see `gep lessons list`)")
            record = deletion_record(Lesson.model_validate_json(row.data), who=who, why=why, at=at)
            s.add(LessonDeletionRow(workspace_id=self.workspace_id, lesson_id=lesson_id, deleted_at=iso(at),
                                    data=record.model_dump_json()))
            s.execute(delete(LessonRow).where(col(LessonRow.workspace_id) == self.workspace_id,
                                              col(LessonRow.id) == lesson_id))
        return record

    @store_errors
    def list_deletions(self) -> list[LessonDeletion]:
        with self.session() as s:
            rows = s.exec(select(LessonDeletionRow.data).where(LessonDeletionRow.workspace_id == self.workspace_id)
                          .order_by(col(LessonDeletionRow.seq))).all()
        return [LessonDeletion.model_validate_json(d) for d in rows]

    @store_errors
    def add_deletion(self, record: LessonDeletion) -> bool:
        """Keep an audit record read from another store (an import); False when it is there already."""
        row = {"workspace_id": self.workspace_id, "lesson_id": record.lesson_id,
               "deleted_at": iso(record.deleted_at), "data": record.model_dump_json()}
        with self.writing() as s:
            return insert_new(s, LessonDeletionRow, [row], key=("workspace_id", "lesson_id"), returning="seq") == 1

    def _deletion(self, s: Session, lesson_id: str) -> str | None:
        return s.exec(select(LessonDeletionRow.lesson_id).where(LessonDeletionRow.workspace_id == self.workspace_id,
                                                                LessonDeletionRow.lesson_id == lesson_id)).first()

    # ---------------------------------------------------------------- verified fixes

    @store_errors
    def save_resolution(self, resolution: Resolution) -> None:
        """Add a fix's record, or store its new status (one per fixing event)."""
        with self.writing() as s:
            upsert(s, ResolutionRow, {"workspace_id": self.workspace_id, "event_id": resolution.event_id},
                   {"status": resolution.status, "data": resolution.model_dump_json()})

    @store_errors
    def recent_resolutions(self, limit: int = RECENT_RESOLUTIONS) -> list[Resolution]:
        """The newest ``limit`` fixes, oldest first."""
        with self.session() as s:
            rows = s.exec(select(ResolutionRow.data).where(ResolutionRow.workspace_id == self.workspace_id)
                          .order_by(col(ResolutionRow.seq).desc()).limit(limit)).all()
        return [Resolution.model_validate_json(d) for d in reversed(rows)]


class _KeepJudgedFixes:
    """Prune keeps the events of the fixes cycles still check (the newest RECENT_RESOLUTIONS, unless they did not
    hold already): a verdict is written on the fix's event, and a verified fix can still turn out not to hold."""

    def keep(self, s: Session, workspace_id: str, event_ids: Sequence[str]) -> set[str]:
        checked = (select(ResolutionRow.event_id, ResolutionRow.status).where(ResolutionRow.workspace_id == workspace_id)
                   .order_by(col(ResolutionRow.seq).desc()).limit(RECENT_RESOLUTIONS).subquery())
        return set(s.exec(select(checked.c.event_id).where(checked.c.status != "did_not_hold",
                                                           checked.c.event_id.in_(list(event_ids)))).all())

    def pruned(self, s: Session, workspace_id: str, event_ids: Sequence[str]) -> None:
        """Lessons and feedback stay: they hold their own content and outlive the events they judge."""


PRUNE_HOOKS.register(_KeepJudgedFixes())
