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

from collections.abc import Callable
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from gep import constants as C
from gep.canary import CanaryResult, run_canary
from gep.checks import (
    ConstraintCheck,
    check_constraints,
    commit_message,
    failure_reasons,
    kept_violations,
    protocol_violations,
)
from gep.config import Settings
from gep.errors import WorkspaceError
from gep.hashing import compute_asset_id
from gep.models import (
    SCHEMA_VERSION,
    Capsule,
    CycleRun,
    EvolutionEvent,
    FailedCapsule,
    Gene,
    Mutation,
    Outcome,
    OutcomeStatus,
    PreparedSuccess,
    ValidationReport,
    iso,
    utc_now,
)
from gep.records import ValidationLine
from gep.runner import run_validation
from gep.store import Store
from gep.workspace import BlastReport, Workspace


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


class Checked(BaseModel):
    """What the checks found about one change."""

    blast: BlastReport
    check: ConstraintCheck
    protocol: list[str]
    report: ValidationReport
    canary: CanaryResult | None = None
    drift: str = ""  # validation changed the tree it checked: why that fails the change
    empty: bool = False

    def reasons(self) -> list[str]:
        reasons = failure_reasons(self.check, self.report, self.canary, self.protocol)
        if self.drift:
            reasons.insert(len(self.check.violations), self.drift)
        return reasons


# ------------------------------------------------------------------ solidify


def solidify(inp: SolidifyInput) -> SolidifyResult:
    """Check the change; commit it (success), record it as empty, or roll it back (failed)."""
    event = inp.event.model_copy(deep=True)
    _save_stage(inp, "checking")
    checked = check_change(inp, event)
    reasons = [] if checked.empty else checked.reasons()
    message = commit_message(str(event.intent), inp.summary, event, inp.gene, inp.mutation)
    diff = inp.workspace.diff_snapshot(inp.run, C.DIFF_SNAPSHOT_CHARS) if not checked.empty else ""
    if not checked.empty and not reasons and inp.approve is not None and not inp.approve(
            _review_request(event, message, checked.blast, diff)):
        reasons.append("protocol: rejected in review")
    record_checks(inp, event, checked, reasons, len(diff))
    inp.store.add_validation_report(checked.report)
    capsule: Capsule | None = None
    failed: FailedCapsule | None = None
    sha: str | None = None
    if checked.empty:
        event.outcome = Outcome(status=OutcomeStatus.empty, score=0.0)
        inp.store.add_event(_with_asset_id(event))
    elif not reasons:
        capsule, sha = commit_change(inp, event, checked.blast, message, diff)
        if sha is None:
            reasons = event.meta.failure_reasons or []
    if not checked.empty and sha is None:
        failed = roll_back(inp, event, checked, reasons, diff)
    _close(inp, event)
    return SolidifyResult(event=event, capsule=capsule, failed_capsule=failed, report=checked.report,
                          commit_sha=sha)


def _save_stage(inp: SolidifyInput, stage: str) -> None:
    inp.run.stage = stage
    inp.store.save_run(inp.run)


def _review_request(event: EvolutionEvent, message: str, blast: BlastReport, diff: str) -> ReviewRequest:
    return ReviewRequest(event_id=event.id, message=message, files=blast.files, lines=blast.lines,
                         changed_files=blast.changed_files[:100], diff=diff)


def check_change(inp: SolidifyInput, event: EvolutionEvent) -> Checked:
    """Constraints and protocol first; validation and the canary only for a change that passed them."""
    ws, run, settings, gene = inp.workspace, inp.run, inp.settings, inp.gene
    blast = ws.blast_radius(run, settings)
    check = check_constraints(blast=blast, gene=gene, settings=settings, workspace=ws, run=run)
    empty = blast.files == 0 and not check.violations  # touching only kept files is a failure, not nothing
    protocol = protocol_violations(event, gene, inp.mutation)
    branch_problem = ws.check_branch(run, inp.branch)
    if branch_problem:
        protocol.append(f"branch: {branch_problem}")
    checked = Checked(blast=blast, check=check, protocol=protocol, empty=empty, report=ValidationReport(
        id=report_id_for(event.id), gene_id=gene.id, commands=list(gene.validation), results=[],
        overall_ok=empty, started_at=iso(inp.now()), finished_at=iso(inp.now()),
        skipped="empty change" if empty else "constraint violations"))
    if not empty and not check.violations:
        validate(inp, event, checked)  # a change that already broke a constraint is not executed
    checked.report.schema_version = SCHEMA_VERSION
    _with_asset_id(checked.report)
    return checked


def validate(inp: SolidifyInput, event: EvolutionEvent, checked: Checked) -> None:
    """Run the gene's validation and the canary; note what the commands changed in the tree they checked."""
    ws, run, settings = inp.workspace, inp.run, inp.settings
    _save_stage(inp, "validating")
    untracked_before = set(ws.untracked_files())
    prints = ws.fingerprints(checked.blast.changed_files)
    checked.report = run_validation(commands=inp.gene.validation, cwd=ws.path, settings=settings,
                                    gene_id=inp.gene.id, report_id=checked.report.id, now=inp.now)
    if checked.report.overall_ok:
        checked.canary = run_canary(workspace=ws, blast=checked.blast, settings=settings)
    # What the commands wrote: new untracked files are their output (removed, like the tool's run);
    # anything else they changed means the tree that passed is not the tree that would be committed.
    artifacts = ws.remove_new_untracked(run, untracked_before)
    if artifacts:
        event.meta.validation_artifacts_removed = artifacts[:20]
    after = ws.blast_radius(run, settings)
    drift = set(after.changed_files) ^ set(checked.blast.changed_files)
    drift |= {p for p, h in ws.fingerprints(checked.blast.changed_files).items() if prints.get(p) != h}
    if drift:
        shown = sorted(drift)
        event.meta.validation_changed = shown[:50]
        checked.drift = ("validation: the commands changed the workspace they checked: " + ", ".join(shown[:10])
                         + (f" (+{len(shown) - 10} more)" if len(shown) > 10 else ""))
    check = checked.check
    check.violations += [v for v in kept_violations(ws.kept_changes(run)) if v not in check.violations]


def record_checks(inp: SolidifyInput, event: EvolutionEvent, checked: Checked, reasons: list[str],
                  diff_chars: int) -> None:
    blast, check, report, canary = checked.blast, checked.check, checked.report, checked.canary
    event.blast_radius = blast.radius
    event.validation_report_id = report.id
    m = event.meta
    m.empty_cycle = checked.empty
    m.constraint_violations = check.violations
    m.constraint_warnings = check.warnings
    m.blast_severity = check.severity
    m.changed_files = blast.changed_files[:50]
    m.validation = [ValidationLine(cmd=r.cmd, ok=r.ok) for r in report.results]
    m.validation_ok = report.overall_ok
    m.canary_ok = canary.ok if canary is not None else None
    m.canary_skipped = canary.skipped if canary is not None else True
    m.protocol_ok = not checked.protocol
    m.protocol_violations = checked.protocol
    m.failure_reasons = reasons
    m.commit = None
    m.branch = inp.branch or inp.run.branch
    m.diff_chars = diff_chars
    m.solidified_at = iso(inp.now())


def commit_change(inp: SolidifyInput, event: EvolutionEvent, blast: BlastReport, message: str,
                  diff: str) -> tuple[Capsule | None, str | None]:
    """One commit of the change. The success outcome is saved on the run first: if the process dies right
    after the commit, recovery records it instead of rolling back validated work."""
    gene, store, run = inp.gene, inp.store, inp.run
    capsule = Capsule(id=capsule_id_for(event.id), trigger=event.signals[:8], gene=gene.id,
                      summary=message.splitlines()[0].split(": ", 1)[-1], confidence=C.SUCCESS_SCORE,
                      blast_radius=blast.radius, outcome=Outcome(status="success", score=C.SUCCESS_SCORE),
                      success_streak=success_streak(store, gene.id, event.id), diff=diff,
                      schema_version=SCHEMA_VERSION)
    event.outcome = Outcome(status=OutcomeStatus.success, score=C.SUCCESS_SCORE)
    event.capsule_id = capsule.id
    run.pending.solidify = PreparedSuccess(event=event.model_copy(deep=True), capsule=capsule, branch=inp.branch)
    _save_stage(inp, "committing")
    try:
        sha = inp.workspace.commit(run, message=message, branch=inp.branch, files=blast.changed_files)
    except WorkspaceError as exc:
        event.capsule_id = None
        event.meta.add_failure(f"protocol: commit failed: {exc}")
        return None, None
    _save_stage(inp, "committed")
    capsule.commit = sha
    store.upsert_capsule(_with_asset_id(capsule))
    event.meta.commit = sha
    store.add_event(_with_asset_id(event))
    return capsule, sha


def roll_back(inp: SolidifyInput, event: EvolutionEvent, checked: Checked, reasons: list[str],
              diff: str) -> FailedCapsule:
    """Record the failure (a FailedCapsule with its diff, then the event), then undo the change. The final
    record goes first: a crash during the rollback keeps the real reasons."""
    gene = inp.gene
    failed = FailedCapsule(
        id=failed_capsule_id_for(event.id), gene=gene.id, trigger=event.signals[:8],
        summary=f"Failed: {gene.id} on signals [{', '.join(event.signals[:3]) or 'none'}]",
        outcome=Outcome(status="failed", score=C.FAILURE_SCORE), diff_snapshot=diff,
        failure_reason="; ".join(reasons)[: C.FAILURE_REASON_CHARS],
        constraint_violations=checked.check.violations, blast_radius=checked.blast.radius,
        created_at=iso(inp.now()), schema_version=SCHEMA_VERSION)
    inp.store.add_failed_capsule(_with_asset_id(failed))
    event.outcome = Outcome(status=OutcomeStatus.failed, score=C.FAILURE_SCORE)
    inp.store.add_event(_with_asset_id(event))
    _save_stage(inp, "rolling_back")
    inp.workspace.rollback(inp.run)
    return failed


def _close(inp: SolidifyInput, event: EvolutionEvent) -> None:
    try:
        inp.workspace.restore_user_changes(inp.run)
    except WorkspaceError as exc:
        event.meta.add_warning(str(exc))
        inp.store.add_event(_with_asset_id(event))
    inp.store.close_run(inp.run.event_id)
    inp.run.status = "closed"
