"""Delivering a cycle's commit: land it, rebase it (then validate again), or keep it on its own branch.

The user's refs are the user's: whatever they did meanwhile (a branch made or deleted, a tag, an amend or
a reset, a stash dropped) is never undone, moved or resurrected; only the branch the commit lands on is
checked. HEAD must still be on the branch it was on at the start (else the commit is kept). On that branch:

* the branch has not moved and the user's tree does not touch the commit's paths: it lands
  (fast-forward, the user's other uncommitted edits untouched);
* the branch moved on (a descendant of the base): the commit is rebased onto it, the clone is moved to the
  rebased tree, and the caller must validate again before calling :func:`deliver` with the new commit;
* otherwise (conflicting edits, a rebase that conflicts, a rewritten branch, too many rebases): the commit
  stays on the evolution branch ``gep/<event>`` and the result carries the command that merges it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from gep.git.clone import CloneRecord, save_record
from gep.git.isolated import close_clone
from gep.git.landing import land
from gep.git.plumbing import shell_quote
from gep.git.rebase import rebase_onto
from gep.git.refs import is_descendant
from gep.git.repo import Repo

MAX_REBASES = 3


class Delivery(BaseModel):
    status: Literal["landed", "needs_revalidation", "kept", "refused"]
    commit: str  # the commit delivered (after a rebase: the rebased one, to validate and deliver again)
    branch: str | None = None  # where the commit now is (main, gep/<event>)
    command: str = ""  # kept: the exact command that merges it
    reasons: list[str] = Field(default_factory=list)
    restored: list[str] = Field(default_factory=list)  # refused: what was put back
    record: CloneRecord


def evolution_refs(event_id: str) -> list[str]:
    return [f"refs/heads/gep/{event_id}", f"refs/heads/gep-{event_id}"]


def keep(repo: Repo, rec: CloneRecord, commit: str, reason: str) -> Delivery:
    """Leave ``commit`` on the cycle's evolution branch (created by compare-and-swap, never moved)."""
    g = repo.git()
    branch = None
    for ref in evolution_refs(rec.event_id):
        if g.sha(ref) == commit or g.run("update-ref", "-m", f"gep: cycle {rec.event_id}", ref, commit, "",
                                         ok=True).ok:
            branch = ref.removeprefix("refs/heads/")
            break
    if branch is None:
        raise RuntimeError(f"cannot create an evolution branch for {rec.event_id}")
    close_clone(repo, rec, "kept")
    command = f"git -C {shell_quote(str(repo.path))} merge {shell_quote(branch)}"
    return Delivery(status="kept", commit=commit, branch=branch, command=command, reasons=[reason], record=rec)


def _check_base(repo: Repo, rec: CloneRecord, commit: str) -> None:
    if repo.git().sha(f"{commit}^") != rec.base:
        raise ValueError(f"commit {commit[:12]} is not on the clone's base {rec.base[:12]}")


def switched_away(repo: Repo, rec: CloneRecord) -> str | None:
    """Why the user's HEAD is no longer where the commit would land (they switched branch), or None."""
    now = repo.git().run("symbolic-ref", "-q", "HEAD", ok=True).line() or None
    if now == rec.branch:
        return None

    def name(ref: str | None) -> str:
        return ref.removeprefix("refs/heads/") if ref else "a detached HEAD"

    return f"you switched from {name(rec.branch)} to {name(now)} during the cycle"


def deliver_to_branch(repo: Repo, rec: CloneRecord, commit: str, branch: str) -> Delivery:
    """Put ``commit`` on the branch the user named (``--branch``): created there, or moved from the cycle's
    base by compare-and-swap; never the checked-out branch, so the user's tree is not touched. A branch that
    exists elsewhere is left alone and the commit kept on ``gep/<event>``."""
    _check_base(repo, rec, commit)
    ref = f"refs/heads/{branch}"
    g = repo.git()
    tip = g.sha(ref)
    if tip is not None and tip != rec.base:
        return keep(repo, rec, commit, f"branch {branch} exists and is not at the cycle's baseline {rec.base[:12]}")
    if not g.run("update-ref", "-m", f"gep: cycle {rec.event_id}", ref, commit, tip or "", ok=True).ok:
        return keep(repo, rec, commit, f"branch {branch} moved meanwhile")
    close_clone(repo, rec, "kept")
    command = f"git -C {shell_quote(str(repo.path))} merge {shell_quote(branch)}"
    return Delivery(status="kept", commit=commit, branch=branch, command=command, record=rec,
                    reasons=[f"on the branch you named ({branch})"])


def deliver(repo: Repo, rec: CloneRecord, commit: str, *, max_rebases: int = MAX_REBASES) -> Delivery:
    """Deliver ``commit`` (made by :func:`gep.git.isolated.commit_change` on ``rec.base``).

    landed / kept: the clone is closed. needs_revalidation: validate the clone again, make the commit again
    (or use ``Delivery.commit``) and call again."""
    g = repo.git()
    _check_base(repo, rec, commit)
    ref = rec.branch or "HEAD"
    name = ref.removeprefix("refs/heads/")
    moved = switched_away(repo, rec)
    if moved is not None:
        return keep(repo, rec, commit, f"not landed on {name}: {moved}")
    tip = g.sha(ref)
    if tip == rec.base:
        why = land(repo, rec.event_id, ref, rec.base, commit)
        if why is None:
            close_clone(repo, rec, "landed")
            return Delivery(status="landed", commit=commit, branch=name, record=rec)
        return keep(repo, rec, commit, f"not landed on {name}: {why}")
    if tip is None or not is_descendant(g, rec.base, tip):
        return keep(repo, rec, commit, f"{name} no longer contains the cycle's baseline {rec.base[:12]}")
    if rec.rebases >= max_rebases:
        return keep(repo, rec, commit, f"{name} kept moving ({rec.rebases} rebases already)")
    rebased, why = rebase_onto(repo, rec, commit, tip)
    if rebased is None:
        return keep(repo, rec, commit, f"{name} moved on and {why}")
    save_record(repo, rec)
    return Delivery(status="needs_revalidation", commit=rebased, branch=name, record=rec,
                    reasons=[f"{name} moved on to {tip[:12]}: the change was rebased onto it; validate again"])
