"""Check a cycle's change, then commit it or roll it back, and record the outcome.

Checks, in order: blast radius against the gene's ``max_files`` and the hard caps, forbidden and protected
paths, the user's stashed files (``--allow-dirty``), protocol rules (mutation, personality, intent), the
gene's validation commands through the safe runner (skipped when a constraint already failed: a change
that touched forbidden paths is not executed), and the canary. Success needs all of them and a
non-empty change; a change of nothing is recorded as ``empty`` and is not a success.

Crash safety. Before committing, the complete success outcome (event and capsule) is saved on the run
record (stage ``committing``); the commit carries ``GEP-Event: <id>``. If the process dies between the
commit and the event write, recovery finds that commit and records the prepared success (with the sha)
instead of rolling back validated work; without the commit it rolls back and records ``interrupted``.
On failure the final event is written *before* the rollback, so a crash during rollback keeps the real
reasons. Every id is derived from the event id and every write is an upsert: nothing is duplicated.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from collections.abc import Callable
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from gep import constants as C
from gep.assets import is_valid_gene_id
from gep.config import CONFIG_FILE, GEP_DIR, Settings
from gep.errors import WorkspaceError
from gep.hashing import compute_asset_id
from gep.models import (
    SCHEMA_VERSION,
    Capsule,
    CommandResult,
    CycleRun,
    EvolutionEvent,
    FailedCapsule,
    Gene,
    Intent,
    Mutation,
    Outcome,
    OutcomeStatus,
    RiskLevel,
    ValidationReport,
    iso,
    utc_now,
)
from gep.mutation import is_high_risk_mutation_allowed, is_high_risk_personality
from gep.runner import run_argv, run_command, run_validation
from gep.sanitize import redact
from gep.store import Store
from gep.tools import is_forbidden
from gep.workspace import BlastReport, FileChange, KeptChange, Workspace

ALWAYS_FORBIDDEN = [".git", GEP_DIR]


class ConstraintCheck(BaseModel):
    violations: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    severity: str = "within_limit"  # within_limit | approaching_limit | exceeded | critical_overrun | hard_cap_breach
    severity_message: str = ""


class CanaryResult(BaseModel):
    ok: bool
    skipped: bool = False
    result: CommandResult | None = None


class ReviewRequest(BaseModel):
    """What a reviewer sees before approving the commit (``--review``)."""

    event_id: str
    message: str
    files: int
    lines: int
    changed_files: list[str]
    diff: str

    def __str__(self) -> str:
        return f"{self.message.splitlines()[0]} ({self.files} files, {self.lines} lines)"


class SolidifyInput(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    workspace: Workspace
    store: Store
    settings: Settings
    run: CycleRun
    event: EvolutionEvent
    gene: Gene
    mutation: Mutation
    summary: str = ""
    branch: str | None = None
    now: Callable[[], datetime] = utc_now
    approve: Callable[[ReviewRequest], bool] | None = None


class SolidifyResult(BaseModel):
    event: EvolutionEvent
    capsule: Capsule | None = None
    failed_capsule: FailedCapsule | None = None
    report: ValidationReport
    commit_sha: str | None = None


# ------------------------------------------------------------------ ids (derived, so re-runs upsert)


def _suffix(event_id: str) -> str:
    return event_id.removeprefix("evt_")


def capsule_id_for(event_id: str) -> str:
    return f"capsule_{_suffix(event_id)}"


def failed_capsule_id_for(event_id: str) -> str:
    return f"failed_capsule_{_suffix(event_id)}"


def report_id_for(event_id: str) -> str:
    return f"vr_{_suffix(event_id)}"


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
    new = target.read_bytes()
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
    personality_meta = event.meta.get("personality")
    known = bool(personality_meta.get("known")) if isinstance(personality_meta, dict) else False
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


# ------------------------------------------------------------------ canary


def run_canary(*, workspace: Workspace, blast: BlastReport, settings: Settings) -> CanaryResult:
    """Does the workspace still load? Default: byte-compile the changed Python files (nothing written)."""
    mode = (settings.canary or "").strip()
    if mode in ("", "none"):
        return CanaryResult(ok=True, skipped=True)
    if mode == "compileall":
        files = [c.path for c in blast.changes
                 if c.status != "deleted" and c.path.endswith(".py") and (workspace.path / c.path).is_file()]
        if not files:
            return CanaryResult(ok=True, skipped=True)
        with tempfile.TemporaryDirectory(prefix="gep-canary-") as cache:
            # the bytecode goes to a temp dir, so the canary leaves nothing in the workspace
            res = run_argv(["python", "-m", "compileall", "-q", *[f"./{f}" for f in files]], cwd=workspace.path,
                           settings=settings, display=f"compileall ({len(files)} changed .py files)",
                           extra_env={"PYTHONPYCACHEPREFIX": cache})
        return CanaryResult(ok=res.ok, result=res)
    res = run_command(mode, cwd=workspace.path, settings=settings)
    return CanaryResult(ok=res.ok, result=res)


# ------------------------------------------------------------------ outcome pieces


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


def success_streak(store: Store, gene_id: str, current_event_id: str) -> int:
    """1 + the gene's consecutive successes just before this one (a failure ends the streak)."""
    streak = 1
    for ev in store.list_events(limit=200):
        if ev.id == current_event_id or gene_id not in ev.genes_used:
            continue
        if ev.outcome.status == OutcomeStatus.success.value:
            streak += 1
        elif ev.outcome.status == OutcomeStatus.failed.value:
            break
    return streak


def _with_asset_id(model: Any) -> Any:
    model.asset_id = None
    model.asset_id = compute_asset_id(model.to_asset())
    return model


# ------------------------------------------------------------------ solidify


def solidify(inp: SolidifyInput) -> SolidifyResult:
    ws, store, settings, run, gene, mutation = inp.workspace, inp.store, inp.settings, inp.run, inp.gene, inp.mutation
    event = inp.event.model_copy(deep=True)
    run.stage = "checking"
    store.save_run(run)

    blast = ws.blast_radius(run, settings)
    check = check_constraints(blast=blast, gene=gene, settings=settings, workspace=ws, run=run)
    empty = blast.files == 0 and not check.violations  # touching only kept files is a failure, not nothing
    protocol = protocol_violations(event, gene, mutation)
    branch_problem = ws.check_branch(run, inp.branch)
    if branch_problem:
        protocol.append(f"branch: {branch_problem}")

    report_id = report_id_for(event.id)
    canary: CanaryResult | None = None
    validation_drift = ""
    if empty or check.violations:
        # nothing to validate, or a change that already broke a constraint: do not execute it
        report = ValidationReport(id=report_id, gene_id=gene.id, commands=list(gene.validation), results=[],
                                  overall_ok=empty, started_at=iso(inp.now()), finished_at=iso(inp.now()),
                                  skipped="empty change" if empty else "constraint violations")
    else:
        run.stage = "validating"
        store.save_run(run)
        untracked_before = set(ws.untracked_files())
        prints = ws.fingerprints(blast.changed_files)
        report = run_validation(commands=gene.validation, cwd=ws.path, settings=settings, gene_id=gene.id,
                                report_id=report_id, now=inp.now)
        if report.overall_ok:
            canary = run_canary(workspace=ws, blast=blast, settings=settings)
        # What the commands wrote: new untracked files are their output (removed, like the tool's run);
        # anything else they changed means the tree that passed is not the tree that would be committed.
        artifacts = ws.remove_new_untracked(run, untracked_before)
        if artifacts:
            event.meta["validation_artifacts_removed"] = artifacts[:20]
        after = ws.blast_radius(run, settings)
        drift = set(after.changed_files) ^ set(blast.changed_files)
        drift |= {p for p, h in ws.fingerprints(blast.changed_files).items() if prints.get(p) != h}
        if drift:
            shown = sorted(drift)
            event.meta["validation_changed"] = shown[:50]
            validation_drift = ("validation: the commands changed the workspace they checked: " + ", ".join(shown[:10])
                                + (f" (+{len(shown) - 10} more)" if len(shown) > 10 else ""))
        check.violations += [v for v in kept_violations(ws.kept_changes(run)) if v not in check.violations]
    report.schema_version = SCHEMA_VERSION
    _with_asset_id(report)

    reasons = failure_reasons(check, report, canary, protocol)
    if validation_drift:
        reasons.insert(len(check.violations), validation_drift)
    message = commit_message(str(event.intent), inp.summary, event, gene, mutation)
    diff = ws.diff_snapshot(run, C.DIFF_SNAPSHOT_CHARS) if not empty else ""
    if not empty and not reasons and inp.approve is not None:
        request = ReviewRequest(event_id=event.id, message=message, files=blast.files, lines=blast.lines,
                                changed_files=blast.changed_files[:100], diff=diff)
        if not inp.approve(request):
            reasons.append("protocol: rejected in review")
    success = not empty and not reasons

    event.blast_radius = blast.radius
    event.validation_report_id = report.id
    event.meta.update({
        "empty_cycle": empty,
        "constraint_violations": check.violations,
        "constraint_warnings": check.warnings,
        "blast_severity": check.severity,
        "changed_files": blast.changed_files[:50],
        "validation": [{"cmd": r.cmd, "ok": r.ok} for r in report.results],
        "validation_ok": report.overall_ok,
        "canary_ok": canary.ok if canary is not None else None,
        "canary_skipped": canary.skipped if canary is not None else True,
        "protocol_ok": not protocol,
        "protocol_violations": protocol,
        "failure_reasons": [] if empty else reasons,
        "commit": None,
        "branch": inp.branch or run.branch,
        "diff_chars": len(diff),
        "solidified_at": iso(inp.now()),
    })
    store.add_validation_report(report)

    capsule: Capsule | None = None
    failed: FailedCapsule | None = None
    sha: str | None = None
    if empty:
        event.outcome = Outcome(status=OutcomeStatus.empty.value, score=0.0)
        store.add_event(_with_asset_id(event))
    elif success:
        capsule = Capsule(id=capsule_id_for(event.id), trigger=event.signals[:8], gene=gene.id,
                          summary=message.splitlines()[0].split(": ", 1)[-1], confidence=C.SUCCESS_SCORE,
                          blast_radius=blast.radius, outcome=Outcome(status="success", score=C.SUCCESS_SCORE),
                          success_streak=success_streak(store, gene.id, event.id), diff=diff,
                          schema_version=SCHEMA_VERSION)
        event.outcome = Outcome(status=OutcomeStatus.success.value, score=C.SUCCESS_SCORE)
        event.capsule_id = capsule.id
        # the prepared outcome: what recovery records if we die right after the commit
        run.stage = "committing"
        run.pending = {**run.pending, "solidify": {"event": event.model_dump(mode="json"),
                                                   "capsule": capsule.model_dump(mode="json"),
                                                   "branch": inp.branch}}
        store.save_run(run)
        try:
            sha = ws.commit(run, message=message, branch=inp.branch, files=blast.changed_files)
        except WorkspaceError as exc:
            success, capsule = False, None
            reasons.append(f"protocol: commit failed: {exc}")
            event.capsule_id = None
            event.meta["failure_reasons"] = reasons
        else:
            run.stage = "committed"
            store.save_run(run)
            capsule.commit = sha
            store.upsert_capsule(_with_asset_id(capsule))
            event.meta["commit"] = sha
            store.add_event(_with_asset_id(event))
    if not empty and not success:
        failed = FailedCapsule(
            id=failed_capsule_id_for(event.id), gene=gene.id, trigger=event.signals[:8],
            summary=f"Failed: {gene.id} on signals [{', '.join(event.signals[:3]) or 'none'}]",
            outcome=Outcome(status="failed", score=C.FAILURE_SCORE), diff_snapshot=diff,
            failure_reason="; ".join(reasons)[: C.FAILURE_REASON_CHARS], constraint_violations=check.violations,
            blast_radius=blast.radius, created_at=iso(inp.now()), schema_version=SCHEMA_VERSION)
        store.add_failed_capsule(_with_asset_id(failed))
        event.outcome = Outcome(status=OutcomeStatus.failed.value, score=C.FAILURE_SCORE)
        # the final record goes first: a crash during the rollback keeps the real reasons
        store.add_event(_with_asset_id(event))
        run.stage = "rolling_back"
        store.save_run(run)
        ws.rollback(run)

    try:
        ws.restore_user_changes(run)
    except WorkspaceError as exc:
        event.meta["warnings"] = [*event.meta.get("warnings", []), str(exc)]
        store.add_event(_with_asset_id(event))
    store.close_run(run.event_id)
    run.status = "closed"
    return SolidifyResult(event=event, capsule=capsule, failed_capsule=failed, report=report, commit_sha=sha)
