"""Issue 32, finding 11 (part): a workspace set up against the engine. A ``.gep`` that is a symlink out of
the workspace is refused in one line, and nothing is written where it points; a repository that needs a git
filter (git-lfs) that is not installed is refused at the start in one line; validation that cannot write its
throw-away copy (a full disk) fails in one line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import git, init_repo

from gep import CycleRequest, run_cycle
from gep.core.errors import WorkspaceError


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


LFS_POINTER = ("version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1"
               "258daaa5e2ca24d17e2393\nsize 12345\n")


@pytest.mark.parametrize("program", ["git-lfs", "gep-no-such-filter"])
def test_a_repository_needing_a_missing_filter_is_refused_at_the_start_in_one_line(tmp_path: Path,
                                                                                   program: str) -> None:
    """git-lfs's setup without git-lfs: every checkout failed ("the remote end hung up unexpectedly") and
    every cycle printed a traceback. The start is refused, naming the filter and what to install."""
    if shutil.which(program):
        pytest.skip(f"{program} is installed here")
    ws = init_repo(tmp_path / "ws", {"app.py": "X = 1\n", ".gitattributes": "*.bin filter=lfs -text\n",
                                     "data.bin": LFS_POINTER})
    for key, value in (("required", "true"), ("process", f"{program} filter-process"),
                       ("smudge", f"{program} smudge -- %f"), ("clean", f"{program} clean -- %f")):
        git(ws, "config", f"filter.lfs.{key}", value)
    out = _gep("cycle", "-w", str(ws), "--mutator", "prompt")
    assert out.returncode == 2 and "Traceback" not in out.stderr and out.stderr.strip().count("\n") == 0
    assert f"requires the git filter 'lfs' (filter.lfs.required), and its program {program} is not installed" \
        in out.stderr, out.stderr
    with pytest.raises(WorkspaceError, match="requires the git filter 'lfs'"):
        run_cycle(CycleRequest(workspace=ws, mutator="command", agent_cmd="true"), env=dict(os.environ))
    assert not (ws / ".gep" / "worktrees").exists() or not list((ws / ".gep" / "worktrees").iterdir())


FULL_DISK_CHILD = r'''
import json, resource, signal, sys
from pathlib import Path
from gep.core.config import Settings
from gep.validation.runner import run_validation
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write over the limit fails with EFBIG, as a full disk fails
resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
report = run_validation(commands=["python app.py"], cwd=Path(sys.argv[1]), settings=Settings(sandbox="none"),
                        gene_id="g", report_id="vr_full")
print(json.dumps({"ok": report.overall_ok, "stderr": report.results[0].stderr}))
'''


def test_validation_that_cannot_write_its_copy_fails_in_one_line(tmp_path: Path) -> None:
    """The disk the agent filled: the engine cannot write the copy validation runs in (simulated with
    RLIMIT_FSIZE below a tracked file's size, which fails writes as ENOSPC would). The checks are not run,
    the reason is one line, no traceback, no partial copy left."""
    ws = init_repo(tmp_path / "ws", {"app.py": "X = 1\n"})
    (ws / "big.bin").write_bytes(os.urandom(2 << 20))
    (ws / ".gep").mkdir()
    out = subprocess.run([sys.executable, "-c", FULL_DISK_CHILD, str(ws)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    result = json.loads(out.stdout)
    assert not result["ok"] and result["stderr"] == "BLOCKED: sandbox: cannot copy the tree to check: File too large"
    assert list((ws / ".gep" / "tmp").iterdir()) == []


AGENT_FILLS_THE_DISK = r'''
import json, os, resource, signal, sys
from pathlib import Path
import gep.git.isolated as iso
import gep.cycle.tree as tree
from gep import CycleRequest, run_cycle
real = iso.clone_change
def full(*a, **k):  # the disk is full from the moment the agent is done: every write over 1 MB fails
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
    return real(*a, **k)
iso.clone_change = tree.clone_change = full
agent = "import os, sys; sys.stdin.read(); open('big.bin', 'wb').write(os.urandom(3 << 20)); open('stats.py', 'a').write('Y = 2\\n')"
event = run_cycle(CycleRequest(workspace=Path(sys.argv[1]), mutator="command", agent_cmd=f"{sys.executable} -c {agent!r}"),
                  env=dict(os.environ))
print(json.dumps({"status": str(event.outcome.status), "reasons": event.meta.failure_reasons, "id": event.id}))
'''


def test_a_disk_the_agent_filled_fails_the_cycle_in_one_line_and_keeps_the_change(example_ws: Path) -> None:
    """Finding 11: the agent fills the disk (RLIMIT_FSIZE from when it is done, as ENOSPC would fail the
    engine's writes): the engine's git cannot store the change nor write a patch of it; the cycle fails with a
    reason, no traceback, and the change's files are moved to .gep/rescued/<event>/, the clone gone."""
    ws = example_ws
    out = subprocess.run([sys.executable, "-c", AGENT_FILLS_THE_DISK, str(ws)], capture_output=True, text=True,
                         timeout=240)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["status"] == "failed" and result["reasons"], result
    assert all("\n" not in r for r in result["reasons"])
    kept = ws / ".gep" / "rescued" / result["id"]
    assert (kept / "big.bin").stat().st_size == 3 << 20 and (kept / "stats.py").read_text().endswith("\nY = 2\n")
    assert not (ws / ".gep" / "worktrees").exists() or not list((ws / ".gep" / "worktrees").iterdir())
