"""The safe command runner: injection payloads are refused and never run; allowed commands run safely."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from gep.core.config import DEFAULT_ALLOWLIST, Settings
from gep.validation.runner import check_command, resolve_program, run_command, run_validation
from gep.validation.sandbox import find_bwrap

# npm and npx are off by default; allowed here so that their own rules are what refuses the payloads
S = Settings(command_allowlist=[*DEFAULT_ALLOWLIST, "npm", "npx"])

# Every payload tries to create the marker file {m}. All must be refused, and none may create it.
PAYLOADS = [
    "pytest; touch {m}",
    "pytest ;touch {m}",
    "pytest && touch {m}",
    "pytest || touch {m}",
    "pytest | tee {m}",
    "pytest & touch {m}",
    "ruff check . &touch {m}",
    "pytest `touch {m}`",
    "pytest $(touch {m})",
    'pytest "$(touch {m})"',
    "pytest --x=`touch {m}`",
    "pytest > {m}",
    "pytest >> {m}",
    "pytest 2> {m}",
    "pytest &> {m}",
    "pytest < {m}",
    "pytest\ntouch {m}",
    "pytest\rtouch {m}",
    "pytest\x00touch {m}",
    "pytest${{IFS}}-q;touch${{IFS}}{m}",
    "python${{IFS}}-c${{IFS}}open('{m}','w')",
    "python $HOME/x.py",
    "python -c \"open('{m}','w')\"",
    "python3 -c \"open('{m}','w')\"",
    "python -Ic \"open('{m}','w')\"",
    "python -qc \"open('{m}','w')\"",
    "python -c\"open('{m}','w')\"",
    "python -W ignore -c \"open('{m}','w')\"",
    "/usr/bin/python3 -c \"open('{m}','w')\"",
    "node -e \"require('fs').writeFileSync('{m}','x')\"",
    "node --eval \"require('fs').writeFileSync('{m}','x')\"",
    "node --eval=\"require('fs').writeFileSync('{m}','x')\"",
    "node -p \"require('fs').writeFileSync('{m}','x')\"",
    "node -pe \"require('fs').writeFileSync('{m}','x')\"",
    "node --print \"require('fs').writeFileSync('{m}','x')\"",
    "npx -c 'touch {m}'",
    "npx --call 'touch {m}'",
    "npm exec -c 'touch {m}'",
    "make --eval='all: ; touch {m}'",
    "make -E 'x'",
    "make SHELL=/bin/touch",
    "touch {m}",
    "/usr/bin/touch {m}",
    "'touch' {m}",
    "sh -c 'touch {m}'",
    "/bin/sh -c 'touch {m}'",
    "bash -c 'touch {m}'",
    "env touch {m}",
    "xargs touch {m}",
    "perl -e 'open(F,\">{m}\")'",
    "FOO=1 touch {m}",
    "LD_PRELOAD=/tmp/evil.so pytest",
    "PYTHONSTARTUP=/tmp/evil.py python",
    "python3.11 -c \"open('{m}','w')\"",
    "python -m timeit -n1 \"open('{m}','w')\"",
    "python -qm timeit \"open('{m}','w')\"",
    "node --import data:text/javascript,import('fs').then(function(f){{f.writeFileSync('{m}','x')}}) x.js",
    "node --import=data:text/javascript,1 x.js",
    "",
    "   ",
    "pytest 'unbalanced",
]


@pytest.mark.parametrize("payload", PAYLOADS)
def test_injection_payload_is_blocked_and_never_runs(payload: str, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    cmd = payload.format(m=marker)
    reason = check_command(cmd, S)
    assert reason is not None and "[rule: " in reason, cmd
    res = run_command(cmd, cwd=tmp_path, settings=S)
    assert not res.ok
    assert res.blocked_reason
    assert res.exit_code is None
    assert res.stderr.startswith("BLOCKED:")
    assert not marker.exists()


def test_there_are_at_least_30_payloads() -> None:
    assert len(PAYLOADS) >= 30


@pytest.mark.parametrize("cmd", [
    "python -m pytest -q",
    "python -m pytest -c pytest.ini -k 'not slow'",  # pytest's own -c (config file) is fine after -m
    "python -q -m compileall .",
    "python script.py -c x",  # -c after the script belongs to the script
    "pytest -q tests/test_x.py",
    "ruff check .",
    "mypy gep",
    "make test",
    "node scripts/validate.js -e",
    "npm test",
    "pytest --junitxml=reports/junit.xml -p no:cacheprovider",
    "ruff check --fix gep tests",
])
def test_ordinary_validation_commands_are_allowed(cmd: str) -> None:
    assert check_command(cmd, S) is None


def test_allowlist_is_configurable() -> None:
    assert check_command("cargo test", S) is not None
    assert check_command("cargo test", Settings(command_allowlist=[*DEFAULT_ALLOWLIST, "cargo"])) is None
    assert check_command("pytest", Settings(command_allowlist=["python"])) is not None


def _script(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "script.py"
    p.write_text(body)
    return p


def test_runs_without_a_shell_and_reports_exit_code(tmp_path: Path) -> None:
    _script(tmp_path, "import sys\nprint('args', sys.argv[1:])\nsys.exit(3)\n")
    res = run_command("python script.py 'a b' '*'", cwd=tmp_path, settings=Settings())
    assert res.exit_code == 3 and not res.ok
    assert "args ['a b', '*']" in res.stdout  # no globbing, quoting honoured
    ok = run_command("python script.py", cwd=tmp_path, settings=Settings())
    assert ok.exit_code == 3
    _script(tmp_path, "print('fine')\n")
    assert run_command("python script.py", cwd=tmp_path, settings=Settings()).ok


def test_output_is_capped_and_redacted(tmp_path: Path) -> None:
    secret = "sk-ant-api03-" + "A" * 40
    _script(tmp_path, f"print('x' * 100_000)\nprint('token {secret}')\n")
    res = run_command("python script.py", cwd=tmp_path, settings=Settings(output_cap_chars=500))
    assert res.ok
    assert len(res.stdout) <= 500 + 80
    assert "truncated" in res.stdout
    assert secret not in res.stdout and "[REDACTED]" in res.stdout


@pytest.mark.parametrize("sandbox", ["none", "auto"])
def test_environment_holds_only_what_the_command_needs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       sandbox: str) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-api03-" + "B" * 40)
    monkeypatch.setenv("MY_SERVICE_TOKEN", "hunter2hunter2")
    monkeypatch.setenv("GEP_HARMLESS", "engine")
    monkeypatch.setenv("APP_MODE", "visible")
    _script(tmp_path, "import os\nprint(sorted(os.environ))\n")
    plain = run_command("python script.py", cwd=tmp_path, settings=Settings(sandbox=sandbox))
    assert "PATH" in plain.stdout and "APP_MODE" not in plain.stdout and "GEP_HARMLESS" not in plain.stdout
    # a variable the user names is passed on; a credential never is, even when named
    named = Settings(sandbox=sandbox, validation_env=["APP_MODE", "ANTHROPIC_API_KEY", "MY_SERVICE_TOKEN"])
    res = run_command("python script.py", cwd=tmp_path, settings=named)
    assert "APP_MODE" in res.stdout
    assert "ANTHROPIC_API_KEY" not in res.stdout and "MY_SERVICE_TOKEN" not in res.stdout


@pytest.mark.parametrize("sandbox", ["none", "bwrap"])
def test_timeout_kills_the_whole_process_group(tmp_path: Path, sandbox: str) -> None:
    if sandbox == "bwrap" and find_bwrap() is None and not os.environ.get("GEP_REQUIRE_BWRAP"):
        pytest.skip("bubblewrap is not installed")
    marker = f"gep-grandchild-{tmp_path.name}"
    pidfile = tmp_path / "child.pid"
    _script(tmp_path, (
        "import subprocess, sys, time\n"
        f"child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', {marker!r}])\n"
        f"open({str(pidfile)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(60)\n"
        "print('slept to the end')\n"))
    # the shortest limit in which python (and bwrap) started the grandchild: 1.5 s on an idle machine, longer
    # when loaded (the wait is sleep, no CPU; a longer limit only when the grandchild had not started)
    for limit in (1.5, 5, 15):
        res = run_command("python script.py", cwd=tmp_path,
                          settings=Settings(validation_timeout_s=limit, sandbox=sandbox))
        if pidfile.exists():
            break
    assert "slept to the end" not in res.stdout  # killed at its limit, not waited for
    assert res.timed_out and not res.ok and res.exit_code is None and res.sandbox == sandbox
    assert "timed out" in res.stderr
    assert pidfile.exists()  # the grandchild was started
    for _ in range(50):  # found by its command line: inside bwrap the pid it wrote is its namespace's
        if not _alive_with_arg(marker):
            break
        time.sleep(0.1)
    else:
        pytest.fail("the grandchild survived the timeout")


def _alive_with_arg(arg: str) -> bool:
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and arg.encode() in (entry / "cmdline").read_bytes().split(b"\0"):
                return (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except (OSError, IndexError):
            continue
    return False


def test_python_falls_back_to_this_interpreter_when_not_on_path(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    assert resolve_program("python", {"PATH": str(empty)}) == sys.executable
    assert resolve_program("pytest", {"PATH": str(empty)}) is None


def test_python_resolves_to_the_path_interpreter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    venv_bin = tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    fake = venv_bin / "python"
    fake.write_text(f"#!/bin/sh\nexec {sys.executable} -c 'print(\"workspace venv\")'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}")
    res = run_command("python -m pytest", cwd=tmp_path, settings=Settings())
    assert res.ok and "workspace venv" in res.stdout


def test_missing_program_fails_cleanly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    res = run_command("mypy .", cwd=tmp_path, settings=Settings())
    assert not res.ok and "not found" in res.stderr and res.blocked_reason is None


def test_validation_stops_at_first_failure_and_reports(tmp_path: Path) -> None:
    (tmp_path / "ok.py").write_text("print('ok')\n")
    (tmp_path / "bad.py").write_text("raise SystemExit(2)\n")
    rep = run_validation(commands=["python ok.py", "python bad.py", "python ok.py"], cwd=tmp_path,
                         settings=Settings(), gene_id="g", report_id="vr_1")
    assert not rep.overall_ok
    assert [r.ok for r in rep.results] == [True, False]
    assert rep.commands == ["python ok.py", "python bad.py", "python ok.py"]
    assert rep.started_at and rep.finished_at
    good = run_validation(commands=["python ok.py"], cwd=tmp_path, settings=Settings(), gene_id="g",
                          report_id="vr_2")
    assert good.overall_ok
    blocked = run_validation(commands=["python ok.py; touch x"], cwd=tmp_path, settings=Settings(), gene_id="g",
                             report_id="vr_3")
    assert not blocked.overall_ok and blocked.results[0].blocked_reason
    assert not (tmp_path / "x").exists()
