"""`gep init [--claude [--remove]]` and `gep doctor`: set a workspace up for gep, and check what a cycle needs,
a line per finding.

The logic is in the library (gep/workspace_setup.py: gep.toml; gep/sessions/hooks.py: the Claude Code hooks;
gep/sessions/claude_plugin.py: Claude Code's hooks and gep's MCP server in the project's own files, for
--claude; gep/doctor.py: the checks); here only the options and the printing. Never imports Prefect.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from gep.cli.prefect_link import err
from gep.cli.store_open import out
from gep.cli.workspace_arg import WorkspaceOpt, checked_top, here
from gep.core.errors import GepError


def register(app: typer.Typer, friendly: Callable[[Any], Any]) -> None:
    """Add `init` and `doctor` to ``app``; ``friendly`` turns errors into one line (gep.cli.root's)."""
    app.command("init")(friendly(init))
    app.command("doctor")(friendly(doctor))


def _say(line: str) -> None:
    out.print(line, markup=False, highlight=False, soft_wrap=True)


def init(
    workspace: WorkspaceOpt = None,
    claude: Annotated[bool, typer.Option("--claude", help="Install Claude Code's side instead: the SessionStart "
                                         "and UserPromptSubmit hooks (gep capture) in .claude/settings.json and "
                                         "the gep MCP server in .mcp.json, merged into what is there.")] = False,
    remove: Annotated[bool, typer.Option("--remove", help="With --claude: take out what it added; a file "
                                         "nothing else changed in is put back byte for byte.")] = False,
) -> None:
    """Set the workspace up for gep: a gep.toml with comments (only when there is none: yours is never
    touched), the Claude Code hooks that capture how people talk to the agent and give each new session what
    the workspace learned (in .claude/settings.local.json, kept out of git), then `gep doctor`'s checks.
    Running it again changes nothing that is there. Exit status: 0, or 1 when a check finds a blocker.

    --claude writes Claude Code's project files instead: .claude/settings.json gets the hooks (and approves
    the project's gep server), .mcp.json the server `gep mcp`. Your own hooks, servers and settings stay; each
    file as it was is kept under .gep/claude/ for --remove. The same parts as a plugin: plugins/claude/gep/.
    """
    if remove and not claude:
        raise GepError("--remove goes with --claude: `gep init --claude --remove`")
    if claude:
        _claude(workspace, remove)
        return
    # deferred, each: the git layer and the settings' models, which `gep --help` and the other commands skip
    from gep.git import open_repo  # see above
    from gep.sessions.hooks import SETTINGS_FILE, install_hooks  # see above
    from gep.workspace_setup import write_config  # see above

    repo = open_repo(workspace.expanduser() if workspace else here())
    wrote = write_config(repo.path)
    _say("wrote gep.toml (every line a comment: uncomment to change)" if wrote
         else "gep.toml is there: left as it is")
    added = install_hooks(repo)
    _say(f"added the Claude Code hooks to {SETTINGS_FILE}" if added
         else f"the Claude Code hooks are in {SETTINGS_FILE}: left as they are")
    _report(repo.path)


def _claude(workspace: Path | None, remove: bool) -> None:
    from gep.sessions import claude_plugin  # deferred: pydantic models every other command would pay for

    top = checked_top(workspace)
    report = claude_plugin.remove(top) if remove else claude_plugin.install(top)
    for line in report.lines():
        typer.echo(line)
    if not any(c.done for c in report.changes):
        typer.echo("nothing to " + ("remove" if remove else "add") + f" in {top}")
    elif not remove:
        typer.echo("restart Claude Code in this workspace; `/mcp` lists the gep server, `/hooks` the hooks")


def doctor(workspace: WorkspaceOpt = None) -> None:
    """Check what a cycle needs: the workspace, gep.toml, the git identity, the agent program (or Claude's
    key), bubblewrap, the Prefect server and its port, the store. One line per finding, with its fix.
    Changes nothing. Exit status: 0, or 1 when something blocks a cycle."""
    from gep.core.errors import WorkspaceError  # deferred: as in init

    try:
        path = workspace if workspace is not None else here()
    except WorkspaceError as exc:
        err.print(f"gep: {exc}", markup=False, highlight=False)
        raise typer.Exit(2) from None
    _report(path)


def _report(path: Path) -> None:
    from gep.doctor import check, width  # deferred: the checks import the store's schema, git, the sandbox

    findings = check(path)
    for f in findings:
        _say(f.line(width()))
    if any(f.blocks for f in findings):
        raise typer.Exit(1)
