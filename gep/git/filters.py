"""Git filters a repository requires (``filter.<name>.required``, git-lfs's setup) whose program is missing:
every checkout of the repository fails ("the remote end hung up unexpectedly"), so a cycle is refused at
its start in one line naming the filter and its program, instead of failing in git's words every cycle."""

from __future__ import annotations

import shlex
import shutil

from gep.core.errors import WorkspaceError
from gep.git.plumbing import shown
from gep.git.repo import Repo

INSTALL_HINT = {"git-lfs": "install git-lfs (https://git-lfs.com), then run `git lfs install`"}


def _program(command: str) -> str | None:
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    return words[0] if words else None


def missing_filters(repo: Repo) -> list[tuple[str, str]]:
    """(filter name, program) of each required filter whose program cannot be found."""
    g = repo.git()
    out = g.run("config", "-z", "--get-regexp", r"^filter\..*\.required$", ok=True)
    missing: list[tuple[str, str]] = []
    for item in out.text.split("\0"):
        key, _, value = item.partition("\n")
        if not key or value.strip().lower() not in ("true", "yes", "on", "1", ""):
            continue
        name = key[len("filter."):-len(".required")]
        kinds = [f"filter.{name}.{kind}" for kind in ("process", "smudge", "clean")]
        commands = g.config_values(kinds)
        for kind in kinds:
            command = (commands.get(kind) or "").strip()
            program = _program(command) if command else None
            if program is not None and shutil.which(program) is None:
                missing.append((name, program))
                break
    return missing


def check_filters(repo: Repo) -> None:
    """A one-line WorkspaceError when a filter the repository requires cannot run here."""
    for name, program in missing_filters(repo):
        hint = INSTALL_HINT.get(program, f"install {program}")
        raise WorkspaceError(f"{shown(repo.path)} requires the git filter '{name}' (filter.{name}.required), and "
                             f"its program {program} is not installed: {hint}")
