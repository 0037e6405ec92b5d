"""Every folder and file the engine reads, with a FIFO, a symlink to /dev/zero or /dev/random, a symlink out
of the workspace or a 1,500-level tree in it: nothing hangs (each test has a short timeout), nothing explodes
(2 GB memory cap), and the trap is skipped with a warning naming it while the real files are still read."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import git
from input_traps import OUTSIDE_MARKER, REASONS, TRAPS, plant, sparse

from gep.assets.gene_files import import_assets, workspace_genes
from gep.core import constants
from gep.core.config import Settings, load_settings
from gep.core.errors import AssetError, ConfigError
from gep.mutators.tools import WorkspaceTools
from gep.sessions.capture import run_hook
from gep.signals.behavior import BehaviorSignal, Detected
from gep.signals.behavior_log import log, read_signals, record
from gep.signals.sources import (
    MEMORY_MISSING,
    USER_MISSING,
    claude_project_dir,
    collect_exchanges,
    collect_sources,
    collect_tails,
    file_marks,
)
from gep.store import Store

pytestmark = [pytest.mark.timeout(30), pytest.mark.usefixtures("memory_cap")]

NOW = datetime.now(UTC).replace(microsecond=0)
DAY = NOW.strftime("%Y-%m-%d")
SETTINGS = Settings(transcript_max_age_hours=0)
GEP = Path(sys.executable).parent / "gep"


def session_line(text: str) -> str:
    return json.dumps({"type": "user", "sessionId": "s1", "timestamp": NOW.isoformat(),
                       "message": {"role": "user", "content": text}}) + "\n"


def workspace(path: Path) -> Path:
    """Real sources beside the traps: each must still be read."""
    files = {"logs/app.log": "ERROR real log line\n", "MEMORY.md": "real memory\n", "USER.md": "real user\n",
             f"memory/{DAY}.md": "real memory log\n", "sessions/real.jsonl": session_line("real session turn")}
    for rel, text in files.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(text)
    return path


def warned(warnings: list, name: str, kind: str) -> bool:
    return any(w.path.endswith(name) and REASONS[kind] in w.reason for w in warnings)


# ------------------------------------------------------------------ sources (gep/signals/sources.py)

SOURCE_TRAPS = ["logs/trap.log", "logs/sub/trap.log", "sessions/trap.jsonl", ".claude/projects/p/trap.jsonl",
                "{claude_project}/trap.jsonl", f"memory/{DAY}.md", "MEMORY.md", "USER.md"]


@pytest.mark.parametrize("kind", TRAPS)
@pytest.mark.parametrize("where", SOURCE_TRAPS)
def test_every_source_folder_skips_its_traps(tmp_path: Path, outside: Path, monkeypatch: pytest.MonkeyPatch,
                                             where: str, kind: str) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))
    ws = workspace(tmp_path / "ws")
    target = (claude_project_dir(ws) / "trap.jsonl") if where.startswith("{") else ws / where
    target.unlink(missing_ok=True)
    plant(target, kind, outside, content=session_line(f"ERROR {OUTSIDE_MARKER}"))

    bundle = collect_sources(ws, SETTINGS, now=NOW)
    assert warned(bundle.warnings, target.name, kind), bundle.warnings
    assert "real log line" in bundle.today_log and "real session turn" in bundle.recent_session_transcript
    assert OUTSIDE_MARKER not in bundle.model_dump_json()
    assert bundle.memory_snippet == (MEMORY_MISSING if where == "MEMORY.md" else "real memory\n")
    assert bundle.user_snippet == (USER_MISSING if where == "USER.md" else "real user\n")

    # the timelines (resolved errors) and the exchanges (behavioural signals) read the same files
    for read in (collect_tails, file_marks, collect_exchanges):
        warnings: list = []
        out = read(ws, SETTINGS, NOW, warnings)
        assert out and OUTSIDE_MARKER not in json.dumps([x.model_dump(mode="json") for x in out])
        if where not in ("MEMORY.md", "USER.md") and (read is not collect_exchanges or where.endswith(".jsonl")):
            assert warned(warnings, target.name, kind), (read.__name__, warnings)


@pytest.mark.parametrize("folder", ["logs", "sessions"])
def test_a_1500_level_tree_under_a_source_folder_is_cut_with_a_warning(tmp_path: Path, deep, folder: str) -> None:
    ws = workspace(tmp_path / "ws")
    deep(ws / folder / "deep", leaf="deep.jsonl" if folder == "sessions" else "deep.log")
    bundle = collect_sources(ws, SETTINGS, now=NOW)
    assert any("deeper than" in w.reason for w in bundle.warnings), bundle.warnings
    assert "real log line" in bundle.today_log and "real session turn" in bundle.recent_session_transcript
    for read in (collect_tails, file_marks, collect_exchanges):
        warnings: list = []
        read(ws, SETTINGS, NOW, warnings)
        assert read is collect_exchanges and folder == "logs" or any("deeper than" in w.reason for w in warnings)


@pytest.mark.parametrize("name", ["new\nline", "sp ace ünï", "we ird\nspäce ünï"])
def test_odd_workspace_paths_are_read(tmp_path: Path, outside: Path, monkeypatch: pytest.MonkeyPatch,
                                      name: str) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))
    ws = workspace(tmp_path / name / "ws")
    (claude_project_dir(ws)).mkdir(parents=True)
    (claude_project_dir(ws) / "cc.jsonl").write_text(session_line("claude code turn"))
    plant(ws / "logs" / "odd\nname.log", "fifo", outside)
    bundle = collect_sources(ws, SETTINGS, now=NOW)
    assert "real log line" in bundle.today_log and "claude code turn" in bundle.recent_session_transcript
    assert [str(w) for w in bundle.warnings] == ["logs/odd\\nname.log: skipped: a FIFO"]  # one line


# ------------------------------------------------------------------ genes (gep/assets/gene_files.py)


@pytest.fixture
def store(tmp_path: Path):
    with Store.open(f"sqlite:///{tmp_path / 'gep.db'}") as s:
        yield s


def gene_json(gene_id: str) -> str:
    return json.dumps({"type": "Gene", "id": gene_id, "category": "repair", "signals_match": ["log_error"]})


@pytest.mark.parametrize("kind", [*TRAPS, "oversized"])
def test_gene_folder_traps_are_skipped_with_a_warning(tmp_path: Path, outside: Path, store: Store,
                                                      kind: str) -> None:
    genes_dir = tmp_path / ".gep" / "genes"
    genes_dir.mkdir(parents=True)
    (genes_dir / "real.json").write_text(gene_json("ws_real_gene"))
    if kind == "oversized":
        sparse(genes_dir / "trap.json", constants.GENE_FILE_MAX_BYTES + 1)
    else:
        plant(genes_dir / "trap.json", kind, outside, content=gene_json("outside_gene"))
    warnings: list = []
    ids = [g.id for g in workspace_genes(tmp_path, store, warnings)]
    assert "ws_real_gene" in ids and "outside_gene" not in ids
    reason = "larger than" if kind == "oversized" else REASONS[kind]
    assert [(w.path, reason in w.reason) for w in warnings] == [(".gep/genes/trap.json", True)]


def test_gep_genes_list_names_the_skipped_files_and_succeeds(repo: Path, outside: Path) -> None:
    genes_dir = repo / ".gep" / "genes"
    plant(genes_dir / "fifo.json", "fifo", outside)
    plant(genes_dir / "zero.json", "zero", outside)
    res = subprocess.run([str(GEP), "genes", "list", "--workspace", str(repo)], capture_output=True,
                         text=True, timeout=25)
    assert res.returncode == 0, res.stderr
    assert "gene_repair_from_errors" in res.stdout
    assert res.stderr.splitlines() == ["gep: warning: .gep/genes/fifo.json: skipped: a FIFO",
                                       "gep: warning: .gep/genes/zero.json: skipped: a character device"]


@pytest.mark.parametrize(("name", "kind"), [("genes.json", "fifo"), ("events.jsonl", "zero"),
                                            ("capsules.json", "random"), ("genes.json", "oversized"),
                                            ("events.jsonl", "oversized")])
def test_asset_files_that_are_no_regular_files_or_too_large_stop_the_import(
        tmp_path: Path, outside: Path, store: Store, name: str, kind: str) -> None:
    assets = tmp_path / "assets"
    if kind == "oversized":
        sparse(assets / name, constants.ASSET_FILE_MAX_BYTES + 1)
    else:
        plant(assets / name, kind, outside)
    match = "larger than" if kind == "oversized" else f"not a file \\({REASONS[kind]}"
    with pytest.raises(AssetError, match=f"{name}: .*{match}"):
        import_assets(store, assets)


# ------------------------------------------------------------------ gep.toml (gep/core/config.py)


@pytest.mark.parametrize("kind", [*TRAPS, "oversized"])
def test_a_gep_toml_that_cannot_be_read_is_refused_in_one_line(tmp_path: Path, outside: Path, kind: str) -> None:
    if kind == "oversized":
        sparse(tmp_path / "gep.toml", constants.CONFIG_FILE_MAX_BYTES + 1)
    else:
        plant(tmp_path / "gep.toml", kind, outside, content="validation_timeout_s = 5\n")
    with pytest.raises(ConfigError) as info:
        load_settings(tmp_path, env={})
    reason = "larger than" if kind == "oversized" else REASONS[kind]
    assert str(info.value) == f"{tmp_path / 'gep.toml'}: not read: " + str(info.value).split("not read: ")[1]
    assert reason in str(info.value) and "\n" not in str(info.value)


# ------------------------------------------------------------------ behavioural signals (gep/signals/behavior_log.py)


def detected(key: str) -> Detected:
    sig = BehaviorSignal(ts=NOW.strftime("%Y-%m-%dT%H:%M:%SZ"), type="correction", summary="User corrected",
                         intensity=3)
    return Detected(key=key, source="claude_code", session_id="s1", ts=NOW, signals=[sig])


@pytest.mark.parametrize("kind", TRAPS)
def test_a_trap_as_a_days_signals_file_is_skipped_when_writing_and_reading(tmp_path: Path, outside: Path,
                                                                          kind: str) -> None:
    folder = tmp_path / "memory" / "growth" / "signals"
    plant(folder / f"{DAY}.jsonl", kind, outside)
    report = record(tmp_path, [detected("k1")])
    assert report.written == [] and warned(report.warnings, f"{DAY}.jsonl", kind)
    assert all(OUTSIDE_MARKER in p.read_text() and "k1" not in p.read_text() for p in outside.iterdir())
    (folder / "2020-01-01.jsonl").write_text(
        json.dumps({"ts": "2020-01-01T00:00:00Z", "type": "emotion", "summary": "s", "intensity": 2}) + "\n")
    read = read_signals(tmp_path)
    assert [s.type for s in read.signals] == ["emotion"] and warned(read.warnings, f"{DAY}.jsonl", kind)


def test_gep_signals_names_a_skipped_day_file_and_succeeds(tmp_path: Path, outside: Path) -> None:
    plant(tmp_path / "memory" / "growth" / "signals" / f"{DAY}.jsonl", "fifo", outside)
    res = subprocess.run([str(GEP), "signals", "--workspace", str(tmp_path), "--json"], capture_output=True,
                         text=True, timeout=25)
    assert (res.returncode, res.stdout, res.stderr.splitlines()) == (
        0, "[]\n", [f"gep: warning: memory/growth/signals/{DAY}.jsonl: skipped: a FIFO"])


@pytest.mark.parametrize("kind", ["fifo", "zero", "random"])
def test_a_trap_as_the_seen_index_or_the_capture_log_never_blocks(tmp_path: Path, outside: Path, kind: str) -> None:
    state = tmp_path / ".gep" / "behavior"
    plant(state / "seen", kind, outside)
    plant(state / "capture.log", kind, outside)
    report = record(tmp_path, [detected("k1")])
    assert len(report.written) == 1 and warned(report.warnings, "seen", kind)
    log(tmp_path, "a line", NOW)  # never raises, never waits


@pytest.mark.parametrize("kind", ["fifo", "zero", "random"])
def test_the_hooks_transcript_path_is_read_only_when_a_regular_file(tmp_path: Path, outside: Path, kind: str) -> None:
    transcript = plant(tmp_path / "claude" / "s1.jsonl", kind, outside)
    payload = json.dumps({"session_id": "s1", "transcript_path": str(transcript), "cwd": str(tmp_path),
                          "hook_event_name": "UserPromptSubmit", "prompt": "No, that's wrong, use tabs"})
    ws = tmp_path / "ws"
    ws.mkdir()
    report = run_hook(ws, payload, now=NOW)
    assert report is not None and report.new == 1  # the prompt alone is the exchange
    assert warned(report.warnings, "s1.jsonl", kind)
    assert "s1.jsonl: skipped" in (ws / ".gep" / "behavior" / "capture.log").read_text()


# ------------------------------------------------------------------ the model's tools (gep/mutators/tools.py)


def tools(ws: Path) -> WorkspaceTools:
    return WorkspaceTools(ws, forbidden_paths=[], validation_commands=[], settings=Settings(), gene_id=None,
                          cycle_id="evt_t")


def test_the_models_tools_list_search_and_read_around_the_traps(tmp_path: Path, outside: Path, deep) -> None:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "app.py").write_text("needle = 1\n")
    for kind in TRAPS:
        plant(ws / "src" / f"{kind}.py", kind, outside, content="needle = 'outside'\n")
    sparse(ws / "src" / "huge.txt", 10 * 1024**3)
    deep(ws / "deep", leaf="deep.py", text="needle = 'deep'\n")
    t = tools(ws)
    listed = t.call("list_files", {})
    assert not listed.is_error
    assert "src/app.py" in listed.content and "src/fifo.py" not in listed.content
    assert "src/zero.py" not in listed.content and "src/outside.py" not in listed.content
    assert f"deeper than {constants.WALK_MAX_DEPTH} folder levels" in listed.content
    found = t.call("search", {"pattern": "needle"})
    assert found.content == "src/app.py:1: needle = 1"
    assert t.call("read_file", {"path": "src/fifo.py"}).is_error
    assert t.call("read_file", {"path": "src/zero.py"}).refused  # resolves outside the workspace
    huge = t.call("read_file", {"path": "src/huge.txt"})
    assert huge.is_error and "larger than" in huge.content
    assert t.call("edit_file", {"path": "src/huge.txt", "old_text": "a", "new_text": "b"}).is_error


# ------------------------------------------------------------------ build files (gep/genes/eligibility.py), protected files


@pytest.mark.parametrize(("name", "cmd"), [("Makefile", "make test"), ("package.json", "npm test")])
def test_an_oversized_build_file_is_not_read_whole(tmp_path: Path, name: str, cmd: str) -> None:
    from gep.genes.eligibility import command_problem

    sparse(tmp_path / name, 10 * 1024**3)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for prog in ("make", "npm"):
        (bin_dir / prog).write_text("#!/bin/sh\nexit 0\n")
        (bin_dir / prog).chmod(0o755)
    settings = Settings(command_allowlist=[*Settings().command_allowlist, "npm"])
    got = command_problem(cmd, workspace=tmp_path, settings=settings, env={"PATH": str(bin_dir)})
    assert got is not None and got.startswith(f"{name} not read: larger than")


def test_an_oversized_protected_file_is_a_violation_not_a_read(repo: Path) -> None:
    from gep.core.config import Settings
    from gep.cycle.checks import _protected_violations
    from gep.cycle.tree import CycleTree
    from gep.git import open_repo

    (repo / "MEMORY.md").write_text("# memory\n")
    git(repo, "add", "MEMORY.md")
    git(repo, "commit", "-q", "-m", "memory")
    tree = CycleTree.open(open_repo(repo), "evt_1", Settings(), "clone", "agent")
    sparse(tree.path / "MEMORY.md", constants.PROTECTED_FILE_MAX_BYTES + 1)
    got = _protected_violations(tree, tree.read(), ["MEMORY.md"], editable=["MEMORY.md"])
    assert got == [f"protected file not checked (larger than {constants.PROTECTED_FILE_MAX_BYTES:,} bytes): MEMORY.md"]
    tree.close()

