"""Pydantic models of every GEP object.

Field names follow the GEP asset files exactly (snake_case), so files written by the reference
implementation validate here. Unknown fields are kept (``extra="allow"``) so that an import followed
by an export loses nothing.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = "1.6.0"


class GepModel(BaseModel):
    """Base for asset models: keeps unknown fields so round-trips are lossless."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    def to_asset(self) -> dict[str, Any]:
        """The JSON object written to asset files: set fields and explicit nulls, unset Nones left out
        (the same object the store keeps, see gep.store.asset_json)."""
        from gep.store import asset_json

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
    schema_version: str | None = None
    asset_id: str | None = None


class BlastRadius(GepModel):
    files: int = 0
    lines: int = 0
    bytes: int | None = None  # bytes added + deleted (None on objects written before it was counted)


class Outcome(GepModel):
    status: str
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
    sandbox: str | None = None  # "bwrap" or "none": what confined the command (gep/sandbox.py)
    limits: list[str] | None = None  # the resource limits that applied, e.g. "processes 512 (cgroup pids)"


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
    commands: list[str | ValidationCommand] = Field(default_factory=list)
    results: list[CommandResult] = Field(default_factory=list)
    overall_ok: bool = True
    started_at: str | None = None
    finished_at: str | None = None
    sandbox: str | None = None  # "bwrap" or "none" (gep/sandbox.py)
    schema_version: str | None = None
    asset_id: str | None = None


# ---------------------------------------------------------------- events


class EvolutionEvent(GepModel):
    type: Literal["EvolutionEvent"] = "EvolutionEvent"
    id: str
    parent: str | None = None
    intent: str = Intent.repair.value
    signals: list[str] = Field(default_factory=list)
    genes_used: list[str] = Field(default_factory=list)
    mutation_id: str | None = None
    personality_state: PersonalityState | None = None
    blast_radius: BlastRadius = Field(default_factory=BlastRadius)
    outcome: Outcome = Field(default_factory=lambda: Outcome(status=OutcomeStatus.running.value))
    capsule_id: str | None = None
    validation_report_id: str | None = None
    meta: dict[str, Any] = Field(default_factory=dict)
    schema_version: str | None = None
    asset_id: str | None = None

    @property
    def status(self) -> str:
        return self.outcome.status

    @property
    def is_empty_cycle(self) -> bool:
        """Empty: flagged so, or a recorded 0-file/0-line blast radius (seed 002)."""
        if self.meta.get("empty_cycle") is True:
            return True
        return self.blast_radius.files == 0 and self.blast_radius.lines == 0


def utc_now() -> datetime:
    return datetime.now(UTC)


def iso(ts: datetime) -> str:
    """ISO-8601 with milliseconds and a Z, as JavaScript's toISOString writes it."""
    return ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z"


# ---------------------------------------------------------------- cycle bookkeeping


class KeptFile(BaseModel):
    """A file git does not track that existed before a cycle (an untracked file of the user's, or git's own
    config, info/ and hooks), as it was then: a cycle that changed it is caught, and rollback restores it."""

    model_config = ConfigDict(extra="forbid")

    key: str  # workspace-relative path, or "git:<path inside the git directory>" (git:hooks/pre-commit)
    kind: Literal["file", "symlink", "large"]  # large: fingerprinted (size, mtime) but no copy kept
    sha: str | None = None  # blob written to the repository's object store (kind "file")
    target: str | None = None  # kind "symlink"
    mode: int = 0o644
    size: int = 0
    mtime_ns: int = 0


class CycleRun(BaseModel):
    """The "cycle running" record, written before anything in the workspace changes.

    It is what crash recovery reads: where the workspace stood (baseline) and how far the cycle got.
    """

    model_config = ConfigDict(extra="forbid")

    event_id: str
    workspace: str
    head_sha: str
    branch: str | None = None
    untracked: list[str] = Field(default_factory=list)
    stash_sha: str | None = None  # the user's own uncommitted work, stashed under --allow-dirty
    stage: str = "started"
    status: Literal["running", "awaiting_changes", "closed"] = "running"
    pid: int | None = None
    started_at: str = Field(default_factory=lambda: iso(utc_now()))
    # everything solidify needs to finish a two-phase (prompt-mode) cycle later
    pending: dict[str, Any] = Field(default_factory=dict)
    # baseline entries rollback must never touch: ignored paths (git's collapsed listing, e.g. ".venv/")
    # and empty directories that existed before the cycle
    ignored: list[str] = Field(default_factory=list)
    empty_dirs: list[str] = Field(default_factory=list)
    # files git does not track, as they were at the baseline (see KeptFile); kept_recorded is False on
    # records written before this existed, so their recovery does not take every hook for a new one
    kept: list[KeptFile] = Field(default_factory=list)
    kept_recorded: bool = False
