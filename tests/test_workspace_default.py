"""Every command that takes a workspace works from anywhere inside it without --workspace (issue 31, point 3),
and says so in one line outside a repository."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gep.cli.root import app
from gep.core.models import CycleRun, EvolutionEvent
from gep.store import Store

runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


@pytest.fixture
def inside(repo: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The current directory is a sub-folder of the workspace ``repo``; no Prefect server is known."""
    (repo / "src" / "deep").mkdir(parents=True)
    monkeypatch.chdir(repo / "src" / "deep")
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    return repo


def ok(result) -> str:
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert "--workspace" not in result.stderr
    return result.stdout


def refused(result, *needles: str) -> str:
    assert result.exit_code != 0
    assert "Missing option" not in result.stderr and "not inside" not in result.stderr, result.stderr
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, result.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def test_store_commands_default_to_the_repository_of_the_current_directory(inside: Path, tmp_path: Path):
    with Store.for_workspace(inside) as store:
        store.add_event(EvolutionEvent(id="evt_1_abcdef", signals=["log_error"], genes_used=["gene_repair_from_errors"],
                                       outcome={"status": "success", "score": 0.85}))
    ok(run("recover"))
    out = tmp_path / "assets"
    assert "1 event" in ok(run("export", str(out))) or (out / "events.jsonl").is_file()
    assert "evt_1_abcdef" in (out / "events.jsonl").read_text()
    ok(run("import", str(out)))
    ok(run("store", "prune"))
    ok(run("genes", "retire", "gene_repair_from_errors", "--reason", "not here"))
    ok(run("genes", "restore", "gene_repair_from_errors"))
    ok(run("genes", "distill", "--dry-run"))
    ok(run("lessons", "list"))
    ok(run("feedback", "stats"))
    assert "recorded helpful" in ok(run("feedback", "evt_1_abcdef", "helpful"))


def test_signals_reads_the_workspace_not_the_current_folder(inside: Path):
    signals = inside / "memory" / "growth" / "signals"
    signals.mkdir(parents=True)
    line = {"ts": "2026-01-02T03:04:05Z", "type": "preference", "intensity": 2, "summary": "short answers"}
    (signals / "2026-01-02.jsonl").write_text(json.dumps(line) + "\n")
    listed = json.loads(ok(run("signals", "--json")))
    assert [s["summary"] for s in listed] == ["short answers"]


def test_cycle_and_solidify_find_the_workspace_before_anything_runs(inside: Path):
    refused(run("solidify"), "no cycle is awaiting changes")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=inside, capture_output=True, text=True).stdout.strip()
    with Store.for_workspace(inside) as store:
        store.save_run(CycleRun(event_id="evt_pending", workspace=str(inside), head_sha=head,
                                status="awaiting_changes"))
    refused(run("cycle", "--mutator", "prompt"), "evt_pending")


def test_serve_finds_the_workspace_then_asks_for_a_server(inside: Path, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect-home"))  # no background server recorded
    refused(run("serve"), "needs a running Prefect server")


@pytest.mark.parametrize("args", [["cycle"], ["solidify"], ["signals"], ["recover"], ["genes", "distill"],
                                  ["lessons", "list"], ["feedback", "stats"], ["history"], ["store", "prune"],
                                  ["export", "out"]])
def test_outside_a_repository_is_one_line(args: list[str], tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run(*args)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "is not inside a git repository" in lines[0], result.stderr


def test_a_folder_inside_a_repository_is_refused_as_a_cycle_refuses_it(repo: Path):
    (repo / "tests").mkdir()
    result = run("history", "--workspace", str(repo / "tests"))
    assert result.exit_code == 2 and "gep cycle" not in result.stdout
    assert "point --workspace at the repository's top directory" in result.stderr
