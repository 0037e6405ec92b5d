"""Issue 32, finding 11 (part): a workspace set up against the engine. A ``.gep`` that is a symlink out of
the workspace is refused in one line, and nothing is written where it points."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import init_repo

from gep import CycleRequest, run_cycle
from gep.errors import WorkspaceError


def _gep(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(Path(sys.executable).with_name("gep")), *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "NO_COLOR": "1"})


def test_a_gep_dir_that_is_a_symlink_out_of_the_workspace_is_refused_not_followed(tmp_path: Path,
                                                                                  outside: Path) -> None:
    ws = init_repo(tmp_path / "ws", {"app.py": "X = 1\n"})
    (ws / ".gep").symlink_to(outside)
    for args in (["history", "-w", str(ws)], ["cycle", "-w", str(ws), "--mutator", "prompt"],
                 ["recover", "-w", str(ws)]):
        out = _gep(*args)
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        assert out.stderr.strip().count("\n") == 0 and "Traceback" not in out.stderr
        assert f"{ws / '.gep'} is a symlink to {outside}, outside the workspace" in out.stderr
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        run_cycle(CycleRequest(workspace=ws, mutator="prompt"), env=dict(os.environ))
    assert list(outside.iterdir()) == []  # no store, clone, lock or patch was written through the link


def test_a_gep_dir_linked_inside_the_workspace_still_works(tmp_path: Path) -> None:
    ws = init_repo(tmp_path / "ws", {"app.py": "X = 1\n"})
    (ws / "state").mkdir()
    (ws / ".gep").symlink_to("state")
    out = _gep("history", "-w", str(ws))
    assert out.returncode == 0, out.stderr
