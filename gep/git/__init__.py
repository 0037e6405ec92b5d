"""The engine's git layer: a cycle never touches the user's tree until its change is ready.

plumbing.py (running git), repo.py (opening the repository), lock.py (the cycle lock), refs.py (the user's
references, pinned), clone.py (a cycle's own clone), isolated.py (a cycle in its clone), change.py (what a
cycle changed), change_scope.py (what a commit changed), entries.py (per-path state), scan.py (a work tree
as a tree object), ignore.py (what the baseline ignored), filters.py (required filters whose program is
missing), indexwrite.py (the one write of the user's index), landing.py (a fast-forward onto the user's
branch), rebase.py, delivery.py (land, rebase or keep), rescue.py and raw_rescue.py (a change saved as a
patch), crash_repair.py (the git side of crash recovery), kept.py (a commit kept on its branch: merged yet?),
by_hand.py (landing a kept commit, reverting a landed one); prompt mode, in the person's tree: inplace.py,
inplace_commit.py, inplace_abandon.py.

Model- or agent-driven cycles (isolated, in a clone)::

    repo = open_repo(path)
    with workspace_lock(repo, settings.lock_timeout_s):
        recover_git(repo, live=...)                       # before anything: finish what died
        rec = open_clone(repo, event_id, settings.env_dirs)  # begin (save rec with the run)
        ... the mutator edits rec.path ...
        actions = clone_git_actions(rec)                   # after the mutator: its git doings (fail if any)
        change = clone_change(repo, rec)                   # the change and its blast radius
        ... validation and canary run in rec.path ...
        drift_paths(repo, change, clone_change(repo, rec))   # what validation changed (fail if any)
        commit = commit_change(repo, rec, change, message)
        d = deliver(repo, rec, commit)                    # landed | kept | needs_revalidation | refused
        # needs_revalidation: validate rec.path again, then deliver(repo, d.record, d.commit)
        # refused, or any failure: discard_clone(repo, rec, change) -> patch under .gep/rescued/

Prompt mode (in the person's tree)::

    rec = begin_in_place(repo, event_id, settings.env_dirs)
    ch = in_place_change(repo, rec)        # ch.flagged: paths that held uncommitted edits before
    commit_in_place(repo, rec, ch, message); close_in_place(repo, rec)
    abandon_in_place(repo, rec)            # patch first, then only the cycle's paths put back
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gep.core.salvage import salvage
    from gep.git.change import Change, FileChange, Radius
    from gep.git.clone import CloneRecord, load_record, open_clone, remove_clone
    from gep.git.crash_repair import RecoveryReport, find_event_commit, recover_git
    from gep.git.delivery import Delivery, deliver
    from gep.git.inplace import (
        InPlaceChange,
        InPlaceRecord,
        begin_in_place,
        close_in_place,
        in_place_change,
        load_in_place,
    )
    from gep.git.inplace_abandon import abandon_in_place
    from gep.git.inplace_commit import InPlaceCommit, commit_in_place
    from gep.git.isolated import (
        clone_change,
        clone_git_actions,
        close_clone,
        commit_change,
        discard_clone,
        drift_paths,
    )
    from gep.git.lock import holds_lock, workspace_lock
    from gep.git.refs import RefRecord, record_refs
    from gep.git.repo import Repo, ensure_gep_dir, open_repo
    from gep.git.rescue import Rescue

# Imported on first use: a store-only command opens a repository (repo.py) without paying for the cycle's
# git machinery (clones, delivery, rescue: ~0.07 s of import) that these names bring in.
_WHERE = {
    "Change": "gep.git.change", "CloneRecord": "gep.git.clone", "Delivery": "gep.git.delivery",
    "FileChange": "gep.git.change", "InPlaceChange": "gep.git.inplace",
    "InPlaceCommit": "gep.git.inplace_commit", "InPlaceRecord": "gep.git.inplace", "Radius": "gep.git.change",
    "RecoveryReport": "gep.git.crash_repair", "RefRecord": "gep.git.refs", "Repo": "gep.git.repo",
    "Rescue": "gep.git.rescue", "abandon_in_place": "gep.git.inplace_abandon",
    "begin_in_place": "gep.git.inplace", "clone_change": "gep.git.isolated",
    "clone_git_actions": "gep.git.isolated", "close_clone": "gep.git.isolated",
    "close_in_place": "gep.git.inplace", "commit_change": "gep.git.isolated",
    "commit_in_place": "gep.git.inplace_commit", "deliver": "gep.git.delivery",
    "discard_clone": "gep.git.isolated", "drift_paths": "gep.git.isolated", "ensure_gep_dir": "gep.git.repo",
    "find_event_commit": "gep.git.crash_repair", "holds_lock": "gep.git.lock",
    "in_place_change": "gep.git.inplace", "load_in_place": "gep.git.inplace", "load_record": "gep.git.clone",
    "open_clone": "gep.git.clone", "open_repo": "gep.git.repo", "record_refs": "gep.git.refs",
    "recover_git": "gep.git.crash_repair", "remove_clone": "gep.git.clone", "salvage": "gep.core.salvage",
    "workspace_lock": "gep.git.lock",
}


def __getattr__(name: str) -> object:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "Change", "FileChange", "Radius", "CloneRecord", "load_record", "open_clone", "remove_clone", "Delivery",
    "deliver", "InPlaceChange", "InPlaceRecord", "begin_in_place", "close_in_place", "in_place_change",
    "load_in_place", "abandon_in_place", "InPlaceCommit", "commit_in_place", "clone_change", "clone_git_actions",
    "close_clone", "commit_change", "discard_clone", "drift_paths", "holds_lock", "workspace_lock",
    "RecoveryReport", "find_event_commit", "recover_git", "salvage", "RefRecord", "record_refs", "Repo", "ensure_gep_dir", "open_repo", "Rescue",
]
