"""Pydantic models of every GEP object.

Field names follow the GEP asset files exactly (snake_case), so files written by the reference
implementation validate here. Unknown fields are kept (``extra="allow"``) so that an import followed
by an export loses nothing.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictBool,
    StrictInt,
    StrictStr,
    TypeAdapter,
    ValidationError,
    model_serializer,
    model_validator,
)
from pydantic.functional_serializers import SerializerFunctionWrapHandler

from gep.core.asset_json import asset_json
from gep.core.config import RunLimits
from gep.core.records import (
    BehaviorRecord,
    CapsuleOriginRecord,
    FixCheckRecord,
    FixCreditRecord,
    GenePoolRecord,
    HistoryRecord,
    HostFailure,
    MutatorResult,
    PersonalityRecord,
    PromptSizes,
    ResolvedRecord,
    SelectorDecision,
    SourcesRecord,
    ValidationLine,
)
from gep.core.stored_path import StoredPath

SCHEMA_VERSION = "1.6.0"


class GepModel(BaseModel):
    """Base for asset models: keeps unknown fields so round-trips are lossless."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    def to_asset(self) -> dict[str, Any]:  # JSON edge: the asset file's object
        """The JSON object written to asset files: set fields and explicit nulls, unset Nones left out
        (the same object the store keeps, see gep/core/asset_json.py)."""
        return asset_json(self)


class Intent(StrEnum):
    repair = "repair"
    optimize = "optimize"
    innovate = "innovate"


class OutcomeStatus(StrEnum):
    success = "success"
    failed = "failed"
    empty = "empty"
    awaiting_changes = "awaiting_changes"
    abandoned = "abandoned"
    interrupted = "interrupted"
    running = "running"
    skipped = "skipped"


class RiskLevel(StrEnum):
    low = "low"
    medium = "medium"
    high = "high"


# ---------------------------------------------------------------- genes and capsules


class GeneConstraints(GepModel):
    max_files: int | None = None
    forbidden_paths: list[str] = Field(default_factory=list)
    # protected files (settings.protected_paths) this gene may rewrite; others may only be appended to
    editable_protected: list[str] | None = None


class TriggerFrequency(GepModel):
    """A gene with many successful capsules and the triggers they had most often (lower-cased)."""

    gene_id: str
    count: int
    avg_score: float
    top_triggers: list[str] = Field(default_factory=list)


class StrategyDrift(GepModel):
    """A gene whose first and last successful capsule summaries share few words."""

    gene_id: str
    similarity: float
    early_summary: str
    recent_summary: str


class CoverageGap(GepModel):
    """A signal seen in several events that no successful capsule's trigger covers."""

    signal: str
    frequency: int


class DistillAnalysis(GepModel):
    total_success: int = 0
    total_capsules: int = 0
    success_rate: float = 0.0
    high_frequency: list[TriggerFrequency] = Field(default_factory=list)
    strategy_drift: list[StrategyDrift] = Field(default_factory=list)
    coverage_gaps: list[CoverageGap] = Field(default_factory=list)


class GeneProvenance(GepModel):
    """Where a gene the engine wrote came from (kept in the gene's asset, so exports carry it)."""

    origin: Literal["distilled", "auto"]
    synthesis: str | None = None  # distilled: "claude" | "deterministic"
    source_gene_ids: list[str] = Field(default_factory=list)
    source_capsule_ids: list[str] = Field(default_factory=list)
    data_hash: str | None = None
    analysis: DistillAnalysis | None = None
    signal_key: str | None = None  # auto: the signal key the gene was built for


class Gene(GepModel):
    type: Literal["Gene"] = "Gene"
    id: str
    category: str = "repair"
    signals_match: list[str] = Field(default_factory=list)
    preconditions: list[str] = Field(default_factory=list)
    strategy: list[str] = Field(default_factory=list)
    constraints: GeneConstraints = Field(default_factory=GeneConstraints)
    validation: list[str] = Field(default_factory=list)
    summary: str | None = None
    provenance: GeneProvenance | None = None  # genes the engine distilled or built; None for authored genes
    schema_version: str | None = None
    asset_id: str | None = None


class BlastRadius(GepModel):
    files: int = 0
    lines: int = 0
    bytes: int | None = None  # bytes added + deleted (None on objects written before it was counted)


class Outcome(GepModel):
    # the enum whenever the value is one of ours; another tool's status still loads as a plain string
    status: Annotated[OutcomeStatus | str, Field(union_mode="left_to_right")]
    score: float = 0.0


class Capsule(GepModel):
    type: Literal["Capsule"] = "Capsule"
    id: str
    trigger: list[str] = Field(default_factory=list)
    gene: str | None = None
    summary: str = ""
    confidence: float = 0.0
    blast_radius: BlastRadius = Field(default_factory=BlastRadius)
    outcome: Outcome = Field(default_factory=lambda: Outcome(status="success", score=0.85))
    success_streak: int = 1
    diff: str | None = None
    commit: str | None = None
    schema_version: str | None = None
    asset_id: str | None = None


class FailedCapsule(GepModel):
    """A failed mutation, kept with its diff so later cycles can avoid repeating it.

    The reference writes these with ``type: "Capsule"`` and ``outcome.status == "failed"``.
    """

    type: Literal["Capsule"] = "Capsule"
    id: str
    gene: str | None = None
    trigger: list[str] = Field(default_factory=list)
    summary: str = ""
    outcome: Outcome = Field(default_factory=lambda: Outcome(status="failed", score=0.2))
    diff_snapshot: str = ""
    failure_reason: str = ""
    constraint_violations: list[str] = Field(default_factory=list)
    blast_radius: BlastRadius = Field(default_factory=BlastRadius)
    created_at: str | None = None
    schema_version: str | None = None
    asset_id: str | None = None


# ---------------------------------------------------------------- mutation and personality


class Mutation(GepModel):
    type: Literal["Mutation"] = "Mutation"
    id: str
    category: Intent
    trigger_signals: list[str] = Field(default_factory=list)
    target: str = ""
    expected_effect: str = ""
    risk_level: RiskLevel = RiskLevel.low


class PersonalityState(GepModel):
    type: Literal["PersonalityState"] = "PersonalityState"
    rigor: float = 0.7
    creativity: float = 0.35
    verbosity: float = 0.25
    risk_tolerance: float = 0.4
    obedience: float = 0.85


# ---------------------------------------------------------------- validation


class CommandResult(GepModel):
    cmd: str
    ok: bool
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    duration_ms: int = 0
    blocked_reason: str | None = None
    timed_out: bool = False
    sandbox: str | None = None  # "bwrap" or "none": what confined the command (gep/validation/sandbox.py)
    limits: list[str] | None = None  # the resource limits that applied, e.g. "processes 512 (cgroup pids)"
    # what the runner found, never read from the output's words (gep/validation/report_verdict.py):
    missing: str | None = None  # the program, or the `python -m` module, that resolved nowhere
    started: bool = True  # False: the program could not be started (the runner's "cannot start: ...")


class ValidationCommand(GepModel):
    """One entry of a reference-written report's ``commands`` (the reference stores objects, not strings)."""

    command: str = ""
    ok: bool = False
    stdout: str = ""
    stderr: str = ""


class ValidationReport(GepModel):
    type: Literal["ValidationReport"] = "ValidationReport"
    id: str
    gene_id: str | None = None
    # this engine writes command strings; reports imported from the reference hold ValidationCommand objects
    # required: a report that does not say what ran and whether it passed is never read as passing
    commands: list[str | ValidationCommand]
    results: list[CommandResult] = Field(default_factory=list)
    overall_ok: bool
    skipped: str | None = None  # why no command ran (an empty change, a constraint already failed)
    started_at: str | None = None
    finished_at: str | None = None
    sandbox: str | None = None  # "bwrap" or "none" (gep/validation/sandbox.py)
    schema_version: str | None = None
    asset_id: str | None = None


# ---------------------------------------------------------------- events


class EventMeta(BaseModel):
    """What a cycle records beside the GEP fields of its event.

    Every field is optional and left out of the stored JSON until set. Keys this version does not know are
    kept (``extra="allow"``), and a known key whose value another tool wrote in another shape (the
    reference's ``selector``, say) is kept as it was rather than refused: the event still loads, and dumps
    back the value it was given.
    """

    model_config = ConfigDict(extra="allow")

    at: StrictStr | None = None
    cycle: StrictInt | None = None
    seed: StrictInt | None = None
    holdout: StrictBool | None = None  # drawn into the holdout: ran without what was learned (unset: no draw)
    strategy: StrictStr | None = None
    selector: SelectorDecision | None = None
    mutation: Mutation | None = None
    personality: PersonalityRecord | None = None
    history: HistoryRecord | None = None
    capsule_reused: StrictStr | None = None
    capsule_origin: CapsuleOriginRecord | None = None  # whose capsule it was (a fleet's shared capsules)
    sources: SourcesRecord | None = None
    gene_pool: GenePoolRecord | None = None  # genes left out of selection here; the automatic gene
    behavior: BehaviorRecord | None = None  # behavioural signals captured and used (issue 17)
    flow_run_id: StrictStr | None = None
    solidify_flow_run_id: StrictStr | None = None
    recovered: list[str] | None = None  # crashed cycles this cycle's start recovered
    recovery: StrictStr | None = None  # set when recovery, not the cycle, recorded this outcome
    interrupted_at_stage: StrictStr | None = None
    prompt_sizes: PromptSizes | None = None
    mutator: StrictStr | None = None
    mutator_result: MutatorResult | None = None  # what the mutator reported, as it reported it
    failure_reasons: list[str] | None = None
    warnings: list[str] | None = None
    empty_cycle: StrictBool | None = None
    empty_reason: StrictStr | None = None
    fix_verdict: Literal["verified", "did_not_hold"] | None = None  # set by the next cycle (gep.learning.resolved)
    fix_credit: FixCreditRecord | None = None  # the problem a committed fix was credited to (gep/cycle/fixes.py)
    host_failure: HostFailure | None = None  # failed for a reason outside the change (gep/learning/attribution.py)
    # learning (gep/cycle/fixes.py, gep/cycle/record_learning.py): signals earlier fixes resolved or that came back, the verdicts
    # this cycle gave on earlier fixes, the lessons shown in its prompt and the conflicts it was asked to reconcile
    resolved: list[ResolvedRecord] | None = None
    live_again: list[ResolvedRecord] | None = None
    fix_checks: list[FixCheckRecord] | None = None
    lessons_recalled: list[str] | None = None
    synthesis_of: list[str] | None = None
    skip_reason: StrictStr | None = None  # a cycle that did not run (outcome "skipped"): why
    # solidify
    constraint_violations: list[str] | None = None
    constraint_warnings: list[str] | None = None
    blast_severity: StrictStr | None = None
    changed_files: list[str] | None = None
    validation: list[ValidationLine] | None = None
    validation_ok: StrictBool | None = None
    validation_artifacts_removed: list[str] | None = None
    validation_changed: list[str] | None = None
    canary_ok: StrictBool | None = None
    canary_skipped: StrictBool | None = None
    protocol_ok: StrictBool | None = None
    protocol_violations: list[str] | None = None
    commit: StrictStr | None = None
    branch: StrictStr | None = None
    diff_chars: StrictInt | None = None
    change_excerpt: StrictStr | None = None  # the change in a few lines (gep/cycle/change_excerpt.py)
    solidified_at: StrictStr | None = None
    # isolation (issue 13) and confinement (issue 20)
    sandbox: StrictStr | None = None  # what confined validation: "bwrap" or "none"
    delivery: Literal["landed", "kept"] | None = None  # landed on the branch, or kept on gep/<event>
    delivery_note: StrictStr | None = None  # why it was kept, or what it was rebased onto
    merge_command: StrictStr | None = None  # kept: the command that merges it
    refs_restored: list[str] | None = None  # refs the cycle changed, put back from the record
    rescued_patch: StrictStr | None = None  # a change nobody committed, saved as a patch
    rescue_command: StrictStr | None = None  # the `git apply` line that brings it back
    solidify_attempts: StrictInt | None = None  # prompt mode: how many times `gep solidify` ran
    not_run: StrictStr | None = None  # prompt mode: validation could not run here (what is missing, the fix)
    # what opening this cycle did first: dead cycles cleaned up (an index.lock removed, a clone's change saved),
    # unreadable run records moved aside, a pending cycle abandoned (and where its change is)
    start_notes: list[str] | None = None
    _foreign: dict[str, Any] = PrivateAttr(default_factory=dict)  # JSON edge: see _keep_foreign_values

    @model_validator(mode="before")
    @classmethod
    def _keep_foreign_values(cls, data: Any) -> Any:
        """A known key holding a value of another shape moves to ``_foreign`` (dumped back unchanged)."""
        if not isinstance(data, dict):
            return data
        foreign: dict[str, Any] = {}  # JSON edge: values written by other tools, kept as they were
        for name in cls.model_fields.keys() & data.keys():
            if data[name] is None:
                continue
            try:
                _meta_adapter(name).validate_python(data[name])
            except ValidationError:
                foreign[name] = data[name]
        if not foreign:
            return data
        return {**{k: v for k, v in data.items() if k not in foreign}, "__foreign__": foreign}

    @model_validator(mode="after")
    def _stash_foreign(self) -> EventMeta:
        extra = self.__pydantic_extra__ or {}
        self._foreign = extra.pop("__foreign__", None) or {}
        self.__pydantic_fields_set__.update(self._foreign)  # "set", so no dump leaves them out
        return self

    @model_serializer(mode="wrap")
    def _dump_foreign(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:  # JSON edge: foreign values
        data = handler(self)
        for name in type(self).model_fields.keys() - self.model_fields_set:
            if data.get(name) is None:  # never set: left out, as a dict without the key would be
                data.pop(name, None)
        data.update(self._foreign)
        return data

    def add_failure(self, reason: str) -> None:
        self.failure_reasons = [*(self.failure_reasons or []), reason]

    def add_warning(self, warning: str) -> None:
        self.warnings = [*(self.warnings or []), warning]


@functools.cache
def _meta_adapter(name: str) -> TypeAdapter[Any]:
    """The validator of one EventMeta field, built on first use: building all of them at import took a
    store-only command ~0.1 s of its start (bench/cli.py), and an event holds a few of them."""
    annotation = EventMeta.model_fields[name].annotation
    return TypeAdapter(Any if annotation is None else annotation)


class EvolutionEvent(GepModel):
    type: Literal["EvolutionEvent"] = "EvolutionEvent"
    id: str
    parent: str | None = None
    intent: Annotated[Intent | str, Field(union_mode="left_to_right")] = Intent.repair
    signals: list[str] = Field(default_factory=list)
    genes_used: list[str] = Field(default_factory=list)
    mutation_id: str | None = None
    personality_state: PersonalityState | None = None
    blast_radius: BlastRadius = Field(default_factory=BlastRadius)
    outcome: Outcome = Field(default_factory=lambda: Outcome(status=OutcomeStatus.running))
    capsule_id: str | None = None
    validation_report_id: str | None = None
    meta: EventMeta = Field(default_factory=EventMeta)
    schema_version: str | None = None
    asset_id: str | None = None

    @property
    def status(self) -> str:
        return self.outcome.status

    @property
    def gene_id(self) -> str | None:
        """The gene the cycle ran: the one place ``genes_used`` (the stored GEP list, one id at most when gep
        wrote it) is read as a gene."""
        return self.genes_used[0] if self.genes_used else None

    @property
    def used_gene(self) -> str:
        """``gene_id`` of an event known to have run a gene (feedback, approvals and verdicts are about such)."""
        gid = self.gene_id
        if gid is None:
            raise ValueError(f"{self.id} ran no gene")
        return gid

    @property
    def is_empty_cycle(self) -> bool:
        """Empty: flagged so, or a recorded 0-file/0-line blast radius (seed 002)."""
        if self.meta.empty_cycle is True:
            return True
        return self.blast_radius.files == 0 and self.blast_radius.lines == 0


def utc_now() -> datetime:
    return datetime.now(UTC)


def iso(ts: datetime) -> str:
    """ISO-8601 with milliseconds and a Z, as JavaScript's toISOString writes it."""
    return ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z"


# ---------------------------------------------------------------- cycle bookkeeping


class PreparedSuccess(BaseModel):
    """The success outcome saved before the commit: what recovery records if the process dies right after."""

    event: EvolutionEvent
    capsule: Capsule | None = None
    branch: str | None = None


class RunPending(BaseModel):
    """What finishing a cycle later needs: a prompt-mode cycle awaiting changes, or a commit in flight."""

    model_config = ConfigDict(extra="allow")

    event: EvolutionEvent | None = None
    gene: Gene | None = None
    mutation: Mutation | None = None
    review: bool = False
    branch: str | None = None
    solidify: PreparedSuccess | None = None
    # prompt mode: what widens what runs (allowlist, sandbox, timeouts ...), as read when the cycle started;
    # `gep solidify` uses these, never what gep.toml says by then
    limits: RunLimits | None = None


class CycleRun(BaseModel):
    """The "cycle running" record, written before anything of the cycle exists (its clone, its baseline).

    It is what crash recovery reads: where the workspace stood (``head_sha``), how the change is made
    (``mode``) and how far the cycle got. The git layer keeps its own records beside the clone
    (``.gep/worktrees/<event>.json``) and the in-place baseline (``.gep/inplace/<event>.json``).
    """

    # rows written before the git layer carry fields that no longer exist (stash, kept files): ignored
    model_config = ConfigDict(extra="ignore")

    event_id: str
    workspace: StoredPath
    head_sha: str  # the user's HEAD commit when the cycle started
    branch: str | None = None
    # clone: a model or an agent works in its own clone; in_place: prompt mode, a person works in their tree
    mode: Literal["clone", "in_place"] = "clone"
    awaited: bool = False  # in place: the cycle reached "awaiting changes" (a crash then loses nothing)
    stage: str = "started"
    status: Literal["running", "awaiting_changes", "closed"] = "running"
    pid: int | None = None
    started_at: str = Field(default_factory=lambda: iso(utc_now()))
    pending: RunPending = Field(default_factory=RunPending)
