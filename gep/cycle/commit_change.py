"""Committing a validated change and handing it to the user.

From a clone: the engine's commit is written to the user's object store and delivered by gep/git/delivery.py
(the refs checked first): landed on the user's branch (a fast-forward that leaves their other work alone),
rebased onto commits the user made meanwhile and validated again before landing, or kept on
``gep/<event>`` with the command that merges it. In place (prompt mode): exactly the cycle's paths are
committed on the person's current HEAD, nothing of theirs rewritten.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, Field

from gep.cycle.tree import CycleTree, TreeChange
from gep.git import Delivery, InPlaceChange, commit_change, commit_in_place, deliver
from gep.git.delivery import deliver_to_branch

# validating the tree again after a rebase: the failure reasons (empty when it passed)
Revalidate = Callable[[TreeChange], list[str]]


class Delivered(BaseModel):
    status: Literal["landed", "kept", "refused", "failed", "nothing"]
    commit: str | None = None
    branch: str | None = None  # where the commit is (main, gep/<event>, the branch the user named)
    command: str = ""  # kept: the command that merges it
    reasons: list[str] = Field(default_factory=list)  # refused or failed: why; kept: why it did not land
    restored: list[str] = Field(default_factory=list)  # refused: the refs put back
    rebased: list[str] = Field(default_factory=list)  # the rebases onto the user's new commits

    @property
    def ok(self) -> bool:
        return self.status in ("landed", "kept")


def _from(d: Delivery, rebased: list[str]) -> Delivered:
    status: Literal["landed", "kept", "refused"] = "refused" if d.status == "refused" else d.status  # type: ignore[assignment]
    return Delivered(status=status, commit=d.commit, branch=d.branch, command=d.command, reasons=d.reasons,
                     restored=d.restored, rebased=rebased)


def deliver_change(tree: CycleTree, tc: TreeChange, message: str, *, branch: str | None, max_rebases: int,
                   revalidate: Revalidate) -> Delivered:
    """Commit ``tc`` (the change that passed validation) and deliver it."""
    if tree.clone is None:
        return _commit_in_place(tree, tc, message)
    repo, rec = tree.repo, tree.clone
    commit = commit_change(repo, rec, tc.change, message)
    if branch and f"refs/heads/{branch}" != rec.branch:
        return _from(deliver_to_branch(repo, rec, commit, branch), [])
    d = deliver(repo, rec, commit, max_rebases=max_rebases)
    rebased: list[str] = []
    while d.status == "needs_revalidation":
        rebased += d.reasons
        reasons = revalidate(tree.read())
        if reasons:
            return Delivered(status="failed", commit=d.commit, rebased=rebased,
                             reasons=[f"after rebasing onto your new commits: {r}" for r in reasons])
        d = deliver(repo, d.record, d.commit, max_rebases=max_rebases)
    return _from(d, rebased)


def _commit_in_place(tree: CycleTree, tc: TreeChange, message: str) -> Delivered:
    assert tree.in_place is not None
    done = commit_in_place(tree.repo, tree.in_place, InPlaceChange(change=tc.change, flagged=tc.flagged), message)
    if done.commit is None:
        return Delivered(status="nothing", reasons=["nothing left to commit: your HEAD already holds the change"])
    tree.close()
    return Delivered(status="landed", commit=done.commit, branch=done.branch)
