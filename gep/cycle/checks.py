"""The checks a change must pass before it is committed: blast radius, forbidden and protected paths, what an
agent did with git in its clone, and the protocol's rules; and the failure reasons and commit message built
from them. What no commit will hold (ignored files such as ``.env``) is a warning: the commit leaves it out.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from gep.assets.gene_files import is_valid_gene_id
from gep.core import constants
from gep.core.config import CONFIG_FILE, GEP_DIR, Settings
from gep.core.forbidden_paths import is_forbidden
from gep.core.models import EvolutionEvent, Gene, Intent, Mutation, RiskLevel, ValidationReport
from gep.core.sanitize import redact
from gep.cycle.tree import CycleTree, TreeChange
from gep.cycle.unsafe_entries import unsafe_entries
from gep.genes.mutation import is_high_risk_mutation_allowed, is_high_risk_personality
from gep.validation.canary import CanaryResult

ALWAYS_FORBIDDEN = [".git", GEP_DIR]


class ConstraintCheck(BaseModel):
    violations: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    severity: str = "within_limit"  # within_limit | approaching_limit | exceeded | critical_overrun | hard_cap_breach
    severity_message: str = ""


# ------------------------------------------------------------------ constraints


def classify_blast(files: int, lines: int, max_files: int, settings: Settings, bytes_changed: int = 0,
                   ) -> tuple[str, str]:
    """Severity of a blast radius against the gene's max_files and the hard caps (the reference's scale, plus
    a cap in bytes: five one-line 400 KB files are not a small change)."""
    if files > settings.hard_cap_files or lines > settings.hard_cap_lines or bytes_changed > settings.hard_cap_bytes:
        return "hard_cap_breach", (f"hard cap breach: {files} files / {lines} lines / {bytes_changed} bytes exceeds "
                                   f"the limit ({settings.hard_cap_files} files / {settings.hard_cap_lines} lines / "
                                   f"{settings.hard_cap_bytes} bytes)")
    if files > max_files * constants.CRITICAL_RATIO:
        return "critical_overrun", (f"critical overrun: {files} files > {max_files * constants.CRITICAL_RATIO:g} "
                                    f"({constants.CRITICAL_RATIO:g}x the gene's max_files {max_files})")
    if files > max_files:
        return "exceeded", f"max_files exceeded: {files} > {max_files}"
    if files > max_files * constants.APPROACHING_RATIO:
        return "approaching_limit", f"approaching limit: {files} / {max_files} files ({round(files / max_files * 100)}%)"
    return "within_limit", f"{files} / {max_files} files"


def check_constraints(*, tc: TreeChange, tree: CycleTree, gene: Gene, settings: Settings) -> ConstraintCheck:
    """The change against the gene's limits and the engine's rules. The blast radius is what can be
    committed; forbidden paths are looked for in every file the cycle touched (an ignored ``.gep/`` file a
    clone's change wrote included)."""
    out = ConstraintCheck()
    limit = gene.constraints.max_files or 0
    max_files = limit if limit > 0 else constants.DEFAULT_MAX_FILES
    radius = tc.radius
    out.severity, out.severity_message = classify_blast(radius.files, radius.lines, max_files, settings, radius.bytes)
    if out.severity == "approaching_limit":
        out.warnings.append(out.severity_message)
    elif out.severity != "within_limit":
        out.violations.append(out.severity_message)
    # the engine's own configuration is out of any cycle's reach, whoever made the change
    forbidden = [*gene.constraints.forbidden_paths, *ALWAYS_FORBIDDEN, "/" + CONFIG_FILE]
    editable = gene.constraints.editable_protected or []
    committable = {f.path for f in tc.committable}
    protected = [f.path for f in tc.committable if not is_forbidden(f.path, forbidden)
                 and is_forbidden(f.path, settings.protected_paths)]
    for f in tc.change.files:
        if is_forbidden(f.path, forbidden):
            out.violations.append(f"forbidden path touched: {f.path}")
    out.violations += _protected_violations(tree, tc, protected, editable)
    out.violations += [f"git: {a}" for a in tree.git_actions()]
    out.violations += unsafe_entries(tree, tc)
    out.warnings += not_committed(tc, committable, forbidden)
    return out


def not_committed(tc: TreeChange, committable: set[str], forbidden: list[str]) -> list[str]:
    """Warnings for what the cycle touched that no commit will hold: files the baseline ignores (``.env``,
    build output), entries git cannot commit, a person's files that held uncommitted edits before."""
    groups: dict[str, list[str]] = {}
    for f in tc.change.files:
        if f.path in committable or is_forbidden(f.path, forbidden):
            continue
        why = ("had your uncommitted edits before the cycle (commit it yourself)" if f.path in tc.flagged
               else f.note or f.kind)
        groups.setdefault(why, []).append(f.path)
    out = []
    for why, paths in groups.items():
        shown = ", ".join(paths[:5]) + (f" (+{len(paths) - 5} more)" if len(paths) > 5 else "")
        out.append(f"not committed ({why}): {shown}")
    return out


def _protected_violations(tree: CycleTree, tc: TreeChange, paths: list[str], editable: list[str]) -> list[str]:
    """A protected file (MEMORY.md, USER.md ...) is never deleted or emptied, and is only appended to (its
    baseline content a prefix of the new one) unless the gene names it in constraints.editable_protected.
    Contents are compared as git stores them (eol and filters applied on both sides)."""
    if not paths:
        return []
    old, new = tree.entries(tc, paths)
    out: list[str] = []
    for rel in paths:
        now = new.get(rel)
        if now is None:
            out.append(f"protected file deleted: {rel}")
            continue
        if not now[0].startswith("100"):
            out.append(f"protected file replaced by something that is not a regular file: {rel}")
            continue
        if tree.blob_size(now[1]) > constants.PROTECTED_FILE_MAX_BYTES:
            out.append(f"protected file not checked (larger than {constants.PROTECTED_FILE_MAX_BYTES:,} bytes): {rel}")
            continue
        data = tree.blob(now[1])
        if not data.strip():
            out.append(f"protected file emptied: {rel}")
        elif rel in old and not is_forbidden(rel, editable) and not data.startswith(tree.blob(old[rel][1])):
            out.append(f"protected file rewritten (it may only be appended to): {rel}")
    return out


def protocol_violations(event: EvolutionEvent, gene: Gene, mutation: Mutation) -> list[str]:
    """The reference's protocol rules, plus consistency between the event and what is solidified."""
    out: list[str] = []
    if not mutation.id or mutation.category not in set(Intent):
        out.append("missing_or_invalid_mutation")
    if event.mutation_id and event.mutation_id != mutation.id:
        out.append(f"mutation_mismatch: event has {event.mutation_id}, solidify got {mutation.id}")
    p = event.personality_state
    traits = [p.rigor, p.creativity, p.verbosity, p.risk_tolerance, p.obedience] if p else []
    if p is None or any(not 0.0 <= t <= 1.0 for t in traits):
        out.append("missing_or_invalid_personality_state")
    known = event.meta.personality.known if event.meta.personality is not None else False
    if mutation.risk_level == RiskLevel.high:
        if not is_high_risk_mutation_allowed(p):
            out.append("high_risk_mutation_not_allowed_by_personality")
        if not known:
            out.append("high_risk_mutation_forbidden_under_unknown_personality")
    if mutation.category == Intent.innovate and is_high_risk_personality(p):
        out.append("forbidden_innovate_with_high_risk_personality")
    if event.intent and str(event.intent) != mutation.category.value:
        out.append(f"intent_mismatch_with_mutation:{event.intent}!={mutation.category.value}")
    return out


def _tail(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else "..." + text[-n:]


def failure_reasons(check: ConstraintCheck, report: ValidationReport, canary: CanaryResult | None,
                    protocol: list[str]) -> list[str]:
    reasons = [f"constraint: {v}" for v in check.violations]
    for r in report.results:
        if r.ok:
            continue
        if r.blocked_reason:
            reasons.append(f"validation: {r.cmd[:120]} blocked: {r.blocked_reason}")
        elif r.timed_out:
            reasons.append(f"validation: {r.cmd[:120]} timed out")
        else:
            reasons.append(f"validation: {r.cmd[:120]} exited {r.exit_code}: {_tail(r.stderr or r.stdout, 200)}")
    if canary is not None and not canary.ok and canary.result is not None:
        res = canary.result
        reasons.append(f"canary: {res.cmd[:120]} failed: {_tail(res.stderr or res.stdout, 200)}")
    reasons += [f"protocol: {p}" for p in protocol]
    return reasons


def _trailer_value(value: str) -> str:
    """A trailer value from an id: only the id alphabet, so no newline or separator can forge a trailer."""
    return value if is_valid_gene_id(value) else (re.sub(r"[^A-Za-z0-9_.:-]", "_", value)[:120] or "_")


def _signal_name(signal: str) -> str:
    """A signal by its name only: what follows the name is words read from sessions and logs (a feature request,
    a preference, an error line a person typed), never for a commit (issue 45: a person's words reached the
    trailer through ``user_feature_request:``)."""
    return signal.partition(":")[0].strip() or "signal"


def commit_message(intent: str, summary: str, event: EvolutionEvent, gene: Gene, mutation: Mutation) -> str:
    """The engine's commit message. Trailers are built from validated values only: ids in the id alphabet,
    the subject and signals redacted and flattened to one line (a newline cannot start a trailer)."""
    subject = ""
    for line in redact(summary or "").splitlines():
        if line.strip():
            subject = " ".join(line.split())
            break
    subject = subject or " ".join((mutation.expected_effect or gene.summary or f"apply {gene.id}").split())
    if len(subject) > constants.COMMIT_SUBJECT_CHARS:
        subject = subject[: constants.COMMIT_SUBJECT_CHARS - 3].rstrip() + "..."
    signals = ", ".join(dict.fromkeys(" ".join(redact(_signal_name(s)).split()) for s in event.signals))
    if len(signals) > constants.COMMIT_SIGNALS_CHARS:
        signals = signals[: constants.COMMIT_SIGNALS_CHARS - 3].rstrip() + "..."
    trailers = [f"GEP-Event: {_trailer_value(event.id)}", f"GEP-Gene: {_trailer_value(gene.id)}",
                f"GEP-Mutation: {_trailer_value(mutation.id)}"]
    if signals:
        trailers.append(f"GEP-Signals: {signals}")
    kind = intent if intent in {i.value for i in Intent} else "change"
    return f"gep({kind}): {subject}\n\n" + "\n".join(trailers) + "\n"
