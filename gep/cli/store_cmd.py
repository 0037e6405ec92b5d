"""`gep store ...`: maintenance of a workspace's store. Plain database work: never imports Prefect."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from gep.cli.workspace_arg import WorkspaceOpt, workspace_or_here
from gep.core.errors import WorkspaceError


def store_app(friendly: Callable[[Any], Any]) -> typer.Typer:
    """The `store` command group; ``friendly`` turns errors into one line (gep.cli.root's)."""
    app = typer.Typer(help="Maintain a workspace's store: prune old history, move it into a shared database.",
                      no_args_is_help=True)
    app.command("prune")(friendly(prune))
    app.command("copy")(friendly(copy))
    return app


def _workspace(given: Path | None) -> Path:
    path = workspace_or_here(given)
    if not path.is_dir():
        raise WorkspaceError(f"workspace {path} is not a directory")
    return path


def prune(
    workspace: WorkspaceOpt = None,
    keep_days: Annotated[float | None, typer.Option("--keep-days", min=0, help="Keep events younger than this "
                                                    "many days.")] = None,
    keep_events: Annotated[int | None, typer.Option("--keep-events", min=0, help="Keep the newest this many "
                                                    "events.")] = None,
) -> None:
    """Delete old events (their lessons for gene selection stay, as summaries) and what only they used.

    Without --keep-days or --keep-events, the settings prune_keep_days / prune_keep_events apply, else the
    newest 10,000 events are kept. Never deleted: the newest 500 events, events of an unfinished cycle,
    capsules a kept event refers to, the newest 200 capsules and failed capsules, failed capsules within
    the ban window.
    """
    from gep.core.config import load_settings
    from gep.learning.memory_graph import MEMORY_FOLD
    from gep.store import PRUNE_KEEP_EVENTS, Store

    workspace = _workspace(workspace)
    settings = load_settings(workspace)
    if keep_days is None and keep_events is None:
        keep_days, keep_events = settings.prune_keep_days, settings.prune_keep_events
        if keep_days is None and keep_events is None:
            keep_events = PRUNE_KEEP_EVENTS
    with Store.for_workspace(workspace, settings) as store:
        report = store.prune(fold=MEMORY_FOLD, keep_events=keep_events, keep_days=keep_days,
                             ban_cycles=settings.ban_cycles)
    typer.echo(report.summary())


def copy(
    to: Annotated[str, typer.Option("--to", help="The shared database's URL "
                                    "(postgresql+psycopg2://user@host/db, or sqlite:///path).")],
    workspace: WorkspaceOpt = None,
) -> None:
    """Copy a workspace's own store (.gep/gep.db) into a shared database, then verify the copy.

    Idempotent: what the target already holds is left as it is. Afterwards point the workspace at the shared
    database (GEP_DATABASE_URL or database_url in gep.toml). Exit status 1 when the copy does not verify.
    """
    from gep.store.copy import copy_workspace_store

    typer.echo(copy_workspace_store(_workspace(workspace), to).summary())
