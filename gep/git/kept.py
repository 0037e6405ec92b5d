"""Where a commit kept on its own branch (``gep/<event>``) stands now: not merged, merged, or its branch gone.

A cycle whose commit could not land keeps it on a branch and records the command that merges it. That hint
is true only while the branch exists and is not in the person's branch yet (``git merge-base
--is-ancestor``); and the merge works only when the person has no uncommitted edits to the files the branch
changes, so those files are named (to commit or stash first). Reads only: nothing here writes a ref or a file.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from gep.git.change import changed_paths
from gep.git.landing import dirty_paths
from gep.git.plumbing import shell_quote
from gep.git.repo import Repo

KeptState = Literal["unmerged", "merged", "gone"]


class KeptBranch(BaseModel):
    """A kept commit as it stands now."""

    event_id: str
    branch: str
    commit: str | None = None  # the branch's tip now (None when the branch is gone)
    state: KeptState
    files: list[str] = Field(default_factory=list)  # what merging it would change in the person's branch
    dirty: list[str] = Field(default_factory=list)  # of those, the ones the person has uncommitted edits to
    command: str = ""  # the git command that merges it

    def hint(self) -> str:
        """What to do about it, in one line (empty once merged or gone)."""
        if self.state != "unmerged":
            return ""
        first = ""
        if self.dirty:
            shown = " ".join(shell_quote(p) for p in self.dirty[:4]) + (" ..." if len(self.dirty) > 4 else "")
            first = f"commit or stash your edits to {shown} first, then: "
        return first + self.command


def kept_branch(repo: Repo, event_id: str, branch: str) -> KeptBranch:
    """The state of the kept branch ``branch`` of cycle ``event_id`` against the person's HEAD."""
    g = repo.git()
    tip = g.sha(f"refs/heads/{branch}")
    command = f"git -C {shell_quote(str(repo.path))} merge {shell_quote(branch)}"
    if tip is None:
        return KeptBranch(event_id=event_id, branch=branch, state="gone", command=command)
    head = g.sha("HEAD")
    if head is not None and g.run("merge-base", "--is-ancestor", tip, head, ok=True).ok:
        return KeptBranch(event_id=event_id, branch=branch, commit=tip, state="merged", command=command)
    base = g.run("merge-base", tip, head, ok=True).line() if head else ""
    files = sorted(changed_paths(g, base, tip)) if base else []
    return KeptBranch(event_id=event_id, branch=branch, commit=tip, state="unmerged", files=files,
                      dirty=dirty_paths(repo, files) if files else [], command=command)
