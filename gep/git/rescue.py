"""A change nobody will commit is saved as a patch under ``.gep/rescued/`` before anything drops it.

The patch is git's binary diff between two trees (the user's own filters apply when it is applied), and
:func:`apply_command` is the exact line that brings it back.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, Field

from gep.git.plumbing import Git, shell_quote
from gep.git.repo import Repo

RESCUED = "rescued"


class Rescue(BaseModel):
    patch: Path | None = None  # None: nothing to save (an empty change)
    command: str = ""  # the line that applies it again
    restored: list[str] = Field(default_factory=list)  # paths put back to their baseline content
    kept: list[str] = Field(default_factory=list)  # paths left as they are (no baseline copy to restore them from)


def apply_command(repo: Repo, patch: Path) -> str:
    return f"git -C {shell_quote(str(repo.path))} apply {shell_quote(str(patch))}"


def _free_name(folder: Path, event_id: str) -> Path:
    target = folder / f"{event_id}.patch"
    n = 1
    while target.exists():
        target = folder / f"{event_id}~{n}.patch"
        n += 1
    return target


def write_patch(repo: Repo, event_id: str, old: str, new: str, g: Git | None = None) -> Path | None:
    """``.gep/rescued/<event>.patch`` holding ``old``..``new`` (trees or commits); None when they are equal."""
    g = g or repo.git()
    diff = g.run("diff", "--binary", "--full-index", "--no-color", "--no-ext-diff", "--no-textconv",
                 "--no-renames", old, new, "--").out
    if not diff:
        return None
    target = _free_name(repo.engine_dir(RESCUED), event_id)
    tmp = target.with_name(target.name + ".tmp")
    with open(tmp, "wb") as fh:
        fh.write(diff)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, target)
    return target
