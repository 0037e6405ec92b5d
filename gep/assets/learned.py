"""What a workspace learned, exported and imported beside the reference's asset files (gep/assets/gene_files.py);
the file helpers both use are in gep/assets/files.py.

Three files of this engine's own, one JSON object per line in the order they were written:
``lessons.jsonl`` (gep.learning.lessons.Lesson), ``lesson_deletions.jsonl`` (the audit of deleted lessons) and
``feedback.jsonl`` (gep.learning.feedback.FeedbackSignal). The reference's four files are not touched by them.

Importing keeps both stores' rules: nothing known is written twice, a lesson is never rewritten (only its
``conflict_resolved`` flag may be set), a deleted lesson is not brought back, and a deletion the file
records for a lesson this store holds deletes it here too (audited, with the file's who, when and why).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from gep.assets.files import ImportReport, _present, _read_jsonl, _validate, _where, _write_atomic
from gep.core.hashing import js_dumps
from gep.learning.feedback import FeedbackSignal
from gep.learning.lessons import Lesson, LessonDeletion

if TYPE_CHECKING:  # `gep genes` imports gep/assets/gene_files.py (this module too) without SQLAlchemy
    from gep.store import Store

M = TypeVar("M", bound=BaseModel)

LESSONS_FILE = "lessons.jsonl"
DELETIONS_FILE = "lesson_deletions.jsonl"
FEEDBACK_FILE = "feedback.jsonl"
LEARNING_FILES = (LESSONS_FILE, DELETIONS_FILE, FEEDBACK_FILE)


@dataclass
class LearningPlan:
    """The files read and validated, before anything is written."""

    files: list[str] = field(default_factory=list)
    lessons: list[Lesson] = field(default_factory=list)
    deletions: list[LessonDeletion] = field(default_factory=list)
    feedback: list[FeedbackSignal] = field(default_factory=list)


def _lines(assets_dir: Path, name: str, cls: type[M], plan: LearningPlan) -> list[M]:
    path = assets_dir / name
    if not _present(path):
        return []
    plan.files.append(name)
    return [_validate(cls, obj, _where(path, lineno, obj, line=True)) for lineno, obj in _read_jsonl(path)]


def read_learning(assets_dir: Path) -> LearningPlan:
    """Read the learning files in ``assets_dir`` (AssetError naming the file, line and field when one is bad)."""
    plan = LearningPlan()
    plan.lessons = _lines(assets_dir, LESSONS_FILE, Lesson, plan)
    plan.deletions = _lines(assets_dir, DELETIONS_FILE, LessonDeletion, plan)
    plan.feedback = _lines(assets_dir, FEEDBACK_FILE, FeedbackSignal, plan)
    return plan


def import_learning(store: Store, plan: LearningPlan, report: ImportReport) -> None:
    """Write what ``plan`` holds that the store does not (counted in ``report``)."""
    held = {x.id: x for x in store.list_lessons()}
    deleted = {d.lesson_id for d in store.list_deletions()}
    for d in plan.deletions:
        if d.lesson_id in held:
            store.delete_lesson(d.lesson_id, who=d.deleted_by, why=d.reason, at=d.deleted_at)
            del held[d.lesson_id]
            report.lesson_deletions.updated += 1
        elif store.add_deletion(d):
            report.lesson_deletions.added += 1
        else:
            report.lesson_deletions.unchanged += 1
        deleted.add(d.lesson_id)
    for lesson in plan.lessons:
        stored = held.get(lesson.id)
        if lesson.id in deleted or (stored is not None and stored.conflict_resolved >= lesson.conflict_resolved):
            report.lessons.unchanged += 1
        elif stored is not None:
            store.mark_conflicts_resolved([lesson.id], by=lesson.resolved_by or "import")
            report.lessons.updated += 1
        else:
            store.append_lesson(lesson)
            report.lessons.added += 1
    for signal in plan.feedback:
        if store.add_feedback(signal):
            report.feedback.added += 1
        else:
            report.feedback.unchanged += 1


# JSON edge: each line is the model's JSON object, as stored
def _objects(models: list[Any]) -> list[str]:
    return [js_dumps(m.model_dump(mode="json")) + "\n" for m in models]


def export_learning(store: Store, out: Path) -> dict[str, int]:
    """Write the three files into ``out``; how many objects each holds."""
    written: dict[str, int] = {}
    for name, models in ((LESSONS_FILE, store.list_lessons()), (DELETIONS_FILE, store.list_deletions()),
                         (FEEDBACK_FILE, store.list_feedback())):
        _write_atomic(out / name, iter(_objects(models)))
        written[name] = len(models)
    return written
