"""`gep init --claude [--remove]`: Claude Code's hooks and gep's MCP server in a workspace's own project
files, merged into what is there (gep/sessions/claude_plugin.py does the work). Never imports Prefect.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import typer

from gep.cli.workspace_arg import WorkspaceOpt, checked_top
from gep.core.errors import GepError


def register(app: typer.Typer, friendly: Callable[[Any], Any]) -> None:
    """Add the `init` command to ``app``; ``friendly`` turns errors into one line (gep.cli.root's)."""
    app.command("init")(friendly(init))


def init(
    workspace: WorkspaceOpt = None,
    claude: Annotated[bool, typer.Option("--claude", help="Install Claude Code's side: the SessionStart and "
                                         "UserPromptSubmit hooks (gep capture) in .claude/settings.json and "
                                         "the gep MCP server in .mcp.json, merged into what is there.")] = False,
    remove: Annotated[bool, typer.Option("--remove", help="With --claude: take out what it added; a file "
                                         "nothing else changed in is put back byte for byte.")] = False,
) -> None:
    """Set a workspace up for gep.

    --claude writes Claude Code's project files: .claude/settings.json gets the hooks (and approves the
    project's gep server), .mcp.json the server `gep mcp`. Your own hooks, servers and settings stay; each
    file as it was is kept under .gep/claude/ for --remove. The same parts as a plugin: plugins/claude/gep/.
    """
    from gep.sessions import claude_plugin  # deferred: pydantic models every other command would pay for

    if not claude:
        raise GepError("say what to set up: `gep init --claude` (Claude Code's hooks and MCP server)")
    top = checked_top(workspace)
    report = claude_plugin.remove(top) if remove else claude_plugin.install(top)
    lines = report.lines()
    for line in lines:
        typer.echo(line)
    if not any(c.done for c in report.changes):
        typer.echo("nothing to " + ("remove" if remove else "add") + f" in {top}")
    elif not remove:
        typer.echo("restart Claude Code in this workspace; `/mcp` lists the gep server, `/hooks` the hooks")
