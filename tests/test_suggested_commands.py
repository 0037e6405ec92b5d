"""Every `gep ...` command the CLI and the cycle artifact suggest runs as printed (issue 31, point 4).

Each suggestion is collected from the real output (a refusal, an empty history, a pending cycle's artifact,
a failed `gep solidify`), run from a folder outside the workspace, and must be accepted as typed: parsed by
the real command line and pointed at the workspace. Those that only read are run for real; those that would
start a flow run (solidify, cycle) are checked up to the point where the flow would start."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from gep.cli.root import _not_solidified, app
from gep.core.models import CycleRun
from gep.store import Store

runner = CliRunner()
SUGGESTION = re.compile(r"`(gep [^`]+)`|(?:with|run): (gep \S.*)$", re.M)


def suggestions(text: str) -> list[str]:
    return [a or b for a, b in SUGGESTION.findall(text)]


def parsed(command: str) -> dict:
    """The command's parameters as the real command line parses them (a usage error raises)."""
    args = shlex.split(command)[1:]
    ctx = get_command(app).make_context("gep", args)
    while hasattr(ctx.command, "resolve_command"):  # a group (typer may vendor its own click)
        name, sub, rest = ctx.command.resolve_command(ctx, [*getattr(ctx, "protected_args", getattr(ctx, "_protected_args", [])), *ctx.args])
        ctx = sub.make_context(name, rest, parent=ctx)
    return ctx.params


def runs_as_printed(command: str, workspace: Path) -> None:
    params = parsed(command)
    assert Path(params["workspace"]).resolve() == workspace.resolve(), command
    result = runner.invoke(app, shlex.split(command)[1:])
    assert "Missing" not in result.stderr and "No such" not in result.stderr, (command, result.stderr)
    assert "not inside a git repository" not in result.stderr, (command, result.stderr)


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    away = tmp_path / "elsewhere"
    away.mkdir()
    monkeypatch.chdir(away)
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    return away


def test_the_commands_a_refusal_and_an_empty_history_suggest_run_as_printed(repo: Path, elsewhere: Path):
    empty = runner.invoke(app, ["history", "--workspace", str(repo)])
    nothing = runner.invoke(app, ["solidify", "--workspace", str(repo)])
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    with Store.for_workspace(repo) as store:
        store.save_run(CycleRun(event_id="evt_pending", workspace=str(repo), head_sha=head,
                                status="awaiting_changes"))
    pending = runner.invoke(app, ["cycle", "--workspace", str(repo), "--mutator", "prompt"])
    found = [*suggestions(empty.stdout), *suggestions(nothing.stderr), *suggestions(pending.stderr)]
    assert len(found) == 5, (found, empty.stdout, nothing.stderr, pending.stderr)
    assert any("--abandon" in c and "solidify" in c for c in found)
    for command in found:
        if " solidify" in command or " cycle" in command:  # would start a flow run: parse and check only
            params = parsed(command)
            assert Path(params["workspace"]).resolve() == repo.resolve(), command
        else:
            runs_as_printed(command, repo)


def test_a_failed_solidify_suggests_commands_that_run_as_printed(repo: Path, elsewhere: Path, capsys):
    spaced = repo.parent / "my agent"  # a path with a space: quoted in what is printed
    repo.rename(spaced)
    event = SimpleNamespace(meta=SimpleNamespace(not_run=None, solidify_attempts=1))
    assert _not_solidified(event, spaced).exit_code == 1
    found = suggestions(capsys.readouterr().err)
    assert len(found) == 2 and found[1].endswith("--abandon"), found
    for command in found:
        params = parsed(command)
        assert Path(params["workspace"]) == spaced and params["abandon"] is command.endswith("--abandon")


def test_the_pending_artifact_suggests_a_command_that_runs_as_printed(repo: Path, elsewhere: Path):
    from gep.report.cycle_text import solidify_command

    spaced = repo.parent / "my agent"
    repo.rename(spaced)
    command = solidify_command(spaced)
    assert Path(parsed(command)["workspace"]) == spaced
