"""`gep init` and `gep doctor` (issue 44): a workspace set up in one command without losing anything the person
had, and what a cycle needs checked in lines that fit 80 columns, each with its fix. In process (CliRunner),
on real git repositories; the server check reads a PREFECT_HOME of the test's own."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest
from conftest import git, init_repo
from typer.testing import CliRunner

from gep.cli.root import app
from gep.core.config import Settings, load_settings
from gep.sessions.hooks import SETTINGS_FILE, hook_command
from gep.workspace_setup import CONFIG_TEMPLATE

runner = CliRunner()


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect-home"))
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        monkeypatch.setenv("PREFECT_SERVER_API_PORT", str(s.getsockname()[1]))
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("GEP_MUTATOR", "prompt")
    return init_repo(tmp_path / "ws")


def gep(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def test_init_writes_a_commented_gep_toml_and_the_hooks_then_checks(ws: Path) -> None:
    done = gep("init", "-w", str(ws))
    assert done.exit_code == 0, done.output
    assert (ws / "gep.toml").read_text() == CONFIG_TEMPLATE
    assert load_settings(ws, env={}) == Settings()  # every line a comment: nothing changed until uncommented
    settings = json.loads((ws / SETTINGS_FILE).read_text())
    for event in ("UserPromptSubmit", "SessionStart"):
        [entry] = settings["hooks"][event]
        [hook] = entry["hooks"]
        assert hook["type"] == "command" and hook["command"].endswith(hook_command("")[1:])
    assert "wrote gep.toml" in done.stdout and "ok    workspace" in done.stdout and "ok    store" in done.stdout
    assert git(ws, "status", "--porcelain").splitlines() == ["?? gep.toml"]  # the personal settings: ignored
    assert all(len(line) <= 80 for line in done.stdout.splitlines())


def test_each_setting_the_template_shows_is_valid_when_uncommented(ws: Path) -> None:
    lines = [ln[2:] for ln in CONFIG_TEMPLATE.splitlines() if re.match(r"^# [a-z_]+ = ", ln)]
    assert len(lines) >= 10
    (ws / "gep.toml").write_text("[gep]\n" + "\n".join(lines) + "\n")
    assert load_settings(ws, env={}).agent_cmd == "claude -p --permission-mode acceptEdits"


def test_init_never_overwrites_what_the_person_has(ws: Path) -> None:
    mine = '[gep]\nmutator = "prompt"  # my own\n'
    (ws / "gep.toml").write_text(mine)
    (ws / ".claude").mkdir()
    theirs = {"model": "opus", "hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "my-tool"}]}]}}
    (ws / SETTINGS_FILE).write_text(json.dumps(theirs))
    first = gep("init", "-w", str(ws))
    assert first.exit_code == 0 and "gep.toml is there: left as it is" in first.stdout, first.output
    assert (ws / "gep.toml").read_text() == mine
    after = json.loads((ws / SETTINGS_FILE).read_text())
    assert after["model"] == "opus" and after["hooks"]["SessionStart"][0] == theirs["hooks"]["SessionStart"][0]
    assert len(after["hooks"]["SessionStart"]) == 2 and len(after["hooks"]["UserPromptSubmit"]) == 1
    again = gep("init", "-w", str(ws))  # nothing added twice
    assert "left as they are" in again.stdout and json.loads((ws / SETTINGS_FILE).read_text()) == after
    (ws / SETTINGS_FILE).write_text("{not json")
    broken = gep("init", "-w", str(ws))
    assert broken.exit_code == 2 and "settings.local.json is not valid JSON" in broken.stderr
    assert (ws / SETTINGS_FILE).read_text() == "{not json"


def test_doctor_says_what_blocks_with_its_fix_in_80_columns(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fine = gep("doctor", "-w", str(ws))
    assert fine.exit_code == 0, fine.output
    assert [line.split()[0] for line in fine.stdout.splitlines()] == ["ok"] * 7
    monkeypatch.setenv("GEP_MUTATOR", "command")
    monkeypatch.setenv("GEP_AGENT_CMD", "no-such-agent-xyz -p")
    git(ws, "config", "--unset", "user.email")
    bad = gep("doctor", "-w", str(ws))
    assert bad.exit_code == 1
    lines = bad.stdout.splitlines()
    assert "FAIL  agent: 'no-such-agent-xyz' not on PATH; fix: install it or edit agent_cmd" in lines
    assert "warn  git identity: unset (commits by gep); fix: git config user.email ME@HOST" in lines
    assert all(len(line) <= 80 for line in lines)
    with socket.socket() as busy:  # another program on gep's port: said, not a blocker
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        monkeypatch.setenv("PREFECT_SERVER_API_PORT", str(busy.getsockname()[1]))
        monkeypatch.setenv("GEP_MUTATOR", "prompt")
        taken = gep("doctor", "-w", str(ws))
    assert taken.exit_code == 0 and "gep will start its own on" in taken.stdout
    (ws / ".gep").mkdir()
    (ws / ".gep" / "gep.db").write_text("not a database")
    broken = gep("doctor", "-w", str(ws))
    assert broken.exit_code == 1 and any(ln.startswith("FAIL  store: ") for ln in broken.stdout.splitlines())
    assert all(len(line) <= 80 for line in broken.stdout.splitlines())


def test_doctor_says_a_typo_in_a_setting_in_one_line(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEP_MUTATOR", "claude")
    monkeypatch.setenv("PREFECT_SERVER_API_PORT", "abc")
    lines = gep("doctor", "-w", str(ws)).stdout.splitlines()
    assert "FAIL  agent: unknown mutator 'claude'; fix: anthropic | command | prompt" in lines
    assert "FAIL  server: PREFECT_SERVER_API_PORT='abc' is not a port number; fix: unset it" in lines


def test_doctor_outside_a_repository_still_checks_the_machine(tmp_path: Path) -> None:
    done = gep("doctor", "-w", str(tmp_path))
    assert done.exit_code == 1
    assert done.stdout.splitlines()[0].startswith("FAIL  workspace: ") and "bubblewrap" in done.stdout
