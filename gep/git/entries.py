"""Per-path state: a tree's entries, the index's entries, a work-tree file's blob id (as git would hash it)."""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

from gep.git.plumbing import LITERAL, Git, batched, enc

Entry = tuple[str, str]  # (mode, object id)


def tree_entries(g: Git, treeish: str, paths: Sequence[str]) -> dict[str, Entry]:
    out: dict[str, Entry] = {}
    for chunk in batched(sorted(set(paths))):
        raw = g.run("ls-tree", "-r", "-z", "--full-tree", treeish, "--", *chunk, env=LITERAL).out
        for rec in raw.split(b"\0"):
            if rec:
                meta, path = rec.split(b"\t", 1)
                mode, _kind, sha = meta.decode().split()
                out[os.fsdecode(path)] = (mode, sha)
    return out


def index_entries(g: Git, paths: Sequence[str]) -> dict[str, Entry]:
    """Stage-0 index entries of ``paths`` (conflicted paths are reported with their stage-0 absence)."""
    out: dict[str, Entry] = {}
    for chunk in batched(sorted(set(paths))):
        raw = g.run("ls-files", "-s", "-z", "--", *chunk, env=LITERAL).out
        for rec in raw.split(b"\0"):
            if rec:
                meta, path = rec.split(b"\t", 1)
                mode, sha, stage = meta.decode().split()
                if stage == "0":
                    out[os.fsdecode(path)] = (mode, sha)
    return out


def worktree_blob(g: Git, root: Path, rel: str) -> str | None:
    """The blob id git would store for ``rel`` now (filters applied), None when absent or not a file."""
    p = root / rel
    try:
        mode = os.lstat(p).st_mode
    except OSError:
        return None
    if stat.S_ISLNK(mode):
        return g.out("hash-object", "-t", "blob", "--no-filters", "--stdin", input=enc(os.readlink(p)))
    if not stat.S_ISREG(mode):
        return None
    return g.out("hash-object", f"--path={rel}", "--", str(p))


def index_info(entries: dict[str, Entry | None], hexlen: int = 40) -> bytes:
    """``update-index --index-info -z`` input: set each path's entry, or remove it (None)."""
    zero = "0" * hexlen
    out = b""
    for path, entry in sorted(entries.items()):
        mode, sha = entry if entry else ("0", zero)
        out += f"{mode} {sha}\t".encode() + enc(path) + b"\0"
    return out
