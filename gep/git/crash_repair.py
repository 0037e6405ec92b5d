"""Crash recovery for the git side, needing nothing but the repository and the list of live cycles.

Call :func:`recover_git` holding the workspace lock (then no engine is running here). It:

1. finishes or undoes an interrupted write of the user's index (``.gep/index-write.json`` of a dead
   process): a landing is completed when every path is as before or as the commit has it, otherwise the
   branch is swapped back and the commit kept on ``gep/<event>``; the ``index.lock`` git left is removed
   and named;
2. removes the clones of cycles that are not live, saving an unfinished clone's change as a patch first;
3. drops pins of cycles that are not live and clears ``.gep/tmp``.

Every action comes back as one line. :func:`salvage` reads store records one by one: a record that cannot
be read is moved aside (by the caller's function) with a warning, and never blocks the workspace.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Collection, Iterable

from pydantic import BaseModel, Field

from gep.core.errors import GepError
from gep.git.clone import CloneRecord, load_record, remove_clone, worktrees_dir
from gep.git.delivery import evolution_refs
from gep.git.indexwrite import IndexWrite, clear_engine_lock, marker_path, pid_alive, read_marker
from gep.git.inplace import INPLACE
from gep.git.inplace_commit import resume_in_place
from gep.git.isolated import clone_change, discard_clone
from gep.git.landing import resume_landing
from gep.git.lock import holds_lock
from gep.git.repo import Repo

_SUFFIXES = (".json.tmp", ".json", ".index.lock", ".index")
_TRAILER = re.compile(r"^GEP-Event:\s*(\S+)\s*$", re.MULTILINE)


class RecoveryReport(BaseModel):
    actions: list[str] = Field(default_factory=list)
    removed_clones: list[str] = Field(default_factory=list)
    landed: list[str] = Field(default_factory=list)  # cycles whose interrupted landing was finished
    kept: list[str] = Field(default_factory=list)  # cycles whose commit was put on gep/<event> instead


def _keep_commit(repo: Repo, event_id: str, commit: str) -> str:
    g = repo.git()
    for ref in evolution_refs(event_id):
        if g.sha(ref) == commit or g.run("update-ref", ref, commit, "", ok=True).ok:
            return ref.removeprefix("refs/heads/")
    return commit


def _finish_index_write(repo: Repo, report: RecoveryReport) -> None:
    plan = read_marker(repo)
    if plan is None:
        marker_path(repo).unlink(missing_ok=True)  # unreadable: nothing can be resumed from it
        return
    if pid_alive(plan.pid) and not holds_lock(repo):
        return  # a live engine may still be writing
    cleared = clear_engine_lock(repo, plan)
    if cleared:
        report.actions.append(cleared)
    _resume(repo, plan, report)
    marker_path(repo).unlink(missing_ok=True)


def _resume(repo: Repo, plan: IndexWrite, report: RecoveryReport) -> None:
    if plan.kind == "abandon":
        report.actions.append(f"cycle {plan.event_id}: an abandon was interrupted; its patch is under .gep/rescued/, "
                              "run `gep solidify --abandon` again to finish restoring")
        return
    resume = resume_landing if plan.kind == "landing" else resume_in_place
    done, what = resume(repo, plan)
    report.actions.append(f"cycle {plan.event_id}: {what}")
    if done:
        report.landed.append(plan.event_id)
    elif plan.kind == "landing":
        branch = _keep_commit(repo, plan.event_id, plan.new)
        report.kept.append(plan.event_id)
        report.actions.append(f"cycle {plan.event_id}: its commit is kept on {branch} (merge it with `git merge {branch}`)")


def _clone_events(repo: Repo) -> set[str]:
    out: set[str] = set()
    for entry in worktrees_dir(repo).iterdir():
        name = entry.name
        for suffix in _SUFFIXES:
            if name.endswith(suffix):
                name = name[: -len(suffix)]
                break
        out.add(name)
    return out


def _delivered(repo: Repo, rec: CloneRecord, tree: str) -> str | None:
    """Where a dead cycle's change already is (its landing finished, or it was kept), if anywhere."""
    g = repo.git()
    for ref in evolution_refs(rec.event_id):
        if g.sha(ref):
            return ref.removeprefix("refs/heads/")
    tip = rec.branch or "HEAD"
    trees = g.run("log", "-n50", "--format=%T", f"{rec.base}..{tip}", ok=True).text.split()
    return tip.removeprefix("refs/heads/") if tree in trees else None


def _remove_dead_clone(repo: Repo, event_id: str, report: RecoveryReport) -> None:
    rec = load_record(repo, event_id)
    note = ""
    if rec is not None and rec.status == "open" and rec.path.is_dir():
        try:
            change = clone_change(repo, rec)
            where = _delivered(repo, rec, change.tree)
            if where:
                note = f"; its change is already on {where}"
            else:
                rescue = discard_clone(repo, rec, change)
                note = f"; its change is saved in {rescue.patch} ({rescue.command})" if rescue.patch else ""
        except (GepError, OSError, ValueError) as exc:  # a broken clone is removed all the same
            note = f"; its change could not be saved ({exc})"
    remove_clone(repo, event_id)
    report.removed_clones.append(event_id)
    report.actions.append(f"removed the clone of cycle {event_id}, which is no longer running{note}")


def _drop_stale_pins(repo: Repo, live: Collection[str], report: RecoveryReport) -> None:
    g = repo.git()
    names = g.run("for-each-ref", "--format=%(refname)", "refs/gep/pin/", "refs/gep/baseline/").text.split()
    events = {n.split("/")[3] for n in names if n.count("/") >= 3}
    in_place = {p.stem for p in (repo.gep_dir / INPLACE).glob("*.json")} if (repo.gep_dir / INPLACE).is_dir() else set()
    for event_id in sorted(events - set(live)):
        lines = "".join(f"delete {n}\n" for n in names if n.split("/")[3:4] == [event_id])
        g.run("update-ref", "--stdin", input=lines.encode())
        (repo.gep_dir / INPLACE / f"{event_id}.json").unlink(missing_ok=True)
        what = "baseline snapshot" if event_id in in_place else "pins"
        report.actions.append(f"dropped the {what} of cycle {event_id}, which is no longer running")


def recover_git(repo: Repo, live: Collection[str]) -> RecoveryReport:
    """Clean up after cycles that died. ``live``: ids of cycles still running or awaiting changes."""
    report = RecoveryReport()
    _finish_index_write(repo, report)
    for event_id in sorted(_clone_events(repo) - set(live)):
        _remove_dead_clone(repo, event_id, report)
    _drop_stale_pins(repo, live, report)
    tmp = repo.gep_dir / "tmp"
    if tmp.is_dir() and holds_lock(repo):
        shutil.rmtree(tmp, ignore_errors=True)
    return report


def find_event_commit(repo: Repo, event_id: str, since: str, depth: int = 50,
                      branches: Iterable[str] = ()) -> tuple[str, str] | None:
    """(commit, where) of a commit made after ``since`` carrying ``GEP-Event: <event_id>``, on the user's
    HEAD, the cycle's evolution branch or one of ``branches`` (a branch the user named for the cycle): the
    proof that a cycle which died had already succeeded."""
    g = repo.git()
    for ref in ["HEAD", *evolution_refs(event_id), *(f"refs/heads/{b}" for b in branches)]:
        if g.sha(ref) is None:
            continue
        log = g.run("log", f"-n{depth}", "--format=%H%x1f%B%x1e", f"{since}..{ref}", ok=True).text
        for rec in log.split("\x1e"):
            sha, _, body = rec.strip("\n").partition("\x1f")
            if sha and event_id in _TRAILER.findall(body):
                return sha.strip(), ref.removeprefix("refs/heads/")
    return None
