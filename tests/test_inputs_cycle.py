"""Numeric settings are finite and in range (one-line errors, exit 2 through `gep cycle`), and a whole cycle
survives a workspace full of traps, at an ordinary path, at one with a newline, and at one with spaces and
unicode."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import EXAMPLE, git, init_repo
from input_traps import OUTSIDE_MARKER, make_deep, plant, remove_deep
from typer.testing import CliRunner

import gep
from gep.cli.root import app
from gep.core.config import Settings, load_settings
from gep.core.errors import ConfigError
from gep.signals.sources import claude_project_dir

GEP = Path(sys.executable).parent / "gep"
NUMERIC = [name for name, f in Settings.model_fields.items()
           if f.annotation in (int, float, int | None, float | None)]


def test_every_numeric_setting_is_checked() -> None:
    """No number hides from the checks below behind another annotation (``int | None``, say)."""
    others = {name: str(f.annotation) for name, f in Settings.model_fields.items() if name not in NUMERIC}
    assert not {n: a for n, a in others.items() if "int" in a or "float" in a}
    assert {"validation_timeout_s", "lock_timeout_s", "agent_timeout_s", "log_tail_bytes"} <= set(NUMERIC)
    Settings.model_validate(Settings().model_dump())  # the defaults are in range


@pytest.mark.parametrize("name", NUMERIC)
def test_each_numeric_setting_refuses_nan_inf_negative_and_huge(tmp_path: Path, name: str) -> None:
    for bad in (math.nan, math.inf, -math.inf, -1, 10**30):
        with pytest.raises(ConfigError) as info:
            load_settings(tmp_path, env={}, **{name: bad})
        assert str(info.value).startswith(f"setting '{name}': ") and "\n" not in str(info.value), bad


@pytest.mark.parametrize(("name", "value"), [("validation_timeout_s", "0"), ("agent_timeout_s", "0"),
                                             ("validation_timeout_s", "1e9")])
def test_a_timeout_that_disables_or_overflows_the_timer_is_refused(tmp_path: Path, name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=f"setting '{name}'"):
        load_settings(tmp_path, env={f"GEP_{name.upper()}": value})


def test_lock_timeout_zero_still_means_try_once(tmp_path: Path) -> None:
    assert load_settings(tmp_path, env={"GEP_LOCK_TIMEOUT_S": "0"}).lock_timeout_s == 0


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("toml", "message"), [
    ("validation_timeout_s = nan", "gep: setting 'validation_timeout_s': Input should be a finite number"),
    ("validation_timeout_s = inf", "gep: setting 'validation_timeout_s': Input should be a finite number"),
    ("validation_timeout_s = -5", "gep: setting 'validation_timeout_s': Input should be greater than 0"),
    ("[gep]\nlock_timeout_s = -1.0", "gep: setting 'lock_timeout_s': Input should be greater than or equal to 0"),
    ("log_tail_bytes = 1_000_000_000_000", "gep: setting 'log_tail_bytes': Input should be less than or equal "
                                           "to 67108864"),
])
def test_gep_cycle_refuses_a_bad_number_in_one_line_with_exit_2(repo: Path, toml: str, message: str) -> None:
    """In process (a `gep` process costs ~2 s of CPU before it refuses); the console script's own exit 2 and
    one line for a refused gep.toml: test_gep_cycle_refuses_a_fifo_gep_toml_in_one_line."""
    (repo / "gep.toml").write_text(toml + "\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "settings")
    res = CliRunner().invoke(app, ["cycle", "--workspace", str(repo), "--mutator", "prompt"])
    assert (res.exit_code, res.stderr.splitlines(), res.stdout) == (2, [message], "")
    assert not (repo / ".gep").exists()  # refused before anything was started or recorded


@pytest.mark.timeout(60)
def test_gep_cycle_refuses_a_fifo_gep_toml_in_one_line(repo: Path, outside: Path) -> None:
    plant(repo / "gep.toml", "fifo", outside)
    res = subprocess.run([str(GEP), "cycle", "--workspace", str(repo), "--mutator", "prompt"],
                         capture_output=True, text=True, timeout=50)
    assert (res.returncode, res.stderr.splitlines()) == (2, [f"gep: {repo / 'gep.toml'}: not read: a FIFO"])


# ------------------------------------------------------------------ a whole cycle among the traps


def trap_workspace(ws: Path, outside: Path, claude: Path) -> list[str]:
    """The example workspace (a real bug, its error log) with a trap in every folder a cycle reads; returns
    the paths the warnings must name."""
    shutil.copytree(EXAMPLE, ws)
    day = datetime.now(UTC).strftime("%Y-%m-%d")
    plant(ws / "logs" / "fifo.log", "fifo", outside)
    plant(ws / "logs" / "zero.log", "zero", outside)
    plant(ws / "logs" / "random.log", "random", outside)
    plant(ws / "logs" / "outside.log", "outside", outside)
    plant(ws / "memory" / f"{day}.md", "fifo", outside)
    (ws / "USER.md").unlink()
    plant(ws / "USER.md", "random", outside)
    plant(ws / "sessions" / "fifo.jsonl", "fifo", outside)
    plant(ws / ".claude" / "projects" / "p" / "zero.jsonl", "zero", outside)
    project = claude_project_dir(ws, env={"CLAUDE_CONFIG_DIR": str(claude)})
    plant(project / "random.jsonl", "random", outside)
    plant(ws / ".gep" / "genes" / "fifo.json", "fifo", outside)
    plant(ws / ".gep" / "genes" / "zero.json", "zero", outside)
    plant(ws / "memory" / "growth" / "signals" / f"{day}.jsonl", "fifo", outside)
    make_deep(ws / "logs" / "deep")
    return ["logs/fifo.log", "logs/zero.log", "logs/random.log", "logs/outside.log", f"memory/{day}.md",
            "USER.md", "sessions/fifo.jsonl", ".claude/projects/p/zero.jsonl", "random.jsonl",
            ".gep/genes/fifo.json", ".gep/genes/zero.json", "logs/deep/d/d"]


@pytest.mark.timeout(120)
@pytest.mark.usefixtures("memory_cap")
@pytest.mark.parametrize("name", ["plain", "new\nline", "sp ace ünï"])
def test_a_whole_cycle_survives_a_workspace_full_of_traps(tmp_path: Path, outside: Path,
                                                         monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))
    ws = tmp_path / name / "ws"
    expected = trap_workspace(ws, outside, tmp_path / "claude")
    try:
        init_repo(ws, {})
        event = gep.run_cycle(gep.CycleRequest(workspace=ws, mutator="prompt"), env={})
        assert event is not None and event.outcome.status == "awaiting_changes", event and event.meta
        assert event.genes_used == ["gene_repair_from_errors"]  # the real error log was read
        shown = [w.path for w in event.meta.sources.warnings]
        for path in expected:
            assert any(s.endswith(path) or s.startswith(path) for s in shown), (path, shown)
        assert OUTSIDE_MARKER not in event.model_dump_json()
        prompt = (ws / ".gep" / "prompts" / f"{event.id}.md").read_text()
        assert "ZeroDivisionError" in prompt or "division" in prompt.lower()
        assert os.path.exists(ws / "logs" / "fifo.log")  # the traps are the user's: left as they were
    finally:
        remove_deep(ws / "logs" / "deep")
