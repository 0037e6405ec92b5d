"""Distillation: successful capsules become a new gene (the reference's ``skillDistiller``, stricter).

The steps, each a function, all pure given their inputs and an injected ``now``:
  1. :func:`successful_capsules`: outcome success with score >= ``settings.distill_min_score``; a capsule
     whose fix is known not to have held is left out, verified fixes come first where order matters.
  2. :func:`distill_skip_reason`: fewer than ``distill_min_capsules`` successes, the last attempt under
     ``distill_interval_hours`` ago, or the same capsule set as the last attempt (hash of the ids).
  3. :func:`analyse`: per gene the high-frequency triggers (>= 5 capsules), strategy drift (first vs last
     summary, word Jaccard < 0.6), and coverage gaps (signals in >= 3 events that no capsule trigger covers).
     Unlike the reference, only actionable signals count as triggers and gaps (a ``ban_gene:`` trigger or a
     ``stable_success_plateau`` gap says nothing about what to do).
  4. Synthesis: Claude proposes a gene through a tool whose input schema is the Gene model's JSON schema
     (:class:`ClaudeGeneProposer`, with ``ANTHROPIC_API_KEY``), or :func:`synthesize` builds it from the
     analysis without a model (same capsules, same gene).
  5. :func:`check_proposal`: the reference's checks and stricter ones; repairs what can be repaired (id,
     summary, max_files, forbidden paths, commands that cannot run here) and refuses the rest.
An attempt (kept or rejected) and every skip is a :class:`DistillRun` in the :class:`DistillLog`.

Call :func:`distill` from the distill flow / ``gep genes distill``; store ``result.gene`` when it is set.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel, Field, ValidationError

from gep.core import constants
from gep.core.claude import claude_client
from gep.core.config import Settings
from gep.core.hashing import compute_asset_id
from gep.core.learned import DistillRun as DistillRun
from gep.core.models import (
    SCHEMA_VERSION,
    Capsule,
    CoverageGap,
    DistillAnalysis,
    EvolutionEvent,
    Gene,
    GeneConstraints,
    GeneProvenance,
    Intent,
    StrategyDrift,
    TriggerFrequency,
)
from gep.core.sanitize import redact
from gep.genes.automatic import infer_category, is_actionable, literal_pattern, runnable_validation
from gep.genes.eligibility import command_problem
from gep.genes.selector import DISTILLED_PREFIX, match_pattern, pattern_refusal
from gep.learning.feedback import FeedbackKind, FeedbackSignal, Observation

if TYPE_CHECKING:  # imported where used: the SDK takes ~2 s to import
    from anthropic.types import ToolParam

__all__ = [
    "CheckedProposal",
    "ClaudeGeneProposer",
    "DistillLog",
    "DistillResult",
    "DistillRun",
    "GeneProposer",
    "InMemoryDistillLog",
    "ProposalInvalid",
    "ProposalUnavailable",
    "analyse",
    "check_proposal",
    "claude_proposer",
    "data_hash",
    "derive_id",
    "distill",
    "distill_skip_reason",
    "gene_tool_schema",
    "id_problem",
    "successful_capsules",
    "synthesize",
]

HIGH_FREQUENCY_MIN = 5
TOP_TRIGGERS = 5
DRIFT_MIN_SUMMARIES = 3
DRIFT_SIMILARITY = 0.6
GAP_MIN_EVENTS = 3
MAX_GAPS = 10
MAX_FILES = 12
SUMMARY_MIN, SUMMARY_MAX = 10, 200
REQUIRED_FORBIDDEN = (".git", ".gep")
PROMPT_SAMPLES = 8
TOOL_NAME = "propose_gene"
# editors and agents: a gene named after the tool that ran is not named after what it does
TOOL_NAMES = frozenset({"cursor", "vscode", "vim", "nvim", "emacs", "windsurf", "copilot", "cline", "codex",
                        "claude", "aider", "zed", "jetbrains", "idea", "openclaw", "gemini", "chatgpt"})
_STOP = frozenset({"the", "and", "for", "with", "from", "that", "this", "into", "when", "are", "was", "has", "had",
                   "not", "its", "then", "than", "via", "errsig", "norm", "gene", "distilled", "signal", "signals"})
_VERIFIED = frozenset({"verified", "held"})
PEOPLE = frozenset({Observation.person, Observation.reverted})  # a person's word on a cycle
_NOT_HELD = frozenset({"did_not_hold", "not_held", "regressed"})
_RECURRING = re.compile(r"^recurring_errsig\(\d+x\):(.+)$", re.DOTALL)


# ------------------------------------------------------------------ the log


class DistillLog(Protocol):
    """Where distillation runs persist, per workspace (the store implements it; InMemoryDistillLog for tests)."""

    def add_distill_run(self, run: DistillRun) -> None: ...

    def last_distill_attempt(self) -> DistillRun | None: ...  # the newest kept or rejected run

    def list_distill_runs(self, limit: int) -> list[DistillRun]: ...  # newest last


class InMemoryDistillLog:
    def __init__(self) -> None:
        self.runs: list[DistillRun] = []

    def add_distill_run(self, run: DistillRun) -> None:
        self.runs.append(run.model_copy(deep=True))

    def last_distill_attempt(self) -> DistillRun | None:
        return next((r.model_copy(deep=True) for r in reversed(self.runs) if r.attempted), None)

    def list_distill_runs(self, limit: int) -> list[DistillRun]:
        return [r.model_copy(deep=True) for r in self.runs[-limit:]] if limit > 0 else []


# ------------------------------------------------------------------ 1-2: collect and gate


def _verification(capsule: Capsule) -> str | None:
    """``verified`` / ``did_not_hold`` when a later cycle checked the fix (issue 15 records it), else None."""
    v: Any = getattr(capsule, "verification", None)
    if isinstance(v, BaseModel):
        v = getattr(v, "status", None)
    elif isinstance(v, Mapping):
        v = v.get("status")
    return re.sub(r"[\s-]+", "_", str(v).strip().lower()) if v else None


def successful_capsules(capsules: Sequence[Capsule], settings: Settings,
                        rejected: Collection[str] = ()) -> list[Capsule]:
    """Capsules that count as successes, unique by id (the last copy wins, at the first one's place). A
    capsule in ``rejected`` (a person's word on its cycle was not_helpful: :func:`rejected_capsules`) is no
    success to learn from, whatever its checks said."""
    unique: dict[str, Capsule] = {}
    for c in capsules:
        if c.id:
            unique[c.id] = c
    return [c for c in unique.values()
            if c.outcome.status == "success" and c.outcome.score >= settings.distill_min_score
            and _verification(c) not in _NOT_HELD and c.id not in rejected]


def rejected_capsules(events: Sequence[EvolutionEvent], feedback: Sequence[FeedbackSignal]) -> set[str]:
    """The capsules of cycles whose latest word from a person (a verdict, a review, a revert) is not_helpful."""
    last: dict[str, FeedbackSignal] = {}
    for f in sorted(feedback, key=lambda f: (f.created_at, f.id)):
        if f.event_id and f.origin in PEOPLE and f.kind in (FeedbackKind.helpful, FeedbackKind.not_helpful):
            last[f.event_id] = f
    return {e.capsule_id for e in events
            if e.capsule_id and e.id in last and last[e.id].kind == FeedbackKind.not_helpful}


def verified_first(capsules: Sequence[Capsule]) -> list[Capsule]:
    return sorted(capsules, key=lambda c: 0 if _verification(c) in _VERIFIED else 1)


def data_hash(capsules: Sequence[Capsule]) -> str:
    """The reference's hash of a capsule set: sha256 of the sorted ids joined by ``|``, 16 hex digits."""
    return hashlib.sha256("|".join(sorted(c.id for c in capsules)).encode("utf-8")).hexdigest()[:16]


def distill_skip_reason(success: Sequence[Capsule], last: DistillRun | None, *, now: datetime,
                        settings: Settings) -> str | None:
    """Why not to distil now (None: go ahead). ``last``: the log's last attempt."""
    if len(success) < settings.distill_min_capsules:
        return f"not enough successful capsules ({len(success)} < {settings.distill_min_capsules})"
    if last is not None:
        age = now - last.at
        if age < timedelta(hours=settings.distill_interval_hours):
            return (f"last distillation attempt {age.total_seconds() / 3600:.1f} h ago "
                    f"(interval {settings.distill_interval_hours:g} h)")
        if last.data_hash == data_hash(success):
            return f"capsule set unchanged since the last distillation (hash {last.data_hash})"
    return None


# ------------------------------------------------------------------ 3: analysis


@dataclass
class _Group:
    gene_id: str
    capsules: list[Capsule] = field(default_factory=list)

    @property
    def avg_score(self) -> float:
        return sum(c.outcome.score for c in self.capsules) / len(self.capsules) if self.capsules else 0.0

    def top_triggers(self) -> list[str]:
        counts = Counter(t.strip().lower() for c in self.capsules for t in c.trigger if is_actionable(t))
        return [t for t, _ in counts.most_common(TOP_TRIGGERS)]  # ties: first seen first


def group_by_gene(success: Sequence[Capsule]) -> list[_Group]:
    groups: dict[str, _Group] = {}
    for c in success:
        gid = c.gene or "unknown"
        groups.setdefault(gid, _Group(gid)).capsules.append(c)
    return list(groups.values())


def _word_jaccard(a: str, b: str) -> float:
    wa, wb = set(a.lower().split()), set(b.lower().split())
    union = len(wa | wb)
    return len(wa & wb) / union if union else 1.0


def _drift(g: _Group) -> StrategyDrift | None:
    summaries = [c.summary for c in g.capsules if c.summary]
    if len(summaries) < DRIFT_MIN_SUMMARIES or summaries[0] == summaries[-1]:
        return None
    sim = _word_jaccard(summaries[0], summaries[-1])
    if sim >= DRIFT_SIMILARITY:
        return None
    return StrategyDrift(gene_id=g.gene_id, similarity=round(sim, 2), early_summary=redact(summaries[0][:120]),
                         recent_summary=redact(summaries[-1][:120]))


def _coverage_gaps(success: Sequence[Capsule], events: Sequence[EvolutionEvent]) -> list[CoverageGap]:
    seen = Counter(s for e in events for s in {str(x).strip().lower() for x in e.signals if is_actionable(x)})
    covered = {t.strip().lower() for c in success for t in c.trigger}
    gaps = sorted(((s, n) for s, n in seen.items() if n >= GAP_MIN_EVENTS and s not in covered),
                  key=lambda sn: (-sn[1], sn[0]))
    return [CoverageGap(signal=redact(s), frequency=n) for s, n in gaps[:MAX_GAPS]]


def analyse(capsules: Sequence[Capsule], success: Sequence[Capsule],
            events: Sequence[EvolutionEvent]) -> DistillAnalysis:
    """The reference's pattern analysis of the successful capsules (``capsules``: all, for the rate)."""
    total = len({c.id for c in capsules})
    report = DistillAnalysis(total_success=len(success), total_capsules=total,
                             success_rate=round(len(success) / total, 4) if total else 0.0,
                             coverage_gaps=_coverage_gaps(success, events))
    for g in group_by_gene(success):
        if len(g.capsules) >= HIGH_FREQUENCY_MIN:
            report.high_frequency.append(TriggerFrequency(gene_id=g.gene_id, count=len(g.capsules),
                                                          avg_score=round(g.avg_score, 2),
                                                          top_triggers=[redact(t) for t in g.top_triggers()]))
        drift = _drift(g)
        if drift is not None:
            report.strategy_drift.append(drift)
    return report


# ------------------------------------------------------------------ ids


def _words(text: str) -> list[str]:
    return [w for w in re.sub(r"[^a-z0-9]+", " ", text.lower()).split()
            if len(w) >= 3 and w not in _STOP and _word_problem(w) is None]


def _word_problem(word: str) -> str | None:
    if re.search(r"\d{6,}", word):
        return "a timestamp"
    if word.isdigit():
        return "a bare number"
    if len(word) >= 8 and re.fullmatch(r"[0-9a-f]+", word) and re.search(r"\d", word):
        return "a random hex string"
    if re.sub(r"\d+$", "", word) in TOOL_NAMES:
        return "a tool name"
    return None


def id_problem(gene_id: str) -> str | None:
    """Why ``gene_id`` is not ``gene_distilled_<descriptive-kebab-name>`` (None: it is)."""
    if not gene_id.startswith(DISTILLED_PREFIX):
        return f"id does not start with {DISTILLED_PREFIX}"
    suffix = gene_id[len(DISTILLED_PREFIX):]
    if not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", suffix):
        return "id suffix is not kebab-case"
    words = suffix.split("-")
    for w in words:
        problem = _word_problem(w)
        if problem is not None:
            return f"id holds {problem} ({w})"
    if len(words) < 2 or len(suffix.replace("-", "")) < 6 or len(words) > 8:
        return "id suffix is not a descriptive name of 2-8 words"
    return None


def derive_id(gene: Gene) -> str:
    """An id from the gene's content: words of its signals, then its summary, then its first strategy step."""
    words: list[str] = []

    def take(text: str) -> None:
        for w in _words(re.sub(r"\\(.)", r"\1", text)):  # a regex pattern's escapes are not words
            if w not in words and len(words) < 5:
                words.append(w)

    for pattern in gene.signals_match[:3]:
        take(pattern)
    for text in (gene.summary or "", *gene.strategy[:1]):
        if len(words) < 3:
            take(text)
    if len(words) < 2:
        words += [w for w in ("learned", "strategy") if w not in words]
    return DISTILLED_PREFIX + "-".join(words)


# ------------------------------------------------------------------ 5: checking a proposal


@dataclass
class ProposalContext:
    """What a proposal is checked against."""

    existing: Sequence[Gene]  # every known gene
    source_triggers: Sequence[str]  # the triggers of the capsules it was distilled from
    workspace: Path
    settings: Settings
    env: Mapping[str, str]


class CheckedProposal(BaseModel):
    gene: Gene  # after repairs, stamped
    ok: bool
    repairs: list[str] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)


def _pattern_key(pattern: str) -> str:
    """One signals_match pattern, normalised for the near-duplicate test (``b|a`` equals ``a|b``)."""
    p = pattern.strip().lower()
    if "|" in p and not p.startswith("/"):
        return "|".join(sorted(x.strip() for x in p.split("|") if x.strip()))
    return p


def _fix_shape(g: Gene, repairs: list[str], errors: list[str]) -> None:
    kept = [p.strip() for p in dict.fromkeys(g.signals_match) if len(p.strip()) >= 3 and is_actionable(p)]
    if len(kept) != len(g.signals_match):
        dropped = [p for p in g.signals_match if p.strip() not in kept]
        repairs.append(f"signals_match: dropped {dropped} (control signals, duplicates or under 3 chars)")
    g.signals_match = kept
    errors.extend(f"signals_match: pattern refused, {r}" for r in map(pattern_refusal, kept) if r)
    if not kept:
        errors.append("signals_match is empty")
    g.strategy = [s.strip() for s in g.strategy if s.strip()]
    if not g.strategy:
        errors.append("strategy is empty")
    if g.category not in Intent.__members__:
        inferred = infer_category(kept).value
        repairs.append(f"category: '{g.category}' is not repair, optimize or innovate; set to {inferred}")
        g.category = inferred


def _fix_summary(g: Gene, repairs: list[str], errors: list[str]) -> None:
    summary = " ".join((g.summary or "").split())
    if len(summary) < SUMMARY_MIN:
        summary = g.strategy[0][:SUMMARY_MAX] if g.strategy else ""
        repairs.append(f"summary: under {SUMMARY_MIN} chars; took the first strategy step")
    if len(summary) > SUMMARY_MAX:
        summary = summary[:SUMMARY_MAX + 1].rsplit(" ", 1)[0].rstrip(" ,;:")[:SUMMARY_MAX]
        repairs.append(f"summary: over {SUMMARY_MAX} chars; cut at a word")
    g.summary = summary
    if len(summary) < SUMMARY_MIN:
        errors.append(f"summary: no human summary of {SUMMARY_MIN}-{SUMMARY_MAX} chars")


def _fix_id(g: Gene, existing_ids: set[str], repairs: list[str], errors: list[str]) -> None:
    original = g.id
    if not original.startswith(DISTILLED_PREFIX):
        rest = re.sub(r"^gene_", "", original.strip())
        g.id = DISTILLED_PREFIX + rest
    suffix = re.sub(r"[^a-z0-9]+", "-", g.id[len(DISTILLED_PREFIX):].lower()).strip("-")
    g.id = DISTILLED_PREFIX + suffix
    problem = id_problem(g.id)
    if problem is not None:
        g.id = derive_id(g)
        repairs.append(f"id: '{original}': {problem}; derived {g.id} from the content")
    elif g.id != original:
        repairs.append(f"id: '{original}' renamed {g.id}")
    if g.id in existing_ids:
        base = g.id
        extra = [w for w in _words(" ".join([g.summary or "", *g.strategy])) if w not in base[len(DISTILLED_PREFIX):].split("-")]
        g.id = next((f"{base}-{w}" for w in extra if f"{base}-{w}" not in existing_ids
                     and id_problem(f"{base}-{w}") is None), base)
        if g.id == base:
            errors.append(f"id: {base} is taken by an existing gene")
        else:
            repairs.append(f"id: {base} is taken by an existing gene; renamed {g.id}")


def _fix_constraints(g: Gene, repairs: list[str]) -> None:
    c = g.constraints
    if c.max_files is None or c.max_files < 1 or c.max_files > MAX_FILES:
        repairs.append(f"constraints.max_files: {c.max_files} -> {MAX_FILES}")
        c.max_files = MAX_FILES
    missing = [p for p in REQUIRED_FORBIDDEN if p not in c.forbidden_paths]
    if missing:
        repairs.append(f"constraints.forbidden_paths: added {missing}")
        c.forbidden_paths = [*c.forbidden_paths, *missing]


def _fix_validation(g: Gene, ctx: ProposalContext, repairs: list[str], errors: list[str]) -> None:
    kept: list[str] = []
    for cmd in dict.fromkeys(c.strip() for c in g.validation if c.strip()):
        problem = command_problem(cmd, workspace=ctx.workspace, settings=ctx.settings, env=ctx.env)
        if problem is None:
            kept.append(cmd)
        else:
            repairs.append(f"validation: dropped {redact(cmd)!r}: {problem}")
    if not kept:
        kept = runnable_validation(ctx.settings.default_validation, workspace=ctx.workspace,
                                   settings=ctx.settings, env=ctx.env)
        if kept:
            repairs.append(f"validation: no proposed command can run here; using the workspace's {kept}")
        else:
            errors.append("validation: no command can run in this workspace")
    g.validation = kept


def _duplicate_of(g: Gene, existing: Sequence[Gene]) -> Gene | None:
    """An existing gene with the same signals_match set (any category: the reference's rule, which also
    covers the same set in the same category)."""
    mine = {_pattern_key(p) for p in g.signals_match}
    return next((e for e in existing if mine and {_pattern_key(p) for p in e.signals_match} == mine), None)


def check_proposal(proposal: Gene, ctx: ProposalContext, provenance: GeneProvenance) -> CheckedProposal:
    """Repair what can be repaired, refuse the rest; the returned gene carries ``provenance`` and its asset id."""
    g = proposal.model_copy(deep=True)
    repairs: list[str] = []
    errors: list[str] = []
    _fix_shape(g, repairs, errors)
    _fix_summary(g, repairs, errors)
    dup = _duplicate_of(g, ctx.existing)
    if dup is not None:
        errors.append(f"near-duplicate of existing gene {dup.id} (same signals_match set)")
    _fix_id(g, {e.id for e in ctx.existing}, repairs, errors)
    _fix_constraints(g, repairs)
    _fix_validation(g, ctx, repairs, errors)
    if g.signals_match and not any(match_pattern(p, t) for p in g.signals_match for t in ctx.source_triggers):
        errors.append("signals_match matches none of the source capsules' triggers")
    return CheckedProposal(gene=stamp(g, provenance), ok=not errors, repairs=repairs, errors=errors)


def stamp(gene: Gene, provenance: GeneProvenance) -> Gene:
    """``gene`` with its provenance, schema version and asset id set (in place; returned for chaining)."""
    gene.provenance = provenance
    gene.schema_version = SCHEMA_VERSION
    gene.asset_id = compute_asset_id(gene.to_asset())
    return gene


# ------------------------------------------------------------------ 4a: synthesis without a model


def _trigger_pattern(trigger: str) -> str:
    """A recurring error's count changes from one cycle to the next (``recurring_errsig(3x):``): match any."""
    m = _RECURRING.match(trigger)
    if m:
        return r"/recurring_errsig\(\d+x\):" + re.escape(m.group(1)) + "/i"
    return literal_pattern(trigger)


def _recorded_steps(capsules: Sequence[Capsule]) -> list[str]:
    """Strategy steps capsules recorded (a ``strategy`` list, when the writer kept one), most frequent first."""
    counts: Counter[str] = Counter()
    for c in verified_first(capsules):
        steps = getattr(c, "strategy", None)
        if isinstance(steps, list):
            counts.update(list(dict.fromkeys(s.strip() for s in steps if isinstance(s, str) and s.strip())))
    return [redact(s) for s, _ in counts.most_common(5)]


def _strategy(capsules: Sequence[Capsule], sources: Sequence[Gene], top: Sequence[str]) -> list[str]:
    steps = [f"Confirm the situation first: the signals include {', '.join(t[:80] for t in top[:3])}"]
    recorded = _recorded_steps(capsules)
    if recorded:
        steps += recorded
    else:
        steps += [s for g in sources for s in g.strategy][:4]
        # what worked, verified fixes first, newest first
        ranked = sorted(enumerate(capsules), key=lambda ic: (0 if _verification(ic[1]) in _VERIFIED else 1, -ic[0]))
        summaries = list(dict.fromkeys(c.summary.strip() for _, c in ranked if c.summary.strip()))[:3]
        steps += [f"Reuse the fix that worked before: {redact(s)[:160]}" for s in summaries]
    steps.append("Run the declared validation and roll the change back if any command fails")
    return list(dict.fromkeys(steps))


_VERBS = {"repair": "Repair", "optimize": "Improve", "innovate": "Extend the workspace for"}


def synthesize(capsules: Sequence[Capsule], top_triggers: Sequence[str], sources: Sequence[Gene]) -> Gene:
    """A gene from one gene's successful capsules and their top triggers, without a model (deterministic).

    signals_match: the top triggers; strategy: the capsules' recorded steps, else the source gene's steps
    and the summaries of what worked; constraints: the tightest the source genes had; validation: theirs
    (check_proposal keeps what can run here)."""
    top = list(top_triggers)
    category = next((g.category for g in sources if g.category in Intent.__members__), None) \
        or infer_category(top).value
    limits = [g.constraints.max_files for g in sources if g.constraints.max_files]
    forbidden = list(dict.fromkeys([*REQUIRED_FORBIDDEN, *(p for g in sources for p in g.constraints.forbidden_paths)]))
    what = ", ".join(t[:50] for t in top[:3])
    gene = Gene(
        id="",
        category=category,
        signals_match=[_trigger_pattern(t) for t in top],
        preconditions=[f"signals include one of: {', '.join(t[:80] for t in top)}"],
        strategy=_strategy(capsules, sources, top),
        constraints=GeneConstraints(max_files=min([*limits, MAX_FILES]), forbidden_paths=forbidden),
        validation=list(dict.fromkeys(c for g in sources for c in g.validation)),
        summary=f"{_VERBS.get(category, 'Handle')} {what}, as {len(capsules)} successful capsules did",
    )
    gene.id = derive_id(gene)
    return gene


# ------------------------------------------------------------------ 4b: Claude proposes


class ProposalUnavailable(Exception):
    """The model could not be asked (network, API error): distillation falls back to synthesis."""


class ProposalInvalid(Exception):
    """The model answered without a usable Gene: the run is rejected."""


class CapsuleSample(BaseModel):
    gene: str | None
    trigger: list[str]
    summary: str
    score: float
    verified: bool


class GeneRef(BaseModel):
    id: str
    category: str
    signals_match: list[str]
    validation: list[str]


class ProposalRequest(BaseModel):
    analysis: DistillAnalysis
    samples: list[CapsuleSample]
    existing: list[GeneRef]


class GeneProposer(Protocol):
    name: str

    def propose(self, request: ProposalRequest) -> Gene: ...


def proposal_request(success: Sequence[Capsule], analysis: DistillAnalysis, genes: Sequence[Gene]) -> ProposalRequest:
    """What the model is shown: the analysis, up to 8 capsules (verified first), the existing genes. Redacted."""
    samples = [CapsuleSample(gene=c.gene, trigger=[redact(t)[:200] for t in c.trigger[:10]],
                             summary=redact(c.summary)[:200], score=c.outcome.score,
                             verified=_verification(c) in _VERIFIED)
               for c in verified_first(success)[:PROMPT_SAMPLES]]
    existing = [GeneRef(id=g.id, category=g.category, signals_match=g.signals_match, validation=g.validation)
                for g in genes]
    return ProposalRequest(analysis=analysis, samples=samples, existing=existing)


def _inline_refs(node: Any, defs: Mapping[str, Any]) -> Any:
    if isinstance(node, dict):
        if "$ref" in node:
            return _inline_refs(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
        return {k: _inline_refs(v, defs) for k, v in node.items()}
    if isinstance(node, list):
        return [_inline_refs(v, defs) for v in node]
    return node


def gene_tool_schema() -> dict[str, Any]:  # JSON edge: a JSON Schema for the API
    """The Gene model's JSON schema (references inlined) as the tool's input schema, without the fields the
    engine stamps itself; the fields a distilled gene needs are required. A JSON edge: the API takes a dict."""
    schema = Gene.model_json_schema()
    schema = _inline_refs(schema, schema.pop("$defs", {}))
    for stamped in ("provenance", "schema_version", "asset_id"):
        schema["properties"].pop(stamped, None)
    schema["required"] = ["type", "id", "category", "signals_match", "strategy", "constraints", "validation",
                          "summary"]
    return schema


SYSTEM_PROMPT = f"""You synthesise one reusable Gene for the GEP evolution engine from successful capsules.
Call the {TOOL_NAME} tool exactly once with the gene. Rules:
- strategy: concrete, ordered steps an agent can carry out next time (what to do, not what happened).
- id: "{DISTILLED_PREFIX}" + a descriptive kebab-case name of 2-5 words taken from what the gene does
  (e.g. {DISTILLED_PREFIX}retry-on-timeout). No timestamps, numbers, random strings or tool names.
- summary: one human-readable sentence of {SUMMARY_MIN}-{SUMMARY_MAX} characters saying what the gene does.
- category: repair, optimize or innovate. signals_match: patterns that match the capsules' triggers;
  not the same set as an existing gene's.
- constraints.max_files <= {MAX_FILES}; constraints.forbidden_paths includes ".git" and ".gep".
- validation: single commands without shell operators that run in this workspace (the existing genes'
  commands show what works here)."""


def _user_prompt(request: ProposalRequest) -> str:
    return ("ANALYSIS:\n" + request.analysis.model_dump_json(indent=2)
            + "\n\nSUCCESSFUL CAPSULES:\n" + json.dumps([s.model_dump() for s in request.samples], indent=2)
            + "\n\nEXISTING GENES (do not duplicate):\n"
            + json.dumps([g.model_dump() for g in request.existing], indent=2))


def parse_proposal(data: object) -> Gene:
    """The tool input as a Gene (the fields the engine stamps are ignored; a missing id is derived later)."""
    if not isinstance(data, dict):
        raise ProposalInvalid("the proposal is not a JSON object")
    fields = {k: v for k, v in data.items() if k not in ("provenance", "schema_version", "asset_id")}
    if not isinstance(fields.get("id"), str):
        fields["id"] = ""
    try:
        return Gene.model_validate(fields)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(object)"
        raise ProposalInvalid(f"the proposal is not a Gene: field '{where}': {err['msg']}") from None


class ClaudeGeneProposer:
    name = "claude"

    def __init__(self, settings: Settings, env: Mapping[str, str], *, max_retries: int = constants.ANTHROPIC_MAX_RETRIES,
                 timeout_s: float = constants.ANTHROPIC_TIMEOUT_S) -> None:
        self.model = settings.model
        self.client = claude_client(env["ANTHROPIC_API_KEY"], env, max_retries=max_retries, timeout_s=timeout_s)

    def propose(self, request: ProposalRequest) -> Gene:
        import anthropic

        tool: ToolParam = {"name": TOOL_NAME, "description": "Propose the distilled Gene.", "input_schema": gene_tool_schema()}
        try:
            reply = self.client.messages.create(
                model=self.model, max_tokens=constants.MAX_OUTPUT_TOKENS_PER_TURN, system=SYSTEM_PROMPT, tools=[tool],
                tool_choice={"type": "tool", "name": TOOL_NAME},
                messages=[{"role": "user", "content": _user_prompt(request)}])
        except anthropic.APIError as exc:
            raise ProposalUnavailable(f"Claude unavailable: {type(exc).__name__}: {redact(str(exc))[:300]}") from None
        use = next((b for b in reply.content if b.type == "tool_use" and b.name == TOOL_NAME), None)
        if use is None:
            raise ProposalInvalid(f"Claude did not call {TOOL_NAME}")
        return parse_proposal(use.input)


def claude_proposer(settings: Settings, env: Mapping[str, str]) -> ClaudeGeneProposer | None:
    """Claude when ``ANTHROPIC_API_KEY`` is set, else None (deterministic synthesis)."""
    return ClaudeGeneProposer(settings, env) if env.get("ANTHROPIC_API_KEY") else None


# ------------------------------------------------------------------ the run


class DistillResult(BaseModel):
    run: DistillRun
    gene: Gene | None = None  # set when kept: the caller stores it with the other genes


@dataclass
class _Inputs:
    success: list[Capsule]
    analysis: DistillAnalysis
    genes: Sequence[Gene]
    data_hash: str
    workspace: Path
    settings: Settings
    env: Mapping[str, str]

    def context(self, triggers: Sequence[str]) -> ProposalContext:
        return ProposalContext(existing=self.genes, source_triggers=triggers, workspace=self.workspace,
                               settings=self.settings, env=self.env)

    def provenance(self, synthesis: str, capsules: Sequence[Capsule]) -> GeneProvenance:
        return GeneProvenance(origin="distilled", synthesis=synthesis,
                              source_gene_ids=sorted({c.gene or "unknown" for c in capsules}),
                              source_capsule_ids=[c.id for c in capsules], data_hash=self.data_hash,
                              analysis=self.analysis)


def _outcome(checked: CheckedProposal, synthesis: Literal["claude", "deterministic"], inp: _Inputs,
             now: datetime, notes: list[str]) -> DistillRun:
    return DistillRun(at=now, status="kept" if checked.ok else "rejected", reasons=checked.errors,
                      repairs=checked.repairs, notes=notes, synthesis=synthesis, data_hash=inp.data_hash,
                      capsule_count=len(inp.success), gene_id=checked.gene.id, gene=checked.gene,
                      analysis=inp.analysis)


def _by_claude(proposer: GeneProposer, inp: _Inputs, now: datetime) -> DistillRun:
    raw = proposer.propose(proposal_request(inp.success, inp.analysis, inp.genes))
    triggers = [t for c in inp.success for t in c.trigger]
    checked = check_proposal(raw, inp.context(triggers), inp.provenance("claude", []))
    # provenance: the successful capsules the (repaired) gene matches
    sources = [c for c in inp.success
               if any(match_pattern(p, t) for p in checked.gene.signals_match for t in c.trigger)]
    stamp(checked.gene, inp.provenance("claude", sources))
    return _outcome(checked, "claude", inp, now, [])


def _by_synthesis(inp: _Inputs, now: datetime, notes: list[str]) -> DistillRun:
    ranked = sorted(inp.analysis.high_frequency, key=lambda h: (-h.count, -h.avg_score, h.gene_id))
    groups = {g.gene_id: g for g in group_by_gene(inp.success)}
    by_id = {g.id: g for g in inp.genes}
    refused: list[str] = []
    last: CheckedProposal | None = None
    for hf in ranked:
        capsules = groups[hf.gene_id].capsules
        if not hf.top_triggers:
            refused.append(f"{hf.gene_id}: its capsules have no actionable triggers")
            continue
        sources = [by_id[hf.gene_id]] if hf.gene_id in by_id else []
        gene = synthesize(capsules, hf.top_triggers, sources)
        last = check_proposal(gene, inp.context([t for c in capsules for t in c.trigger]),
                              inp.provenance("deterministic", capsules))
        if last.ok:
            return _outcome(last, "deterministic", inp, now, [*notes, *refused])
        refused.append(f"{hf.gene_id}: " + "; ".join(last.errors))
    if last is None:
        return DistillRun(at=now, status="rejected", synthesis="deterministic", data_hash=inp.data_hash,
                          capsule_count=len(inp.success), analysis=inp.analysis, notes=notes,
                          reasons=[f"nothing to distil: no gene has {HIGH_FREQUENCY_MIN} or more successful "
                                   f"capsules with actionable triggers", *refused])
    run = _outcome(last, "deterministic", inp, now, notes)
    run.reasons = refused
    return run


def _propose(chosen: GeneProposer | None, inp: _Inputs, now: datetime) -> DistillRun:
    """Claude's gene when a proposer is chosen and answers; deterministic synthesis otherwise."""
    notes: list[str] = []
    if chosen is not None:
        try:
            return _by_claude(chosen, inp, now)
        except ProposalUnavailable as exc:
            notes.append(f"{exc}; used deterministic synthesis")
        except ProposalInvalid as exc:
            return DistillRun(at=now, status="rejected", reasons=[str(exc)], synthesis="claude",
                              data_hash=inp.data_hash, capsule_count=len(inp.success), analysis=inp.analysis)
    return _by_synthesis(inp, now, notes)


def distill(*, capsules: Sequence[Capsule], events: Sequence[EvolutionEvent], genes: Sequence[Gene],
            log: DistillLog, workspace: Path, settings: Settings, env: Mapping[str, str], now: datetime,
            proposer: GeneProposer | None | Literal["auto"] = "auto", dry_run: bool = False,
            rejected: Collection[str] = ()) -> DistillResult:
    """One distillation run over a workspace's capsules and events. ``genes``: every known gene;
    ``rejected``: capsules people rejected (never learned from).
    ``env``: the runner's environment (its PATH decides what can run) and, for ``proposer="auto"``, the
    ``ANTHROPIC_API_KEY`` that makes Claude the proposer. The run is logged unless ``dry_run``."""
    success = successful_capsules(capsules, settings, rejected)
    inp = _Inputs(success=success, analysis=DistillAnalysis(), genes=genes, data_hash=data_hash(success),
                  workspace=workspace, settings=settings, env=env)
    skip = distill_skip_reason(success, log.last_distill_attempt(), now=now, settings=settings)
    if skip is not None:
        run = DistillRun(at=now, status="skipped", reasons=[skip], data_hash=inp.data_hash,
                         capsule_count=len(success))
    else:
        inp.analysis = analyse(capsules, success, events)
        run = _propose(claude_proposer(settings, env) if proposer == "auto" else proposer, inp, now)
    if not dry_run:
        log.add_distill_run(run)
    return DistillResult(run=run, gene=run.gene if run.status == "kept" else None)
