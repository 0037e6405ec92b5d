"""Lessons: an append-only memory of what was tried and what happened (seed 004, insights).

After each cycle a :class:`Lesson` is appended on a topic, the gene and the signal situation it ran in
(``<gene id>@<signal key>``). Nothing is overwritten: a later lesson about the same event (its fix was
verified, or did not hold) *supersedes* the earlier one, which stays. A lesson that says the opposite of the
latest lesson from another event on the same topic ("gene X fixes this" / "gene X failed at this")
records ``conflicts_with``. When unresolved conflicts on a topic reach a threshold (default 3), the next
cycle on it is shown them side by side and asked for a synthesis; the lesson written after that cycle lists
``synthesis_source_ids``, and those lessons are marked resolved (the one flag set on an existing row, as in
the seed). Deleting a lesson is exceptional and audited (who, when, why, the deleted content).

``strength = salience_spent x strength_adjustment``: the attention the cycle spent (1 + 0.5 for each kind of
evidence it produced: changed files, validation output, failure reasons, the model's summary) times an
adjustment in [0.1, 10]: a failure after repeated attempts and a first verified fix weigh more, routine
outcomes (an unverified success, an empty cycle) less.

Pure: lessons and ``now`` in, lessons and prompt text out. "The same topic" is the memory graph's
similarity rule (same gene, Jaccard of the situations >= ``SIGNAL_KEY_JACCARD_MIN``), so an error line
whose numbers changed is still the same topic.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime
from typing import Literal, Protocol

from pydantic import BaseModel, Field

from gep.core import constants
from gep.core.learned import Lesson as Lesson
from gep.core.learned import LessonCategory as LessonCategory
from gep.core.learned import LessonDeletion as LessonDeletion
from gep.core.learned import LessonError as LessonError
from gep.core.learned import Stance as Stance
from gep.core.learned import deletion_record as deletion_record
from gep.core.learned import lesson_exists as lesson_exists
from gep.core.sanitize import redact
from gep.learning.feedback import situation_key_signals
from gep.learning.memory_graph import compute_signal_key, jaccard, situation_signals

CONTENT_CHARS = 700
SITUATION_SHOWN_CHARS = 160
RECENCY_WEIGHT = constants.LESSON_RECENCY_WEIGHT
RECALL_LIMIT = constants.LESSON_RECALL_LIMIT
SYNTHESIS_THRESHOLD = constants.LESSON_SYNTHESIS_THRESHOLD
PROMPT_CHARS = constants.LESSON_PROMPT_CHARS


STANCE = {LessonCategory.success: Stance.works, LessonCategory.fix_verified: Stance.works,
          LessonCategory.failure: Stance.fails, LessonCategory.fix_did_not_hold: Stance.fails}


def lesson_topic(gene_id: str, signals: Sequence[str]) -> str:
    return f"{gene_id}@{compute_signal_key(situation_signals([str(s) for s in signals]))}"


def same_topic(lesson: Lesson, gene_id: str, situation: Sequence[str]) -> bool:
    return lesson.gene_id == gene_id and jaccard(lesson.situation, situation) >= constants.SIGNAL_KEY_JACCARD_MIN


def heads(lessons: Sequence[Lesson]) -> list[Lesson]:
    """Lessons no later lesson supersedes (the current understanding; the others stay as history)."""
    replaced = {x.supersedes for x in lessons if x.supersedes}
    return [x for x in lessons if x.id not in replaced]


# ------------------------------------------------------------------ building the lesson of a cycle


class LessonInput(BaseModel):
    """What a finished cycle (or a later verdict on it) tells about its gene in its situation."""

    event_id: str
    gene_id: str
    signals: list[str] = Field(default_factory=list)
    outcome: str  # success | failed | empty | abandoned | interrupted
    failure_reasons: list[str] = Field(default_factory=list)
    validation_summary: str = ""
    model_summary: str = ""
    files_changed: int = 0
    files: list[str] = Field(default_factory=list)  # the paths the change touched (shown: the approach tried)
    change: str = ""  # the change in a few lines (meta.change_excerpt): what was tried, named to the next agent
    fix_held: bool | None = None  # set when the lesson records the verification of the event's fix
    person_verdict: Literal["helpful", "not_helpful"] | None = None
    note: str | None = None
    synthesis_of: list[str] = Field(default_factory=list)  # the SynthesisRequest's source_ids, if one was shown


def _category(inp: LessonInput) -> LessonCategory:
    if inp.synthesis_of:
        return LessonCategory.synthesis
    if inp.person_verdict:
        return LessonCategory.person
    if inp.fix_held is not None:
        return LessonCategory.fix_verified if inp.fix_held else LessonCategory.fix_did_not_hold
    return {"success": LessonCategory.success, "empty": LessonCategory.empty,
            "abandoned": LessonCategory.abandoned}.get(inp.outcome, LessonCategory.failure)


def _stance(inp: LessonInput, cat: LessonCategory) -> Stance:
    if cat is LessonCategory.person:
        return Stance.works if inp.person_verdict == "helpful" else Stance.fails
    return STANCE.get(cat, Stance.neutral)


def _clip(text: str, n: int) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= n else flat[: n - 3].rstrip() + "..."


def _situation_shown(signals: Sequence[str]) -> str:
    return _clip(", ".join(situation_signals([str(s) for s in signals])) or "no signals", SITUATION_SHOWN_CHARS)


def _content(inp: LessonInput, cat: LessonCategory) -> str:
    g, where = inp.gene_id, _situation_shown(inp.signals)
    model = f" Model's summary: {inp.model_summary}" if inp.model_summary.strip() else ""
    validation = f" Validation: {inp.validation_summary}" if inp.validation_summary.strip() else ""
    reasons = "; ".join(inp.failure_reasons)
    # the change itself when it is known (a file name alone reads as "keep away from this file": issue 41)
    touched = (f" Changed: {inp.change}." if inp.change.strip()
               else f" Touched: {', '.join(inp.files[:5])}." if inp.files else "")
    text = {
        LessonCategory.success: f"{g} changed {inp.files_changed} file(s) for [{where}] and passed its checks "
                                f"(fix not verified yet).{touched}{model}{validation}",
        # what the next agent on this problem needs first: what was touched and what the checks said
        LessonCategory.failure: f"{g} failed on [{where}].{touched}{validation}{model} Reasons: "
                                f"{_clip(reasons or inp.outcome, 200)}",
        LessonCategory.empty: f"{g} changed nothing for [{where}].{model}",
        LessonCategory.abandoned: f"{g}'s cycle on [{where}] was abandoned before its change was checked.",
        LessonCategory.fix_verified: f"{g}'s fix for [{where}] held: the trigger was gone at the next cycle."
                                     f"{touched}{model}",
        LessonCategory.fix_did_not_hold: f"{g}'s fix for [{where}] did not hold: the trigger came back after the "
                                         f"commit.{touched}{model}",
        LessonCategory.person: f"a person marked {g}'s change ({inp.event_id}{'; ' + inp.change if inp.change else ''})"
                               f" on [{where}] {(inp.person_verdict or '').replace('_', ' ')}: {inp.note or 'no note'}",
        LessonCategory.synthesis: f"synthesis of {len(inp.synthesis_of)} conflicting lessons on {g} for [{where}]: "
                                  f"{inp.model_summary or reasons or inp.outcome}",
    }[cat]
    return _clip(redact(text), CONTENT_CHARS)


def _salience(inp: LessonInput) -> float:
    evidence = [inp.files_changed > 0, bool(inp.validation_summary.strip()), bool(inp.failure_reasons),
                bool(inp.model_summary.strip())]
    return 1.0 + 0.5 * sum(evidence)


def _adjustment(cat: LessonCategory, topic: Sequence[Lesson]) -> float:
    """Memorable outcomes weigh more, routine ones less (clamped to the seed's 0.1-10)."""
    if cat is LessonCategory.failure:
        # failures since this topic last worked: the second failure in a row weighs 4, the third 6, ...
        streak = 0
        for x in sorted(heads(topic), key=lambda x: x.created_at, reverse=True):
            if x.stance is Stance.works:
                break
            streak += x.stance is Stance.fails
        adj = 2.0 * (1 + streak) if streak else 1.0
    elif cat is LessonCategory.fix_verified:
        adj = 1.5 if any(x.category is LessonCategory.fix_verified for x in topic) else 5.0
    else:
        adj = {LessonCategory.success: 1.0, LessonCategory.empty: 0.3, LessonCategory.abandoned: 0.3,
               LessonCategory.fix_did_not_hold: 3.0, LessonCategory.person: 4.0,
               LessonCategory.synthesis: 6.0}[cat]
    return min(10.0, max(0.1, adj))


_CONFIDENCE = {LessonCategory.success: 0.6, LessonCategory.failure: 0.7, LessonCategory.empty: 0.4,
               LessonCategory.abandoned: 0.3, LessonCategory.fix_verified: 0.9,
               LessonCategory.fix_did_not_hold: 0.8, LessonCategory.person: 0.9, LessonCategory.synthesis: 0.7}


def _lesson_id(inp: LessonInput, cat: LessonCategory, now: datetime) -> str:
    raw = "\x1f".join([inp.event_id, inp.gene_id, cat.value, now.isoformat(), inp.note or ""])
    return "lsn_" + hashlib.sha256(raw.encode()).hexdigest()[:20]


def build_lesson(inp: LessonInput, existing: Sequence[Lesson], now: datetime) -> Lesson:
    """The lesson to append for ``inp``, linked to ``existing`` lessons (supersedes, conflicts_with)."""
    cat = _category(inp)
    stance = _stance(inp, cat)
    situation = situation_key_signals(inp.signals)
    own = [x for x in existing if x.gene_id == inp.gene_id]
    topic = [x for x in own if same_topic(x, inp.gene_id, situation)]
    current = heads(own)
    # a verdict on an event's fix updates that event's lesson; anything else stands beside it. A person's
    # lesson on the event is theirs, not the cycle's: a verdict never replaces it (their note stays recalled)
    supersedes = None if inp.fix_held is None or inp.person_verdict or inp.synthesis_of else next(
        (x.id for x in sorted(current, key=lambda x: x.created_at, reverse=True)
         if x.event_id == inp.event_id and x.category is not LessonCategory.person), None)
    conflicts: list[str] = []
    if stance is not Stance.neutral:
        topic_ids = {x.id for x in topic}
        others = [x for x in current if x.id in topic_ids and x.event_id != inp.event_id
                  and x.stance is not Stance.neutral]
        latest = max(others, key=lambda x: (x.created_at, x.id), default=None)
        # a contradiction of what the topic says now (its latest lesson from another event), once per flip
        if latest is not None and latest.stance is not stance:
            conflicts = [latest.id]
    repair = any(s.startswith(("errsig", "log_error", "recurring_")) for s in situation)
    importance = min(1.0, (0.7 if repair else 0.5) + (0.2 if cat in (LessonCategory.person,
                                                                    LessonCategory.fix_did_not_hold) else 0.0))
    return Lesson(
        id=_lesson_id(inp, cat, now), topic=lesson_topic(inp.gene_id, inp.signals), gene_id=inp.gene_id,
        situation=situation, category=cat, stance=stance, content=_content(inp, cat), event_id=inp.event_id,
        salience_spent=_salience(inp), strength_adjustment=_adjustment(cat, topic),
        confidence=_CONFIDENCE[cat], importance=round(importance, 3), novelty=round(1.0 / (1 + len(topic)), 3),
        created_at=now, supersedes=supersedes, conflicts_with=conflicts,
        synthesis_source_ids=list(dict.fromkeys(inp.synthesis_of)))


# ------------------------------------------------------------------ retrieval for the prompt


def humanize_age(then: datetime, now: datetime) -> str:
    """"3 days ago", "last week", "2 months ago": relative time, as the seed shows memories to a model."""
    s = (now - then).total_seconds()
    days = s / 86400.0

    def n(k: int, unit: str) -> str:
        return f"{k} {unit}{'' if k == 1 else 's'} ago"

    if s < 60:
        return "just now"
    if s < 3600:
        return n(int(s // 60), "minute")
    if s < 86400:
        return n(int(s // 3600), "hour")
    if days < 2:
        return "yesterday"
    if days < 7:
        return n(int(days), "day")
    if days < 14:
        return "last week"
    if days < 30:
        return n(int(days // 7), "week")
    if days < 60:
        return "last month"
    if days < 365:
        return n(int(days // 30), "month")
    return n(int(days // 365), "year")


def strength_label(strength: float) -> str:
    if strength >= 8.0:
        return "vivid memory"
    if strength >= 4.0:
        return "strong memory"
    if strength >= 1.5:
        return "memory"
    if strength >= 0.6:
        return "faint memory"
    return "fading memory"


def marker(lesson: Lesson, now: datetime) -> str:
    return f"{strength_label(lesson.strength)} from {humanize_age(lesson.created_at, now)}"


class Recalled(BaseModel):
    lesson: Lesson
    why: Literal["recent", "strong"]
    text: str  # "strong memory from 3 days ago: ..."


def recall(lessons: Sequence[Lesson], *, gene_id: str, signals: Sequence[str], now: datetime,
           limit: int = RECALL_LIMIT, recency_weight: float = RECENCY_WEIGHT) -> list[Recalled]:
    """The most recent ``int(limit x recency_weight)`` lessons on the topic, then the strongest of the rest
    (as the seed's retrieval). Superseded lessons are left out: their update says what is known now."""
    situation = situation_key_signals(signals)
    pool = [x for x in heads(lessons) if same_topic(x, gene_id, situation)]
    n_recent = int(max(0, limit) * min(1.0, max(0.0, recency_weight)))
    recent = sorted(pool, key=lambda x: (x.created_at, x.id), reverse=True)[:n_recent]
    taken = {x.id for x in recent}
    strong = sorted((x for x in pool if x.id not in taken), key=lambda x: (-x.strength, -x.created_at.timestamp(),
                                                                             x.id))[: max(0, limit - n_recent)]
    return [Recalled(lesson=x, why=why, text=f"{marker(x, now)}: {x.content}")
            for why, group in (("recent", recent), ("strong", strong)) for x in group]


def within_budget(lines: Sequence[str], budget_chars: int) -> list[str]:
    """Lines in order while they fit in ``budget_chars`` (one newline each); a line that does not fit is
    clipped when a useful part of it (80+ characters) fits, and nothing after it is added."""
    out: list[str] = []
    used = 0
    for line in lines:
        room = budget_chars - used - 1
        if len(line) <= room:
            out.append(line)
            used += len(line) + 1
            continue
        if room >= 80:
            out.append(line[: room - 3].rstrip() + "...")
        break
    return out


def lessons_for_prompt(lessons: Sequence[Lesson], *, gene_id: str, signals: Sequence[str], now: datetime,
                       budget_chars: int = PROMPT_CHARS, limit: int = RECALL_LIMIT,
                       recency_weight: float = RECENCY_WEIGHT) -> list[str]:
    """What replaces ``cycle.lessons()``: recalled lessons as prompt lines, within the budget."""
    got = recall(lessons, gene_id=gene_id, signals=signals, now=now, limit=limit, recency_weight=recency_weight)
    return within_budget([r.text for r in got], budget_chars)


# ------------------------------------------------------------------ synthesis


class SynthesisRequest(BaseModel):
    gene_id: str
    topic: str
    source_ids: list[str]  # pass to LessonInput.synthesis_of for the lesson written after the cycle
    text: str  # the conflicting lessons side by side and the instruction, for the prompt


SYNTHESIS_INSTRUCTION = (
    "These lessons about the same gene in this situation contradict each other. Before changing anything, "
    "reconcile them: is one of them superseded, do they hold in different contexts, or does one explanation "
    "cover both? Say your synthesis in one or two sentences at the start of your summary.")


def unresolved_conflicts(lessons: Sequence[Lesson], gene_id: str, signals: Sequence[str]) -> list[Lesson]:
    situation = situation_key_signals(signals)
    return [x for x in heads(lessons) if x.conflicts_with and not x.conflict_resolved
            and same_topic(x, gene_id, situation)]


def synthesis_request(lessons: Sequence[Lesson], *, gene_id: str, signals: Sequence[str], now: datetime,
                      threshold: int = SYNTHESIS_THRESHOLD) -> SynthesisRequest | None:
    """When unresolved conflicts on the topic reach ``threshold``: both sides of each, oldest first."""
    conflicted = unresolved_conflicts(lessons, gene_id, signals)
    if len(conflicted) < max(1, threshold):
        return None
    by_id = {x.id: x for x in lessons}
    ids = {x.id for x in conflicted} | {c for x in conflicted for c in x.conflicts_with if c in by_id}
    sources = sorted((by_id[i] for i in ids), key=lambda x: (x.created_at, x.id))
    lines = [f"- [{x.stance.value}] {marker(x, now)} ({x.id}): {x.content}" for x in sources]
    return SynthesisRequest(gene_id=gene_id, topic=lesson_topic(gene_id, signals),
                            source_ids=[x.id for x in sources],
                            text=SYNTHESIS_INSTRUCTION + "\n" + "\n".join(lines))


# ------------------------------------------------------------------ persistence


class LessonLog(Protocol):
    """What writing a lesson needs (the quick writer of `gep feedback` has this much, the store all of
    :class:`LessonRepository`)."""

    def append_lesson(self, lesson: Lesson) -> None:
        """Add a new row; LessonError when the id exists (rows are never rewritten)."""
        ...

    def list_lessons(self, gene_id: str | None = None) -> list[Lesson]:
        """Lessons, oldest first."""
        ...

    def mark_conflicts_resolved(self, lesson_ids: Sequence[str], by: str) -> None:
        """Set ``conflict_resolved`` and ``resolved_by`` (the only change an existing row ever sees)."""
        ...


class LessonRepository(LessonLog, Protocol):
    """Where lessons are kept (the store backs it with a lessons table and an audit table)."""

    def delete_lesson(self, lesson_id: str, *, who: str, why: str, at: datetime) -> LessonDeletion:
        """Remove a lesson and keep the audit record (LessonError without a reason or for an unknown id)."""
        ...

    def list_deletions(self) -> list[LessonDeletion]: ...


def record_lesson(repo: LessonLog, lesson: Lesson) -> None:
    """Append a lesson; a synthesis also marks the lessons it reconciles as resolved."""
    repo.append_lesson(lesson)
    if lesson.synthesis_source_ids:
        repo.mark_conflicts_resolved(lesson.synthesis_source_ids, by=lesson.id)


class InMemoryLessons:
    def __init__(self) -> None:
        self._rows: dict[str, Lesson] = {}
        self._audit: list[LessonDeletion] = []

    def append_lesson(self, lesson: Lesson) -> None:
        if lesson.id in self._rows or any(d.lesson_id == lesson.id for d in self._audit):
            raise lesson_exists(lesson.id)
        self._rows[lesson.id] = lesson.model_copy(deep=True)

    def list_lessons(self, gene_id: str | None = None) -> list[Lesson]:
        rows = [r.model_copy() for r in self._rows.values() if gene_id is None or r.gene_id == gene_id]
        return sorted(rows, key=lambda r: (r.created_at, r.id))

    def mark_conflicts_resolved(self, lesson_ids: Sequence[str], by: str) -> None:
        for i in lesson_ids:
            if i in self._rows:
                self._rows[i] = self._rows[i].model_copy(update={"conflict_resolved": True, "resolved_by": by})

    def delete_lesson(self, lesson_id: str, *, who: str, why: str, at: datetime) -> LessonDeletion:
        if lesson_id not in self._rows:
            raise LessonError(f"no lesson with id {lesson_id}")
        record = deletion_record(self._rows[lesson_id], who=who, why=why, at=at)
        del self._rows[lesson_id]
        self._audit.append(record)
        return record

    def list_deletions(self) -> list[LessonDeletion]:
        return [d.model_copy(deep=True) for d in self._audit]
