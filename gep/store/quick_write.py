"""The writes of `gep feedback EVENT helpful|not_helpful` without SQLAlchemy: a feedback signal and the
person's lesson appended to the workspace's own SQLite file, as the full store appends them (the same row
values, gep/store/rows.py; the same insert-unless-the-key-exists; BEGIN IMMEDIATE as its writers do).

:func:`open_writer` declines exactly when :func:`gep.store.quick_read.open_quick` does; a write that fails is
rolled back and made by the full store instead. Every other write goes through the full store."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from gep.core.config import Settings
from gep.core.learned import FeedbackSignal, Lesson, lesson_exists
from gep.store import schema
from gep.store.quick_read import QuickStore, connect
from gep.store.rows import Row, feedback_row, lesson_row


def open_writer(workspace: Path, settings: Settings) -> QuickWriter | None:
    """The quick writer of ``workspace`` (resolved), or None when only the full store writes exactly."""
    opened = connect(workspace, settings, "rw")
    if opened is None:
        return None
    for pragma in schema.SQLITE_PRAGMAS:
        opened[0].execute(pragma)
    return QuickWriter(opened[0], workspace, settings, opened[1])


class QuickWriter(QuickStore):
    """A :class:`QuickStore` that also appends feedback signals and lessons (gep.cycle.record_learning.give_feedback)."""

    def add_feedback(self, signal: FeedbackSignal) -> bool:
        """Append a signal; False (nothing written) when its id is stored already."""
        def write() -> bool:
            with self._writing() as cur:
                return _insert_new(cur, schema.FEEDBACK, feedback_row(self.workspace_id, signal))

        return self._answer(write, "add_feedback", signal)

    def append_lesson(self, lesson: Lesson) -> None:
        """Add a new lesson; LessonError when its id is stored, or was deleted (rows are never rewritten)."""
        def write() -> None:
            with self._writing() as cur:
                deleted = cur.execute(f"SELECT 1 FROM {schema.LESSON_DELETIONS} WHERE workspace_id = ? AND lesson_id = ?",
                                      (self.workspace_id, lesson.id)).fetchone()
                if deleted is not None or not _insert_new(cur, schema.LESSONS, lesson_row(self.workspace_id, lesson)):
                    raise lesson_exists(lesson.id)

        self._answer(write, "append_lesson", lesson)

    def mark_conflicts_resolved(self, lesson_ids: Sequence[str], by: str) -> None:
        """A synthesis lesson's marks (a cycle writes those, never a person's verdict): the full store's."""
        self.full().mark_conflicts_resolved(lesson_ids, by)

    @contextmanager
    def _writing(self) -> Iterator[sqlite3.Cursor]:
        """One transaction holding the write lock from its start; rolled back when anything fails."""
        cur = self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield cur
            self.conn.execute("COMMIT")
        except BaseException:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise


def _insert_new(cur: sqlite3.Cursor, table: str, row: Row) -> bool:
    """Insert ``row`` unless its (workspace_id, id) exists: whether it was new (as gep.store.upsert.insert_new)."""
    columns = ", ".join(row)
    marks = ", ".join("?" * len(row))
    cur.execute(f"INSERT INTO {table} ({columns}) VALUES ({marks}) ON CONFLICT (workspace_id, id) DO NOTHING",
                tuple(row.values()))
    return cur.rowcount == 1
