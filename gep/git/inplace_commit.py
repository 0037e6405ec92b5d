"""Prompt mode's commit: exactly the cycle's paths, on top of the current HEAD, like ``git commit --only``.

The commit is built with plumbing (a temporary index from HEAD plus the changed paths' new entries,
``commit-tree``), the branch moves by compare-and-swap, and the user's index gets the new entries of
exactly those paths (other staged work stays staged). The person's files are not written at all: a CRLF
file stays CRLF in their tree while the commit holds what git would store. A kill between the branch move
and the index update is finished by :func:`resume_in_place`.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from pydantic import BaseModel, Field

from gep.core.errors import WorkspaceError
from gep.git.entries import Entry, index_info, tree_entries
from gep.git.indexwrite import IndexWrite, announced
from gep.git.inplace import InPlaceChange, InPlaceRecord
from gep.git.landing import move_ref, moved_entries, with_retries
from gep.git.plumbing import shown
from gep.git.repo import Repo, identity_env
from gep.git.scan import temp_dir


class InPlaceCommit(BaseModel):
    commit: str | None  # None: nothing left to commit (the person had committed it all already)
    branch: str | None = None
    paths: list[str] = Field(default_factory=list)
    flagged: list[str] = Field(default_factory=list)  # changed but left uncommitted (see InPlaceChange)


def _build(repo: Repo, head: str, entries: dict[str, Entry | None], message: str) -> str | None:
    g = repo.git()
    with tempfile.TemporaryDirectory(prefix="commit-", dir=temp_dir(repo)) as tmp:
        gi = g.with_(index=Path(tmp) / "index")
        gi.run("read-tree", head)
        gi.run("update-index", "-z", "--index-info", input=index_info(entries, repo.hexlen))
        tree = gi.out("write-tree")
    if tree == g.sha(f"{head}^{{tree}}"):
        return None
    return g.with_(env=identity_env(repo)).out("commit-tree", tree, "-p", head, input=message.encode())


def commit_in_place(repo: Repo, rec: InPlaceRecord, ch: InPlaceChange, message: str) -> InPlaceCommit:
    """Commit the committable paths of ``ch`` (flagged ones excluded) on the current HEAD."""
    paths = [f.path for f in ch.committable]
    if not paths:
        return InPlaceCommit(commit=None, flagged=ch.flagged)
    g = repo.git()
    head, ref = repo.head(), repo.head_ref() or "HEAD"
    new = tree_entries(g, ch.change.tree, paths)
    entries: dict[str, Entry | None] = {p: new.get(p) for p in paths}
    commit = _build(repo, head, entries, message)
    if commit is None:
        return InPlaceCommit(commit=None, paths=paths, flagged=ch.flagged)
    plan = IndexWrite(kind="inplace", event_id=rec.event_id, ref=ref, old=head, new=commit, base=head, paths=paths)
    with announced(repo, plan):
        if not move_ref(g, ref, commit, head, f"gep: cycle {rec.event_id}"):
            raise WorkspaceError(f"{ref} moved while committing in {shown(repo.path)}; run `gep solidify` again")
        err = with_retries(g, "update-index", "-z", "--index-info", input=index_info(entries, repo.hexlen))
        if err:
            move_ref(g, ref, head, commit, f"gep: cycle {rec.event_id} not committed")
            raise WorkspaceError(f"could not update your index in {shown(repo.path)}: {err}")
    return InPlaceCommit(commit=commit, branch=ref.removeprefix("refs/heads/"), paths=paths, flagged=ch.flagged)


def resume_in_place(repo: Repo, plan: IndexWrite) -> tuple[bool, str]:
    """After a kill during :func:`commit_in_place`: (committed, what was done). The index entries still at
    their old value are moved to the commit's (entries the person changed since are left alone)."""
    moved = moved_entries(repo, plan)
    if moved is None:
        return False, "the interrupted commit had not moved the branch"
    _tip, old, new, idx = moved
    g = repo.git()
    todo: dict[str, Entry | None] = {p: new.get(p) for p in plan.paths if idx.get(p) == old.get(p)}
    if todo:
        g.run("update-index", "-z", "--index-info", input=index_info(todo, repo.hexlen))
    return True, f"finished committing {plan.new[:12]} on {plan.ref} ({len(todo)} index entries updated)"
