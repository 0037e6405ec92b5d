"""Library entry points beside the cycle itself (gep/pipeline.py): the store of a workspace, and recovery."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from gep.config import load_settings
from gep.git import open_repo, workspace_lock
from gep.git.repo import ensure_state_dir
from gep.store import Store

if TYPE_CHECKING:  # recovery pulls in the cycle's machinery: store-only commands open the store without it
    from gep.recovery import Recovery


def open_store(workspace: Path | str) -> Store:
    """The store of ``workspace`` (its ``.gep/gep.db``, or ``database_url``); close it (or use ``with``)."""
    repo = open_repo(workspace)
    ensure_state_dir(repo)  # engine state never shows in git status, even before the first cycle
    return Store.for_workspace(repo.path, load_settings(repo.path))


def recover(workspace: Path | str) -> Recovery:
    """Clean up after crashed cycles on ``workspace`` and record their outcomes: a cycle whose commit is on a
    branch is recorded as the success it was, a prompt-mode cycle killed while solidifying awaits changes
    again, any other is recorded as interrupted (its change, if any, saved as a patch). The user's tree was
    never changed by a dead cycle; an ``index.lock`` the engine left is removed and named."""
    from gep.recovery import recover_workspace

    repo = open_repo(workspace)
    settings = load_settings(repo.path)
    ensure_state_dir(repo)
    with Store.for_workspace(repo.path, settings) as store, workspace_lock(repo, settings.lock_timeout_s):
        return recover_workspace(repo, store)
