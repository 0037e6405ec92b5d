"""The store's learning tables on SQLite and PostgreSQL: append-only feedback and lessons, the audited delete,
the one flag a lesson may change, verified fixes; every row kept to its workspace."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from store_backends import BACKENDS, backend_url

from gep.core.config import Settings
from gep.learning.feedback import Observation, explicit_signal, implicit_signal
from gep.learning.lessons import LessonError, LessonInput, build_lesson
from gep.learning.resolved import Resolution
from gep.store import Store

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
SIG = ["log_error", "errsig:TypeError: x is None"]


def open_ws(tmp_path: Path, name: str, url: str) -> Store:
    path = tmp_path / name
    path.mkdir(exist_ok=True)
    return Store.for_workspace(path, Settings(database_url=url))


@pytest.mark.parametrize("backend", BACKENDS)
def test_learning_rows_are_append_only_audited_and_per_workspace(backend: str, tmp_path: Path) -> None:
    with backend_url(backend, tmp_path) as url, open_ws(tmp_path, "a", url) as a, open_ws(tmp_path, "b", url) as b:
        used = implicit_signal(event_id="e1", gene_id="g", signals=SIG, observation=Observation.fix_verified, at=T0)
        assert used is not None and a.add_feedback(used) and not a.add_feedback(used)  # once per id
        a.add_feedback(explicit_signal(event_id="e1", gene_id="g", signals=SIG, kind="helpful",
                                       at=T0 - timedelta(hours=1), note="good"))
        assert [f.kind.value for f in a.list_feedback()] == ["helpful", "used"]  # in time order
        assert [f.id for f in a.list_feedback("g")] == [f.id for f in a.list_feedback()] and not b.list_feedback()

        first = build_lesson(LessonInput(event_id="e1", gene_id="g", signals=SIG, outcome="success",
                                         files_changed=1), [], T0)
        a.append_lesson(first)
        with pytest.raises(LessonError):
            a.append_lesson(first.model_copy(update={"content": "rewritten"}))
        broke = build_lesson(LessonInput(event_id="e2", gene_id="g", signals=SIG, outcome="failed"), [first],
                             T0 + timedelta(hours=1))
        a.append_lesson(broke)
        assert broke.conflicts_with == [first.id]
        a.mark_conflicts_resolved([broke.id], by="lsn_synth")
        got = {x.id: x for x in a.list_lessons("g")}
        assert got[broke.id].conflict_resolved and got[broke.id].resolved_by == "lsn_synth"
        assert got[first.id].content == first.content and not got[first.id].conflict_resolved
        assert a.lessons_of_events(["e1", "e2", "e3"]) == {"e1": ["success"], "e2": ["failure"]}
        assert b.list_lessons() == [] and b.lessons_of_events(["e1"]) == {}

        with pytest.raises(LessonError, match="needs a reason"):
            a.delete_lesson(first.id, who="ana", why=" ", at=T0)
        with pytest.raises(LessonError, match="no lesson"):
            b.delete_lesson(first.id, who="ana", why="not mine", at=T0)  # another workspace's lesson
        record = a.delete_lesson(first.id, who="ana", why="wrong fixture", at=T0 + timedelta(days=1))
        assert [x.id for x in a.list_lessons()] == [broke.id]
        assert [(d.lesson_id, d.deleted_by, d.reason, d.lesson.content) for d in a.list_deletions()] == [
            (first.id, "ana", "wrong fixture", first.content)] and record.lesson == first
        with pytest.raises(LessonError):
            a.append_lesson(first)  # a deleted lesson is not brought back
        assert not a.add_deletion(record) and b.list_deletions() == []

        for i in range(25):
            a.save_resolution(Resolution(event_id=f"e{i}", signals=SIG, commit_sha=f"{i:040d}",
                                         committed_at=T0 + timedelta(minutes=i)))
        a.save_resolution(Resolution(event_id="e3", signals=SIG, commit_sha="3" * 40, committed_at=T0,
                                     status="verified"))
        recent = a.recent_resolutions()
        assert len(recent) == 20 and recent[-1].event_id == "e24" and recent[0].event_id == "e5"
        assert [r.status for r in a.recent_resolutions(25) if r.event_id == "e3"] == ["verified"]
        assert b.recent_resolutions() == []
