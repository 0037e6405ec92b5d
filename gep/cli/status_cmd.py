"""`gep status`: what waits for the person in a workspace, in a few lines (or --json).

The pending cycle (awaiting a review, awaiting a change, running, or cut off) with the commands that decide
it, the commits kept on their own branch and not merged yet (with `gep land ID`), the Prefect server, and
the last cycle's outcome. The data is gep.api.workspace_status (gep/cycle/status.py) with gep.server.server_state().
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import typer

from gep.cli.workspace_arg import WorkspaceOpt, workspace_or_here


def register(app: typer.Typer, friendly: Callable[[Any], Any]) -> None:
    """Add `status` to ``app``; ``friendly`` turns errors into one line (gep.cli.root's)."""
    app.command("status")(friendly(status))


def status(
    workspace: WorkspaceOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the status as one JSON object.")] = False,
) -> None:
    """Say what waits for you here: a cycle awaiting your review or your change (and the command that decides
    it), commits kept on gep/<event> branches and not merged yet (`gep land ID` lands one), the Prefect server,
    and the last cycle's outcome. Reads only."""
    from gep.api import workspace_status  # deferred: every command module is imported at start; status's
    from gep.cli.store_open import emit_json, out  # deferred: store and git code is not needed by the others
    from gep.server import server_state  # deferred: as above

    st = workspace_status(workspace_or_here(workspace), server_state())
    if as_json:
        emit_json(st.model_dump(mode="json"))
        return
    for line in st.lines():
        out.print(line, markup=False, highlight=False, overflow="fold")
