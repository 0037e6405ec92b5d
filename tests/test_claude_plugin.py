"""`gep init --claude [--remove]` on a workspace whose Claude Code files hold the user's own hooks and servers,
and the plugin folder (plugins/claude/gep/) agreeing with what init writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import init_repo
from typer.testing import CliRunner

from gep.cli.root import app
from gep.core.errors import ConfigError
from gep.sessions.claude_plugin import KEPT, MCP_JSON, SETTINGS, install, our_hook, our_server, remove

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = ROOT / "plugins" / "claude" / "gep"
# the user's own settings, formatted their way (4 spaces, their key order, no final newline)
USER_SETTINGS = """{
    "permissions": {"allow": ["Bash(npm test)"]},
    "hooks": {
        "SessionStart": [
            {"matcher": "startup", "hooks": [{"type": "command", "command": "echo hello"}]}
        ],
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "./check.sh"}]}
        ],
        "UserPromptSubmit": [
            {"hooks": [{"type": "command", "command": "./log-prompt.sh", "timeout": 5}]}
        ]
    },
    "env": {"MY_FLAG": "1"}
}"""
USER_MCP = '{"mcpServers": {"docs": {"command": "docs-server", "args": ["--port", "0"]}}}\n'


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return init_repo(tmp_path / "ws", {"README.md": "hi\n"})


def _users(ws: Path) -> Path:
    (ws / ".claude").mkdir()
    (ws / SETTINGS).write_text(USER_SETTINGS)
    (ws / MCP_JSON).write_text(USER_MCP)
    return ws


def test_install_keeps_the_users_hooks_and_remove_puts_the_files_back_byte_for_byte(ws: Path) -> None:
    _users(ws)
    report = install(ws, gep="gep")
    settings = json.loads((ws / SETTINGS).read_text())
    mine = json.loads(USER_SETTINGS)
    hooks = settings["hooks"]
    assert hooks["SessionStart"] == [*mine["hooks"]["SessionStart"], {"hooks": [our_hook("gep")]}]
    assert hooks["UserPromptSubmit"] == [*mine["hooks"]["UserPromptSubmit"], {"hooks": [our_hook("gep")]}]
    assert hooks["PreToolUse"] == mine["hooks"]["PreToolUse"]
    assert list(settings) == ["permissions", "hooks", "env", "enabledMcpjsonServers"]  # their order kept
    assert settings["env"] == {"MY_FLAG": "1"} and settings["enabledMcpjsonServers"] == ["gep"]
    servers = json.loads((ws / MCP_JSON).read_text())["mcpServers"]
    assert servers == {"docs": {"command": "docs-server", "args": ["--port", "0"]}, "gep": our_server("gep")}
    assert any("added the SessionStart hook" in line for line in report.lines())

    again = install(ws, gep="gep").lines()  # idempotent
    assert (ws / SETTINGS).read_text().count("gep capture") == 2 and "was there already" in again[-1]
    remove(ws, gep="gep")
    assert (ws / SETTINGS).read_text() == USER_SETTINGS
    assert (ws / MCP_JSON).read_text() == USER_MCP
    assert not any((ws / KEPT).iterdir())


def test_files_install_created_are_deleted_by_remove(ws: Path) -> None:
    install(ws, gep="/opt/gep env/bin/gep")  # a path with a space is quoted in the hook's command line
    settings = json.loads((ws / SETTINGS).read_text())
    assert settings["hooks"]["SessionStart"][0]["hooks"][0]["command"].startswith("'/opt/gep env/bin/gep' capture")
    assert json.loads((ws / MCP_JSON).read_text())["mcpServers"]["gep"]["command"] == "/opt/gep env/bin/gep"
    remove(ws, gep="/opt/gep env/bin/gep")
    assert not (ws / SETTINGS).exists() and not (ws / ".claude").exists() and not (ws / MCP_JSON).exists()


def test_remove_keeps_what_the_user_changed_after_install(ws: Path) -> None:
    _users(ws)
    install(ws, gep="gep")
    settings = json.loads((ws / SETTINGS).read_text())
    settings["hooks"]["Stop"] = [{"hooks": [{"type": "command", "command": "./done.sh"}]}]
    settings["hooks"]["SessionStart"][-1]["hooks"].append({"type": "command", "command": "./also.sh"})
    (ws / SETTINGS).write_text(json.dumps(settings))
    remove(ws, gep="gep")
    after = json.loads((ws / SETTINGS).read_text())
    assert after["hooks"]["Stop"] == [{"hooks": [{"type": "command", "command": "./done.sh"}]}]
    assert after["hooks"]["SessionStart"][-1] == {"hooks": [{"type": "command", "command": "./also.sh"}]}
    assert "gep capture" not in json.dumps(after) and "enabledMcpjsonServers" not in after
    assert after["hooks"]["UserPromptSubmit"] == json.loads(USER_SETTINGS)["hooks"]["UserPromptSubmit"]


def test_a_settings_file_that_is_not_an_object_is_refused_and_nothing_is_written(ws: Path) -> None:
    (ws / ".claude").mkdir()
    (ws / SETTINGS).write_text("[1, 2]")
    with pytest.raises(ConfigError, match="not an object"):
        install(ws, gep="gep")
    (ws / SETTINGS).write_text("{not json")
    said = CliRunner().invoke(app, ["init", "--claude", "--workspace", str(ws)])
    assert said.exit_code == 2 and "is not valid JSON" in said.output and "Traceback" not in said.output
    assert (ws / SETTINGS).read_text() == "{not json" and not (ws / MCP_JSON).exists()


def test_a_server_named_gep_of_the_users_own_is_left_alone(ws: Path) -> None:
    mine = '{"mcpServers": {"gep": {"command": "my-gep"}}}'
    (ws / MCP_JSON).write_text(mine)
    report = install(ws, gep="gep")
    assert (ws / MCP_JSON).read_text() == mine and any("of your own" in x for x in report.lines())
    remove(ws, gep="gep")
    assert (ws / MCP_JSON).read_text() == mine


def test_the_cli_installs_and_removes(ws: Path) -> None:
    _users(ws)
    done = CliRunner().invoke(app, ["init", "--claude", "--workspace", str(ws)])
    assert done.exit_code == 0, done.output
    assert ".claude/settings.json: added the UserPromptSubmit hook" in done.output
    taken = CliRunner().invoke(app, ["init", "--claude", "--remove", "--workspace", str(ws)])
    assert taken.exit_code == 0 and (ws / SETTINGS).read_text() == USER_SETTINGS, taken.output


def test_the_plugin_folder_bundles_what_init_writes() -> None:
    manifest = json.loads((PLUGIN / ".claude-plugin" / "plugin.json").read_text())
    hooks = json.loads((PLUGIN / "hooks" / "hooks.json").read_text())["hooks"]
    servers = json.loads((PLUGIN / ".mcp.json").read_text())["mcpServers"]
    assert manifest["name"] == "gep"
    assert hooks == {event: [{"hooks": [our_hook("gep")]}] for event in ("SessionStart", "UserPromptSubmit")}
    assert servers == {"gep": our_server("gep")}
    market = json.loads((ROOT / ".claude-plugin" / "marketplace.json").read_text())
    assert [(p["name"], p["source"]) for p in market["plugins"]] == [("gep", "./plugins/claude/gep")]
