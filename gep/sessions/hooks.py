"""The Claude Code hooks that connect a workspace's agent sessions to gep, installed by `gep init`.

Two hooks run ``gep capture`` (gep/sessions/capture.py): ``UserPromptSubmit`` captures how a person talks to
the agent, ``SessionStart`` gives a new session what the workspace learned (docs/behavior.md). They go into
``.claude/settings.local.json``, Claude Code's personal settings for the project (the command names this
machine's `gep`, so it is no file to share), which git is told to ignore through ``.git/info/exclude``. What the
file holds already is kept: other hooks and settings stay, a hook that runs ``gep capture`` is not added twice,
and a file that is not valid JSON is left as it is (one line says so).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

from gep.core.errors import ConfigError
from gep.git.repo import Repo

SETTINGS_FILE = Path(".claude") / "settings.local.json"
EVENTS = ("UserPromptSubmit", "SessionStart")
TIMEOUT_S = 10


def gep_program() -> str:
    """How a hook names this `gep`: by name when that is the one on PATH, else by its full path."""
    here = Path(sys.argv[0]).resolve() if Path(sys.argv[0]).name == "gep" else Path(sys.executable).with_name("gep")
    on_path = shutil.which("gep")
    return "gep" if on_path and Path(on_path).resolve() == here.resolve() else shlex.quote(str(here))


def hook_command(program: str) -> str:
    return f'{program} capture --workspace "$CLAUDE_PROJECT_DIR"'


def install_hooks(repo: Repo, program: str | None = None) -> list[str]:
    """Add gep's hooks to the workspace's Claude Code settings; the events added (empty: all there already)."""
    path = repo.path / SETTINGS_FILE
    try:
        settings: Any = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{SETTINGS_FILE} is not valid JSON ({exc}): left as it is; add the hooks by hand "
                          "(docs/behavior.md)") from None
    hooks = settings.setdefault("hooks", {}) if isinstance(settings, dict) else None
    if not isinstance(hooks, dict):
        raise ConfigError(f"{SETTINGS_FILE} has no JSON object of hooks: left as it is (docs/behavior.md)")
    command = hook_command(program or gep_program())
    added = [event for event in EVENTS if _add(hooks, event, command)]
    if added:
        path.parent.mkdir(exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(json.dumps(settings, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        tmp.replace(path)
        _ignore(repo)
    return added


def _add(hooks: dict[str, Any], event: str, command: str) -> bool:
    entries = hooks.setdefault(event, [])
    if not isinstance(entries, list):
        raise ConfigError(f"{SETTINGS_FILE}: hooks.{event} is not a list: left as it is (docs/behavior.md)")
    for entry in entries:
        for hook in entry.get("hooks", []) if isinstance(entry, dict) else []:
            words = str(hook.get("command", "")).split() if isinstance(hook, dict) else []
            if "capture" in words and any(Path(w).name == "gep" for w in words):
                return False  # gep's hook is there (perhaps with another path to gep): kept as the person has it
    entries.append({"hooks": [{"type": "command", "command": command, "timeout": TIMEOUT_S}]})
    return True


def _ignore(repo: Repo) -> None:
    """Tell git to ignore the personal settings file, as `.gep/` is (``info/exclude``), when it can."""
    exclude = repo.common_dir / "info" / "exclude"
    line = f"/{SETTINGS_FILE.as_posix()}"
    try:
        exclude.parent.mkdir(parents=True, exist_ok=True)
        text = exclude.read_text(encoding="utf-8") if exclude.is_file() else ""
        if line not in text.splitlines():
            exclude.write_text(text + ("" if not text or text.endswith("\n") else "\n") + line + "\n", encoding="utf-8")
    except OSError:
        pass
