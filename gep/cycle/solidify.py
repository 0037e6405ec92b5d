"""Check a cycle's change, then commit and deliver it, or end the cycle without it, and record the outcome.

Checks, in order: blast radius against the gene's ``max_files`` and the hard caps, forbidden and protected
paths, what an agent did with git in its clone, protocol rules (mutation, personality, intent), the
validation commands in the sandbox (skipped when a constraint already failed: a change that touched
forbidden paths is not executed), and the canary. Success needs all of them and a non-empty change; a
change of nothing is recorded as ``empty`` and is not a success.

A model's or an agent's change (in its clone) that fails is discarded: the clone is deleted and its diff
saved under ``.gep/rescued/<event>.patch``. A person's change (prompt mode) is never discarded: when it
fails, or validation cannot run here, the edits stay and the cycle keeps awaiting changes.

Crash safety. Before committing, the complete success outcome (event and capsule) is saved on the run
record (stage ``committing``); the commit carries ``GEP-Event: <id>``. If the process dies once the commit
is on a branch, recovery finds it and records the prepared success. On failure the final event is written
*before* the clone is discarded, so a crash then keeps the real reasons. Every id is derived from the event
id and every write is an upsert: nothing is duplicated.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from gep.core import constants
from gep.core.config import Settings, validation_commands
from gep.core.errors import WorkspaceError
from gep.core.hashing import compute_asset_id
from gep.core.models import (
    SCHEMA_VERSION,
    BlastRadius,
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
from gep.core.records import ValidationLine
from gep.cycle.change_excerpt import change_excerpt
from gep.cycle.checks import (
    ConstraintCheck,
    check_constraints,
    commit_message,
    failure_reasons,
    protocol_violations,
)
from gep.cycle.commit_change import Delivered, deliver_change
from gep.cycle.commit_subject import diff_subject
from gep.cycle.tree import CycleTree, TreeChange
from gep.cycle.validate import Validated, revalidation_reasons, validate_tree
from gep.learning.attribution import validation_host_failure
from gep.store import Store
from gep.validation.report_verdict import not_run

REJECTED_IN_REVIEW = "protocol: rejected in review"  # the reviewer's verdict, recorded as theirs alone


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

    tree: CycleTree
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
    delivered: Delivered | None = None


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


def with_asset_id(model: Any) -> Any:
    model.asset_id = None
    model.asset_id = compute_asset_id(model.to_asset())
    return model


class Checked(BaseModel):
    """What the checks found about one change."""

    tc: TreeChange
    check: ConstraintCheck
    protocol: list[str]
    validated: Validated
    empty: bool = False

    @property
    def report(self) -> ValidationReport:
        return self.validated.report

    def reasons(self) -> list[str]:
        reasons = failure_reasons(self.check, self.report, self.validated.canary, self.protocol)
        if self.validated.drift:
            reasons.insert(len(self.check.violations), self.validated.drift_reason())
        return reasons


# ------------------------------------------------------------------ solidify


def solidify(inp: SolidifyInput) -> SolidifyResult:
    """Check the change; commit and deliver it (success), record it as empty, or end the cycle without it."""
    event = inp.event.model_copy(deep=True)
    _save_stage(inp, "checking")
    try:
        checked = check_change(inp, event)
    except WorkspaceError as exc:  # the engine's own git could not read the change (issue 32)
        return unreadable_change(inp, event, f"git: the engine could not read the change: {exc}")
    reasons = [] if checked.empty else checked.reasons()
    diff = inp.tree.diff(checked.tc, constants.DIFF_SNAPSHOT_CHARS)
    summary = inp.summary or diff_subject(checked.tc.paths, diff)  # what changed, not the gene's template
    message = commit_message(str(event.intent), summary, event, inp.gene, inp.mutation)
    if not checked.empty and not reasons and inp.approve is not None and not inp.approve(
            _review_request(event, message, checked.tc, diff)):
        reasons.append(REJECTED_IN_REVIEW)
    record_checks(inp, event, checked, reasons, diff)
    inp.store.add_validation_report(checked.report)
    if checked.empty:
        return finish_empty(inp, event, checked.report)
    if not reasons:
        done = commit_and_deliver(inp, event, checked, message, diff)
        if done is not None:
            return done
        reasons = event.meta.failure_reasons or []
    if inp.tree.mode == "in_place":
        return keep_awaiting(inp, event, checked, reasons)
    return discard_change(inp, event, checked, reasons, diff)


def _save_stage(inp: SolidifyInput, stage: str) -> None:
    inp.run.stage = stage
    inp.store.save_run(inp.run)


def _review_request(event: EvolutionEvent, message: str, tc: TreeChange, diff: str) -> ReviewRequest:
    radius = tc.radius
    return ReviewRequest(event_id=event.id, message=message, files=radius.files, lines=radius.lines,
                         changed_files=tc.paths[:100], diff=diff)


def check_change(inp: SolidifyInput, event: EvolutionEvent) -> Checked:
    """Constraints and protocol first; validation and the canary only for a change that passed them."""
    tc = inp.tree.read()
    check = check_constraints(tc=tc, tree=inp.tree, gene=inp.gene, settings=inp.settings)
    empty = tc.empty and not check.violations  # a change no commit can hold that broke a rule is a failure
    protocol = protocol_violations(event, inp.gene, inp.mutation)
    commands = validation_commands(inp.settings, inp.gene.validation)
    report = ValidationReport(id=report_id_for(event.id), gene_id=inp.gene.id, commands=commands, results=[],
                              overall_ok=empty, started_at=iso(inp.now()), finished_at=iso(inp.now()),
                              skipped="empty change" if empty else "constraint violations")
    validated = Validated(report=report)
    if not empty and not check.violations:  # a change that already broke a constraint is not executed
        _save_stage(inp, "validating")
        validated = validate_tree(inp.tree, tc, commands=commands, settings=inp.settings, gene_id=inp.gene.id,
                                  report_id=report.id, now=inp.now)
    validated.report.schema_version = SCHEMA_VERSION
    with_asset_id(validated.report)
    return Checked(tc=tc, check=check, protocol=protocol, validated=validated, empty=empty)


def record_checks(inp: SolidifyInput, event: EvolutionEvent, checked: Checked, reasons: list[str],
                  diff: str) -> None:
    check, report, canary, radius = checked.check, checked.report, checked.validated.canary, checked.tc.radius
    event.blast_radius = BlastRadius(files=radius.files, lines=radius.lines, bytes=radius.bytes)
    event.validation_report_id = report.id
    m = event.meta
    m.empty_cycle = checked.empty
    m.constraint_violations = check.violations
    m.constraint_warnings = check.warnings
    m.blast_severity = check.severity
    m.changed_files = checked.tc.paths[:50]
    m.validation = [ValidationLine(cmd=r.cmd, ok=r.ok) for r in report.results]
    m.validation_ok = report.overall_ok
    m.validation_artifacts_removed = checked.validated.artifacts[:20] or None
    m.validation_changed = sorted(checked.validated.drift)[:50] or None
    m.sandbox = report.sandbox
    m.canary_ok = canary.ok if canary is not None else None
    m.canary_skipped = canary.skipped if canary is not None else True
    m.protocol_ok = not checked.protocol
    m.protocol_violations = checked.protocol
    m.failure_reasons = reasons
    m.not_run = not_run(report) if reasons else None
    # only a change that broke no rule of its own can blame the host for validation that could not run
    m.host_failure = (validation_host_failure(report) if reasons and not check.violations and not checked.protocol
                      else None)
    m.commit = None
    m.branch = inp.branch or inp.run.branch
    m.diff_chars = len(diff)
    m.change_excerpt = change_excerpt(diff) or None  # what was tried, kept though a failed change is discarded
    m.solidified_at = iso(inp.now())


# ------------------------------------------------------------------ the outcomes


def finish_empty(inp: SolidifyInput, event: EvolutionEvent, report: ValidationReport) -> SolidifyResult:
    """Nothing any commit could hold: recorded as empty; the clone (or baseline) is dropped."""
    event.outcome = Outcome(status=OutcomeStatus.empty, score=0.0)
    inp.store.add_event(with_asset_id(event))
    inp.tree.close()
    _close(inp)
    return SolidifyResult(event=event, report=report)


def _revalidate(inp: SolidifyInput, event: EvolutionEvent) -> Callable[[TreeChange], list[str]]:
    def again(tc: TreeChange) -> list[str]:
        _save_stage(inp, "revalidating")
        v = validate_tree(inp.tree, tc, commands=validation_commands(inp.settings, inp.gene.validation),
                          settings=inp.settings, gene_id=inp.gene.id, report_id=report_id_for(event.id) + "_rebased",
                          now=inp.now)
        _save_stage(inp, "committing")
        return revalidation_reasons(v)

    return again


def commit_and_deliver(inp: SolidifyInput, event: EvolutionEvent, checked: Checked, message: str,
                       diff: str) -> SolidifyResult | None:
    """Commit and deliver; the success outcome is saved on the run first, so a process that dies once the
    commit is on a branch is recorded by recovery as the success it was. None when delivery failed (the
    reasons are in ``event.meta.failure_reasons``)."""
    store, radius = inp.store, checked.tc.radius
    capsule = Capsule(id=capsule_id_for(event.id), trigger=event.signals[:8], gene=inp.gene.id,
                      summary=message.splitlines()[0].split(": ", 1)[-1], confidence=constants.SUCCESS_SCORE,
                      blast_radius=BlastRadius(files=radius.files, lines=radius.lines, bytes=radius.bytes),
                      outcome=Outcome(status="success", score=constants.SUCCESS_SCORE),
                      success_streak=success_streak(store, inp.gene.id, event.id), diff=diff,
                      schema_version=SCHEMA_VERSION)
    event.outcome = Outcome(status=OutcomeStatus.success, score=constants.SUCCESS_SCORE)
    event.capsule_id = capsule.id
    inp.run.pending.solidify = PreparedSuccess(event=event.model_copy(deep=True), capsule=capsule, branch=inp.branch)
    _save_stage(inp, "committing")
    try:
        d = deliver_change(inp.tree, checked.tc, message, branch=inp.branch, max_rebases=inp.settings.max_rebases,
                           revalidate=_revalidate(inp, event))
    except WorkspaceError as exc:
        d = Delivered(status="failed", reasons=[f"commit failed: {exc}"])
    record_delivery(event, d)
    if d.status == "nothing":
        event.capsule_id = None
        return finish_empty(inp, event, checked.report)
    if not d.ok:
        event.capsule_id = None
        for r in d.reasons:
            event.meta.add_failure(r if r.startswith("after rebasing") else f"protocol: {r}")
        return None
    _save_stage(inp, "committed")
    capsule.commit = d.commit
    store.upsert_capsule(with_asset_id(capsule))
    store.add_event(with_asset_id(event))
    _close(inp)
    return SolidifyResult(event=event, capsule=capsule, report=checked.report, commit_sha=d.commit, delivered=d)


def record_delivery(event: EvolutionEvent, d: Delivered) -> None:
    m = event.meta
    if d.ok:
        m.commit, m.branch, m.delivery = d.commit, d.branch, d.status  # type: ignore[assignment]
        m.merge_command = d.command or None
    notes = list(d.rebased) + ([f"kept: {'; '.join(d.reasons)}"] if d.status == "kept" and d.reasons else [])
    m.delivery_note = "; ".join(notes) or None
    m.refs_restored = d.restored or None


def discard_change(inp: SolidifyInput, event: EvolutionEvent, checked: Checked, reasons: list[str],
                   diff: str) -> SolidifyResult:
    """A model's or an agent's change failed: record it (a FailedCapsule with its diff, then the event), then
    delete the clone, its change saved as a patch. The final record goes first: a crash while discarding
    keeps the real reasons. A host failure (validation could not run here) leaves no failed capsule: no ban
    counts it."""
    gene, store = inp.gene, inp.store
    failed: FailedCapsule | None = FailedCapsule(
        id=failed_capsule_id_for(event.id), gene=gene.id, trigger=event.signals[:8],
        summary=f"Failed: {gene.id} on signals [{', '.join(event.signals[:3]) or 'none'}]",
        outcome=Outcome(status="failed", score=constants.FAILURE_SCORE), diff_snapshot=diff,
        failure_reason="; ".join(reasons)[: constants.FAILURE_REASON_CHARS],
        constraint_violations=checked.check.violations, blast_radius=event.blast_radius,
        created_at=iso(inp.now()), schema_version=SCHEMA_VERSION)
    if event.meta.host_failure is not None:
        failed = None
    else:
        store.add_failed_capsule(with_asset_id(failed))
    event.outcome = Outcome(status=OutcomeStatus.failed, score=constants.FAILURE_SCORE)
    event.meta.failure_reasons = reasons
    store.add_event(with_asset_id(event))
    _save_stage(inp, "discarding")
    rescue = inp.tree.discard(checked.tc)
    if rescue.patch is not None:
        event.meta.rescued_patch, event.meta.rescue_command = str(rescue.patch), rescue.command
        store.add_event(with_asset_id(event))
    _close(inp)
    return SolidifyResult(event=event, failed_capsule=failed, report=checked.report)


def keep_awaiting(inp: SolidifyInput, event: EvolutionEvent, checked: Checked, reasons: list[str]) -> SolidifyResult:
    """A person's change failed, or could not be validated here: nothing is rolled back, the cycle keeps
    awaiting changes with the reasons, and the person fixes and runs `gep solidify` again (or abandons)."""
    m = event.meta
    m.failure_reasons = reasons
    m.solidify_attempts = (m.solidify_attempts or 0) + 1
    event.outcome = Outcome(status=OutcomeStatus.awaiting_changes, score=0.0)
    event.capsule_id = None
    inp.store.add_event(with_asset_id(event))
    run = inp.run
    run.status, run.stage = "awaiting_changes", "awaiting_changes"
    run.pending.event, run.pending.solidify = event.model_copy(deep=True), None
    inp.store.save_run(run)
    return SolidifyResult(event=event, report=checked.report)


def unreadable_change(inp: SolidifyInput, event: EvolutionEvent, reason: str) -> SolidifyResult:
    """A change the engine's git cannot read: a clone's is failed (saved raw, the clone removed); a person's
    keeps awaiting with the reason (their files are theirs to fix)."""
    report = ValidationReport(id=report_id_for(event.id), gene_id=inp.gene.id, commands=[], results=[],
                              overall_ok=False, started_at=iso(inp.now()), finished_at=iso(inp.now()),
                              skipped="the change could not be read")
    m = event.meta
    m.failure_reasons, m.validation_ok = [reason], False
    if inp.tree.mode == "in_place":
        m.solidify_attempts = (m.solidify_attempts or 0) + 1
        event.outcome = Outcome(status=OutcomeStatus.awaiting_changes, score=0.0)
        inp.store.add_event(with_asset_id(event))
        inp.run.status, inp.run.stage = "awaiting_changes", "awaiting_changes"
        inp.run.pending.event, inp.run.pending.solidify = event.model_copy(deep=True), None
        inp.store.save_run(inp.run)
        return SolidifyResult(event=event, report=report)
    event.outcome = Outcome(status=OutcomeStatus.failed, score=constants.FAILURE_SCORE)
    inp.store.add_event(with_asset_id(event))  # the final record first: a crash while discarding keeps it
    _save_stage(inp, "discarding")
    rescue = inp.tree.discard()
    if rescue.patch is not None:
        m.rescued_patch, m.rescue_command = str(rescue.patch), rescue.command
        inp.store.add_event(with_asset_id(event))
    _close(inp)
    return SolidifyResult(event=event, report=report)


def _close(inp: SolidifyInput) -> None:
    inp.store.close_run(inp.run.event_id)
    inp.run.status = "closed"
