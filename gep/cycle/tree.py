"""Where a cycle's change is made and checked: its own clone, or (prompt mode) the person's own tree.

A thin adapter over gep/git for the stages. A model or an agent works in a clone under
``.gep/worktrees/<event>``, so the user's working tree, index, stash, untracked and ignored files are never
touched while the cycle runs; a person (prompt mode) works in their own tree, against a baseline that
records it without changing it. Either way the stages read the change the same way (:class:`TreeChange`),
validate it in :attr:`CycleTree.path` under the sandbox for the change's origin, and end it: the clone is
discarded (its change saved as a patch) or delivered (gep/cycle/commit_change.py); the in-place baseline is closed.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from gep.core.config import Settings
from gep.core.errors import GepError, WorkspaceError
from gep.core.sanitize import redact
from gep.git import (
    Change,
    CloneRecord,
    FileChange,
    InPlaceRecord,
    Radius,
    Repo,
    Rescue,
    begin_in_place,
    clone_change,
    clone_git_actions,
    close_clone,
    close_in_place,
    discard_clone,
    in_place_change,
    load_in_place,
    load_record,
    open_clone,
)
from gep.git.change import tree_diff
from gep.git.entries import Entry, tree_entries
from gep.git.landing import prune_empty_dirs
from gep.validation.sandbox import ChangeOrigin, Sandbox

Mode = Literal["clone", "in_place"]
ARTIFACT_SLACK_S = 2.0  # file system timestamp granularity when telling validation's output from a person's file

REDACT_MARGIN = 65_536  # characters redacted past a diff's cut (the longest secret shapes are shorter)


class TreeChange(BaseModel):
    """One reading of a cycle's change. Only :attr:`committable` files can ever be committed."""

    model_config = ConfigDict(frozen=True)

    change: Change
    root: Path  # the work tree the change is in (the clone, or the person's tree)
    flagged: list[str] = []  # in place: changed paths that held the person's uncommitted edits before the cycle

    @property
    def committable(self) -> list[FileChange]:
        held = set(self.flagged)
        return [f for f in self.change.committable if f.path not in held]

    @property
    def paths(self) -> list[str]:
        return [f.path for f in self.committable]

    @property
    def radius(self) -> Radius:
        files = self.committable
        return Radius(files=len(files), lines=sum(f.added + f.deleted for f in files), bytes=sum(f.bytes for f in files))

    @property
    def empty(self) -> bool:
        return not self.committable


class CycleTree:
    """The tree of one cycle: a clone (``mode == "clone"``) or the person's tree with its baseline."""

    def __init__(self, repo: Repo, *, clone: CloneRecord | None = None, in_place: InPlaceRecord | None = None,
                 origin: ChangeOrigin = "person"):
        assert (clone is None) != (in_place is None)
        self.repo = repo
        self.clone = clone
        self.in_place = in_place
        self.origin: ChangeOrigin = origin

    # ---------------------------------------------------------------- opening

    @classmethod
    def open(cls, repo: Repo, event_id: str, settings: Settings, mode: Mode, origin: ChangeOrigin) -> CycleTree:
        """Make the cycle's clone, or record the person's tree as the baseline (nothing of theirs changes)."""
        if mode == "clone":
            return cls(repo, clone=open_clone(repo, event_id, settings.env_dirs), origin=origin)
        rec = begin_in_place(repo, event_id, settings.env_dirs, settings.snapshot_copy_max_bytes)
        return cls(repo, in_place=rec, origin=origin)

    @classmethod
    def resume(cls, repo: Repo, event_id: str, mode: Mode) -> CycleTree:
        """The tree of a cycle that awaits changes (prompt mode), from the git layer's record."""
        if mode == "clone":
            rec = load_record(repo, event_id)
            if rec is None or not rec.path.is_dir():
                raise WorkspaceError(f"the clone of cycle {event_id} is gone")
            return cls(repo, clone=rec, origin="agent")
        found = load_in_place(repo, event_id)
        if found is None or not all(repo.git().sha(f"{c}^{{commit}}") for c in (found.head, found.snapshot, found.raw)):
            raise WorkspaceError(f"the baseline of cycle {event_id} is gone (.gep/inplace/{event_id}.json or its "
                                 "pinned commits)")
        return cls(repo, in_place=found, origin="person")

    @property
    def mode(self) -> Mode:
        return "clone" if self.clone is not None else "in_place"

    @property
    def path(self) -> Path:
        """Where the change is made and validated."""
        return self.clone.path if self.clone is not None else self.repo.path

    # ---------------------------------------------------------------- reading

    def read(self) -> TreeChange:
        if self.clone is not None:
            return TreeChange(change=clone_change(self.repo, self.clone), root=self.clone.path)
        assert self.in_place is not None
        ch = in_place_change(self.repo, self.in_place)
        return TreeChange(change=ch.change, root=self.repo.path, flagged=ch.flagged)

    def git_actions(self) -> list[str]:
        """What the agent did with git in its clone (commits, checkouts, refs): each one fails the cycle."""
        return clone_git_actions(self.clone) if self.clone is not None else []

    def entries(self, tc: TreeChange, paths: list[str]) -> tuple[dict[str, Entry], dict[str, Entry]]:
        """(baseline entries, entries now) of ``paths``, as git stores them (eol and filters applied)."""
        g = self.repo.git()
        return tree_entries(g, tc.change.base_tree, paths), tree_entries(g, tc.change.tree, paths)

    def blob(self, sha: str) -> bytes:
        return self.repo.git().run("cat-file", "blob", sha).out

    def blob_size(self, sha: str) -> int:
        return int(self.repo.git().out("cat-file", "-s", sha))

    def diff(self, tc: TreeChange, limit: int) -> str:
        """The committable change as a redacted unified diff, at most ``limit`` characters."""
        if tc.empty:
            return ""
        paths = tc.paths
        raw = self.repo.git().run("diff", "--no-color", "--no-ext-diff", "--no-textconv", "--no-renames",
                                  tc.change.base_tree, tc.change.tree, "--", *paths[:500],
                                  env={"GIT_LITERAL_PATHSPECS": "1"}).text
        # only what is kept is redacted (a 2 MB generated file took 3 s of regexes a cycle), with a margin past
        # the cut so a secret that starts before it is still redacted whole (a PEM block runs to the end anyway)
        head = raw[:limit + REDACT_MARGIN]
        text = redact(head)
        if len(head) == len(raw) and len(text) <= limit:
            return text
        return text[:limit] + "\n... [TRUNCATED]"

    def sandbox(self, settings: Settings, tc: TreeChange | None = None) -> Sandbox:
        """The sandbox validation runs in: the tree writable, the engine's state and git read-only, the user's
        environment folders linked into a clone read-only (even when they live under a hidden /tmp). In the
        person's tree (prompt mode) what git would not commit is not shown: of the untracked files, only those
        ``tc`` would commit (an untracked ``.env`` they had before the cycle stays out)."""
        box = Sandbox.resolve(self.path, settings, origin=self.origin)
        if self.clone is not None:
            box.readonly = [Path(link.target) for link in self.clone.env_links]
        elif tc is not None:
            box.untracked = tc.paths
        return box

    # ---------------------------------------------------------------- what validation wrote

    def validation_effects(self, before: TreeChange, after: TreeChange, started: float) -> tuple[list[str], list[str]]:
        """(files validation created and that are removed again, committable paths it changed). New files
        are its output (test reports); anything else it changed means the tree that passed is not the tree
        that would be committed."""
        if before.change.tree == after.change.tree:
            return [], []
        deleted = {f.path for f in before.change.files if f.status == "deleted"}
        removed: list[str] = []
        drift: list[str] = []
        for f in tree_diff(self.repo.git(), before.change.tree, after.change.tree):
            p = self.path / f.path
            if f.status == "added" and f.path not in deleted and _created_since(p, started):
                self._set_aside(f.path)
                removed.append(f.path)
            else:
                drift.append(f.path)
        return removed, drift

    def _set_aside(self, rel: str) -> None:
        """A file validation created: deleted from a clone (the engine's); in a person's tree moved to
        ``.gep/rescued/<event>-validation/`` instead (a file of theirs made in the same seconds is never lost)."""
        p = self.path / rel
        if self.in_place is not None:
            dest = self.repo.engine_dir("rescued") / f"{self.in_place.event_id}-validation" / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(p, dest)
        else:
            p.unlink()
        prune_empty_dirs(self.path, rel)

    # ---------------------------------------------------------------- ending

    def discard(self, tc: TreeChange | None = None) -> Rescue:
        """A failed cycle: the clone's change goes to ``.gep/rescued/<event>.patch``, the clone is deleted. In
        place nothing is discarded: the person's edits stay where they are."""
        if self.clone is None:
            return Rescue()
        fresh = tc is not None and tc.change.base == self.clone.base  # else rebased since: read it again
        return discard_clone(self.repo, self.clone, tc.change if fresh and tc is not None else None)

    def close(self) -> None:
        """The cycle is over with nothing to keep (an empty change, a commit made): drop the clone or baseline."""
        if self.clone is not None:
            if self.clone.status == "open":
                close_clone(self.repo, self.clone, "discarded")
        elif self.in_place is not None:
            close_in_place(self.repo, self.in_place)


def _created_since(p: Path, started: float) -> bool:
    try:
        st = os.lstat(p)
    except OSError:
        return False
    return st.st_mtime >= started - ARTIFACT_SLACK_S and st.st_mtime <= time.time() + ARTIFACT_SLACK_S


def tree_edited(tree: CycleTree | None) -> bool:
    """Whether the agent changed anything in the cycle's tree (unknown counts as edited: the change's fault)."""
    if tree is None:
        return False
    try:
        return not tree.read().empty
    except GepError:
        return True
