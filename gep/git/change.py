"""What a cycle changed: per file status, lines and bytes, committable or not, and the blast radius.

Bytes are the bytes of the lines the change adds and deletes (whole files for added, deleted and binary
ones; a symlink counts its target's length), so a byte cap stops a huge file whatever its line count, while
a one-line edit of a large file counts one line.
Ignored files the change made or touched are part of the radius (a ``.env`` written by a cycle is seen) but
never of the commit.
"""

from __future__ import annotations

import codecs
import os
import stat
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from gep.git.plumbing import SAFE_CONFIG, Git, batched, z
from gep.git.repo import GEP_DIR

Kind = Literal["tracked", "ignored", "refused"]
Status = Literal["added", "modified", "deleted"]
LINE_COUNT_MAX_BYTES = 64 * 1024 * 1024  # beyond this a file's lines are not counted (its bytes still are)


class FileChange(BaseModel):
    path: str
    status: Status
    added: int = 0
    deleted: int = 0
    bytes: int = 0
    kind: Kind = "tracked"  # tracked: part of the commit; ignored: the baseline ignores it; refused: cannot be
    note: str = ""


class Radius(BaseModel):
    files: int = 0
    lines: int = 0
    bytes: int = 0


class Change(BaseModel):
    """A work tree against its base commit. ``tree`` is what a commit of it would hold."""

    base: str
    tree: str
    base_tree: str
    files: list[FileChange] = Field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.files

    @property
    def committable(self) -> list[FileChange]:
        return [f for f in self.files if f.kind == "tracked"]

    @property
    def uncommittable(self) -> list[FileChange]:
        return [f for f in self.files if f.kind != "tracked"]

    @property
    def paths(self) -> list[str]:
        return [f.path for f in self.files]

    def radius(self, kinds: Iterable[Kind] = ("tracked", "ignored", "refused")) -> Radius:
        chosen = [f for f in self.files if f.kind in set(kinds)]
        return Radius(files=len(chosen), lines=sum(f.added + f.deleted for f in chosen),
                      bytes=sum(f.bytes for f in chosen))


def is_engine_path(rel: str) -> bool:
    return rel == GEP_DIR or rel.startswith(GEP_DIR + "/")


def changed_paths(g: Git, a: str, *others: str) -> set[str]:
    """The paths that differ between tree ``a`` and any of ``others``: names only (no line counts or sizes,
    which cost :func:`tree_diff` three more git calls), one call per distinct other tree."""
    out: set[str] = set()
    for b in dict.fromkeys(others):
        out.update(z(g.run("diff-tree", "-r", "-z", "--no-renames", "--name-only", a, b).out))
    return out


def tree_diff(g: Git, a: str, b: str) -> list[FileChange]:
    """Files that differ between two trees (or commits), with lines and the bytes of the new side."""
    raw = g.run("diff-tree", "-r", "-z", "--no-renames", "--no-ext-diff", "--no-textconv", a, b).out
    fields = raw.split(b"\0")
    out: dict[str, FileChange] = {}
    sizes: dict[str, str] = {}
    for meta, path in zip(fields[0::2], fields[1::2], strict=False):
        if not meta.startswith(b":"):
            continue
        _om, nm, _osha, nsha, code = meta[1:].decode().split()
        rel = os.fsdecode(path)
        status: Status = "added" if code == "A" else "deleted" if code == "D" else "modified"
        out[rel] = FileChange(path=rel, status=status)
        if status != "deleted" and nm != "160000":
            sizes[rel] = nsha
    num = g.run("diff-tree", "-r", "-z", "--no-renames", "--no-ext-diff", "--no-textconv", "--numstat", a, b).out
    for rec in num.split(b"\0"):
        parts = rec.split(b"\t", 2)
        if len(parts) == 3 and os.fsdecode(parts[2]) in out:
            fc = out[os.fsdecode(parts[2])]
            fc.added = int(parts[0]) if parts[0].isdigit() else 0
            fc.deleted = int(parts[1]) if parts[1].isdigit() else 0
    if sizes:
        shas = list(sizes.values())
        res = g.run("cat-file", "--batch-check=%(objectsize)", input="".join(s + "\n" for s in shas).encode())
        for rel, size in zip(sizes, res.text.split(), strict=True):
            out[rel].bytes = int(size)
    text = [f.path for f in out.values() if f.status != "added" and (f.added or f.deleted)]
    for rel, changed in line_bytes(g, a, b, text).items():  # modified text files: the lines changed
        out[rel].bytes = changed
    return sorted(out.values(), key=lambda f: f.path)


def line_bytes(g: Git, a: str, b: str, paths: list[str]) -> dict[str, int]:
    """Bytes of the added and deleted lines of ``paths`` between two trees, streamed from one ``-U0`` diff (a
    huge change is never held in memory)."""
    out: dict[str, int] = {}
    for chunk in batched(paths):
        _count_lines(g, a, b, chunk, out)
    return out


def _count_lines(g: Git, a: str, b: str, paths: list[str], out: dict[str, int]) -> None:
    argv = ["git", *[x for item in SAFE_CONFIG for x in ("-c", item)], "diff-tree", "-r", "-p", "-U0",
            "--no-renames", "--no-ext-diff", "--no-textconv", "--no-color", a, b, "--", *paths]
    with subprocess.Popen(argv, cwd=g.cwd, env=g._env({"GIT_LITERAL_PATHSPECS": "1"}), stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL) as proc:
        assert proc.stdout is not None
        current, in_hunk = "", False
        for line in proc.stdout:
            if line.startswith(b"diff --git "):
                current, in_hunk = "", False
            elif line.startswith(b"+++ ") and not in_hunk:
                current = _diff_path(line[4:])
            elif line.startswith(b"@@"):
                in_hunk = True
            elif in_hunk and current and line[:1] in (b"+", b"-"):
                out[current] = out.get(current, 0) + len(line) - 1 + (0 if line.endswith(b"\n") else 1)


def _diff_path(raw: bytes) -> str:
    """The path of a ``+++ b/<path>`` line (C-quoted by git when it holds special characters)."""
    text = raw.rstrip(b"\n")
    if text.startswith(b'"'):
        text = codecs.escape_decode(text[1:-1])[0]
    return os.fsdecode(text[2:]) if text.startswith(b"b/") else ""


def file_lines_bytes(path: Path) -> tuple[int, int]:
    """Lines (0 for binary or very large files) and bytes of a work-tree file, without following links."""
    try:
        st = os.lstat(path)
    except OSError:
        return 0, 0
    if stat.S_ISLNK(st.st_mode):
        return 1, len(os.fsencode(os.readlink(path)))
    if not stat.S_ISREG(st.st_mode) or st.st_size > LINE_COUNT_MAX_BYTES:
        return 0, st.st_size if stat.S_ISREG(st.st_mode) else 0
    lines, last = 0, b""
    try:
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 20):
                if b"\0" in chunk:
                    return 0, st.st_size
                lines += chunk.count(b"\n")
                last = chunk[-1:]
    except OSError:
        return 0, st.st_size
    return lines + (1 if last and last != b"\n" else 0), st.st_size


def untracked_changes(root: Path, paths: Iterable[str], kind: Kind, note: str = "",
                      status: Status = "added") -> list[FileChange]:
    out: list[FileChange] = []
    for rel in paths:
        lines, size = file_lines_bytes(root / rel.rstrip("/"))
        out.append(FileChange(path=rel, status=status, added=lines, bytes=size, kind=kind, note=note))
    return out
