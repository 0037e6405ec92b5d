"""Giving up a prompt-mode cycle: save the person's change as a patch, then put back only its paths.

Nothing is discarded: the patch (snapshot -> work tree now) goes to ``.gep/rescued/<event>.patch`` first,
and :func:`apply_command` brings it back. Then each changed path returns to its baseline content: the exact
bytes for a path that already had uncommitted edits, HEAD's version (checked out as git would) for one
that was clean, nothing for one the cycle created. A path with no baseline copy (too large) is left as it
is. The index entries of those paths go back to what the person's index held at the baseline.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from gep.git.entries import Entry, index_entries, index_info, tree_entries
from gep.git.indexwrite import IndexWrite, announced
from gep.git.inplace import InPlaceRecord, close_in_place, in_place_change
from gep.git.landing import prune_empty_dirs, with_retries
from gep.git.plumbing import Git
from gep.git.repo import Repo
from gep.git.rescue import Rescue, apply_command, write_patch
from gep.git.scan import temp_dir


def _remove(root: Path, rel: str) -> None:
    p = root / rel
    if p.is_symlink() or p.is_file():
        p.unlink()
        prune_empty_dirs(root, rel)


def _write_raw(g: Git, root: Path, rel: str, entry: Entry) -> None:
    mode, sha = entry
    p = root / rel
    data = g.run("cat-file", "blob", sha).out
    if p.is_symlink() or p.is_file():
        p.unlink()
    p.parent.mkdir(parents=True, exist_ok=True)
    if mode == "120000":
        os.symlink(os.fsdecode(data), p)
        return
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o755 if mode == "100755" else 0o644)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def _checkout_head(repo: Repo, head: str, paths: list[str]) -> None:
    """Write HEAD's version of ``paths`` through the user's filters (a temporary index, not theirs)."""
    with tempfile.TemporaryDirectory(prefix="restore-", dir=temp_dir(repo)) as tmp:
        gi = repo.git().with_(index=Path(tmp) / "index")
        gi.run("read-tree", head)
        for rel in paths:
            _remove(repo.path, rel)
            gi.run("checkout-index", "-f", "-q", "--", rel)


def _restore_index(repo: Repo, rec: InPlaceRecord, paths: list[str]) -> None:
    g = repo.git()
    was = tree_entries(g, rec.index, paths)
    now = index_entries(g, paths)
    todo: dict[str, Entry | None] = {p: was.get(p) for p in paths if now.get(p) != was.get(p)}
    if todo:
        with_retries(g, "update-index", "-z", "--index-info", input=index_info(todo, repo.hexlen))


def abandon_in_place(repo: Repo, rec: InPlaceRecord) -> Rescue:
    """Save the change as a patch, restore the changed paths to the baseline, close the cycle."""
    g = repo.git()
    ch = in_place_change(repo, rec)
    changed = [f.path for f in ch.change.committable]
    patch = write_patch(repo, rec.event_id, ch.change.base_tree, ch.change.tree) if changed else None
    raw = tree_entries(g, rec.raw, changed)
    head = tree_entries(g, rec.head, changed)
    restored: list[str] = []
    kept: list[str] = []
    from_head: list[str] = []
    plan = IndexWrite(kind="abandon", event_id=rec.event_id, ref=rec.head_ref or "HEAD", old=rec.head, new=rec.head,
                      base=rec.snapshot, paths=changed)
    with announced(repo, plan):
        _restore(repo, rec, changed, raw, head, restored, kept, from_head)
    close_in_place(repo, rec)
    return Rescue(patch=patch, command=apply_command(repo, patch) if patch else "",
                  restored=sorted(restored + from_head), kept=kept)


def _restore(repo: Repo, rec: InPlaceRecord, changed: list[str], raw: dict[str, Entry], head: dict[str, Entry],
             restored: list[str], kept: list[str], from_head: list[str]) -> None:
    g = repo.git()
    dirty, unsaved = set(rec.dirty), set(rec.unsaved)
    for rel in changed:
        if rel in unsaved:
            kept.append(rel)
        elif rel in raw:
            _write_raw(g, repo.path, rel, raw[rel])
            restored.append(rel)
        elif rel in head and rel not in dirty:
            from_head.append(rel)
        else:  # absent at the baseline (created by the cycle, or deleted by the person before it)
            _remove(repo.path, rel)
            restored.append(rel)
    _checkout_head(repo, rec.head, from_head)
    _restore_index(repo, rec, [p for p in changed if p not in unsaved])
