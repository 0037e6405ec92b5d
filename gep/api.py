"""Library entry points beside the cycle itself (gep/pipeline.py): the store of a workspace, and recovery."""

from __future__ import annotations

from pathlib import Path

from gep.config import load_settings
from gep.context import ensure_state_dir
from gep.store import Store
from gep.workspace import RecoveredRun, Workspace
from gep.workspace import recover as recover_runs


def open_store(workspace: Path | str) -> Store:
    """The store of ``workspace`` (its ``.gep/gep.db``, or ``database_url``); close it (or use ``with``)."""
    ws = Workspace.open(workspace)
    ensure_state_dir(ws)  # engine state never shows in git status, even before the first cycle
    return Store.for_workspace(ws.path, load_settings(ws.path))


def recover(workspace: Path | str) -> list[RecoveredRun]:
    """Restore ``workspace`` after crashed cycles and record their outcomes (a cycle that had committed is
    recorded as the success it was; any other is rolled back and recorded as interrupted)."""
    ws = Workspace.open(workspace)
    settings = load_settings(ws.path)
    with Store.for_workspace(ws.path, settings) as store, ws.lock(settings.lock_timeout_s):
        return recover_runs(workspace=ws.path, store=store, settings=settings, force=True)
