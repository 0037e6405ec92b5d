"""A model- or agent-driven cycle in its clone: what it changed, what it did with git, its commit, its end.

The change is the clone's work tree against the record's base, read with the user's git dir (the clone's
own config is the agent's and is never trusted by the engine). The agent's own commits, HEAD moves and ref
changes in the clone are found by comparing the clone's refs with those recorded when it was made.
"""

from __future__ import annotations

import os

from gep.core.errors import GepError, WorkspaceError
from gep.git.change import Change, FileChange, tree_diff, untracked_changes
from gep.git.clone import CloneRecord, clone_paths, read_clone_state, remove_clone, save_record
from gep.git.raw_rescue import rescue_unreadable
from gep.git.repo import Repo, identity_env
from gep.git.rescue import Rescue, apply_command, write_patch
from gep.git.scan import scan


def clone_git_actions(rec: CloneRecord) -> list[str]:
    """What the agent did to its clone's refs: commits, checkouts, resets, branches, tags, stashes."""
    try:
        now = read_clone_state(rec)
    except GepError as exc:  # a clone whose git dir the agent broke is a finding, not a crash
        return [f"the agent broke its copy's git directory ({exc})"]
    was = rec.clone_state
    out: list[str] = []
    if now.head_ref != was.head_ref or now.head != was.head:
        out.append(f"the agent moved HEAD in its copy (from {was.head_ref or (was.head or '')[:12]} to "
                   f"{now.head_ref or (now.head or '')[:12]}: a commit, checkout or reset)")
    for name in sorted(set(was.refs) | set(now.refs)):
        old, new = was.refs.get(name), now.refs.get(name)
        if old == new:
            continue
        what = "created" if old is None else "deleted" if new is None else "moved"
        out.append(f"the agent {what} {name} in its copy")
    return out


def _intact_links(rec: CloneRecord) -> list[str]:
    out = []
    for link in rec.env_links:
        p = rec.path / link.path
        if p.is_symlink() and os.readlink(p) == link.target:
            out.append(link.path)
    return out


def clone_change(repo: Repo, rec: CloneRecord) -> Change:
    """The clone's work tree against ``rec.base``: committable files, ignored files, refused entries."""
    _clone, index, _record = clone_paths(repo, rec.event_id)
    g = repo.git()
    sc = scan(repo, rec.path, base_tree=rec.base, seed_index=index, skip=_intact_links(rec), all_untracked=True)
    files: list[FileChange] = tree_diff(g, rec.base, sc.tree)
    files += untracked_changes(rec.path, sc.ignored, "ignored", "ignored by the baseline's rules: never committed")
    for r in sc.refused:
        files += untracked_changes(rec.path, [r.path], "refused", r.why)
    keep_alive(repo, rec.event_id, f"tree-{sc.tree}", sc.tree)
    return Change(base=rec.base, tree=sc.tree, base_tree=g.out("rev-parse", f"{rec.base}^{{tree}}"),
                  files=sorted(files, key=lambda f: f.path))


def keep_alive(repo: Repo, event_id: str, name: str, sha: str) -> None:
    """Pin an object the engine made (a tree, a commit) until the cycle ends: nothing refers to it yet, and a
    ``gc --prune=now`` run meanwhile (by a check, say) must not take it."""
    repo.git().run("update-ref", f"refs/gep/pin/{event_id}/{name}", sha)


def drift_paths(repo: Repo, before: Change, after: Change) -> list[str]:
    """Committable paths whose content differs between two readings of the same clone."""
    if before.tree == after.tree:
        return []
    return [f.path for f in tree_diff(repo.git(), before.tree, after.tree)]


def commit_change(repo: Repo, rec: CloneRecord, change: Change, message: str) -> str:
    """The engine's commit of ``change`` on ``rec.base``, written to the user's object store (no ref moves).
    Identity: the repository's configured user, else the engine's."""
    if change.base != rec.base:
        raise ValueError(f"change measured against {change.base[:12]}, the clone is now on {rec.base[:12]}")
    g = repo.git().with_(env=identity_env(repo))
    commit = g.out("commit-tree", change.tree, "-p", rec.base, input=message.encode())
    keep_alive(repo, rec.event_id, f"commit-{commit}", commit)
    return commit


def discard_clone(repo: Repo, rec: CloneRecord, change: Change | None = None) -> Rescue:
    """The cycle failed: its committable diff goes to ``.gep/rescued/<event>.patch``, the clone is deleted.
    The user's tree was never touched, so there is nothing to roll back."""
    rescue = Rescue()
    if os.path.isdir(rec.path):
        try:
            if change is None:
                change = clone_change(repo, rec)
            patch = write_patch(repo, rec.event_id, rec.base, change.tree) if change.committable else None
        except (WorkspaceError, OSError):  # the engine's git cannot read it, a full disk (issue 32): never lost
            patch = rescue_unreadable(repo, rec.path, rec.base, rec.event_id, _intact_links(rec))
            if patch is not None and patch.is_dir():
                close_clone(repo, rec, "discarded")
                return Rescue(patch=patch, command=f"the files are in {patch}")
        if patch is not None:
            rescue = Rescue(patch=patch, command=apply_command(repo, patch))
    close_clone(repo, rec, "discarded")
    return rescue


def close_clone(repo: Repo, rec: CloneRecord, status: str = "landed") -> None:
    """The cycle is over: record the status, delete the clone, drop the pins."""
    rec.status = status  # type: ignore[assignment]
    if rec.clone_dir.exists():
        save_record(repo, rec)
    remove_clone(repo, rec.event_id)


