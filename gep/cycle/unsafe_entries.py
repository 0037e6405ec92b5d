"""Entries no change may hold, whoever made it: a symlink that points outside the tree (``/etc/passwd``,
``../../.aws/credentials``: committed, every checkout would read or write through it) and a special file
(FIFO, socket, device: reading one blocks or never ends). Each is one line of the cycle's failure reasons."""

from __future__ import annotations

import os
import posixpath
import stat
from pathlib import Path

from gep.cycle.tree import CycleTree, TreeChange

SYMLINK_MODE = "120000"
SPECIAL_NOTE = "not a regular file"


def escapes(rel: str, target: str) -> bool:
    """Whether a symlink at ``rel`` (relative to the tree's root) pointing to ``target`` leaves the tree."""
    if not target or posixpath.isabs(target) or "\0" in target:
        return True
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(rel), target))
    return resolved == ".." or resolved.startswith("../")


def special_files(root: Path, limit: int = 20) -> list[str]:
    """FIFOs, sockets and devices under ``root`` (``.git`` and symlinks not entered; git does not list them)."""
    found: list[str] = []
    stack = [root]
    while stack and len(found) < limit:
        here = stack.pop()
        try:
            entries = list(os.scandir(here))
        except OSError:
            continue
        for e in entries:
            try:
                mode = e.stat(follow_symlinks=False).st_mode
            except OSError:
                continue
            if stat.S_ISDIR(mode):
                if not (here == root and e.name == ".git"):
                    stack.append(Path(e.path))
            elif not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
                found.append(os.path.relpath(e.path, root))
    return sorted(found)


def unsafe_entries(tree: CycleTree, tc: TreeChange) -> list[str]:
    """One violation per symlink pointing outside the tree and per special file in the change (a clone is
    the cycle's own: every special file in it is the change's)."""
    specials = {f.path for f in tc.change.files if f.kind == "refused" and f.note.startswith(SPECIAL_NOTE)}
    if tree.mode == "clone":
        specials.update(special_files(tree.path))
    out = [f"special file in the change (FIFO, socket or device): {p}" for p in sorted(specials)]
    paths = [f.path for f in tc.committable if f.status != "deleted"]
    if not paths:
        return out
    _old, new = tree.entries(tc, paths)
    for rel, (mode, sha) in sorted(new.items()):
        if mode != SYMLINK_MODE:
            continue
        target = tree.blob(sha).decode("utf-8", "surrogateescape")
        if escapes(rel, target):
            out.append(f"symlink pointing outside the tree: {rel} -> {target[:200]!r}")
    return out
