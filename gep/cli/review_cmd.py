"""`gep approve ID [--note]` and `gep reject ID --note`: answer a `gep cycle --review` waiting in another terminal.

The waiting cycle recorded its pause in the store (gep/cycle/review_wait.py); the answer resumes its flow run
through the Prefect API, as the UI's form does, and this command waits (a bounded time) for the cycle's
outcome and says it. Never imports Prefect.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Annotated, Any

import typer

from gep.cli.workspace_arg import WorkspaceOpt, workspace_or_here
from gep.core.errors import GepError

OUTCOME_WAIT_S = 120.0  # how long to wait for the resumed cycle's outcome before saying where to look
POLL_S = 0.5

IdArg = Annotated[str, typer.Argument(metavar="ID", help="The waiting cycle's id (as `gep status` or "
                                      "`gep history` shows it, any unique prefix, or the full id).")]


def register(app: typer.Typer, friendly: Callable[[Any], Any]) -> None:
    """Add `approve` and `reject` to ``app``; ``friendly`` turns errors into one line (gep.cli.root's)."""
    app.command("approve")(friendly(approve))
    app.command("reject")(friendly(reject))


def approve(
    event_id: IdArg,
    note: Annotated[str, typer.Option("--note", help="Why (kept with the feedback: the gene counts it "
                                      "helpful).")] = "",
    workspace: WorkspaceOpt = None,
) -> None:
    """Approve the change a `gep cycle --review` waits on: it is committed (and landed on your branch when
    safe). Works from any terminal; the waiting cycle ends with the outcome printed here too.

    Exit status: 0 committed, 1 the cycle failed after the answer, 2 nothing to approve (one line says why)."""
    _answer(event_id, True, note, workspace)


def reject(
    event_id: IdArg,
    note: Annotated[str, typer.Option("--note", help="Why it is rejected (required: the gene counts it not "
                                      "helpful, and the next cycles on this gene can recall your words).")] = "",
    workspace: WorkspaceOpt = None,
) -> None:
    """Reject the change a `gep cycle --review` waits on: nothing is committed, the change is saved as a
    patch under .gep/rescued/. Works from any terminal; the waiting cycle ends.

    Exit status: 0 rejected, 2 nothing to reject or no --note (one line says why)."""
    if not note.strip():
        raise GepError("say why with --note (`gep reject ID --note \"...\"`): your words are what the next "
                       "cycles on this gene recall")
    _answer(event_id, False, note, workspace)


def _answer(typed: str, approved: bool, note: str, workspace: Any) -> None:
    from gep.cli.store_open import writable_store  # deferred: every command module is imported at start;
    from gep.core.event_ids import short_id  # deferred: the store and the cycle's code only when answering
    from gep.core.sanitize import redact  # deferred: as above
    from gep.cycle.review_wait import answer, recorded_outcome  # deferred: as above

    ws = workspace_or_here(workspace)
    with writable_store(ws) as store:
        wait = answer(store, typed, approved, redact(note))
        sid = short_id(wait.event_id)
        typer.echo(f"{'approved' if approved else 'rejected'} cycle {sid}; waiting for it to finish ...")
        deadline = time.monotonic() + OUTCOME_WAIT_S
        event = recorded_outcome(store, wait.event_id)
        while event is None and time.monotonic() < deadline:
            time.sleep(POLL_S)
            event = recorded_outcome(store, wait.event_id)
    if event is None:
        typer.echo(f"cycle {sid} goes on; `gep status` and `gep history` say how it ends")
        return
    m = event.meta
    status = str(event.outcome.status)
    where = f" ({m.delivery or 'landed'} on {m.branch})" if m.commit and m.branch else ""
    said = f"committed {m.commit[:12]}{where}" if m.commit and status == "success" else status
    if not approved and status == "failed":
        said = "rejected, nothing committed"
    typer.echo(f"cycle {sid}: {said}")
    if m.merge_command:
        typer.echo(f"  land it with: gep land {sid}")
    if m.rescued_patch:
        typer.echo(f"  change saved in: {m.rescued_patch}")
    if approved and status in ("failed", "interrupted"):
        raise typer.Exit(1)
