"""Traps a workspace can hold where the engine reads (tests of gep/core/safe_files.py and its callers).

A FIFO (opening it for reading waits for a writer), symlinks to /dev/zero and /dev/random (reading them never
ends), a symlink to a file outside the workspace, a directory 1,500 levels deep (deeper than Python's
recursion limit; ``os.makedirs`` and ``shutil.rmtree`` themselves overflow on it, so it is made and removed
level by level), and a memory cap so that a regression fails with MemoryError instead of taking the machine.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

TRAPS = ("fifo", "zero", "random", "outside")
# what the warning says for each trap
REASONS = {"fifo": "a FIFO", "zero": "a character device", "random": "a character device",
           "outside": "a symlink out of"}
OUTSIDE_MARKER = "OUTSIDE_SECRET_MARKER"
DEEP_LEVELS = 1500


def plant(path: Path, kind: str, outside: Path, content: str = "") -> Path:
    """A trap of ``kind`` at ``path``; ``outside`` holds the target of the out-of-workspace symlink (with
    ``content``, or a marker line)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind in ("zero", "random"):
        os.symlink(f"/dev/{kind}", path)
    elif kind == "outside":
        target = outside / f"target-{len(list(outside.iterdir()))}-{path.name}"
        target.write_text(content or f"ERROR {OUTSIDE_MARKER} boom\n", encoding="utf-8")
        os.symlink(target, path)
    else:
        raise ValueError(kind)
    return path


def sparse(path: Path, size: int) -> Path:
    """A file of ``size`` bytes that takes no disk space (reading it whole would take ``size`` of memory)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        fh.truncate(size)
    return path


def _chain(top: Path, levels: int) -> Path:
    return top.joinpath(*["d"] * levels)


def _down(fd: int, name: str, make: bool = False) -> int:
    """The folder ``name`` under the folder open at ``fd`` (made first when ``make``), opened; ``fd`` closed.
    Relative to an open folder each step costs one lookup: by whole paths the walk is quadratic (~1.5 s)."""
    if make:
        os.mkdir(name, dir_fd=fd)
    try:
        return os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
    finally:
        os.close(fd)


def make_deep(top: Path, levels: int = DEEP_LEVELS, leaf: str = "deep.log",
              text: str = "ERROR deep down\n") -> Path:
    """``top/d/d/.../d/<leaf>`` with ``levels`` folders; returns the leaf file."""
    top.mkdir(parents=True, exist_ok=True)
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(levels):
        fd = _down(fd, "d", make=True)
    try:
        with open(leaf, "w", opener=lambda name, flags: os.open(name, flags, 0o644, dir_fd=fd)) as fh:
            fh.write(text)
    finally:
        os.close(fd)
    return _chain(top, levels) / leaf


def remove_deep(top: Path, levels: int = DEEP_LEVELS) -> None:
    """Undo :func:`make_deep` without recursion (pytest's own cleanup would overflow on it)."""
    if not top.is_dir():
        return
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    depth = 0
    try:
        while depth < levels:
            fd, depth = _down(fd, "d"), depth + 1
    except FileNotFoundError:  # _down closed the last folder it had: nothing was made below it
        return
    for name in os.listdir(fd):
        os.unlink(name, dir_fd=fd)
    while depth > 0:
        fd, depth = _down(fd, ".."), depth - 1
        os.rmdir("d", dir_fd=fd)
    os.close(fd)


@pytest.fixture
def deep() -> Iterator[Callable[..., Path]]:
    """``deep(top, ...)`` makes a 1,500-level tree under ``top`` (see :func:`make_deep`), removed afterwards."""
    made: list[tuple[Path, int]] = []

    def make(top: Path, levels: int = DEEP_LEVELS, **kw: str) -> Path:
        made.append((top, levels))
        return make_deep(top, levels, **kw)

    yield make
    for top, levels in made:
        remove_deep(top, levels)


def _vm_size() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


@pytest.fixture
def memory_cap() -> Iterator[None]:
    """At most 2 GB more address space while the test runs: a read of /dev/zero that is not stopped fails
    the test with MemoryError instead of exhausting a shared machine."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = _vm_size() + 2 * 1024**3
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
