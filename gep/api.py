"""Library entry points beside the cycle itself (gep/cycle/pipeline.py): the store of a workspace, recovery, status."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from gep.core.config import Settings, load_settings
from gep.git import open_repo, workspace_lock
from gep.git.repo import ensure_state_dir
from gep.prefect_api import release_dead_slots, workspace_slot_name

if TYPE_CHECKING:  # recovery pulls in the cycle's machinery and the full store SQLAlchemy: store-only
    # commands read without either
    from gep.cycle.recovery import Recovery
    from gep.cycle.status_models import ServerState, WorkspaceStatus
    from gep.store import Store
    from gep.store.quick_read import QuickStore
    from gep.store.quick_write import QuickWriter

Q = TypeVar("Q")


def open_store(workspace: Path | str) -> Store:
    """The store of ``workspace`` (its ``.gep/gep.db``, or ``database_url``); close it (or use ``with``)."""
    return _quick_or_full(workspace, None)


def read_store(workspace: Path | str) -> QuickStore | Store:
    """What :func:`open_store` reads, for a command that only reads: the workspace checked and prepared the
    same way, then its own SQLite file read without SQLAlchemy when that answers exactly (gep/store/quick_read.py).
    Close it (or use ``with``)."""
    from gep.store.quick_read import open_quick

    return _quick_or_full(workspace, open_quick)


def feedback_store(workspace: Path | str) -> QuickWriter | Store:
    """Like :func:`read_store`, also appending a person's feedback and lesson (gep/store/quick_write.py)."""
    from gep.store.quick_write import open_writer

    return _quick_or_full(workspace, open_writer)


def _quick_or_full(workspace: Path | str, quick: Callable[[Path, Settings], Q | None] | None) -> Q | Store:
    """The workspace checked (a git repository's top) with its state directory made, then ``quick``'s store
    when it answers, else the full one."""
    repo = open_repo(workspace)
    ensure_state_dir(repo)  # engine state never shows in git status, even before the first cycle
    settings = load_settings(repo.path)
    store = quick(repo.path, settings) if quick is not None else None
    if store is not None:
        return store
    from gep.store import Store

    return Store.for_workspace(repo.path, settings)


def recover(workspace: Path | str) -> Recovery:
    """Clean up after crashed cycles on ``workspace`` and record their outcomes: a cycle whose commit is on a
    branch is recorded as the success it was, a prompt-mode cycle killed while solidifying awaits changes
    again, any other is recorded as interrupted (its change, if any, saved as a patch). The user's tree was
    never changed by a dead cycle; an ``index.lock`` the engine left is removed and named; the Prefect slot a
    killed cycle held is given back."""
    from gep.cycle.recovery import recover_workspace
    from gep.store import Store

    repo = open_repo(workspace)
    settings = load_settings(repo.path)
    ensure_state_dir(repo)
    with Store.for_workspace(repo.path, settings) as store, workspace_lock(repo, settings.lock_timeout_s):
        done = recover_workspace(repo, store)
    # the Prefect slot of a cycle killed here (SIGKILL): given back now, not when its lease ends
    if release_dead_slots(workspace_slot_name(repo.path)):
        done.actions.append("gave back the workspace slot a killed cycle held (the next cycle starts at once)")
    return done


def workspace_status(workspace: Path | str, server: ServerState | None = None) -> WorkspaceStatus:
    """What ``workspace`` waits for and holds (gep/cycle/status.py): the pending cycle, commits kept off the
    branch and not merged, the last outcome, and ``server`` as given (gep.server.server_state()). Reads only;
    a workspace no cycle ran on has no store and is not given one."""
    # deferred: the cycle's status code and the full store only for `gep status` (store-only commands skip them)
    from gep.core.config import gep_dir  # deferred: as said above
    from gep.cycle.status import workspace_status as status_of  # deferred: as above
    from gep.store import Store  # deferred: as above

    repo = open_repo(workspace)
    settings = load_settings(repo.path)
    if not settings.database_url and not gep_dir(repo.path).is_dir():
        return status_of(repo.path, None, server)
    with Store.for_workspace(repo.path, settings) as store:
        return status_of(repo.path, store, server)
