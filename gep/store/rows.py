"""The rows both write paths insert, column by column: the full store (learned.py) and the quick writer of
`gep feedback EVENT helpful|not_helpful` (quick_write.py) write the same values through one definition."""

from __future__ import annotations

from gep.core.learned import FeedbackSignal, Lesson
from gep.core.models import iso

Row = dict[str, str | None]  # column name -> value: the database edge


def feedback_row(workspace_id: str, signal: FeedbackSignal) -> Row:
    return {"workspace_id": workspace_id, "id": signal.id, "gene_id": signal.gene_id, "event_id": signal.event_id,
            "created_at": iso(signal.created_at), "data": signal.model_dump_json()}


def lesson_row(workspace_id: str, lesson: Lesson) -> Row:
    return {"workspace_id": workspace_id, "id": lesson.id, "gene_id": lesson.gene_id, "event_id": lesson.event_id,
            "category": lesson.category.value, "created_at": iso(lesson.created_at), "data": lesson.model_dump_json()}
