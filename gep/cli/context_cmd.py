"""`gep context`: what the workspace has learned that an agent should know now, for any agent.

The same text Claude Code's ``SessionStart`` hook receives from ``gep capture`` (gep/sessions/session_start.py), to
include in AGENTS.md, an MCP resource or a shell. Plain store work: never imports Prefect.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from gep.core.errors import WorkspaceError


def register(app: typer.Typer, friendly: Callable[[Any], Any]) -> None:
    """Add the `context` command to ``app``; ``friendly`` turns errors into one line (gep.cli.root's)."""
    app.command("context")(friendly(context))


def context(
    workspace: Annotated[Path, typer.Option("--workspace", "-w", help="The workspace (default: the repository "
                                            "the current directory is in).")] = Path("."),
    session: Annotated[str | None, typer.Option("--session", help="Record the context as given to this session "
                                                "(the next cycle judges whether it was used).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the text and its items as JSON, nothing else.")] = False,
) -> None:
    """Print the context a new agent session should receive: avoid-lines and lessons about live problems,
    the people's preferences and corrections, what a person said in feedback. Bounded by `context_chars`
    in gep.toml (default 1500), redacted; prints nothing when there is nothing to say."""
    from gep.core.models import utc_now
    from gep.learning.context_cache import repository_top
    from gep.learning.injections import record_injection
    from gep.sessions.session_start import workspace_context

    top = repository_top(workspace.expanduser().resolve())
    if top is None:
        raise WorkspaceError(f"{workspace} is not in a git repository")
    now = utc_now()
    got = workspace_context(top, now)
    if session:
        record_injection(top, session=session, items=got.items, now=now)
    if as_json:
        sys.stdout.write(json.dumps(got.model_dump(mode="json"), ensure_ascii=False) + "\n")
    elif got.text:
        sys.stdout.write(got.text + "\n")
