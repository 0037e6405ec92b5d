"""The `--workspace` of every command: the folder given, else the repository the current directory is in.

Light on purpose (subprocess; the git layer only to check a folder named): the store-only commands must
answer without importing git libraries, pydantic models or Prefect.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Annotated

import typer

from gep.core.errors import WorkspaceError

HELP = "The workspace: a git repository an agent works in (default: the one the current directory is in)."
WorkspaceOpt = Annotated[Path | None, typer.Option("--workspace", "-w", help=HELP)]


def _toplevel(cwd: Path | None) -> str | None:
    try:
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=cwd, capture_output=True, text=True)
    except OSError:
        return None
    return top.stdout.strip() if top.returncode == 0 and top.stdout.strip() else None


def here() -> Path:
    """The top of the git work tree the current directory is in; a one-line error outside one."""
    top = _toplevel(None)
    if top is None:
        raise WorkspaceError(f"{Path.cwd()} is not inside a git repository: run this in a workspace or pass "
                             "--workspace DIR")
    return Path(top).resolve()


def workspace_or_here(workspace: Path | None) -> Path:
    """``--workspace`` as given (the command checks it as it always did), else :func:`here`."""
    return here() if workspace is None else workspace


def folder_or_here(workspace: Path | None) -> Path:
    """For commands that read what `gep capture` wrote: the folder given, any directory (Claude Code's hook
    captures in a project whether or not it is a git repository), else :func:`here`."""
    if workspace is None:
        return here()
    path = workspace.expanduser()
    if not path.is_dir():
        raise WorkspaceError(f"workspace {path} is not a directory" if path.exists()
                             else f"workspace {path} does not exist")
    return path.resolve()


def checked_top(workspace: Path | None) -> Path:
    """A workspace for a command that reads the store: :func:`here`, or the folder given when it is the top of
    a git repository, refused in one line otherwise: the checks a cycle makes (:func:`gep.git.open_repo`), so
    that what the command then suggests, `gep cycle --workspace DIR`, runs."""
    if workspace is None:
        return here()
    from gep.git import open_repo  # pydantic and the git layer: only when a folder is named

    return open_repo(workspace).path
