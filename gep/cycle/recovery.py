"""Crash recovery: what the next cycle, or `gep recover`, does about cycles that died.

Call :func:`recover_workspace` holding the workspace lock: every run still recorded as running is then
dead. The git side comes first (gep/git/crash_repair.py): an interrupted write of the user's index is finished
or undone and the ``index.lock`` the engine left is removed (and named), dead clones are removed with their
change saved as a patch, stale pins dropped. Then each dead run is recorded:

* its commit is on the user's branch, on ``gep/<event>`` or on the branch the user named: the success it
  already was (the outcome prepared before committing), saying so;
* a prompt-mode cycle killed during `gep solidify`: awaiting changes again, the person's files as they were;
* its final outcome was already written (a failure being discarded): kept as it was;
* otherwise: interrupted, with the patch that holds its change when there was one.

A run awaiting changes whose event still says running (killed between writing the two) gets the event it held.

Events left "running" or "awaiting changes" without a readable run (a row moved aside as unreadable, a
crash between writing the event and the run) are recorded as interrupted: nothing stays open for good.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from gep.core import constants
from gep.core.errors import GepError
from gep.core.hashing import compute_asset_id
from gep.core.models import BlastRadius, CycleRun, EvolutionEvent, Outcome, OutcomeStatus
from gep.git import Radius, Repo, clone_change, close_in_place, find_event_commit, load_in_place, load_record
from gep.git.crash_repair import recover_git
from gep.git.plumbing import shell_quote
from gep.git.rescue import RESCUED, apply_command
from gep.store import Store

FINAL = {OutcomeStatus.success, OutcomeStatus.failed, OutcomeStatus.empty, OutcomeStatus.abandoned,
         OutcomeStatus.interrupted}
ORPHAN_SCAN = 200  # newest events looked at for one left open without a run


class RecoveredRun(BaseModel):
    event_id: str
    outcome: OutcomeStatus  # success (it had committed), interrupted, awaiting_changes, or as already recorded
    head_sha: str = ""  # the baseline the cycle started from
    commit: str | None = None
    where: str | None = None  # the branch the commit is on
    note: str = ""


class Recovery(BaseModel):
    runs: list[RecoveredRun] = Field(default_factory=list)
    actions: list[str] = Field(default_factory=list)  # the git side: index.lock removed, clones removed ...
    warnings: list[str] = Field(default_factory=list)  # unreadable run records moved aside, gone baselines


def recover_workspace(repo: Repo, store: Store) -> Recovery:
    """Clean up after dead cycles and record their outcomes (hold the workspace lock)."""
    out = Recovery()
    runs = store.open_runs()
    out.warnings += store.take_warnings()
    dead = [r for r in runs if r.status == "running"]
    resumable = {r.event_id for r in dead if r.mode == "in_place" and r.awaited}
    live = {r.event_id for r in runs if r.status == "awaiting_changes"} | resumable
    radii = {r.event_id: _clone_radius(repo, r.event_id) for r in dead if r.mode == "clone"}
    report = recover_git(repo, live)
    out.actions += report.actions
    for run in dead:
        out.runs.append(_finish(repo, store, run, radii.get(run.event_id), resumable, out.warnings))
    out.runs += _stale_awaiting(store, [r for r in runs if r.status == "awaiting_changes"])
    out.runs += _orphans(store, {r.event_id for r in runs})
    return out


def _stale_awaiting(store: Store, awaiting: list[CycleRun]) -> list[RecoveredRun]:
    """Runs awaiting changes whose event was never brought up to date (the cycle died between writing the two):
    the event the run holds, the one it was about to write, is recorded."""
    out: list[RecoveredRun] = []
    for run in awaiting:
        stored = store.get_event(run.event_id)
        pending = run.pending.event
        if pending is None or (stored is not None and stored.outcome.status != OutcomeStatus.running):
            continue
        store.add_event(pending)
        out.append(RecoveredRun(event_id=run.event_id, outcome=OutcomeStatus(pending.outcome.status),
                                head_sha=run.head_sha, note="it awaits your changes; its record was brought up to date"))
    return out


def _clone_radius(repo: Repo, event_id: str) -> Radius | None:
    """What a dead clone had changed (read before recovery removes it), None when there is no clone."""
    rec = load_record(repo, event_id)
    if rec is None or not rec.path.is_dir():
        return None
    try:
        return clone_change(repo, rec).radius(("tracked",))
    except (GepError, OSError, ValueError):  # a broken clone is removed all the same; its size is unknown
        return None


def _finish(repo: Repo, store: Store, run: CycleRun, radius: Radius | None, resumable: set[str],
            warnings: list[str]) -> RecoveredRun:
    stored = store.get_event(run.event_id)
    found = None
    if repo.git().sha(f"{run.head_sha}^{{commit}}") is None:
        warnings.append(f"cycle {run.event_id}: its baseline commit {run.head_sha[:12]} is gone; "
                        "recorded as interrupted")
    else:
        named = [b for b in [run.pending.branch] if b]
        found = find_event_commit(repo, run.event_id, since=run.head_sha, depth=constants.RECOVERY_LOG_DEPTH, branches=named)
    if found is not None:
        out = _record_committed(repo, store, run, stored, *found)
    elif run.event_id in resumable:
        return _await_again(store, run)
    elif stored is not None and stored.outcome.status in FINAL:
        _note_patch(repo, store, stored)
        out = RecoveredRun(event_id=run.event_id, outcome=OutcomeStatus(stored.outcome.status), head_sha=run.head_sha)
    else:
        out = _record_interrupted(repo, store, run, stored, radius)
    if run.mode == "in_place" and (rec := load_in_place(repo, run.event_id)) is not None:
        close_in_place(repo, rec)
    store.close_run(run.event_id)
    return out


def _where(repo: Repo, ref: str) -> tuple[str, str | None]:
    """(delivery, merge command) for a commit found on ``ref`` (HEAD, gep/<event> or a named branch)."""
    if ref == "HEAD":
        return "landed", None
    return "kept", f"git -C {shell_quote(str(repo.path))} merge {shell_quote(ref)}"


def _record_committed(repo: Repo, store: Store, run: CycleRun, stored: EvolutionEvent | None, commit: str,
                      ref: str) -> RecoveredRun:
    """The cycle's commit is on a branch: it passed every check, so record the success it had prepared."""
    prepared = run.pending.solidify
    event = prepared.event.model_copy(deep=True) if prepared else stored or EvolutionEvent(id=run.event_id)
    delivery, command = _where(repo, ref)
    event.outcome = Outcome(status=OutcomeStatus.success, score=constants.SUCCESS_SCORE)
    m = event.meta
    m.commit, m.delivery, m.merge_command = commit, delivery, command  # type: ignore[assignment]
    m.branch = run.branch if ref == "HEAD" else ref
    m.empty_cycle = False if m.empty_cycle is None else m.empty_cycle
    m.recovery = f"the cycle had committed {commit[:12]} ({'landed' if ref == 'HEAD' else 'on ' + ref}) before it died"
    if prepared and prepared.capsule:
        capsule = prepared.capsule.model_copy(deep=True)
        capsule.commit = commit
        capsule.asset_id = None
        capsule.asset_id = compute_asset_id(capsule.to_asset())
        store.upsert_capsule(capsule)
        event.capsule_id = capsule.id
    store.add_event(event)
    return RecoveredRun(event_id=run.event_id, outcome=OutcomeStatus.success, head_sha=run.head_sha, commit=commit,
                        where=None if ref == "HEAD" else ref)


def _await_again(store: Store, run: CycleRun) -> RecoveredRun:
    """A prompt-mode cycle killed during `gep solidify`: nothing was rolled back; it awaits changes again."""
    run.status, run.stage, run.pid = "awaiting_changes", "awaiting_changes", None
    run.pending.solidify = None
    store.save_run(run)
    return RecoveredRun(event_id=run.event_id, outcome=OutcomeStatus.awaiting_changes, head_sha=run.head_sha,
                        note="its `gep solidify` was interrupted; your files are as you left them")


def rescued_patch(repo: Repo, event_id: str) -> Path | None:
    folder = repo.gep_dir / RESCUED
    found = sorted(folder.glob(f"{event_id}*.patch"), key=lambda p: p.stat().st_mtime) if folder.is_dir() else []
    return found[-1] if found else None


def _note_patch(repo: Repo, store: Store, event: EvolutionEvent) -> None:
    patch = rescued_patch(repo, event.id)
    if patch is not None and not event.meta.rescued_patch:
        event.meta.rescued_patch, event.meta.rescue_command = str(patch), apply_command(repo, patch)
        store.add_event(event)


def _record_interrupted(repo: Repo, store: Store, run: CycleRun, stored: EvolutionEvent | None,
                        radius: Radius | None) -> RecoveredRun:
    event = stored or EvolutionEvent(id=run.event_id)
    event.meta.at = event.meta.at or run.started_at
    event.outcome = Outcome(status=OutcomeStatus.interrupted, score=0.0)
    if radius is not None:
        event.blast_radius = BlastRadius(files=radius.files, lines=radius.lines, bytes=radius.bytes)
    event.meta.failure_reasons = ["interrupted"]
    event.meta.interrupted_at_stage = run.stage
    event.meta.empty_cycle = radius is None or radius.files == 0
    event.meta.recovery = "the cycle died before it finished; your tree was never changed by it"
    patch = rescued_patch(repo, run.event_id) if run.mode == "clone" else None
    if patch is not None:
        event.meta.rescued_patch, event.meta.rescue_command = str(patch), apply_command(repo, patch)
    store.add_event(event)
    note = f"its change is saved in {patch}" if patch else ""
    return RecoveredRun(event_id=run.event_id, outcome=OutcomeStatus.interrupted, head_sha=run.head_sha, note=note)


def _orphans(store: Store, open_ids: set[str]) -> list[RecoveredRun]:
    """Events still open (running, awaiting changes) with no readable run record: recorded as interrupted."""
    out: list[RecoveredRun] = []
    for status in (OutcomeStatus.running, OutcomeStatus.awaiting_changes):
        for event in store.list_events(limit=ORPHAN_SCAN, status=status.value):
            if event.id in open_ids:
                continue
            event.outcome = Outcome(status=OutcomeStatus.interrupted, score=0.0)
            event.meta.failure_reasons = ["interrupted"]
            event.meta.empty_cycle = True if event.meta.empty_cycle is None else event.meta.empty_cycle
            event.meta.recovery = "its run record was missing or unreadable; recorded as interrupted"
            store.add_event(event)
            out.append(RecoveredRun(event_id=event.id, outcome=OutcomeStatus.interrupted,
                                    note="its run record was missing or unreadable"))
    return out

