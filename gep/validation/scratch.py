"""A throw-away copy of the tree under check: validation, the canary and the model's ``run_validation``
run in it, so nothing they write (a ``conftest.py`` appending to README.md, a tracked file replaced by a
symlink, a test report) ever reaches the tree the engine reads the change from, and it is deleted after.
It lives in the workspace's ``.gep/tmp/`` (recovery empties it after a kill), else in the system's temp dir.

The copy holds what the change is made of: the files git lists as tracked or untracked-not-ignored (the
workspace's ignored files, ``.env`` and the like, are never copied). In prompt mode, where the tree is the
person's own, only the untracked files the change would commit are copied (``Sandbox.untracked``): an untracked
``.env`` they had before the cycle, which git does not ignore, is never shown to validation. The environment folders
(``env_dirs``: ``.venv``, ``node_modules``) are links to the user's, which the sandbox shows read-only.
Only regular files and symlinks are copied (a FIFO or a device is never opened).
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gep.git.clone import _force_remove
from gep.git.plumbing import NO_LOCKS, Git, z
from gep.validation.sandbox import Sandbox

SCRATCH_PREFIX = "check-"


def _listed(tree: Path, untracked: list[str] | None = None) -> list[str] | None:
    """The tree's files as git sees them (tracked, and untracked not ignored: of those only ``untracked``
    when given); None when it is no repo."""
    if not (tree / ".git").exists():
        return None
    g = Git(tree, where=str(tree))
    if untracked is not None:
        res = g.run("ls-files", "-z", "-c", ok=True, env=NO_LOCKS)
        return [*dict.fromkeys([*z(res.out), *untracked])] if res.ok else None
    res = g.run("ls-files", "-z", "-c", "-o", "--exclude-standard", ok=True, env=NO_LOCKS)
    return list(dict.fromkeys(z(res.out))) if res.ok else None


def _walked(tree: Path) -> list[str]:
    out: list[str] = []
    for root, dirs, files in os.walk(tree):
        dirs[:] = [d for d in dirs if not (root == str(tree) and d == ".git")]
        out += [os.path.relpath(os.path.join(root, f), tree) for f in files]
        out += [os.path.relpath(os.path.join(root, d), tree) for d in dirs if os.path.islink(os.path.join(root, d))]
    return out


def _copy_one(src: Path, dst: Path) -> None:
    try:
        st = os.lstat(src)
    except OSError:
        return  # deleted in the tree: absent from the copy too
    if not (stat.S_ISLNK(st.st_mode) or stat.S_ISREG(st.st_mode)):
        return
    dst.parent.mkdir(parents=True, exist_ok=True)
    if stat.S_ISLNK(st.st_mode):
        os.symlink(os.readlink(src), dst)
    else:
        shutil.copy2(src, dst, follow_symlinks=False)


def copy_tree(tree: Path, env_dirs: list[str], dest: Path, untracked: list[str] | None = None) -> list[Path]:
    """Copy ``tree``'s files into ``dest`` (of the untracked, only ``untracked`` when given); link its
    environment folders. Returns the folders linked to."""
    names = _listed(tree, untracked)
    for rel in names if names is not None else _walked(tree):
        _copy_one(tree / rel, dest / rel)
    linked: list[Path] = []
    for name in env_dirs:
        rel = name.strip().strip("/")
        src, dst = tree / rel, dest / rel
        if not rel or ".." in Path(rel).parts or os.path.lexists(dst) or not src.is_dir():
            continue
        target = src.resolve()
        dst.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, dst)
        linked.append(target)
    return linked


def _scratch_root(box: Sandbox) -> Path | None:
    """``.gep/tmp`` of the workspace (its file system; recovery empties it after a kill), else the system's."""
    if box.state_dir is None or not box.state_dir.is_dir() or box.state_dir.is_symlink():
        return None
    root = box.state_dir / "tmp"
    root.mkdir(exist_ok=True)
    return root


@contextmanager
def throwaway(box: Sandbox) -> Iterator[Sandbox]:
    """``box`` running its commands in a fresh copy of its tree, deleted afterwards (``box`` itself when it
    already has one, or when every command is refused anyway)."""
    if box.scratch is not None or box.refusal:
        yield box
        return
    dest: Path | None = None
    try:
        dest = Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX, dir=_scratch_root(box)))
        linked = copy_tree(box.tree, box.env_dirs, dest, box.untracked)
        if box.kind == "none" and (box.tree / ".git").exists():
            os.symlink(box.tree / ".git", dest / ".git")  # unconfined: git still works in the copy
    except OSError as exc:  # a full disk, a file over a limit: the checks cannot run (one line, no traceback)
        if dest is not None:
            shutil.rmtree(dest, onerror=_force_remove)
        yield box.model_copy(update={"refusal": f"cannot copy the tree to check: {exc.strerror or exc}"})
        return
    try:
        yield box.model_copy(update={"scratch": dest, "readonly": [*box.readonly, *linked]})
    finally:
        shutil.rmtree(dest, onerror=_force_remove)
