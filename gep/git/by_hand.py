"""What a person asks of a cycle's commit after the cycle: land a kept one (`gep land`), put a landed one back
(`gep undo`). Both write one new commit at most and move the person's branch with the landing code
(gep/git/landing.py): a fast-forward by compare-and-swap that writes only the commit's paths, refused when
the person has uncommitted edits to any of them. Nothing of theirs is touched: a refusal changes nothing.

* land: the kept branch's tip when it descends from HEAD; else a merge commit of HEAD and the branch made
  with ``git merge-tree --write-tree`` (refused when they conflict), then landed.
* undo: the inverse of the cycle's commit applied to HEAD's tree in a scratch index (refused when later
  commits changed the same lines), committed as ``Revert "..."`` with ``This reverts commit <sha>`` (what
  ``git revert`` writes, and what gep's revert scan recognises), then landed.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from pydantic import BaseModel

from gep.core.errors import WorkspaceError
from gep.git.kept import kept_branch
from gep.git.landing import land
from gep.git.plumbing import shell_quote
from gep.git.refs import is_descendant
from gep.git.repo import Repo, identity_env
from gep.git.scan import temp_dir


class ByHand(BaseModel):
    """A commit landed on the person's branch by `gep land` / `gep undo`."""

    commit: str  # the new tip of the branch
    branch: str
    how: str  # "fast-forward", "merge commit", "revert commit"


def _where(repo: Repo) -> tuple[str, str]:
    ref = repo.head_ref()
    if ref is None:
        raise WorkspaceError("HEAD is detached: check out the branch to land on first")
    return ref, repo.head()


def _landed(repo: Repo, event_id: str, ref: str, head: str, commit: str, how: str) -> ByHand:
    why = land(repo, event_id, ref, head, commit)
    if why is not None:
        if why.startswith("your uncommitted changes touch "):
            why = "commit or stash your edits to " + why.removeprefix("your uncommitted changes touch ") + " first"
        raise WorkspaceError(f"not done, nothing changed: {why}")
    return ByHand(commit=commit, branch=ref.removeprefix("refs/heads/"), how=how)


def land_kept(repo: Repo, event_id: str, branch: str) -> ByHand:
    """Land the commit kept on ``branch`` (cycle ``event_id``) on the checked-out branch."""
    k = kept_branch(repo, event_id, branch)
    if k.state == "gone":
        raise WorkspaceError(f"branch {branch} is gone (deleted): nothing to land")
    if k.state == "merged":
        raise WorkspaceError(f"{branch} is already in your branch: nothing to land")
    if k.dirty:
        raise WorkspaceError(f"commit or stash your edits to {', '.join(k.dirty[:5])} first: {branch} changes "
                             "them (nothing was changed)")
    ref, head = _where(repo)
    g = repo.git()
    tip = str(k.commit)
    if is_descendant(g, head, tip):
        return _landed(repo, event_id, ref, head, tip, "fast-forward")
    merged = g.run("merge-tree", "--write-tree", "--no-messages", head, tip, ok=True)
    if merged.code != 0:
        raise WorkspaceError(f"{branch} conflicts with your branch: merge it by hand ({k.command}) and "
                             "resolve the conflicts")
    message = f"Merge branch {shell_quote(branch)} (gep cycle {event_id})\n"
    commit = g.with_(env=identity_env(repo)).out("commit-tree", merged.line(), "-p", head, "-p", tip,
                                                  input=message.encode())
    return _landed(repo, event_id, ref, head, commit, "merge commit")


def undo_commit(repo: Repo, event_id: str, commit: str) -> ByHand:
    """Put back the change of ``commit`` (cycle ``event_id``, in the checked-out branch) with a revert commit."""
    g = repo.git()
    ref, head = _where(repo)
    if g.sha(f"{commit}^{{commit}}") is None or not is_descendant(g, commit, head):
        raise WorkspaceError(f"commit {commit[:12]} is not in your branch: nothing to undo")
    parent = g.sha(f"{commit}^")
    if parent is None:
        raise WorkspaceError(f"commit {commit[:12]} is the first commit: it cannot be undone")
    subject = g.out("log", "-1", "--format=%s", commit)
    patch = g.run("diff", "--binary", "--full-index", "--no-renames", commit, parent, "--").out
    with tempfile.TemporaryDirectory(prefix="undo-", dir=temp_dir(repo)) as tmp:
        gi = g.with_(index=Path(tmp) / "index")
        gi.run("read-tree", head)
        applied = gi.run("apply", "--cached", "--whitespace=nowarn", input=patch, ok=True)
        if not applied.ok and gi.run("apply", "--cached", "--check", "-R", input=patch, ok=True).ok:
            raise WorkspaceError(f"the change of {commit[:12]} is no longer in your branch (undone already?): "
                                 "nothing to undo")
        if not applied.ok:
            raise WorkspaceError(f"later commits changed the lines of {commit[:12]}: undo it by hand "
                                 f"(git revert {commit[:12]}); nothing was changed")
        tree = gi.out("write-tree")
    if tree == g.sha(f"{head}^{{tree}}"):
        raise WorkspaceError(f"the change of {commit[:12]} is no longer in your branch: nothing to undo")
    message = (f'Revert "{subject}"\n\nThis reverts commit {commit}.\n\n'
               f"Undone with `gep undo` (cycle {event_id}).\n")
    revert = g.with_(env=identity_env(repo)).out("commit-tree", tree, "-p", head, input=message.encode())
    return _landed(repo, event_id, ref, head, revert, "revert commit")
