"""``gep init --claude``: Claude Code's side of gep installed in a workspace, and taken out again.

What the plugin in plugins/claude/gep/ bundles, written into the workspace's own project files (Claude Code
reads them with no plugin marketplace): in ``.claude/settings.json`` the ``SessionStart`` and
``UserPromptSubmit`` hooks running ``gep capture`` (the command README's hook section gives) and ``"gep"`` in
``enabledMcpjsonServers`` (the project's server approved), and in ``.mcp.json`` the ``gep`` MCP server
(``gep mcp``, which finds the workspace from ``$CLAUDE_PROJECT_DIR`` or its folder).

Merged into what is there: the user's own hooks, servers and settings are never dropped or reordered, and a
file that is not a JSON object is refused in one line before anything is written. Each file's text as it was
before the first install is kept under ``.gep/claude/`` (mode 0600); ``remove`` takes out only what install
added and, when nothing else changed meanwhile, puts the file back byte for byte (or deletes a file install
created); a file the user edited since keeps their edits.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from gep.core.errors import ConfigError

SERVER = "gep"
HOOK_EVENTS = ("SessionStart", "UserPromptSubmit")
HOOK_TIMEOUT_S = 10
SETTINGS = Path(".claude") / "settings.json"
MCP_JSON = Path(".mcp.json")
KEPT = Path(".gep") / "claude"  # the files as they were before the first install
FILES = (SETTINGS, MCP_JSON)


def gep_command() -> str:
    """``gep`` when Claude Code will find it on PATH, else the full path of this installation's script."""
    if shutil.which("gep"):
        return "gep"
    here = Path(sys.executable).parent / "gep"
    return str(here) if here.is_file() else "gep"


def hook_command(gep: str) -> str:
    return f'{shlex.quote(gep)} capture --workspace "$CLAUDE_PROJECT_DIR"'


def our_hook(gep: str) -> dict[str, Any]:
    return {"type": "command", "command": hook_command(gep), "timeout": HOOK_TIMEOUT_S}


def our_server(gep: str) -> dict[str, Any]:
    return {"type": "stdio", "command": gep, "args": ["mcp"]}


class Change(BaseModel):
    """What install or remove did to one file."""

    path: str
    done: list[str] = Field(default_factory=list)  # one line per change
    kept: list[str] = Field(default_factory=list)  # what was left as the user has it, and why


class Report(BaseModel):
    changes: list[Change] = Field(default_factory=list)

    def lines(self) -> list[str]:
        out = []
        for c in self.changes:
            out += [f"{c.path}: {d}" for d in c.done] + [f"{c.path}: {k}" for k in c.kept]
        return out


def _read(path: Path) -> tuple[str | None, dict[str, Any]]:
    """A file's text (None when absent) and its JSON object; a file that is not one is refused."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    if not text.strip():
        return text, {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{path} is not valid JSON ({exc}); fix it, then run `gep init --claude` again") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} holds a JSON {type(data).__name__}, not an object; nothing was changed")
    return text, data


def _dump(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.gep-{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _keep_original(workspace: Path, rel: Path, text: str | None) -> None:
    """The file as it was before the first install (an absent file is kept as ``null``)."""
    kept = workspace / KEPT / (rel.name + ".json")
    if kept.exists():
        return  # installed before: that record holds the user's own version
    kept.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(kept, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump({"path": str(rel), "text": text}, fh)


def _original(workspace: Path, rel: Path) -> tuple[bool, str | None]:
    """(known, text) of the file before the first install."""
    kept = workspace / KEPT / (rel.name + ".json")
    try:
        return True, json.loads(kept.read_text(encoding="utf-8"))["text"]
    except (OSError, ValueError, KeyError, TypeError):
        return False, None


# ------------------------------------------------------------------ the entries


def _has_hook(entries: list[Any], hook: dict[str, Any]) -> bool:
    return any(isinstance(e, dict) and hook["command"] in [h.get("command") for h in e.get("hooks", [])
                                                           if isinstance(h, dict)] for e in entries)


def add_hooks(data: dict[str, Any], gep: str, change: Change) -> None:
    hooks = data.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise ConfigError(f"{change.path}: \"hooks\" is not an object; nothing was changed")
    for event in HOOK_EVENTS:
        entries = hooks.setdefault(event, [])
        if not isinstance(entries, list):
            raise ConfigError(f"{change.path}: hooks.{event} is not a list; nothing was changed")
        if _has_hook(entries, our_hook(gep)):
            change.kept.append(f"the {event} hook was there already")
            continue
        entries.append({"hooks": [our_hook(gep)]})
        change.done.append(f"added the {event} hook ({hook_command(gep)})")
    approved = data.setdefault("enabledMcpjsonServers", [])
    if isinstance(approved, list) and SERVER not in approved:
        approved.append(SERVER)
        change.done.append(f"approved the project's {SERVER!r} MCP server (enabledMcpjsonServers)")


def drop_hooks(data: dict[str, Any], gep: str, change: Change) -> None:
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        hooks = {}
    for event in HOOK_EVENTS:
        entries = hooks.get(event)
        if not isinstance(entries, list):
            continue
        kept = []
        for e in entries:
            ours = [h for h in e.get("hooks", []) if h == our_hook(gep)] if isinstance(e, dict) else []
            rest = [h for h in e.get("hooks", []) if h != our_hook(gep)] if isinstance(e, dict) else []
            if ours:
                change.done.append(f"removed the {event} hook")
            if not ours:
                kept.append(e)
            elif rest:
                kept.append({**e, "hooks": rest})  # the user's hooks in the same entry stay
        hooks[event] = kept
    approved = data.get("enabledMcpjsonServers")
    if isinstance(approved, list) and SERVER in approved:
        approved.remove(SERVER)
        change.done.append(f"took back the approval of the {SERVER!r} MCP server")


def add_server(data: dict[str, Any], gep: str, change: Change) -> None:
    servers = data.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise ConfigError(f"{change.path}: \"mcpServers\" is not an object; nothing was changed")
    if servers.get(SERVER) == our_server(gep):
        change.kept.append(f"the {SERVER!r} MCP server was there already")
        return
    if SERVER in servers:
        change.kept.append(f"a {SERVER!r} server of your own is configured: left as it is")
        return
    servers[SERVER] = our_server(gep)
    change.done.append(f"added the {SERVER!r} MCP server ({gep} mcp)")


def drop_server(data: dict[str, Any], gep: str, change: Change) -> None:
    servers = data.get("mcpServers")
    if isinstance(servers, dict) and servers.get(SERVER) == our_server(gep):
        del servers[SERVER]
        change.done.append(f"removed the {SERVER!r} MCP server")
    elif isinstance(servers, dict) and SERVER in servers:
        change.kept.append(f"the {SERVER!r} server is not the one gep wrote: left as it is")


def _prune(data: dict[str, Any], original: dict[str, Any]) -> None:
    """Containers install created and left empty go (the ones the user had stay, even empty)."""
    hooks = data.get("hooks")
    if isinstance(hooks, dict):
        had = original.get("hooks")
        had = had if isinstance(had, dict) else {}
        for event in HOOK_EVENTS:
            if hooks.get(event) == [] and event not in had:
                del hooks[event]
    for key in ("hooks", "enabledMcpjsonServers", "mcpServers"):
        if data.get(key) in ({}, []) and key not in original:
            del data[key]


# ------------------------------------------------------------------ install and remove


Edit = Callable[[dict[str, Any], str, Change], None]
ADD: dict[Path, Edit] = {SETTINGS: add_hooks, MCP_JSON: add_server}
DROP: dict[Path, Edit] = {SETTINGS: drop_hooks, MCP_JSON: drop_server}


def install(workspace: Path, gep: str | None = None) -> Report:
    """Add the hooks and the MCP server to ``workspace``'s Claude Code files (both read and checked first)."""
    gep = gep or gep_command()
    read = {rel: _read(workspace / rel) for rel in FILES}  # a file that cannot be merged: nothing is written
    report = Report()
    for rel in FILES:
        text, data = read[rel]
        change = Change(path=str(rel))
        ADD[rel](data, gep, change)
        if change.done:
            _keep_original(workspace, rel, text)
            _write(workspace / rel, _dump(data))
        report.changes.append(change)
    return report


def remove(workspace: Path, gep: str | None = None) -> Report:
    """Take out what :func:`install` added; a file nothing else changed in is put back byte for byte."""
    gep = gep or gep_command()
    report = Report()
    for rel in FILES:
        path = workspace / rel
        text, data = _read(path)
        change = Change(path=str(rel))
        known, before = _original(workspace, rel)
        if text is not None:
            DROP[rel](data, gep, change)
            original = _parsed(before)
            _prune(data, original if known else data)
            if change.done and known and data == original:
                _restore(path, before, change)
            elif change.done:
                _write(path, _dump(data))
        (workspace / KEPT / (rel.name + ".json")).unlink(missing_ok=True)
        report.changes.append(change)
    return report


def _parsed(text: str | None) -> dict[str, Any]:
    try:
        data = json.loads(text) if text and text.strip() else {}
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _restore(path: Path, before: str | None, change: Change) -> None:
    """The file as it was before install: its own bytes, or no file (and no ``.claude/`` install made)."""
    if before is None:
        path.unlink()
        if path.parent.name == ".claude" and not any(path.parent.iterdir()):
            path.parent.rmdir()
        change.done.append("deleted (gep had created it)")
    else:
        _write(path, before)
        change.done.append("put back as it was before `gep init --claude`")
