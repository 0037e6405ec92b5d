"""The typed values of what a workspace learned, as the store keeps them (issue 27: the store keeps core types).

Feedback signals, lessons and their deletions, resolutions of verified fixes, gene statuses, distillation
runs, and the memory graph's situation summaries (behavioural signals are gep/core/behavior_signal.py, and a
fix's file marks gep.core.records.FileMark: both are read without gep.core.models). Values only, so that the store reads and
writes them without importing what computes them: the arithmetic over them stays in gep.learning.feedback,
gep.learning.lessons, gep.learning.resolved, gep.genes.eligibility, gep.genes.distiller and gep.learning.memory_graph, which import these names back
(every caller reads them where it did).

Core level: imports nothing of gep but errors, models, records and sanitize.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, Field, computed_field, model_validator

from gep.core.errors import GepError
from gep.core.models import DistillAnalysis, EvolutionEvent, Gene
from gep.core.records import FileMark
from gep.core.sanitize import redact


class FeedbackKind(StrEnum):
    used = "used"
    ignored = "ignored"
    helpful = "helpful"
    not_helpful = "not_helpful"


class Observation(StrEnum):
    """What a later cycle (or a person) saw about an earlier cycle of a gene."""

    fix_verified = "fix_verified"  # the code that failed ran again without the fix's problem
    fix_did_not_hold = "fix_did_not_hold"  # a success whose trigger came back
    ended_empty = "ended_empty"  # the gene was selected and the cycle changed nothing
    ended_abandoned = "ended_abandoned"
    rolled_back = "rolled_back"  # the gene's change failed its checks and was discarded: abandoned too
    reverted = "reverted"  # a person reverted the cycle's commit
    person = "person"  # explicit helpful / not_helpful


class FeedbackSignal(BaseModel):
    """One feedback signal about the gene an event used, in that event's signal situation."""

    id: str
    gene_id: str
    event_id: str | None = None
    kind: FeedbackKind
    confidence: float = Field(ge=0.0, le=1.0)
    origin: Observation
    situation: list[str] = Field(default_factory=list)  # normalised situation signals, sorted
    note: str | None = None
    author: str | None = None
    created_at: datetime


class LessonError(GepError):
    """A lesson operation that cannot be done (unknown id, a delete without a reason, a rewrite)."""


def lesson_exists(lesson_id: str) -> LessonError:
    """The refusal of a second write of a lesson id (stored, or deleted: ids are never reused)."""
    return LessonError(f"lesson {lesson_id} exists: lessons are append-only (write a new one)")


class LessonCategory(StrEnum):
    success = "success"  # committed, not yet verified
    failure = "failure"
    empty = "empty"
    abandoned = "abandoned"
    fix_verified = "fix_verified"
    fix_did_not_hold = "fix_did_not_hold"
    person = "person"  # a person's verdict and note
    synthesis = "synthesis"


class Stance(StrEnum):
    works = "works"
    fails = "fails"
    neutral = "neutral"


class Lesson(BaseModel):
    id: str
    topic: str
    gene_id: str
    situation: list[str] = Field(default_factory=list)  # normalised situation signals (for similarity)
    category: LessonCategory
    stance: Stance = Stance.neutral
    content: str
    event_id: str | None = None
    salience_spent: float = Field(default=1.0, gt=0.0)
    strength_adjustment: float = Field(default=1.0, ge=0.1, le=10.0)
    confidence: float = Field(default=0.5, ge=0.0, le=1.0)
    importance: float = Field(default=0.5, ge=0.0, le=1.0)
    novelty: float = Field(default=0.5, ge=0.0, le=1.0)
    created_at: datetime
    supersedes: str | None = None
    conflicts_with: list[str] = Field(default_factory=list)
    synthesis_source_ids: list[str] = Field(default_factory=list)
    conflict_resolved: bool = False
    resolved_by: str | None = None  # the synthesis lesson that resolved this one's conflicts

    @computed_field  # type: ignore[prop-decorator]
    @property
    def strength(self) -> float:
        return round(self.salience_spent * self.strength_adjustment, 6)


class LessonDeletion(BaseModel):
    """The audit record of a deleted lesson: nothing a person or a cycle wrote disappears untraced."""

    lesson_id: str
    deleted_by: str
    deleted_at: datetime
    reason: str
    lesson: Lesson  # the deleted content, whole


def deletion_record(lesson: Lesson, *, who: str, why: str, at: datetime) -> LessonDeletion:
    if not why or not why.strip():
        raise LessonError(f"deleting lesson {lesson.id} needs a reason (--reason TEXT)")
    if not who or not who.strip():
        raise LessonError(f"deleting lesson {lesson.id} needs to say who deletes it")
    return LessonDeletion(lesson_id=lesson.id, deleted_by=redact(who.strip()), deleted_at=at,
                          reason=redact(why.strip()), lesson=lesson.model_copy(deep=True))


FixStatus = Literal["pending", "verified", "did_not_hold"]


# the signals that name one problem (an error line, a request), as against generic ones (log_error ...):
# a fix is judged on these first (gep/learning/resolved.py); `gep history` names them
SPECIFIC_PREFIXES = ("errsig:", "recurring_errsig", "user_feature_request:", "user_improvement_suggestion:")


def is_specific(signal: str) -> bool:
    return signal.startswith(SPECIFIC_PREFIXES)


class Resolution(BaseModel):
    """What a committed fix addressed, and where the logs stood when it was committed."""

    event_id: str
    gene_id: str | None = None
    signals: list[str]
    commit_sha: str
    committed_at: datetime
    files: list[FileMark] = Field(default_factory=list)
    # trigger errors whose code the change did not touch (gep/learning/fix_credit.py): never verified by it
    missed: list[str] = Field(default_factory=list)
    credited: list[str] = Field(default_factory=list)  # errors it touched that did not trigger the cycle
    rerun: list[str] = Field(default_factory=list)  # failing tests its own validation ran again and passed
    # the functions the change touched: a problem line written after it that names one of them and was never
    # logged before is the problem in another shape (a swallowed error's warning), not a fix
    touched: list[str] = Field(default_factory=list)
    touched_files: list[str] = Field(default_factory=list)  # the files it changed (a person's correction names them)
    reshaped: list[str] = Field(default_factory=list)  # those new problem lines (identities), once judged
    status: FixStatus = "pending"
    checked_at: datetime | None = None


class GeneStatusChange(BaseModel):
    action: Literal["retire", "restore"]
    reason: str | None = None
    at: datetime


class GeneStatus(BaseModel):
    """A gene's standing in one workspace's pool (the store keeps it per workspace: genes are fleet-wide, retiring
    one is a workspace's verdict). History is kept, never rewritten."""

    gene_id: str
    retired: bool = False
    reason: str | None = None
    changed_at: datetime | None = None
    history: list[GeneStatusChange] = Field(default_factory=list)


class DistillRun(BaseModel):
    """One distillation run as logged: kept (a gene), rejected (with the reasons) or skipped (why)."""

    at: datetime
    status: Literal["kept", "rejected", "skipped"]
    reasons: list[str] = Field(default_factory=list)  # why skipped / why refused
    repairs: list[str] = Field(default_factory=list)  # what was fixed in the proposal
    notes: list[str] = Field(default_factory=list)  # e.g. Claude unavailable, deterministic synthesis used
    synthesis: Literal["claude", "deterministic"] | None = None
    data_hash: str | None = None
    capsule_count: int = 0
    gene_id: str | None = None
    gene: Gene | None = None  # the kept gene, or the refused one after repairs (for the record)
    analysis: DistillAnalysis | None = None

    @property
    def attempted(self) -> bool:
        return self.status != "skipped"


def parse_at(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        ts = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return ts if ts.tzinfo else ts.replace(tzinfo=UTC)


class SituationSummary(BaseModel):
    """What events say about one gene in one signal situation, folded into counts and decayed sums.

    The memory graph gives the same advice from a summary as from the events it folds, so the store can
    prune old events and keep their summaries (gep/store/graph_history.py). Decayed sums are kept as of ``ref_at``:
    a dated outcome weighs ``0.5 ** ((ref_at - at) / half_life)`` there, and at any later ``now`` every one
    of them has decayed by the same factor, so one multiplication ages the whole sum. Outcomes without a
    time weigh 1 at any age (as :func:`decay_weight`). Exact for outcomes stamped before ``ref_at`` and a
    ``now`` not before it; an outcome stamped after ``ref_at`` (a clock ahead) decays from ``ref_at`` on.
    """

    key: str  # compute_signal_key of the situation signals
    signals: list[str]  # the situation's normalised signals, for similarity
    gene_id: str
    success: int = 0
    failed: int = 0
    empty: int = 0
    last_at: str | None = None  # newest dated outcome (ISO-8601, full precision)
    ref_at: str | None = None
    edge_success: float = 0.0  # EDGE_HALF_LIFE_DAYS
    edge_fail: float = 0.0  # failures and empties alike
    prior_success: float = 0.0  # GENE_PRIOR_HALF_LIFE_DAYS
    prior_fail: float = 0.0
    undated_success: int = 0
    undated_fail: int = 0
    # selection's evidence window (issue 15): the newest EVIDENCE_WINDOW outcomes as (success, at), oldest first,
    # and the older ones' sums (decayed as the edge sums, faded by EVIDENCE_RETENTION per newer outcome beyond the
    # window); see :func:`window_evidence`
    recent: list[tuple[bool, str | None]] = Field(default_factory=list)
    faded_success: float = 0.0
    faded_fail: float = 0.0
    faded_undated_success: float = 0.0
    faded_undated_fail: float = 0.0
    # the kinds of its errors (gep/learning/problem_key.py ``error_kind``: exception class and message shape), so
    # a gene's record here counts, weighed below, on another problem of a kind (empty: stored before kinds)
    kinds: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _legacy(self) -> SituationSummary:
        """A summary stored before the window existed: its outcomes count as faded ones, unfaded (not lost)."""
        if self.total and not ({"recent", "faded_success", "faded_fail"} & self.model_fields_set):
            self.faded_success, self.faded_fail = self.edge_success, self.edge_fail
            self.faded_undated_success, self.faded_undated_fail = self.undated_success, self.undated_fail
        return self

    @property
    def total(self) -> int:
        return self.success + self.failed + self.empty


class MemoryHistory(BaseModel):
    """The memory graph's whole input as the store keeps it: summaries of folded events, then the events
    recorded since (oldest first). Together they stand for every event the workspace recorded."""

    summaries: list[SituationSummary] = Field(default_factory=list)
    events: list[EvolutionEvent] = Field(default_factory=list)


NOT_JUDGED = "not yet judged"  # a committed fix nothing ran after yet: no verdict until something does


def fix_label(meta_verdict: str | None, status: str, delivery: str | None, committed: bool) -> str:
    """A cycle's fix as people read it (`gep history`, `gep status`): verified, did not hold, not landed (kept on
    its own branch: nothing the agent runs has it yet), not yet judged, or "-" for no committed fix."""
    if meta_verdict:
        return meta_verdict.replace("_", " ")
    if delivery == "kept" and committed:
        return "not landed"
    return NOT_JUDGED if status == "success" and committed else "-"
