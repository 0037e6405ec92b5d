"""The checks a change must pass before it is committed: blast radius, forbidden and protected paths, files
that were the user's, and the protocol's rules; and the failure reasons and commit message built from them.
"""

from __future__ import annotations

import re
import subprocess

from pydantic import BaseModel, Field

from gep import constants as C
from gep.assets import is_valid_gene_id
from gep.canary import CanaryResult
from gep.config import CONFIG_FILE, GEP_DIR, Settings
from gep.inputs import Unreadable, read_capped
from gep.models import CycleRun, EvolutionEvent, Gene, Intent, Mutation, RiskLevel, ValidationReport
from gep.mutation import is_high_risk_mutation_allowed, is_high_risk_personality
from gep.sanitize import redact
from gep.tools import is_forbidden
from gep.workspace import BlastReport, FileChange, KeptChange, Workspace

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
    if files > max_files * C.CRITICAL_RATIO:
        return "critical_overrun", (f"critical overrun: {files} files > {max_files * C.CRITICAL_RATIO:g} "
                                    f"({C.CRITICAL_RATIO:g}x the gene's max_files {max_files})")
    if files > max_files:
        return "exceeded", f"max_files exceeded: {files} > {max_files}"
    if files > max_files * C.APPROACHING_RATIO:
        return "approaching_limit", f"approaching limit: {files} / {max_files} files ({round(files / max_files * 100)}%)"
    return "within_limit", f"{files} / {max_files} files"


def check_constraints(*, blast: BlastReport, gene: Gene, settings: Settings, workspace: Workspace,
                      run: CycleRun) -> ConstraintCheck:
    out = ConstraintCheck()
    max_files = gene.constraints.max_files if (gene.constraints.max_files or 0) > 0 else C.DEFAULT_MAX_FILES
    out.severity, out.severity_message = classify_blast(blast.files, blast.lines, max_files, settings, blast.bytes)
    if out.severity == "approaching_limit":
        out.warnings.append(out.severity_message)
    elif out.severity != "within_limit":
        out.violations.append(out.severity_message)
    # the engine's own configuration is out of any cycle's reach, whoever made the change
    forbidden = [*gene.constraints.forbidden_paths, *ALWAYS_FORBIDDEN, "/" + CONFIG_FILE]
    editable = gene.constraints.editable_protected or []
    for change in blast.changes:
        if is_forbidden(change.path, forbidden):
            out.violations.append(f"forbidden path touched: {change.path}")
        elif is_forbidden(change.path, settings.protected_paths):
            out.violations += _protected_violations(workspace, run, change, is_forbidden(change.path, editable))
    stashed = set(workspace.user_stashed_paths(run))
    for path in sorted(stashed & set(blast.changed_files)):
        out.violations.append(f"touched a file holding your uncommitted changes (--allow-dirty): {path}")
    for path in sorted(set(run.untracked) & set(blast.changed_files)):
        out.violations.append(f"staged a file that was untracked before the cycle (yours): {path}")
    out.violations += kept_violations(workspace.kept_changes(run))
    return out


def _protected_violations(workspace: Workspace, run: CycleRun, change: FileChange, editable: bool) -> list[str]:
    """A protected file (MEMORY.md, USER.md ...) is never deleted or emptied, and is only appended to (its
    baseline content a prefix of the new one) unless the gene names it in constraints.editable_protected."""
    target = workspace.path / change.path
    if change.status == "deleted" or not target.exists():
        return [f"protected file deleted: {change.path}"]
    if not target.is_file() or target.is_symlink():
        return [f"protected file replaced by something that is not a regular file: {change.path}"]
    try:
        new = read_capped(target, C.PROTECTED_FILE_MAX_BYTES)
    except Unreadable as exc:  # swapped for a FIFO since, or too large to compare
        return [f"protected file not checked ({exc.reason}): {change.path}"]
    if not new.strip():
        return [f"protected file emptied: {change.path}"]
    if editable:
        return []
    old = _baseline_bytes(workspace, run, change.path)
    if old is not None and not new.startswith(old):
        return [f"protected file rewritten (it may only be appended to): {change.path}"]
    return []


def _baseline_bytes(workspace: Workspace, run: CycleRun, rel: str) -> bytes | None:
    """``rel`` as it was at the cycle's baseline (committed, or an untracked file the baseline kept), or None
    when it did not exist."""
    kept = next((k for k in run.kept if k.key == rel and k.kind == "file" and k.sha), None)
    spec = kept.sha if kept is not None else f"{run.head_sha}:{rel}"
    res = subprocess.run(["git", "-C", str(workspace.path), "cat-file", "blob", str(spec)], capture_output=True)
    return res.stdout if res.returncode == 0 else None


def kept_violations(changes: list[KeptChange]) -> list[str]:
    """Violations for kept files the cycle changed: git's internals are forbidden paths; the user's own
    untracked files are theirs (rollback restores them unless they were too large to copy)."""
    out: list[str] = []
    for c in changes:
        if c.in_git_dir:
            out.append(f"forbidden path touched: {c.shown} ({c.what})")
        else:
            verb = "deleted" if c.what == "deleted" else "changed"
            note = "" if c.restorable else " (too large to keep a copy: not restored)"
            out.append(f"{verb} a file that was untracked before the cycle (yours): {c.shown}{note}")
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
    if event.genes_used and gene.id not in event.genes_used:
        out.append(f"gene_mismatch: event used {','.join(event.genes_used)}, solidify got {gene.id}")
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


def commit_message(intent: str, summary: str, event: EvolutionEvent, gene: Gene, mutation: Mutation) -> str:
    """The engine's commit message. Trailers are built from validated values only: ids in the id alphabet,
    the subject and signals redacted and flattened to one line (a newline cannot start a trailer)."""
    subject = ""
    for line in redact(summary or "").splitlines():
        if line.strip():
            subject = " ".join(line.split())
            break
    subject = subject or " ".join((mutation.expected_effect or gene.summary or f"apply {gene.id}").split())
    if len(subject) > C.COMMIT_SUBJECT_CHARS:
        subject = subject[: C.COMMIT_SUBJECT_CHARS - 3].rstrip() + "..."
    signals = ", ".join(" ".join(redact(s).split()) for s in event.signals)
    if len(signals) > C.COMMIT_SIGNALS_CHARS:
        signals = signals[: C.COMMIT_SIGNALS_CHARS - 3].rstrip() + "..."
    trailers = [f"GEP-Event: {_trailer_value(event.id)}", f"GEP-Gene: {_trailer_value(gene.id)}",
                f"GEP-Mutation: {_trailer_value(mutation.id)}"]
    if signals:
        trailers.append(f"GEP-Signals: {signals}")
    kind = intent if intent in {i.value for i in Intent} else "change"
    return f"gep({kind}): {subject}\n\n" + "\n".join(trailers) + "\n"
