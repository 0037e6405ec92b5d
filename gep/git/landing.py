"""Landing a commit on the user's branch: a fast-forward that leaves every other uncommitted edit alone.

Only when it is safe: the branch is where the commit starts, and none of the paths the commit changes is
modified, staged, or present untracked or ignored in the user's tree. Then the branch moves by
compare-and-swap (a user commit made meanwhile makes it fail, nothing is overwritten) and
``git read-tree -m -u <base> <commit>`` (after ``update-index --refresh``: stale stat data is no edit) moves
the index and files of exactly those paths, with the user's eol settings and filters (CRLF and ``text=auto``
come out as a checkout would). If that fails the branch is swapped back. A kill in between is finished or
undone by :func:`resume_landing`.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from gep.git.change import changed_paths
from gep.git.entries import Entry, index_entries, index_info, tree_entries, worktree_blob
from gep.git.indexwrite import IndexWrite, announced
from gep.git.plumbing import LITERAL, NO_LOCKS, Git, batched, z
from gep.git.refs import is_descendant
from gep.git.repo import Repo

RETRIES = 10
RETRY_S = 0.2


def dirty_paths(repo: Repo, paths: list[str]) -> list[str]:
    """Which of ``paths`` the user has touched: modified, staged, or an untracked or ignored file there (git
    itself would overwrite an ignored file: it counts them as expendable, the engine does not)."""
    g = repo.git()
    found: set[str] = set()
    for chunk in batched(paths):
        out = g.run("status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignored=traditional",
                    "--no-renames", "--", *chunk, env={**LITERAL, **NO_LOCKS}).out
        found.update(rec[3:] for rec in z(out))
    wanted = set(paths)

    def touches(p: str) -> bool:
        if p in wanted or any(p.startswith(w + "/") for w in wanted):
            return True
        return p.endswith("/") and any(w.startswith(p) for w in wanted)  # a whole folder listed

    found = {p for p in found if touches(p)}
    for w in wanted:  # a file (or link) of the user's where the commit needs a folder
        parts = w.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            lead = "/".join(parts[:i])
            if os.path.lexists(repo.path / lead) and not os.path.isdir(repo.path / lead) or \
                    os.path.islink(repo.path / lead):
                found.add(lead)
                break
    return sorted(found)


def with_retries(g: Git, *args: str, input: bytes | None = None) -> str | None:
    """Run a command that takes the user's index lock, retrying while another git holds it. None when it
    succeeded, else git's first error line."""
    for attempt in range(RETRIES):
        res = g.run(*args, ok=True, input=input)
        if res.ok:
            return None
        err = res.err.decode(errors="replace")
        if "index.lock" not in err or attempt == RETRIES - 1:
            lines = [ln for ln in err.splitlines() if ln.strip()]
            return lines[0] if lines else f"git {args[0]} exited {res.code}"
        time.sleep(RETRY_S)
    return None


def refresh_index(g: Git) -> None:
    """``git update-index -q --refresh`` (what `git status` does): stat data brought up to date, nothing else.
    Retried while another git holds the index lock; what it finds (edits) is the caller's to check."""
    for _ in range(RETRIES):
        res = g.run("update-index", "-q", "--refresh", ok=True)
        if res.ok or "index.lock" not in res.err.decode(errors="replace"):
            return
        time.sleep(RETRY_S)


def move_ref(g: Git, ref: str, new: str, old: str, why: str) -> bool:
    args = ["update-ref", "-m", why] + (["--no-deref"] if ref == "HEAD" else []) + [ref, new, old]
    return g.run(*args, ok=True).ok


def land(repo: Repo, event_id: str, ref: str, base: str, commit: str) -> str | None:
    """Move ``ref`` from ``base`` to ``commit`` and the user's index and files with it. None when landed,
    else why not (then nothing of the user's changed)."""
    g = repo.git()
    paths = sorted(changed_paths(g, base, commit))  # names only: what lines or sizes changed is not needed
    dirty = dirty_paths(repo, paths)
    if dirty:
        return "your uncommitted changes touch " + ", ".join(dirty[:5]) + (" ..." if len(dirty) > 5 else "")
    # the index's stat data may be stale (an in-place commit writes entries without it; an edit in the same
    # second as the index write is racily clean): read-tree would call a clean file "not uptodate"
    refresh_index(g)
    plan = IndexWrite(kind="landing", event_id=event_id, ref=ref, old=base, new=commit, base=base, paths=paths)
    with announced(repo, plan):
        if not move_ref(g, ref, commit, base, f"gep: cycle {event_id}"):
            return f"{ref} moved meanwhile"
        err = with_retries(g, "read-tree", "-m", "-u", base, commit)
        if err:
            move_ref(g, ref, base, commit, f"gep: cycle {event_id} not landed")
            return f"could not update your files: {err}"
    return None


def _state(sha: str | None, old: Entry | None, new: Entry | None) -> str:
    if sha == (new[1] if new else None):
        return "new"
    if sha == (old[1] if old else None):
        return "old"
    return "other"


def moved_entries(repo: Repo, plan: IndexWrite) -> tuple[str, dict[str, Entry], dict[str, Entry],
                                                          dict[str, Entry]] | None:
    """For an interrupted write: (the ref's tip, the paths' old, new and index entries) when the ref had
    already moved to the engine's commit (or past it); None when it had not moved."""
    g = repo.git()
    tip = g.sha("HEAD" if plan.ref == "HEAD" else plan.ref)
    if tip is None or tip == plan.old or not is_descendant(g, plan.new, tip):
        return None
    return (tip, tree_entries(g, plan.old, plan.paths), tree_entries(g, plan.new, plan.paths),
            index_entries(g, plan.paths))


def resume_landing(repo: Repo, plan: IndexWrite) -> tuple[bool, str]:
    """After a kill during :func:`land`: (landed, what was done). Finishes the landing when every path is
    either as before or as the commit has it; otherwise swaps the ref back and puts back only the files
    the engine itself had written (the user's later edits are left alone)."""
    moved = moved_entries(repo, plan)
    if moved is None:
        return False, "the interrupted landing had not moved the branch"
    tip, old, new, idx = moved
    g = repo.git()
    root = Path(repo.path)
    work = {p: worktree_blob(g, root, p) for p in plan.paths}
    index_state = {p: _state(idx[p][1] if p in idx else None, old.get(p), new.get(p)) for p in plan.paths}
    work_state = {p: _state(work[p], old.get(p), new.get(p)) for p in plan.paths}
    if all(s != "other" for s in [*index_state.values(), *work_state.values()]):
        _finish(g, repo, plan, new)
        return True, f"finished landing {plan.new[:12]} on {plan.ref}"
    if tip == plan.new:
        move_ref(g, plan.ref, plan.old, plan.new, f"gep: cycle {plan.event_id} not landed (recovery)")
    ours = [p for p in plan.paths if work_state[p] == "new" and index_state[p] != "new"]
    _put_back(g, root, ours, old)
    return False, (f"left {plan.ref} at {plan.old[:12]}: your files changed during the interrupted landing "
                   f"({', '.join(p for p in plan.paths if work_state[p] == 'other')[:200]})")


def _finish(g: Git, repo: Repo, plan: IndexWrite, new: dict[str, Entry]) -> None:
    g.run("update-index", "-z", "--index-info", input=index_info({p: new.get(p) for p in plan.paths}, repo.hexlen))
    present = [p for p in plan.paths if p in new]
    for chunk in batched(present):
        g.run("checkout-index", "-f", "-u", "-q", "--", *chunk)
    for p in plan.paths:
        if p not in new and ((repo.path / p).is_file() or (repo.path / p).is_symlink()):
            (repo.path / p).unlink()
            prune_empty_dirs(repo.path, p)


def prune_empty_dirs(root: Path, rel: str) -> None:
    """Remove the directories above ``rel`` that a removal left empty (as git does)."""
    parent = (root / rel).parent
    while parent != root and root in parent.parents:
        try:
            parent.rmdir()
        except OSError:
            return
        parent = parent.parent


def _put_back(g: Git, root: Path, paths: list[str], old: dict[str, Entry]) -> None:
    for p in paths:
        if p in old:
            g.run("checkout-index", "-f", "-q", "--", p)  # the index still holds the old entry
        elif (root / p).is_file() or (root / p).is_symlink():
            (root / p).unlink()
            prune_empty_dirs(root, p)
