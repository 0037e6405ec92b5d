"""Issue 32: validation sees "no other repositories, whatever their paths". The root showed /opt (and /nix,
/gnu, /snap) whole, read-only, so another repository or anyone's data kept there was readable from a gene's
validation command. Now only the system's folders are shown whole; from /opt and the like, only the tool
roots the command runs from (real bubblewrap; run with ``sandbox = "none"`` too, where all is readable)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import init_repo
from test_sandbox import needs_bwrap

from gep.core.config import Settings
from gep.validation.runner import run_validation
from gep.validation.sandbox import Sandbox

SYSTEM_PYTHON = next((p for p in ("/usr/bin/python3", "/bin/python3") if os.access(p, os.X_OK)), None)
# folders beside /opt that hold data on real machines; each gets a secret when it exists and is writable
DATA_DIRS = ("/opt", "/srv", "/mnt", "/media", "/var/lib", "/var/tmp")

pytestmark = [needs_bwrap, pytest.mark.skipif(not os.access("/opt", os.W_OK) or SYSTEM_PYTHON is None,
                                              reason="needs a writable /opt and a system python3")]

PROBE = """import os, subprocess, sys
try:
    import gep_opt_tool
    print("TOOL", gep_opt_tool.NAME)
except ImportError:
    print("TOOL missing")
print("PYTHON", sys.prefix)
try:
    print("HELPER", subprocess.run(["gep-opt-helper"], capture_output=True, text=True).stdout.strip())
except OSError as exc:
    print("HELPER missing", exc)
for p in {paths!r}:
    try:
        print("SEEN", p, open(p).read().strip())
    except OSError:
        pass
print("OPT", sorted(os.listdir("/opt")) if os.path.isdir("/opt") else [])
"""


@pytest.fixture
def made() -> Iterator[list[Path]]:
    """Folders the test creates outside its tmp_path, removed afterwards."""
    out: list[Path] = []
    yield out
    for p in out:
        shutil.rmtree(p, ignore_errors=True)


def _validate(ws: Path, mode: str) -> str:
    settings = Settings(sandbox=mode)  # type: ignore[arg-type]
    rep = run_validation(commands=["python probe.py"], cwd=ws, settings=settings, gene_id="gene_repair_from_errors",
                         report_id=f"r-{mode}", sandbox=Sandbox.resolve(ws, settings))
    res = rep.results[0]
    assert res.exit_code == 0, (mode, res.stdout, res.stderr)
    return res.stdout


def _opt_tool(made: list[Path]) -> Path:
    """A tool installed under /opt/<name>: its bin/python needs its own lib/ (the tool root, not just bin/)."""
    tool = Path(tempfile.mkdtemp(prefix="gep-tool-", dir="/opt"))
    made.append(tool)
    (tool / "bin").mkdir()
    (tool / "lib").mkdir()
    (tool / "lib" / "gep_opt_tool.py").write_text("NAME = 'opt-tool'\n")
    shim = tool / "bin" / "python"
    shim.write_text(f'#!/bin/sh\nPYTHONPATH={tool}/lib exec {SYSTEM_PYTHON} "$@"\n')
    shim.chmod(0o755)
    return tool


def _opt_helper(made: list[Path]) -> Path:
    """Another tool under /opt on PATH (not the command's program): its script reads its own share/."""
    tool = Path(tempfile.mkdtemp(prefix="gep-helper-", dir="/opt"))
    made.append(tool)
    (tool / "bin").mkdir()
    (tool / "share").mkdir()
    (tool / "share" / "greeting").write_text("helper-ok\n")
    script = tool / "bin" / "gep-opt-helper"
    script.write_text('#!/bin/sh\nexec cat "$(dirname "$(readlink -f "$0")")/../share/greeting"\n')
    script.chmod(0o755)
    return tool


def _secrets(made: list[Path]) -> list[str]:
    """Another repository under /opt (a tracked and an ignored file) and a secret in each data folder."""
    other = init_repo(Path(tempfile.mkdtemp(prefix="gep-other-", dir="/opt")), {"notes.txt": "REPOSECRET\n",
                                                                               ".gitignore": ".env\n"})
    made.append(other)
    (other / ".env").write_text("ENVSECRET\n")
    paths = [str(other / "notes.txt"), str(other / ".env"), str(other / ".git" / "HEAD")]
    for d in DATA_DIRS:
        if os.path.isdir(d) and os.access(d, os.W_OK):
            folder = Path(tempfile.mkdtemp(prefix="gep-data-", dir=d))
            made.append(folder)
            (folder / "secret.txt").write_text(f"DATASECRET in {d}\n")
            paths.append(str(folder / "secret.txt"))
    return paths


def test_other_repositories_and_data_are_invisible_while_a_tool_under_opt_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, made: list[Path]) -> None:
    tool, helper, paths = _opt_tool(made), _opt_helper(made), _secrets(made)
    monkeypatch.setenv("PATH", os.pathsep.join([str(tool / "bin"), str(helper / "bin"), "/usr/bin", "/bin"]))
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    ws = init_repo(tmp_path / "ws", {"probe.py": PROBE.format(paths=paths)})
    plain = _validate(ws, "none")
    assert plain.count("SEEN") == len(paths) and "REPOSECRET" in plain  # unconfined: the test can fail
    boxed = _validate(ws, "auto")
    assert "TOOL opt-tool" in boxed and "HELPER helper-ok" in boxed  # tools under /opt on PATH still run
    assert "SEEN" not in boxed and "SECRET" not in boxed, boxed
    assert f"OPT {sorted([tool.name, helper.name])}" in boxed  # of /opt, only the tools' roots are there


def test_a_virtualenv_whose_base_python_is_under_opt_still_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                made: list[Path]) -> None:
    """A Python installed under /opt/<name>/bin, and a virtualenv made from it (its base is bound, the rest
    of /opt is not)."""
    base = Path(tempfile.mkdtemp(prefix="gep-python-", dir="/opt"))
    made.append(base)
    (base / "bin").mkdir()
    real = Path(SYSTEM_PYTHON or "").resolve()
    shutil.copy2(real, base / "bin" / real.name)  # finds its standard library from its build prefix
    (base / "bin" / "python3").symlink_to(real.name)
    venv = tmp_path / "venv"
    subprocess.run([str(base / "bin" / "python3"), "-m", "venv", "--without-pip", str(venv)], check=True)
    assert f"home = {base / 'bin'}" in (venv / "pyvenv.cfg").read_text()
    paths = _secrets(made)
    monkeypatch.setenv("PATH", f"{venv / 'bin'}{os.pathsep}/usr/bin{os.pathsep}/bin")
    monkeypatch.setenv("VIRTUAL_ENV", str(venv))
    ws = init_repo(tmp_path / "ws", {"probe.py": PROBE.format(paths=paths)})
    boxed = _validate(ws, "auto")
    assert f"PYTHON {venv}" in boxed and "SEEN" not in boxed and "SECRET" not in boxed, boxed
    assert f"OPT {[base.name]}" in boxed


@pytest.mark.skipif(not os.access("/usr/local/bin", os.W_OK), reason="/usr/local/bin is not writable here")
def test_a_tool_under_opt_linked_from_usr_local_bin_still_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               made: list[Path]) -> None:
    helper = _opt_helper(made)
    link = Path("/usr/local/bin") / f"gep-linked-{helper.name}"
    link.symlink_to(helper / "bin" / "gep-opt-helper")
    try:
        paths = _secrets(made)
        monkeypatch.setenv("PATH", os.pathsep.join(["/usr/local/bin", "/usr/bin", "/bin"]))
        probe = PROBE.format(paths=paths).replace('["gep-opt-helper"]', repr([link.name]))
        ws = init_repo(tmp_path / "ws", {"probe.py": probe})
        boxed = _validate(ws, "auto")
        assert "HELPER helper-ok" in boxed and "SEEN" not in boxed and f"OPT {[helper.name]}" in boxed, boxed
    finally:
        link.unlink()
