"""The `gep` CLI: stable verbs, one-line errors with non-zero exits, JSON on stdout only."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, init_repo
from source_trees import nodes
from typer.testing import CliRunner

from gep.cli.root import app
from gep.core.models import EvolutionEvent
from gep.store import Store

runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def one_line_error(result, *needles: str) -> None:
    assert result.exit_code != 0
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    for n in needles:
        assert n in lines[0], lines[0]


def test_help_lists_every_verb():
    result = run("--help")
    assert result.exit_code == 0
    for verb in ("cycle", "solidify", "history", "show", "genes", "import", "export", "recover", "serve",
                 "server"):
        assert verb in result.stdout


def test_missing_workspace(tmp_path: Path):
    one_line_error(run("history", "--workspace", str(tmp_path / "nope")), "nope")


def test_not_a_git_repo(tmp_path: Path):
    one_line_error(run("cycle", "--workspace", str(tmp_path)), "not a git repository")


def test_repo_without_commits(tmp_path: Path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    one_line_error(run("cycle", "--workspace", str(tmp_path)), "commit")


def test_malformed_workspace_gene_names_file_and_field(repo: Path):
    """A malformed gene file costs that gene only (issue 45, G04): one stderr line names the file and the
    field, the other genes are listed."""
    genes = repo / ".gep" / "genes"
    genes.mkdir(parents=True)
    (genes / "bad.json").write_text(json.dumps({"type": "Gene", "id": "g1", "signals_match": "error"}))
    done = run("genes", "list", "--workspace", str(repo))
    assert done.exit_code == 0 and "gene_repair_from_errors" in done.stdout and "g1" not in done.stdout.split()
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "bad.json" in lines[0] and "signals_match" in lines[0], done.stderr
    assert "Traceback" not in done.stderr + done.stdout


def test_unreadable_store(repo: Path):
    db = repo / ".gep" / "gep.db"
    db.parent.mkdir(parents=True)
    db.write_bytes(b"this is not a sqlite database at all" * 100)
    one_line_error(run("history", "--workspace", str(repo)), "store")


def test_history_show_json(repo: Path):
    with Store.for_workspace(repo) as store:
        for i in range(3):
            store.add_event(EvolutionEvent(id=f"evt_{i}", signals=["log_error"], genes_used=["g"],
                                           outcome={"status": "success", "score": 0.85}))
    result = run("history", "--workspace", str(repo), "--limit", "2", "--json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert [e["id"] for e in data] == ["evt_2", "evt_1"]
    shown = run("show", "evt_0", "--workspace", str(repo))
    assert json.loads(shown.stdout)["id"] == "evt_0"
    one_line_error(run("show", "evt_missing", "--workspace", str(repo)), "evt_missing")


def test_genes_list_and_show():
    listed = run("genes", "list", "--json")
    ids = {g["id"] for g in json.loads(listed.stdout)}
    assert {"gene_repair_from_errors", "gene_innovate_from_opportunity", "gene_perf_bottleneck",
            "gene_capability_gap", "gene_optimize_code_quality"} <= ids
    shown = json.loads(run("genes", "show", "gene_repair_from_errors").stdout)
    assert shown["category"] == "repair" and shown["validation"]
    one_line_error(run("genes", "show", "gene_nope"), "gene_nope")


def test_banned_gene_visible_in_genes_list(repo: Path):
    with Store.for_workspace(repo) as store:
        store.add_event(EvolutionEvent(id="evt_ban", signals=["failure_loop_detected",
                                                              "ban_gene:gene_repair_from_errors"],
                                       genes_used=["gene_repair_from_errors"],
                                       outcome={"status": "failed", "score": 0.2}))
    out = run("genes", "list", "--workspace", str(repo), "--json")
    genes = {g["id"]: g for g in json.loads(out.stdout)}
    assert genes["gene_repair_from_errors"]["ban"] is not None
    assert genes["gene_innovate_from_opportunity"]["ban"] is None


def test_export_import_round_trip(repo: Path, tmp_path: Path):
    with Store.for_workspace(repo) as store:
        store.add_event(EvolutionEvent(id="evt_x", signals=["a"], outcome={"status": "success", "score": 0.85}))
    out = tmp_path / "assets"
    assert run("export", str(out), "--workspace", str(repo)).exit_code == 0
    assert (out / "events.jsonl").is_file() and (out / "genes.json").is_file()
    other = init_repo(tmp_path / "other")
    assert run("import", str(out), "--workspace", str(other)).exit_code == 0
    with Store.for_workspace(other) as store:
        assert store.get_event("evt_x") is not None


def test_engine_has_no_prefect_import():
    """gep/ is a plain library: Prefect lives in flows/ only."""
    for path in (ROOT / "gep").rglob("*.py"):
        for node in nodes(path):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n == "prefect" or n.startswith("prefect.") for n in names), path


@pytest.mark.timeout(120)
def test_console_script_errors_without_traceback(tmp_path: Path):
    gep = Path(sys.executable).with_name("gep")
    proc = subprocess.run([str(gep), "cycle", "--workspace", str(tmp_path / "missing")],
                          capture_output=True, text=True)
    assert proc.returncode != 0
    assert proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def console(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The installed `gep` script, as a user runs it (Prefect's own log handlers write to the real stderr)."""
    gep = Path(sys.executable).with_name("gep")
    return subprocess.run([str(gep), *args], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                          env={**os.environ, **(env or {})})


def console_error(proc: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gep: "), proc.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


@pytest.mark.timeout(120)
def test_usage_errors_are_one_line(repo: Path):
    console_error(console("history", "--workspace", str(repo), "--limit", "0"), "--limit", "gep history --help")
    console_error(console("history", "--workspace", str(repo), "--limit", "many"), "--limit")
    console_error(console("cycle", "--workspace"), "--workspace")  # no argument
    console_error(console("bogus"), "bogus")
    console_error(console("genes", "bogus"), "bogus")
    helped = console()
    assert helped.returncode == 2 and "cycle" in helped.stdout and helped.stderr == ""
    assert console("cycle", "--help").returncode == 0


def run_quiet(*args: str, env: dict[str, str] | None = None):
    """``run`` with ``env`` over the process's environment (CliRunner sets it for the call only)."""
    return runner.invoke(app, list(args), env=env, catch_exceptions=False)


def in_process_error(result, *needles: str) -> str:
    """What console_error checks, for a command run in process."""
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gep: "), result.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


@pytest.mark.timeout(120)
def test_bad_cycle_requests_are_refused_before_anything_runs(repo: Path):
    """A typo is a user error: one line, nothing recorded (it must not count as a failed cycle of a gene).
    Two through the installed script (a real process: nothing else reaches its stderr), the rest in process
    (a `gep cycle` process costs ~2 s of CPU before it refuses)."""
    console_error(console("cycle", "-w", str(repo), "--mutator", "claude"), "unknown mutator 'claude'")
    in_process_error(run_quiet("cycle", "-w", str(repo), "--strategy", "fast"), "unknown strategy 'fast'")
    in_process_error(run_quiet("cycle", "-w", str(repo), "--mutator", "command"), "--agent-cmd")
    # issue 44: an agent program that is not there costs no cycle (it was a failed one, a host failure)
    in_process_error(run_quiet("cycle", "-w", str(repo), "--mutator", "command", "--agent-cmd", "no-such-agent-xyz -p"),
                     "agent program 'no-such-agent-xyz' is not on PATH")
    in_process_error(run_quiet("cycle", "-w", str(repo), "--mutator", "command", "--agent-cmd", "./bin/agent"),
                     "agent program './bin/agent' does not exist")
    (repo / "gep.toml").write_text('[gep]\nmutator = "command"\nagent_cmd = "claude-missing -p"\n')
    in_process_error(run_quiet("cycle", "-w", str(repo)), "'claude-missing' is not on PATH")
    in_process_error(run_quiet("cycle", "-w", str(repo), "--mutator", "anthropic", env={"ANTHROPIC_API_KEY": ""}),
                     "ANTHROPIC_API_KEY")
    (repo / "gep.toml").write_text("[gep\n")
    in_process_error(run_quiet("cycle", "-w", str(repo)), "gep.toml", "not valid TOML")
    console_error(console("solidify", "-w", str(repo)), "gep.toml")
    (repo / "gep.toml").unlink()
    with Store.for_workspace(repo) as store:
        assert store.count_events() == 0 and store.open_runs() == []


@pytest.mark.timeout(120)
def test_pending_cycle_and_nothing_to_solidify_are_one_line(repo: Path):
    from gep.core.models import CycleRun

    console_error(console("solidify", "-w", str(repo)), "no cycle is awaiting changes")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    with Store.for_workspace(repo) as store:
        store.save_run(CycleRun(event_id="evt_pending", workspace=str(repo), head_sha=head,
                                status="awaiting_changes"))
    console_error(console("cycle", "-w", str(repo), "--mutator", "prompt"), "evt_pending", "gep solidify")


def test_unwritable_engine_state_is_one_line(repo: Path):
    (repo / ".gep").write_text("a file where the engine's folder should be\n")
    one_line_error(run("history", "--workspace", str(repo)), "cannot write engine state", ".gep")
    one_line_error(run("cycle", "--workspace", str(repo), "--mutator", "prompt"), "cannot write engine state")


@pytest.mark.timeout(120)
def test_refused_starts_store_nothing_and_print_one_line(repo: Path):
    console_error(console("cycle", "-w", str(repo), "--allow-dirty"), "--allow-dirty")  # gone: a dirty tree runs
    (repo / ".git" / "MERGE_HEAD").write_text(subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo,
                                                            capture_output=True, text=True).stdout)
    console_error(console("cycle", "-w", str(repo), "--mutator", "prompt"), "a merge is in progress")
    console_error(console("cycle", "-w", str(repo), "--mutator", "command", "--agent-cmd", "true",
                          "--branch", "bad..name"), "'bad..name' is not a valid branch name")
    console_error(console("cycle", "-w", str(repo), "--mutator", "prompt", "--branch", "gep/mine"),
                  "--branch is for cycles made in a clone")
    with Store.for_workspace(repo) as store:
        assert store.count_events() == 0 and store.open_runs() == []


# ------------------------------------------------------------------ commands that only read the store


STORE_ONLY = [["history"], ["history", "--all"], ["history", "--json"], ["show", "evt_0"], ["genes", "list"],
              ["genes", "list", "--workspace", "."], ["genes", "show", "gene_repair_from_errors"],
              ["signals", "--workspace", "."], ["capture", "--workspace", "."], ["lessons", "list"],
              ["feedback", "stats"], ["feedback", "evt_0", "helpful", "--note", "a write"], ["context"],
              ["context", "--json"]]
HOOK = json.dumps({"hook_event_name": "UserPromptSubmit", "session_id": "t", "prompt": "keep it short please"})

NO_PREFECT = """
import sys
from gep.entry import main  # the console script's entry point
sys.argv = ["gep", *sys.argv[1:]]
try:
    main()
except SystemExit as exc:
    code = exc.code
print("PREFECT-LOADED" if any(m == "prefect" or m.startswith("prefect.") for m in sys.modules) else "NO-PREFECT",
      file=sys.stderr)
print("ANTHROPIC-LOADED" if "anthropic" in sys.modules else "NO-ANTHROPIC", file=sys.stderr)  # ~2 s of import
# the quick read path (gep/store/quick_read.py): SQLAlchemy and SQLModel are ~0.4 s of import, GitPython ~0.1 s;
# a plain-http Prefect API is asked with urllib (httpx: ~0.13 s)
HEAVY = ("sqlalchemy", "sqlmodel", "git", "httpx")
print("HEAVY-LOADED " + " ".join(m for m in HEAVY if m in sys.modules)
      if any(m in sys.modules for m in HEAVY) else "NO-HEAVY", file=sys.stderr)
"""


@pytest.mark.timeout(180)
def test_store_only_commands_never_import_prefect_sqlalchemy_nor_start_a_server(repo: Path, tmp_path: Path):
    home = tmp_path / "prefect-home"
    with Store.for_workspace(repo) as store:
        store.add_event(EvolutionEvent(id="evt_0", signals=["log_error"], genes_used=["g"],
                                       outcome={"status": "success", "score": 0.85},
                                       meta={"flow_run_id": "6f1c0a4e-3d7b-4d0e-9a43-6f3c2b1e0d9a"}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    for args in STORE_ONLY:
        for api in (None, "http://127.0.0.1:9/api"):  # none configured, and one that does not answer
            run_env = {**env, "PREFECT_HOME": str(home), **({"PREFECT_API_URL": api} if api else {})}
            proc = subprocess.run([sys.executable, "-c", NO_PREFECT, *args], cwd=repo, env=run_env,
                                  capture_output=True, text=True, timeout=60, input=HOOK)
            assert "NO-PREFECT" in proc.stderr and "NO-ANTHROPIC" in proc.stderr, (args, api, proc.stderr)
            assert "NO-HEAVY" in proc.stderr, (args, api, proc.stderr)
            assert proc.returncode == 0, (args, api, proc.stdout, proc.stderr)
    assert not home.exists() or not (home / "gep-server.json").exists()  # no server was started for them


def test_history_and_show_default_to_the_workspace_of_the_current_directory(repo: Path, monkeypatch):
    with Store.for_workspace(repo) as store:
        store.add_event(EvolutionEvent(id="evt_here", signals=["a"], outcome={"status": "success", "score": 0.85}))
    (repo / "src").mkdir()
    monkeypatch.chdir(repo / "src")
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    listed = run("history", "--json")
    assert [e["id"] for e in json.loads(listed.stdout)] == ["evt_here"]
    assert json.loads(run("show", "evt_here").stdout)["id"] == "evt_here"


def test_history_outside_a_repository_says_so(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    one_line_error(run("history"), "not inside a git repository", "--workspace")


def test_history_of_a_workspace_without_cycles_creates_nothing(repo: Path):
    result = run("history", "--workspace", str(repo))
    assert result.exit_code == 0 and "no cycles recorded" in result.stdout
    assert f"gep cycle --workspace {repo}" in result.stdout
    assert not (repo / ".gep").exists()  # a read never creates the engine's folder
    assert json.loads(run("history", "--workspace", str(repo), "--json").stdout) == []


@pytest.mark.timeout(60)
def test_history_does_not_wait_for_a_server_that_does_not_answer(repo: Path, monkeypatch):
    import socket
    import time

    with Store.for_workspace(repo) as store:
        store.add_event(EvolutionEvent(id="evt_1", signals=["a"], outcome={"status": "success", "score": 0.85},
                                       meta={"flow_run_id": "6f1c0a4e-3d7b-4d0e-9a43-6f3c2b1e0d9a"}))
    # a server that accepts connections and never answers
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        monkeypatch.setenv("PREFECT_API_URL", f"http://127.0.0.1:{silent.getsockname()[1]}/api")
        started = time.monotonic()
        result = run("history", "--workspace", str(repo), "--all", "--wide")  # --wide: the run's id and state
        took = time.monotonic() - started
    assert result.exit_code == 0, result.stderr
    assert took < 4, f"history waited {took:.1f} s for a silent server"
    row = next(line for line in result.stdout.splitlines() if "evt_1" in line)
    assert "6f1c0a4e-3d7b-4d0e-9a43-6f3c2b1e0d9a" in row and row.rstrip(" │").endswith("-")
    assert "does not answer" in result.stderr


def test_version():
    result = run("--version")
    assert result.exit_code == 0 and result.stdout.startswith("gep ") and result.stdout.split()[1][0].isdigit()


# ------------------------------------------------------------------ gep server, without a server


def test_server_status_and_stop_when_none_runs(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "home"))
    status = run("server", "status")
    assert status.exit_code == 1 and status.stdout.startswith("stopped")
    assert "no Prefect server started by gep" in run("server", "stop").stdout


def test_server_stop_never_kills_a_process_that_is_not_its_server(tmp_path: Path, monkeypatch):
    """A stale record whose pid now belongs to another program (here: a sleeping python) is not acted on."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("PREFECT_HOME", str(home))
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        (home / "gep-server.json").write_text(json.dumps(
            {"pid": other.pid, "port": 9, "api_url": "http://127.0.0.1:9/api", "ui_url": "http://127.0.0.1:9"}))
        assert run("server", "status").stdout.startswith("stopped")
        assert "had already stopped" in run("server", "stop").stdout
        assert other.poll() is None, "gep server stop killed a process it had not started"
        assert not (home / "gep-server.json").exists()
    finally:
        other.kill()
        other.wait()


def test_a_bad_port_setting_is_one_line(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PREFECT_SERVER_API_PORT", "forty-two")
    one_line_error(run("server", "start"), "PREFECT_SERVER_API_PORT", "forty-two")


def test_prefect_settings_are_read_from_the_active_profile_without_prefect(tmp_path: Path):
    from gep import prefect_api

    home = tmp_path / "home"
    home.mkdir()
    (home / "profiles.toml").write_text('active = "local"\n[profiles.local]\n'
                                        'PREFECT_API_URL = "http://127.0.0.1:4310/api"\n'
                                        '[profiles.other]\nPREFECT_API_URL = "http://elsewhere/api"\n')
    env = {"PREFECT_HOME": str(home)}
    assert prefect_api.configured_api_url(env) == "http://127.0.0.1:4310/api"
    assert prefect_api.configured_api_url({**env, "PREFECT_PROFILE": "other"}) == "http://elsewhere/api"
    assert prefect_api.configured_api_url({**env, "PREFECT_API_URL": "http://x/api/"}) == "http://x/api"
    assert prefect_api.ui_url("http://127.0.0.1:4310/api", env) == "http://127.0.0.1:4310"
    assert prefect_api.run_link("http://h:1/api", "abc", env) == "http://h:1/runs/flow-run/abc"
    assert prefect_api.configured_api_url({"PREFECT_HOME": str(tmp_path / "none")}) is None


def test_help_lists_the_commands_in_the_order_a_person_uses_them():
    """`gep --help`: a cycle first (it listed init and doctor first), what waits on you and the history next,
    setting up after the daily commands; every command has its place in the order."""
    from gep.cli.root import HELP_ORDER

    listing = run("--help").stdout.split("Commands:", 1)[1]
    commands = [line.split()[0] for line in listing.splitlines() if line.strip()]
    assert commands[:6] == ["cycle", "status", "approve", "reject", "solidify", "history"], commands
    assert commands.index("init") > commands.index("recover") and commands.index("doctor") > commands.index("init")
    assert sorted(commands) == sorted(HELP_ORDER), set(commands) ^ set(HELP_ORDER)  # none left to the end
