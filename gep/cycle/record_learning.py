"""What a finished cycle teaches, and what people tell: feedback signals (seed 003) and lessons (seed 004).

After every cycle that ran (success, failed, empty, abandoned) a lesson on its gene and situation is appended,
and an empty or abandoned cycle, or one whose change failed its checks and was rolled back, is an implicit
``ignored`` for its gene. Outcomes recorded outside the stages
(a pending cycle abandoned by the next one, a crashed cycle recovered) are caught up at the next cycle's
start, as are people's ``git revert`` of GEP commits (``not_helpful``). A person's verdict (``gep feedback``,
the feedback flow, the review form) is an explicit signal with its note, and a lesson of its own
(gep/learning/human_verdicts.py).

The prompt recalls lessons for the selected gene and signals (recency and strength, within a budget) and,
when a topic's unresolved conflicts reach the threshold, shows them side by side and asks for a synthesis;
the lesson written after that cycle names them (``meta.synthesis_of``), which marks them resolved.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime

from pydantic import BaseModel, Field

from gep.core.learning_switch import learning_switch
from gep.core.models import EvolutionEvent, Gene
from gep.cycle.context import CycleContext
from gep.cycle.fixes import mark_read, remember_commit
from gep.cycle.solidify import REJECTED_IN_REVIEW
from gep.learning.attribution import is_host_failure
from gep.learning.avoid import avoid_lines
from gep.learning.feedback import (
    FeedbackError,
    FeedbackSignal,
    RevertFound,
    find_reverts,
    implicit_signal,
    outcome_observation,
    revert_signal,
)
from gep.learning.human_verdicts import person_lesson
from gep.learning.lessons import (
    Lesson,
    LessonCategory,
    LessonInput,
    build_lesson,
    recall,
    record_lesson,
    synthesis_request,
    within_budget,
)
from gep.learning.lessons_by_problem import merge_recalled, recall_problem
from gep.learning.similar_problems import similar_fixes
from gep.store import Store

LEARNED = ("success", "failed", "empty", "abandoned")  # outcomes a gene is judged by (interrupted is not its doing)
OUTCOME_LESSONS = {LessonCategory.success, LessonCategory.failure, LessonCategory.empty, LessonCategory.abandoned}
CATCH_UP_EVENTS = 20  # recent events checked for an outcome nobody learned from yet
REVERT_SCAN = "learning.revert_scan"  # state key: the head up to which reverts were looked for
VALIDATION_SUMMARY_CHARS = 300
SIMILAR_EVENTS = 200  # recent cycles searched for fixes of similar problems


# ------------------------------------------------------------------ outcomes


def _validation_summary(store: Store, event: EvolutionEvent) -> str:
    report = store.get_validation_report(event.validation_report_id) if event.validation_report_id else None
    if report is None:
        return ""
    if report.skipped:
        return f"not run ({report.skipped})"
    parts = []
    for r in report.results:
        tail = failing_lines(r.stderr or r.stdout)
        parts.append(f"{r.cmd}: {'ok' if r.ok else 'FAILED'}" + ("" if r.ok or not tail else f" ({tail})"))
    return "; ".join(parts)[:VALIDATION_SUMMARY_CHARS]


_FAILING = re.compile(r"^(?:E\s|FAILED\b|ERROR\b|Traceback|\w*(?:Error|Exception)\b|assert\b)")


def failing_lines(output: str, most: int = 3) -> str:
    """What the validation said went wrong (pytest's ``E`` lines, ``FAILED`` lines, exceptions), else its last
    line: what the next agent on this problem should read."""
    lines = [x.strip() for x in output.strip().splitlines() if x.strip()]
    hits = list(dict.fromkeys(x for x in lines if _FAILING.match(x)))
    return " | ".join(hits[-most:]) if hits else (lines[-1] if lines else "")


def _model_summary(event: EvolutionEvent) -> str:
    """What the agent said it did (prompt mode's "prompt written to ..." is not a summary of a change)."""
    result = event.meta.mutator_result
    return result.summary if result is not None and result.status != "awaiting_changes" else ""


def learn_outcome(store: Store, event: EvolutionEvent, now: datetime) -> None:
    """The lesson of a finished cycle, and the implicit signal its outcome gives (empty, abandoned, rolled back)."""
    if event.outcome.status not in LEARNED or is_host_failure(event):  # the host's failure teaches nothing
        return
    if REJECTED_IN_REVIEW in (event.meta.failure_reasons or []):
        return  # the reviewer's not_helpful and note are the verdict: no implicit 'ignored', no failure lesson
    gene = event.gene_id
    observation = outcome_observation(event.outcome.status, event.is_empty_cycle)
    signal = implicit_signal(event_id=event.id, gene_id=gene, signals=event.signals, observation=observation,
                             at=now) if observation else None
    if signal is not None:
        store.add_feedback(signal)
    if gene is None:
        return
    m = event.meta
    # a synthesis was asked for: it is one only when the change was made and checked (not abandoned, not empty)
    synthesis = list(m.synthesis_of or []) if event.outcome.status in ("success", "failed") else []
    inp = LessonInput(event_id=event.id, gene_id=gene, signals=event.signals, outcome=event.outcome.status,
                      failure_reasons=list(m.failure_reasons or []), validation_summary=_validation_summary(store, event),
                      model_summary=_model_summary(event), files_changed=event.blast_radius.files,
                      files=list(m.changed_files or []), change=m.change_excerpt or "",
                      synthesis_of=synthesis)
    record_lesson(store, build_lesson(inp, store.list_lessons(gene), now))


def learn_from_cycle(ctx: CycleContext, event: EvolutionEvent | None) -> None:
    """The record stage: what this cycle's outcome teaches, and what its commit addressed."""
    if event is None:
        return
    learn_outcome(ctx.store, event, ctx.clock())
    remember_commit(ctx, event)
    mark_read(ctx, event)


def catch_up(ctx: CycleContext) -> None:
    """Outcomes recorded outside the stages (abandoned by ``--abandon-pending``, recovered after a crash)."""
    events = [e for e in ctx.store.recent_events(CATCH_UP_EVENTS)
              if e.outcome.status in LEARNED and e.genes_used and e.id != ctx.event_id]
    known = ctx.store.lessons_of_events([e.id for e in events])
    for event in events:
        # a synthesis is the lesson of its cycle's outcome too: learning it again would append one per cycle
        if not (OUTCOME_LESSONS | {LessonCategory.synthesis}) & {LessonCategory(c) for c in known.get(event.id, [])}:
            learn_outcome(ctx.store, event, ctx.started_at)


# ------------------------------------------------------------------ people


class RevertScan(BaseModel):
    head: str | None = None


def scan_reverts(ctx: CycleContext) -> list[FeedbackSignal]:
    """People's reverts of GEP commits since the last scan: ``not_helpful`` for the reverted cycle's gene."""
    head = ctx.repo.head()
    seen = ctx.store.get_state(REVERT_SCAN, RevertScan) or RevertScan()
    if seen.head == head:
        return []
    try:
        found = find_reverts(ctx.repo.path, since=seen.head)
    except FeedbackError:  # the last scanned head is gone (history rewritten): look again (ids dedupe)
        found = find_reverts(ctx.repo.path)
    added = [s for r in found if (s := record_revert(ctx.store, r, ctx.started_at)) is not None]
    ctx.store.set_state(REVERT_SCAN, RevertScan(head=head))
    return added


def record_revert(store: Store, revert: RevertFound, now: datetime) -> FeedbackSignal | None:
    """A person's revert of a cycle's commit: ``not_helpful`` for its gene and a lesson with the revert's words
    (None when the signal was recorded already: a revert counts once, whoever finds it first)."""
    event = store.get_event(revert.event_id)
    if event is None or event.gene_id is None:
        return None
    signal = revert_signal(revert, gene_id=event.gene_id, signals=event.signals)
    if signal is None or not store.add_feedback(signal):
        return None
    note = f"reverted in {revert.revert_sha[:12]} by {signal.author}: {signal.note or ''}".strip()
    person_lesson(store, event, "not_helpful", note, now)
    return signal


# ------------------------------------------------------------------ the prompt


class PromptMemory(BaseModel):
    """What the prompt is told from the lessons: recalled lines (with their ids), and a synthesis request."""

    lines: list[str] = Field(default_factory=list)
    lesson_ids: list[str] = Field(default_factory=list)
    # the try (event) each line / each recalled lesson tells of, "" for none: the prompt names a try the recent
    # outcomes show once, there (a person's lesson keeps its note: "")
    line_events: list[str] = Field(default_factory=list)
    lesson_events: list[str] = Field(default_factory=list)
    synthesis: str = ""
    synthesis_of: list[str] = Field(default_factory=list)


def _approach(store: Store, event: EvolutionEvent) -> str:
    """What a fix did, in a line: its capsule's summary (its commit's subject), else the agent's own; then the
    change itself (meta.change_excerpt), so the next agent is told the change that worked (issue 41)."""
    capsule = store.get_capsule(event.capsule_id) if event.capsule_id else None
    said = (capsule.summary if capsule is not None else "") or _model_summary(event)
    change = event.meta.change_excerpt or ""
    return f"{said} ({change})" if said and change else said or change


def _try_of(lesson: Lesson) -> str:
    """The cycle a lesson tells the story of, when the recent outcomes can tell it instead ("" for a person's
    lesson, whose note only it carries, and a synthesis)."""
    return "" if lesson.category in (LessonCategory.person, LessonCategory.synthesis) else lesson.event_id or ""


def recall_for_prompt(ctx: CycleContext, gene: Gene, signals: Sequence[str]) -> PromptMemory:
    s, now = ctx.settings, ctx.started_at
    use = learning_switch(s)
    # the gene's own lessons (tries older than the recent outcomes, conflicts to synthesise) are experimental
    # (issue 41: no effect beside the outcome lines); a person's note and the avoid lines are not
    lessons = ctx.store.list_lessons(gene.id) if use.on("lessons") else []
    recalled = recall(lessons, gene_id=gene.id, signals=signals, now=now, limit=s.lesson_limit,
                      recency_weight=s.lesson_recency_weight)
    # what was tried on this problem by any gene comes first (gep/learning/lessons_by_problem.py); problem memory
    # off (experimental, issue 41), a person's word on this problem still does, whichever gene is picked
    every = [x for x in ctx.store.list_lessons() if use.on("problem_memory") or x.category == LessonCategory.person]
    problem = recall_problem(every, signals=signals, now=now, limit=s.lesson_limit)
    recalled = merge_recalled(problem, recalled, s.lesson_limit)
    avoid = avoid_lines(ctx.store, signals) if use.on("avoid") else []  # short "do not" lines first (gep/learning/avoid.py)
    # then what worked on similar problems elsewhere in the workspace (gep/learning/similar_problems.py)
    similar = similar_fixes(ctx.store.recent_events(SIMILAR_EVENTS), signals, lambda e: _approach(ctx.store, e)) \
        if use.on("problem_memory") else []
    lines = within_budget([*avoid, *(r.text for r in recalled), *similar], s.lesson_prompt_chars)
    shown = recalled[:max(0, len(lines) - len(avoid))]
    tries = [_try_of(r.lesson) for r in shown]
    request = synthesis_request(lessons, gene_id=gene.id, signals=signals, now=now,
                                threshold=s.lesson_synthesis_threshold)
    return PromptMemory(lines=lines, lesson_ids=[r.lesson.id for r in shown], lesson_events=tries,
                        line_events=([""] * len(avoid) + tries + [""] * len(lines))[:len(lines)],
                        synthesis=request.text if request else "",
                        synthesis_of=request.source_ids if request else [])
