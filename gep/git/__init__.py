"""The engine's git layer: a cycle never touches the user's tree until its change is ready.

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

__all__ = [
    "Change", "FileChange", "Radius", "CloneRecord", "load_record", "open_clone", "remove_clone", "Delivery",
    "deliver", "InPlaceChange", "InPlaceRecord", "begin_in_place", "close_in_place", "in_place_change",
    "load_in_place", "abandon_in_place", "InPlaceCommit", "commit_in_place", "clone_change", "clone_git_actions",
    "close_clone", "commit_change", "discard_clone", "drift_paths", "holds_lock", "workspace_lock",
    "RecoveryReport", "find_event_commit", "recover_git", "salvage", "RefRecord", "record_refs", "Repo", "ensure_gep_dir", "open_repo", "Rescue",
]
