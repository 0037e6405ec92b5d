"""`gep doctor`: what a cycle needs on this machine and in this workspace, checked, each finding with its fix.

Checked in the order a cycle meets them: the workspace (a git repository with a commit), gep.toml, the git
identity commits are made with, the agent program (or Claude's key), bubblewrap (the sandbox validation runs
in), the Prefect server and its port, and the store. Nothing is created or changed: a workspace no cycle ran on
has no store yet, and that is fine. A finding *blocks* when a cycle would be refused or fail because of it.
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from gep import prefect_api, server
from gep.core.config import CONFIG_FILE, Settings, gep_dir, load_settings
from gep.core.errors import GepError
from gep.core.text_fit import shorten
from gep.git.repo import ENGINE_NAME, Repo, open_repo
from gep.mutators import MUTATORS, default_mutator
from gep.mutators.command import missing_program
from gep.store import schema
from gep.validation.sandbox import ChangeOrigin, find_bwrap, validation_refusal

WIDTH = 80


def width() -> int:
    """The terminal's columns, at most 80 (a finding reads best short), at least 40."""
    return max(40, min(WIDTH, shutil.get_terminal_size((WIDTH, 24)).columns))
Level = Literal["ok", "warn", "FAIL"]


class Finding(BaseModel):
    """One thing checked: what was found, and the fix when it is not fine."""

    level: Level
    what: str  # git identity, agent, bubblewrap ...
    text: str
    fix: str | None = None

    @property
    def blocks(self) -> bool:
        return self.level == "FAIL"

    def line(self, width: int = WIDTH) -> str:
        """One line of at most ``width`` characters: the text is shortened (never the fix) when it must be."""
        head = f"{self.level:<4}  {self.what}: "
        tail = f"; fix: {self.fix}" if self.fix else ""
        room = width - len(head) - len(tail)
        return (head + shorten(self.text, room) + tail)[:width]


def ok(what: str, text: str) -> Finding:
    return Finding(level="ok", what=what, text=text)


def check(workspace: Path, env: Mapping[str, str] | None = None) -> list[Finding]:
    """Every finding for ``workspace`` (its checks stop at the first that makes the rest meaningless)."""
    env = os.environ if env is None else env
    try:
        repo = open_repo(workspace)
    except GepError as exc:  # the machine's own checks still say what they find
        return [Finding(level="FAIL", what="workspace", text=str(exc).removeprefix("workspace ")),
                _bubblewrap(Settings(), env), _server(env)]
    found = [ok("workspace", f"git repository {repo.path.name}")]
    try:
        settings = load_settings(repo.path, env=env)
    except GepError as exc:
        return [*found, Finding(level="FAIL", what=CONFIG_FILE, text=str(exc), fix=f"edit {CONFIG_FILE}")]
    found.append(ok(CONFIG_FILE, "read" if (repo.path / CONFIG_FILE).is_file() else "none (defaults; `gep init`)"))
    checks: list[Callable[[], Finding]] = [
        lambda: _identity(repo), lambda: _agent(repo, settings, env), lambda: _bubblewrap(settings, env),
        lambda: _server(env), lambda: _store(repo.path, settings)]
    return found + [c() for c in checks]


def _identity(repo: Repo) -> Finding:
    found = repo.git().config_values(("user.name", "user.email"))
    name, email = (found.get("user.name") or "").strip(), (found.get("user.email") or "").strip()
    if name and email:
        return ok("git identity", f"{name} <{email}>")
    return Finding(level="warn", what="git identity", text=f"unset (commits by {ENGINE_NAME})",
                   fix="git config user.email ME@HOST")


def mutator_of(settings: Settings, env: Mapping[str, str]) -> str:
    """Who makes a cycle's change when `gep cycle` is given no --mutator."""
    return (settings.mutator or default_mutator(env)).strip().lower()


def _agent(repo: Repo, settings: Settings, env: Mapping[str, str]) -> Finding:
    name = mutator_of(settings, env)
    if name not in MUTATORS:
        return Finding(level="FAIL", what="agent", text=f"unknown mutator '{name}'", fix=" | ".join(MUTATORS))
    if name == "command":
        try:
            missing = missing_program(settings.agent_cmd, env, repo.path)
        except GepError as exc:
            return Finding(level="FAIL", what="agent", text=str(exc), fix="agent_cmd in gep.toml")
        if missing:
            text = missing.split(":")[0].replace("agent program ", "").replace(" is not on PATH", " not on PATH")
            return Finding(level="FAIL", what="agent", text=text, fix="install it or edit agent_cmd")
        return ok("agent", f"command: {shlex.split(settings.agent_cmd or '')[0]}")
    if name == "anthropic":
        if env.get("ANTHROPIC_API_KEY"):
            return ok("agent", "anthropic (ANTHROPIC_API_KEY is set)")
        return Finding(level="FAIL", what="agent", text="ANTHROPIC_API_KEY unset",
                       fix="export it, or set mutator in gep.toml")
    return ok("agent", f"{name}: you make the change, then `gep solidify`")


def _bubblewrap(settings: Settings, env: Mapping[str, str]) -> Finding:
    if find_bwrap() is not None:
        return ok("bubblewrap", "works: validation runs sandboxed")
    if settings.sandbox == "none":
        return Finding(level="warn", what="bubblewrap", text='sandbox = "none": checks run unconfined')
    origins: dict[str, ChangeOrigin] = {"command": "agent", "anthropic": "model"}
    refused = validation_refusal(origins.get(mutator_of(settings, env)), settings)
    level: Level = "FAIL" if refused else "warn"
    return Finding(level=level, what="bubblewrap", text="not usable here",
                   fix='install bubblewrap, or sandbox = "none"')


def _server(env: Mapping[str, str]) -> Finding:
    configured = prefect_api.configured_api_url(env)
    if configured:
        if prefect_api.healthy(configured, env=env):
            return ok("server", f"PREFECT_API_URL {configured} answers")
        return Finding(level="FAIL", what="server", text=f"PREFECT_API_URL {configured} does not answer",
                       fix="start it or unset it")
    st = server.status(env)
    if st.running and st.record:
        return ok("server", f"gep's at {st.record.ui_url}")
    try:
        port = server.port_setting(env)
    except GepError as exc:
        return Finding(level="FAIL", what="server", text=str(exc), fix="unset it")
    if server.port_taken(port):
        return Finding(level="warn", what="server", text=f"port {port} is another's; gep will start its own on "
                       f"{server.free_port(port)}")
    return ok("server", f"not running; `gep cycle` starts it on port {port}")


def _store(workspace: Path, settings: Settings) -> Finding:
    if not settings.database_url and not schema.default_db(workspace).is_file():
        return ok("store", "none yet: the first cycle makes .gep/gep.db")
    if gep_dir(workspace).exists() and not gep_dir(workspace).is_dir():
        return Finding(level="FAIL", what="store", text=".gep is a file", fix="move .gep aside")
    from gep.store import Store  # deferred: SQLAlchemy (~0.4 s), only when there is a store to open

    try:
        with Store.for_workspace(workspace, settings) as store:
            events = store.count_events()
    except GepError as exc:
        return Finding(level="FAIL", what="store", text=str(exc), fix="GEP_DEBUG=1 gep doctor")
    return ok("store", f"{events} event(s) recorded")
