"""The evaluation's throwaway folder: a copy of the workspace's history, trees checked out aside, clones per arm.

Everything ``gep eval`` writes is under one folder in the system's temporary directory (outside the workspace),
removed when the run ends, however it ends (Ctrl-C included). The workspace is only read: ``git clone
--no-hardlinks`` copies its committed history (never its working tree, index, stash, refs under edit or
``.gep`` store), and nothing is ever written back.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from gep.git.clone import force_remove
from gep.git.plumbing import Git

PREFIX = "gep-eval-"


@contextmanager
def scratch_folder() -> Iterator[Path]:
    """A new folder in the system's temporary directory, removed on the way out (whatever raised)."""
    root = Path(tempfile.mkdtemp(prefix=PREFIX)).resolve()
    try:
        yield root
    finally:
        remove(root)


def remove(folder: Path) -> None:
    if os.path.lexists(folder):
        shutil.rmtree(folder, onerror=force_remove)


def mirror(workspace: Path, dest: Path) -> Git:
    """A bare copy of the workspace's committed history (its HEAD's branch included) at ``dest``."""
    Git(dest.parent).run("clone", "--bare", "--no-hardlinks", "--quiet", "--", str(workspace), str(dest))
    return Git(dest, git_dir=dest)


def clone(source: Path, dest: Path) -> Git:
    """A working clone of ``source`` (the mirror) at ``dest``, with an identity for the cycles' commits."""
    Git(dest.parent).run("clone", "--quiet", "--", str(source), str(dest))
    g = Git(dest)
    g.run("config", "user.name", "gep eval")
    g.run("config", "user.email", "gep-eval@localhost")
    return g


def materialize(git: Git, tree: str, dest: Path, env_dirs: Sequence[Path] = ()) -> Path:
    """The files of ``tree`` (a tree or commit of ``git``'s repository) in a plain folder ``dest``, built with a
    temporary index (the repository's own index and work tree are not touched); ``env_dirs``, the workspace's
    environment folders (a virtualenv the checks need), are linked in."""
    remove(dest)
    dest.mkdir(parents=True)
    index = dest.parent / f".{dest.name}.index"
    g = git.with_(index=index, work_tree=dest)
    try:
        g.run("read-tree", tree)
        g.run("checkout-index", "-a", "-f")
    finally:
        index.unlink(missing_ok=True)
    for src in env_dirs:
        if not os.path.lexists(dest / src.name):
            os.symlink(src, dest / src.name)
    return dest
