"""`gep land ID` and `gep undo ID`: land a commit a cycle kept on its own branch, or put back a landed one.

Both refuse in one line, changing nothing, when the person's uncommitted edits touch the files concerned
(commit or stash them first); the store and git work is gep/cycle/by_hand.py and gep/git/by_hand.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import typer

from gep.cli.workspace_arg import WorkspaceOpt, workspace_or_here

IdArg = Annotated[str, typer.Argument(metavar="ID", help="The cycle's id as `gep history` or `gep status` "
                                      "shows it (any unique prefix, or the full id).")]


def register(app: typer.Typer, friendly: Callable[[Any], Any]) -> None:
    """Add `land` and `undo` to ``app``; ``friendly`` turns errors into one line (gep.cli.root's)."""
    app.command("land")(friendly(land))
    app.command("undo")(friendly(undo))


def land(event_id: IdArg, workspace: WorkspaceOpt = None) -> None:
    """Land the commit a cycle kept on gep/<event> (it could not land at the time) on your current branch:
    a fast-forward, or a merge commit when your branch moved on. Refused, changing nothing, when it conflicts
    with your branch or your uncommitted edits touch its files.

    Exit status: 0 landed, 2 refused (one line says why and what to do)."""
    from gep.cli.store_open import writable_store  # deferred: every command module is imported at start;
    from gep.cycle.by_hand import land_cycle  # deferred: the store and git code only when landing

    ws = workspace_or_here(workspace)
    with writable_store(ws) as store:
        done = land_cycle(ws.expanduser().resolve(), store, event_id)
    r = done.result
    typer.echo(f"landed cycle {done.id} on {r.branch} ({r.how}: {r.commit[:12]})")


def undo(
    event_id: IdArg,
    note: Annotated[str, typer.Option("--note", help="Why (kept with the not_helpful feedback and lesson).")] = "",
    workspace: WorkspaceOpt = None,
) -> None:
    """Put back the change a cycle landed, with a revert commit on your branch (history is kept; `git revert`
    of the revert brings it back). Your uncommitted work is never touched: refused when it touches the same
    files. Recorded as your verdict: not_helpful for the cycle's gene.

    Exit status: 0 undone, 2 refused (one line says why and what to do)."""
    from gep.cli.store_open import writable_store  # deferred: as in land
    from gep.core.sanitize import redact  # deferred: as in land
    from gep.cycle.by_hand import undo_cycle  # deferred: as in land

    ws = workspace_or_here(workspace)
    with writable_store(ws) as store:
        done = undo_cycle(ws.expanduser().resolve(), store, event_id, redact(note))
    r = done.result
    typer.echo(f"undid cycle {done.id}: {r.how} {r.commit[:12]} on {r.branch}")
    if done.feedback:
        typer.echo("  recorded as not_helpful for the cycle's gene (`gep feedback stats` shows it)")
