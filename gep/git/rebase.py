"""Rebasing a cycle's commit onto the user's newer commits, entirely with plumbing.

``git merge-tree --write-tree`` (git >= 2.38) merges without touching any index or work tree; the rebased
commit keeps the original's message and author. The clone's files are then moved to the rebased tree (with
the user's git dir, as everything the engine does to the clone) and its HEAD to the new base, so the
caller can validate exactly what would land.
"""

from __future__ import annotations

from gep.git.clone import CloneRecord, clone_git, clone_paths, read_clone_state
from gep.git.isolated import keep_alive
from gep.git.plumbing import Git, z
from gep.git.repo import Repo, identity_env


def merge_tree(g: Git, onto: str, commit: str) -> tuple[str | None, str]:
    """(tree, "") for a clean merge of ``commit`` onto ``onto``; (None, why) otherwise."""
    res = g.run("merge-tree", "--write-tree", "-z", "--name-only", "--no-messages", onto, commit, ok=True)
    if res.code == 0:
        return z(res.out)[0], ""
    if res.code == 1:
        conflicts = z(res.out)[1:]
        return None, "the rebase conflicts in " + ", ".join(sorted(set(conflicts))[:5])
    err = res.err.decode(errors="replace")
    if "write-tree" in err or "usage" in err:
        return None, "rebasing needs git 2.38 or newer"
    return None, f"git merge-tree failed: {err.strip().splitlines()[-1] if err.strip() else res.code}"


def _recommit(repo: Repo, tree: str, parent: str, original: str) -> str:
    g = repo.git()
    fields = g.run("log", "-1", "--format=%an%x00%ae%x00%aI%x00%B", original).text.split("\0", 3)
    env = {**identity_env(repo), "GIT_AUTHOR_NAME": fields[0], "GIT_AUTHOR_EMAIL": fields[1],
           "GIT_AUTHOR_DATE": fields[2]}
    return g.with_(env=env).out("commit-tree", tree, "-p", parent, input=fields[3].encode())


def move_clone(repo: Repo, rec: CloneRecord, commit: str, new_base: str) -> None:
    """The clone's tracked files to ``commit``'s tree, its HEAD and branch to ``new_base``."""
    _clone, index, _record = clone_paths(repo, rec.event_id)
    files = Git(rec.path, git_dir=repo.git_dir, work_tree=rec.path, index=index, where=str(rec.clone_dir))
    files.run("read-tree", "--reset", "-u", commit)
    cg = clone_git(rec)
    cg.run("update-ref", "--no-deref", "HEAD", new_base)
    if rec.branch and rec.branch in rec.clone_state.refs:
        cg.run("update-ref", rec.branch, new_base)
    Git(rec.path, git_dir=repo.git_dir, work_tree=rec.path, index=rec.path / ".git" / "index",
        where=str(rec.clone_dir)).run("read-tree", new_base)


def rebase_onto(repo: Repo, rec: CloneRecord, commit: str, tip: str) -> tuple[str | None, str]:
    """Rebase ``commit`` onto ``tip`` and move the clone there; ``rec`` is updated (base, rebases)."""
    tree, why = merge_tree(repo.git(), tip, commit)
    if tree is None:
        return None, why
    rebased = _recommit(repo, tree, tip, commit)
    keep_alive(repo, rec.event_id, f"commit-{rebased}", rebased)
    move_clone(repo, rec, rebased, tip)
    rec.base = tip
    rec.rebases += 1
    rec.clone_state = read_clone_state(rec)
    return rebased, ""
