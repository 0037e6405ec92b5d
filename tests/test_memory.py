"""Lessons (seed 004): strength, append-only updates, conflicts and synthesis, retrieval, audited deletes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from gep.learning.lessons import (
    InMemoryLessons,
    Lesson,
    LessonCategory,
    LessonError,
    LessonInput,
    Stance,
    build_lesson,
    heads,
    humanize_age,
    lessons_for_prompt,
    recall,
    record_lesson,
    strength_label,
    synthesis_request,
    within_budget,
)

T0 = datetime(2026, 5, 4, 8, 0, tzinfo=UTC)
SIG = ["log_error", "errsig:ZeroDivisionError: division by zero in stats.mean (stats.py line 8)"]
SIG_LATER = ["log_error", "errsig:ZeroDivisionError: division by zero in stats.mean (stats.py line 9)"]
ELSEWHERE = ["user_feature_request:export the report as CSV", "capability_gap"]


def inp(event: str, outcome: str = "success", gene: str = "gene_repair", signals: list[str] | None = None,
        **kw) -> LessonInput:
    return LessonInput(event_id=event, gene_id=gene, signals=list(SIG if signals is None else signals),
                       outcome=outcome, **kw)


def add(repo: InMemoryLessons, i: LessonInput, at: datetime) -> Lesson:
    lesson = build_lesson(i, repo.list_lessons(), at)
    record_lesson(repo, lesson)
    return lesson


# ------------------------------------------------------------------ strength


def test_strength_is_salience_spent_times_adjustment():
    lesson = build_lesson(inp("e1", files_changed=2, validation_summary="3 passed", model_summary="fixed n-1"),
                          [], T0)
    assert lesson.salience_spent == 2.5  # 1 + 0.5 x (changed files, validation output, model summary)
    assert lesson.strength_adjustment == 1.0  # a routine, unverified success
    assert lesson.strength == pytest.approx(2.5)
    assert lesson.model_dump()["strength"] == pytest.approx(2.5)  # stored with the row
    with pytest.raises(ValidationError):
        Lesson(id="x", topic="t", gene_id="g", category=LessonCategory.success, content="c", created_at=T0,
               strength_adjustment=10.5)
    with pytest.raises(ValidationError):
        Lesson(id="x", topic="t", gene_id="g", category=LessonCategory.success, content="c", created_at=T0,
               strength_adjustment=0.05)


def test_repeated_failures_and_a_first_verified_fix_weigh_more_routine_outcomes_less():
    repo = InMemoryLessons()
    reasons = {"failure_reasons": ["validation: pytest exited 1"]}
    f1 = add(repo, inp("e1", "failed", **reasons), T0)
    f2 = add(repo, inp("e2", "failed", **reasons), T0 + timedelta(hours=1))
    f3 = add(repo, inp("e3", "failed", **reasons), T0 + timedelta(hours=2))
    assert [f1.strength_adjustment, f2.strength_adjustment, f3.strength_adjustment] == [1.0, 4.0, 6.0]
    ok = add(repo, inp("e4", files_changed=1), T0 + timedelta(hours=3))
    first = add(repo, inp("e4", fix_held=True), T0 + timedelta(hours=4))
    assert (ok.strength_adjustment, first.strength_adjustment, first.category) == (1.0, 5.0,
                                                                                    LessonCategory.fix_verified)
    add(repo, inp("e5", files_changed=1), T0 + timedelta(hours=5))
    again = add(repo, inp("e5", fix_held=True), T0 + timedelta(hours=6))
    assert again.strength_adjustment == 1.5
    empty = add(repo, inp("e6", "empty"), T0 + timedelta(hours=7))
    assert empty.strength_adjustment == 0.3 and empty.stance is Stance.neutral
    # a failure after a success starts a new streak
    assert add(repo, inp("e7", "failed", **reasons), T0 + timedelta(hours=8)).strength_adjustment == 1.0
    assert f3.novelty < f1.novelty == 1.0


def test_content_says_what_happened_and_is_redacted():
    lesson = build_lesson(inp("e1", "failed", failure_reasons=["validation: pytest exited 1: token=abcd1234efgh5678"],
                              validation_summary="1 failed, 2 passed", model_summary="changed the divisor"), [], T0)
    assert lesson.category is LessonCategory.failure and lesson.stance is Stance.fails
    assert "gene_repair failed on [log_error, errsig:ZeroDivisionError" in lesson.content
    assert "1 failed, 2 passed" in lesson.content and "changed the divisor" in lesson.content
    assert "abcd1234efgh5678" not in lesson.content
    assert lesson.topic.startswith("gene_repair@") and "errsig_norm:" in lesson.topic


# ------------------------------------------------------------------ append-only


def test_append_only_an_update_is_a_new_row_that_supersedes():
    repo = InMemoryLessons()
    first = add(repo, inp("e1", files_changed=1), T0)
    with pytest.raises(LessonError, match="append-only"):
        repo.append_lesson(first.model_copy(update={"content": "rewritten"}))
    update = add(repo, inp("e1", fix_held=False), T0 + timedelta(days=1))
    rows = repo.list_lessons()
    assert [r.id for r in rows] == [first.id, update.id]
    assert rows[0].content == first.content  # the old row is untouched
    assert update.supersedes == first.id and update.category is LessonCategory.fix_did_not_hold
    assert [x.id for x in heads(rows)] == [update.id]
    # a verdict on its own event is an update, not a contradiction
    assert update.conflicts_with == []
    got = recall(rows, gene_id="gene_repair", signals=SIG, now=T0 + timedelta(days=1))
    assert [r.lesson.id for r in got] == [update.id]


# ------------------------------------------------------------------ conflicts and synthesis


def test_opposite_lessons_from_other_events_conflict():
    repo = InMemoryLessons()
    works = add(repo, inp("e1", files_changed=1), T0)
    works2 = add(repo, inp("e2", files_changed=1, signals=SIG_LATER), T0 + timedelta(hours=1))
    assert works2.conflicts_with == []  # same stance
    broke = add(repo, inp("e3", "failed", signals=SIG_LATER), T0 + timedelta(hours=2))
    assert broke.conflicts_with == [works2.id]  # "gene X fixes this" vs "gene X failed at this"
    assert works.id not in broke.conflicts_with  # only what the topic says now
    other_gene = add(repo, inp("e4", files_changed=1, gene="gene_other"), T0 + timedelta(hours=3))
    assert other_gene.conflicts_with == []
    elsewhere = add(repo, inp("e5", "failed", signals=ELSEWHERE), T0 + timedelta(hours=4))
    assert elsewhere.conflicts_with == []


def _flips(repo: InMemoryLessons, n: int, start: datetime = T0) -> list[Lesson]:
    out = []
    for k in range(n + 1):
        outcome = "success" if k % 2 == 0 else "failed"
        out.append(add(repo, inp(f"e{k}_{start.hour}", outcome, files_changed=1), start + timedelta(hours=k)))
    return out


def test_synthesis_is_asked_for_when_unresolved_conflicts_reach_the_threshold():
    repo = InMemoryLessons()
    lessons = _flips(repo, 2)  # works, fails, works: 2 conflicts
    now = T0 + timedelta(days=1)
    assert synthesis_request(repo.list_lessons(), gene_id="gene_repair", signals=SIG, now=now) is None
    lessons.append(add(repo, inp("e_more", "failed"), T0 + timedelta(hours=5)))  # the third
    req = synthesis_request(repo.list_lessons(), gene_id="gene_repair", signals=SIG_LATER, now=now)
    assert req is not None
    assert req.source_ids == [x.id for x in lessons]  # both sides of every conflict, oldest first
    assert req.text.startswith("These lessons about the same gene in this situation contradict each other")
    assert "[works] memory from yesterday" in req.text and "[fails]" in req.text
    assert synthesis_request(repo.list_lessons(), gene_id="gene_repair", signals=SIG, now=now,
                             threshold=4) is None

    # the cycle that was shown the request writes the synthesis: it resolves them
    synth = add(repo, inp("e_synth", model_summary="mean fails only for one-element lists", files_changed=1,
                          synthesis_of=req.source_ids), now)
    assert synth.category is LessonCategory.synthesis and synth.synthesis_source_ids == req.source_ids
    rows = {x.id: x for x in repo.list_lessons()}
    assert all(rows[i].conflict_resolved and rows[i].resolved_by == synth.id for i in req.source_ids)
    assert synthesis_request(repo.list_lessons(), gene_id="gene_repair", signals=SIG, now=now) is None
    assert "mean fails only for one-element lists" in synth.content


# ------------------------------------------------------------------ retrieval


def test_recall_takes_the_most_recent_then_the_strongest():
    lessons = []
    for k in range(12):  # k hours old: 0 is the newest; strength grows with age for the oldest three
        adj = {9: 9.0, 10: 2.0, 11: 7.0}.get(k, 1.0)
        lessons.append(Lesson(id=f"l{k:02d}", topic="t", gene_id="gene_repair", situation=sorted(
            ["log_error", "errsig_norm:x"]), category=LessonCategory.failure, content=f"lesson {k}",
            strength_adjustment=adj, created_at=T0 - timedelta(hours=k)))
    sig = ["log_error", "errsig_norm:x"]
    got = recall(lessons, gene_id="gene_repair", signals=sig, now=T0, limit=5, recency_weight=0.6)
    assert [(r.lesson.id, r.why) for r in got] == [("l00", "recent"), ("l01", "recent"), ("l02", "recent"),
                                                   ("l09", "strong"), ("l11", "strong")]
    assert got[3].text == "vivid memory from 9 hours ago: lesson 9"
    assert got[0].text == "faint memory from just now: lesson 0"
    default = recall(lessons, gene_id="gene_repair", signals=sig, now=T0)  # 10 x 0.7: 7 recent, 3 strong
    assert [r.why for r in default].count("recent") == 7
    assert [r.lesson.id for r in default][7:] == ["l09", "l11", "l10"]
    assert recall(lessons, gene_id="gene_other", signals=sig, now=T0) == []
    assert recall(lessons, gene_id="gene_repair", signals=ELSEWHERE, now=T0) == []


def test_prompt_lines_fit_the_budget():
    repo = InMemoryLessons()
    for k in range(6):
        add(repo, inp(f"e{k}", "failed", failure_reasons=["x" * 150]), T0 + timedelta(days=k))
    now = T0 + timedelta(days=9)
    lines = lessons_for_prompt(repo.list_lessons(), gene_id="gene_repair", signals=SIG, now=now, budget_chars=700)
    assert sum(len(x) + 1 for x in lines) <= 700
    # newest first; the sixth failure in a row weighs the most (adjustment 10)
    assert lines[0].startswith("vivid memory from 4 days ago: gene_repair failed on")
    assert len(lines) == 3 and lines[-1].endswith("...")
    assert within_budget(["a" * 50, "b" * 50], 60) == ["a" * 50]  # too little room to clip the second
    assert within_budget(["a" * 500], 100) == ["a" * 96 + "..."]


@pytest.mark.parametrize("age, text", [
    (timedelta(seconds=20), "just now"), (timedelta(minutes=1), "1 minute ago"), (timedelta(minutes=59), "59 minutes ago"),
    (timedelta(hours=3), "3 hours ago"), (timedelta(hours=30), "yesterday"), (timedelta(days=3), "3 days ago"),
    (timedelta(days=9), "last week"), (timedelta(days=22), "3 weeks ago"), (timedelta(days=45), "last month"),
    (timedelta(days=100), "3 months ago"), (timedelta(days=800), "2 years ago"), (timedelta(days=-1), "just now"),
])
def test_human_relative_time(age, text):
    assert humanize_age(T0 - age, T0) == text


@pytest.mark.parametrize("strength, label", [(0.3, "fading memory"), (1.0, "faint memory"), (2.5, "memory"),
                                             (5.0, "strong memory"), (12.0, "vivid memory")])
def test_strength_labels(strength, label):
    assert strength_label(strength) == label


# ------------------------------------------------------------------ audited delete


def test_delete_is_audited_and_needs_a_reason():
    repo = InMemoryLessons()
    keep = add(repo, inp("e1", files_changed=1), T0)
    gone = add(repo, inp("e2", "failed", failure_reasons=["wrong"]), T0 + timedelta(hours=1))
    with pytest.raises(LessonError, match="needs a reason"):
        repo.delete_lesson(gone.id, who="ana", why="  ", at=T0)
    with pytest.raises(LessonError, match="no lesson with id nope"):
        repo.delete_lesson("nope", who="ana", why="typo", at=T0)
    assert len(repo.list_lessons()) == 2  # a refused delete deletes nothing
    record = repo.delete_lesson(gone.id, who="ana", why="the failure was the CI runner, not the gene",
                                at=T0 + timedelta(days=1))
    assert [x.id for x in repo.list_lessons()] == [keep.id]
    assert repo.list_deletions() == [record]
    assert (record.deleted_by, record.reason, record.deleted_at) == (
        "ana", "the failure was the CI runner, not the gene", T0 + timedelta(days=1))
    assert record.lesson == gone  # the deleted content, whole
    with pytest.raises(LessonError, match="append-only"):
        repo.append_lesson(gone)  # a deleted id is not reused


def test_a_persons_note_stands_beside_the_cycle_lesson():
    repo = InMemoryLessons()
    cycle = add(repo, inp("e1", files_changed=1), T0)
    note = add(repo, inp("e1", person_verdict="not_helpful", note="it hid the error instead of fixing it"),
               T0 + timedelta(hours=2))
    assert note.category is LessonCategory.person and note.stance is Stance.fails and note.supersedes is None
    assert note.strength_adjustment == 4.0 and "it hid the error instead of fixing it" in note.content
    assert note.conflicts_with == []  # the same event: not a contradiction between two experiences
    later = add(repo, inp("e2", files_changed=1), T0 + timedelta(hours=3))
    assert later.conflicts_with == [note.id]  # but "fixed" after a person said it was not helpful is one
    shown = lessons_for_prompt(repo.list_lessons(), gene_id="gene_repair", signals=SIG, now=T0 + timedelta(hours=4))
    assert len(shown) == 3 and any("a person marked gene_repair's change (e1)" in x for x in shown)
    assert cycle.id in {x.id for x in heads(repo.list_lessons())}
