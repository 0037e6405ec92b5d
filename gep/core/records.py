"""Typed records a cycle keeps in its event's ``meta``: what the selector, the personality, the history
rules, the sources, the prompt and the mutator decided or measured.

A leaf module (pydantic only), so that ``gep.core.models.EventMeta`` can type every field without importing the
modules that produce them; those modules import their result types from here.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

# ---------------------------------------------------------------- selection


class GeneBan(BaseModel):
    gene_id: str
    source: str  # "signal" | "failed_capsules" | "memory" | "fix_did_not_hold"
    reason: str
    cycles_left: int | None = None  # cycles the ban still covers, this one included; None: while evidence lasts


class CandidateScore(BaseModel):
    gene_id: str
    match_score: float
    expected: float = 0.5
    evidence: float = 0.0
    banned: bool = False
    usefulness: float = 0.5  # feedback score (0.5: none)
    usefulness_scope: str = "none"  # situation | global | none
    rank: float = 0.5  # what candidates are ordered by: expected, blended with usefulness when feedback is given
    refines: str | None = None  # a distilled gene with little record of its own: the source gene whose rank it took
    trial: bool = False  # a gene new to the workspace among genes with a record: ranked with the best (its trial)


class SelectorDecision(BaseModel):
    # other tools write their own selector record (e.g. the reference's ``reason``): kept, not dropped
    model_config = ConfigDict(extra="allow")

    selected: str | None = None
    capsule: str | None = None
    alternatives: list[str] = Field(default_factory=list)
    reasons: list[str] = Field(default_factory=list)
    drift: bool = False
    drift_intensity: float = 0.0  # the chance of drifting here: the seed's intensity scaled by doubt (selector 4.)
    drift_mode: str = "none"  # none | selection | drift
    bans_applied: list[GeneBan] = Field(default_factory=list)
    dominance_capped: list[str] = Field(default_factory=list)
    scores: list[CandidateScore] = Field(default_factory=list)
    signal_key: str = ""
    memory_preferred: str | None = None
    usefulness_weight: float = 0.0  # 0 when no feedback was given


# ---------------------------------------------------------------- personality


class PersonalityMutation(BaseModel):
    type: str = "PersonalityMutation"
    param: str
    delta: float
    reason: str


class PersonalityRecord(BaseModel):
    """How the cycle's personality was chosen (the state itself is the event's ``personality_state``)."""

    model_config = ConfigDict(extra="allow")

    key: str
    known: bool
    mutations: list[PersonalityMutation] = Field(default_factory=list)
    best_known_key: str | None = None
    best_known_score: float | None = None
    triggered: str | None = None  # why triggered mutations ran, if they did


# ---------------------------------------------------------------- history rules


class HistoryRecord(BaseModel):
    """What the last events say about loops (the reference's ``analyzeRecentHistory``)."""

    suppressed_signals: list[str] = Field(default_factory=list)
    recent_intents: list[str] = Field(default_factory=list)
    consecutive_repair_count: int = 0
    empty_cycle_count: int = 0
    consecutive_empty_cycles: int = 0
    consecutive_failure_count: int = 0
    recent_failure_count: int = 0
    recent_failure_ratio: float = 0.0
    signal_freq: dict[str, int] = Field(default_factory=dict)
    gene_freq: dict[str, int] = Field(default_factory=dict)


# ---------------------------------------------------------------- sources and prompt

SourceKind = Literal["transcript", "memory_log", "log", "memory", "user"]


class SourceFile(BaseModel):
    """One file a cycle read (paths relative to the workspace)."""

    path: str
    kind: SourceKind
    size: int
    bytes_read: int
    truncated: bool
    mtime: float = 0.0


class FileMark(BaseModel):
    """A file's size at a moment (a fix's commit): bytes before it were written before that moment (kept in
    gep.core.learned.Resolution; here, beside SourceFile, so that gep.signals.sources reads it without gep.core.models)."""

    path: str
    kind: SourceKind
    size: int
    head: str | None = None  # digest of its first bytes: a file rewritten since (not appended to) differs


class InputWarning(BaseModel):
    """An input the engine did not read, and why: not a regular file (a FIFO, a device), a symlink out of
    the folder it was found in, over a size cap, deeper than the walk goes (see gep/core/safe_files.py). ``path`` is
    shown on one line (control characters escaped) and redacted."""

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


class SourcesRecord(BaseModel):
    files: list[SourceFile] = Field(default_factory=list)
    warnings: list[InputWarning] = Field(default_factory=list)  # inputs skipped (sources and gene files)


class PromptSizes(BaseModel):
    system_chars: int
    context_chars: int
    total: int
    neutralised: int = 0  # phrases addressing the agent replaced in learned text (gep/core/learned_text.py)


# ---------------------------------------------------------------- learning (issue 15) and the fleet (issue 14)


class ResolvedRecord(BaseModel):
    """A signal an earlier cycle's committed fix addressed, as this cycle saw it: resolved (only in lines written
    before the commit, so it does not drive this cycle) or live again (in a line written after it)."""

    signal: str
    event_id: str  # the cycle whose commit addressed it
    commit: str
    committed_at: str


class FixCheckRecord(BaseModel):
    """A verdict this cycle gave on an earlier cycle's fix (that event's ``meta.fix_verdict`` says it too)."""

    event_id: str
    commit: str
    verdict: Literal["verified", "did_not_hold"]
    live_signals: list[str] = Field(default_factory=list)
    new_lines: int = 0  # lines the code that failed wrote since the commit
    evidence: Literal["new_lines", "rerun"] = "new_lines"  # rerun: its failing test ran again after it and passed


class FixCreditRecord(BaseModel):
    """Which problem a committed fix was credited to (gep/learning/fix_credit.py: the errors whose code it touched), and,
    once the next cycles judged it, the signals its verdict followed. Avoid-lists and ``gep history`` read it."""

    addressed: list[str] = Field(default_factory=list)  # what the fix's verdict follows
    credited: list[str] = Field(default_factory=list)  # of them, errors that did not trigger the cycle
    missed: list[str] = Field(default_factory=list)  # trigger errors the change did not touch
    judged: list[str] | None = None  # set with the verdict: the problems it was judged on


class CapsuleOriginRecord(BaseModel):
    """Where a reused capsule came from (another workspace's, with ``share_capsules``)."""

    workspace_id: str
    workspace_name: str | None = None
    own: bool = True  # recorded by the workspace that listed it


# ---------------------------------------------------------------- mutator

MutatorStatus = Literal["changed", "no_change", "awaiting_changes", "error"]


class MutatorMetrics(BaseModel):
    model: str | None = None
    turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    estimated_cost_usd: float | None = None  # None: no price known for the model
    tool_calls: int = 0
    tool_refusals: int = 0
    duration_ms: int = 0

    @property
    def total_tokens(self) -> int:
        return (self.input_tokens + self.output_tokens + self.cache_creation_input_tokens
                + self.cache_read_input_tokens)


class MutatorResult(BaseModel):
    """What a mutator reports; the event keeps it as it is (``meta.mutator_result``)."""

    model_config = ConfigDict(extra="allow")  # keys a stored event holds that this version does not know: kept

    status: MutatorStatus
    summary: str = ""  # one line; solidify uses it as the commit subject
    rationale: str = ""
    error: str | None = None  # one line when status == "error"
    metrics: MutatorMetrics = Field(default_factory=MutatorMetrics)
    output: str = ""  # bounded, redacted
    prompt_file: str | None = None
    # the mutator's own finding that the provider failed (the anthropic mutator caught the SDK's API error),
    # never words in what a model or an agent said (gep/learning/attribution.py)
    provider_error: bool = False


HostFailureKind = Literal["agent_missing", "agent_crash", "agent_timeout", "provider", "validation_not_run",
                          "sandbox_missing"]


class HostFailure(BaseModel):
    """A failure outside the change (gep/learning/attribution.py): it teaches nothing about the gene."""

    kind: HostFailureKind
    reason: str


# ---------------------------------------------------------------- solidify


class ValidationLine(BaseModel):
    """One validation command and whether it passed (the full output is in the ValidationReport)."""

    model_config = ConfigDict(extra="allow")

    cmd: str
    ok: bool


# ---------------------------------------------------------------- gene pool (issue 16)


class AutoGeneRecord(BaseModel):
    """The automatic gene a cycle built (or reused, or could not build) when no gene matched."""

    gene_id: str | None = None
    created: bool = False  # True: a new gene, stored by this cycle
    reason: str


class GenePoolRecord(BaseModel):
    """What selection could not draw from here, and the automatic gene when one was needed."""

    excluded: dict[str, str] = Field(default_factory=dict)  # gene id -> retired / not runnable here
    auto_gene: AutoGeneRecord | None = None


# ---------------------------------------------------------------- behavioural signals (issue 17)


class LlmPassRecord(BaseModel):
    """The Claude signal pass of one cycle (gep/signals/claude_pass.py): what it was asked, what it kept, what it cost."""

    asked: int = 0  # exchanges sent to Claude
    kept: int = 0
    dropped_low_confidence: int = 0
    dropped_unsourced: int = 0  # source not a verbatim excerpt of the user turn sent
    dropped_quoting: int = 0  # content copies the message: it would store the message
    dropped_malformed: int = 0
    skipped_budget: int = 0  # exchanges not sent: the cycle's token budget was spent
    not_run: str | None = None  # why the pass did not run at all (the day's token budget was spent)
    errors: list[str] = Field(default_factory=list)
    metrics: MutatorMetrics = Field(default_factory=MutatorMetrics)  # tokens, model, estimated cost


class ApprovalFeedback(BaseModel):
    """An approval said after a GEP change, counted as ``helpful`` for the gene of that change."""

    event_id: str
    gene_id: str
    at: str  # when the approval was said (the behavioural signal's ts)
    recorded: bool = False  # False: no feedback repository in this store yet (see gep.learning.approval)


class BehaviorRecord(BaseModel):
    """Behavioural signals in one cycle: captured from the transcripts it read, and those it used."""

    exchanges: int = 0  # exchanges read from the transcripts
    new_exchanges: int = 0  # not captured before (by a hook or an earlier cycle)
    captured: int = 0  # signals written by this cycle
    capped: int = 0  # signals over the daily cap, not written
    malformed: int = 0  # lines of the signal files that are not valid signals (skipped)
    stored: int = 0  # signals new in the store
    signals: list[str] = Field(default_factory=list)  # the GEP signals they added to the cycle
    llm: LlmPassRecord | None = None
    approvals: list[ApprovalFeedback] = Field(default_factory=list)
    # corrections naming what a GEP change touched, counted as not_helpful for it (gep/learning/corrections.py)
    corrected: list[ApprovalFeedback] = Field(default_factory=list)
    # problems put first again because a person said since the last cycle that a function a change touched
    # still fails (gep/learning/corrections.py reopened_by_corrections; feedback on)
    reopened: list[str] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)  # capture problems (the cycle went on without them)
    warnings: list[InputWarning] = Field(default_factory=list)  # signal files skipped (a FIFO, a device ...)
