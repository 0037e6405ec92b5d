"""The workspace's cycle lock: one ``flock`` on ``.gep/cycle.lock``, released by the kernel when the holder
dies (kill -9 included), so a crash never leaves the workspace locked."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager

from gep.core.errors import WorkspaceError
from gep.core.safe_files import flock_within
from gep.git.plumbing import shown
from gep.git.repo import Repo, ensure_gep_dir

LOCK_FILE = "cycle.lock"
POLL_S = 0.1


class _HeldLocks:
    """The workspaces whose lock this process holds. Process-wide on purpose: the flock is the process's,
    whichever thread took it (a fleet runs its cycles in threads), and crash repair (gep/git/crash_repair.py)
    asks here whether this process holds it, in which case no other live engine is writing in the workspace."""

    def __init__(self) -> None:
        self._paths: set[str] = set()

    def add(self, repo: Repo) -> None:
        self._paths.add(str(repo.path))

    def discard(self, repo: Repo) -> None:
        self._paths.discard(str(repo.path))

    def __contains__(self, repo: Repo) -> bool:
        return str(repo.path) in self._paths


HELD = _HeldLocks()


@contextmanager
def workspace_lock(repo: Repo, timeout_s: float) -> Iterator[None]:
    """Hold the lock; wait up to ``timeout_s`` for another holder, then fail naming its pid."""
    path = ensure_gep_dir(repo) / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        if not flock_within(fd, timeout_s, POLL_S):
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            raise WorkspaceError(f"another cycle is running on {shown(repo.path)} (pid {holder}); "
                                 f"gave up after {timeout_s:g}s")
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        HELD.add(repo)
        try:
            yield
        finally:
            HELD.discard(repo)
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def holds_lock(repo: Repo) -> bool:
    return repo in HELD
