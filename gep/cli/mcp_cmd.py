"""`gep mcp`: serve the workspace to an agent over the Model Context Protocol (stdio), gep/sessions/mcp_server.py.

Plain store work and, for `gep_cycle`, a cycle in a child process: never imports Prefect.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from gep.cli.workspace_arg import checked_top


def register(app: typer.Typer, friendly: Callable[[Any], Any]) -> None:
    """Add the `mcp` command to ``app``; ``friendly`` turns errors into one line (gep.cli.root's)."""
    app.command("mcp")(friendly(mcp))


def mcp(
    workspace: Annotated[Path | None, typer.Option("--workspace", "-w", help="The workspace (default: "
                                                   "$CLAUDE_PROJECT_DIR when set, else the repository the "
                                                   "current directory is in).")] = None,
) -> None:
    """Serve the workspace's memory to an agent over MCP on stdin/stdout (an MCP client starts it).

    Tools: gep_live_problems, gep_recall {problem?, file?}, gep_history {limit?}, gep_status (read-only),
    gep_feedback {event, verdict, note?} and gep_cycle {mutator?, agent_cmd?, strategy?}; resources
    gep://lessons, gep://genes, gep://problems. Answers are redacted and marked as the workspace's data.
    Claude Code: `claude mcp add gep -- gep mcp --workspace DIR`, or `gep init --claude`. See docs/mcp.md.
    """
    project = os.environ.get("CLAUDE_PROJECT_DIR", "")
    top = checked_top(workspace if workspace is not None else Path(project) if project else None)
    from gep.sessions.mcp_server import serve  # deferred: the MCP SDK (~1 s), only for this command

    serve(top)
