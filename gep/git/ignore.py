"""Which paths the *baseline* ignored, whatever the change did to ``.gitignore``.

A cycle that edits ``.gitignore`` (or deletes it) must not thereby get ``.env`` committed: ignore status is
judged with the rules of the baseline tree. ``git check-ignore --no-index`` is run on a scratch work tree
holding only the baseline's ``.gitignore`` files, with the repository's git dir (its ``info/exclude`` and
``core.excludesFile``), so the answer is git's own, nested files and negations included.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from gep.git.plumbing import Git, z
from gep.git.repo import Repo


def tree_paths(g: Git, tree: str) -> dict[str, tuple[str, str]]:
    """Every entry of ``tree`` (recursively): path -> (mode, object id)."""
    out: dict[str, tuple[str, str]] = {}
    for rec in g.run("ls-tree", "-r", "-z", "--full-tree", tree).out.split(b"\0"):
        if not rec:
            continue
        meta, path = rec.split(b"\t", 1)
        mode, _kind, sha = meta.decode().split()
        out[os.fsdecode(path)] = (mode, sha)
    return out


def _materialize(g: Git, entries: dict[str, tuple[str, str]], root: Path) -> None:
    wanted = [(p, sha) for p, (mode, sha) in entries.items()
              if (p == ".gitignore" or p.endswith("/.gitignore")) and mode.startswith("100")]
    if not wanted:
        return
    res = g.run("cat-file", "--batch", input=b"".join(sha.encode() + b"\n" for _p, sha in wanted))
    data = res.out
    pos = 0
    for path, _sha in wanted:
        header_end = data.index(b"\n", pos)
        size = int(data[pos:header_end].split()[2])
        body = data[header_end + 1:header_end + 1 + size]
        pos = header_end + 1 + size + 1
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(body)


def baseline_ignored(repo: Repo, tree: str, paths: Iterable[str],
                     entries: dict[str, tuple[str, str]] | None = None) -> set[str]:
    """The subset of ``paths`` (files, relative) that the rules of ``tree`` ignore."""
    todo = sorted(set(paths))
    if not todo:
        return set()
    g = repo.git()
    # in `.gep/tmp` (gep/git/scan.py's temp_dir), which recovery empties: a cycle killed here leaves nothing behind
    with tempfile.TemporaryDirectory(prefix="ignore-", dir=repo.engine_dir("tmp")) as scratch:
        root = Path(scratch)
        _materialize(g, tree_paths(g, tree) if entries is None else entries, root)
        check = Git(root, git_dir=repo.git_dir, work_tree=root, where=str(repo.path))
        res = check.run("check-ignore", "--no-index", "-z", "--stdin",
                        input=b"".join(os.fsencode(p) + b"\0" for p in todo), ok=True)
        if res.code not in (0, 1):  # 1: nothing ignored
            check.run("check-ignore", "--no-index", "-z", "--stdin", input=b"")  # raise the real error
        return set(z(res.out))


def untracked(g: Git, *, all_files: bool, exclude: Iterable[str] = ()) -> list[str]:
    """Untracked paths in ``g``'s work tree relative to ``g``'s index: every file (``all_files``), or
    only those the current rules do not ignore. Nested repositories come as ``dir/``."""
    args = ["ls-files", "-o", "-z"] + ([] if all_files else ["--exclude-standard"])
    specs = [f":(exclude,literal){p}" for p in exclude]
    return g.paths(*args, "--", ".", *specs) if specs else g.paths(*args)
