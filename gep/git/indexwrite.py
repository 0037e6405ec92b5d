"""The one moment the engine writes the user's index (and, landing, their files): announced on disk first.

Before moving the user's branch and writing ``.git/index``, the engine writes ``.gep/index-write.json``
(what it is about to do, by which pid) and removes it when done. After a kill -9 in between, recovery
finds the marker of a dead pid: it finishes or undoes the write (see :mod:`gep.git.landing` and
:mod:`gep.git.inplace`), and removes the ``index.lock`` git left behind, but only one that no live process
holds open and that is not older than the marker (so it is the engine's, not someone else's).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from gep.git.repo import Repo, ensure_gep_dir

MARKER = "index-write.json"


class IndexWrite(BaseModel):
    kind: Literal["landing", "inplace", "abandon"]
    event_id: str
    ref: str  # the ref moved: refs/heads/<name>, or HEAD when detached
    old: str  # its value before
    new: str  # the engine's commit
    base: str  # where the paths' index entries and files come from before the write
    paths: list[str] = Field(default_factory=list)
    pid: int = Field(default_factory=os.getpid)
    started: float = Field(default_factory=time.time)


def marker_path(repo: Repo) -> Path:
    return repo.gep_dir / MARKER


@contextmanager
def announced(repo: Repo, plan: IndexWrite) -> Iterator[None]:
    path = ensure_gep_dir(repo) / MARKER
    tmp = path.with_name(MARKER + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(plan.model_dump_json())
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    try:
        yield
    finally:
        path.unlink(missing_ok=True)


def read_marker(repo: Repo) -> IndexWrite | None:
    try:
        return IndexWrite.model_validate(json.loads(marker_path(repo).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def held_open(path: Path) -> bool:
    """Whether a live process has ``path`` open (git keeps its lock file open while it writes)."""
    target = str(path)
    proc = Path("/proc")
    if not proc.is_dir():
        return False
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            for fd in (entry / "fd").iterdir():
                if os.readlink(fd) == target:
                    return True
        except OSError:
            continue
    return False


def index_lock(repo: Repo) -> Path:
    return repo.git_dir / "index.lock"


def clear_engine_lock(repo: Repo, plan: IndexWrite) -> str | None:
    """Remove the ``index.lock`` a killed engine left; a message naming it, or None."""
    lock = index_lock(repo)
    try:
        st = lock.lstat()
    except OSError:
        return None
    if st.st_mtime < plan.started - 2.0 or held_open(lock):
        return None
    lock.unlink()
    return f"removed {lock}, left by the engine (pid {plan.pid}) killed while writing the index"
