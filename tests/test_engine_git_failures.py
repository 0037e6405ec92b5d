"""Issue 32, finding 7: a failure inside the engine's own git steps (here: a ``.gitattributes`` the agent wrote
asks for ``working-tree-encoding=UTF-16`` on files that are not, so the engine's ``git add`` fails) is a
failed cycle with a one-line reason and a rescued patch; never an exception, a traceback or a left clone."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import EXAMPLE, git, init_repo

from gep import CycleRequest, run_cycle

AGENT = ("import pathlib, sys; sys.stdin.read(); "
         "pathlib.Path('.gitattributes').write_text('*.py working-tree-encoding=UTF-16\\n'); "
         "p = pathlib.Path('stats.py'); p.write_text(p.read_text().replace('(len(values) - 1)', 'len(values)'))")


def test_a_gitattributes_that_breaks_the_engines_git_add_fails_the_cycle_and_saves_the_change(
        tmp_path: Path) -> None:
    shutil.copytree(EXAMPLE, tmp_path / "ws")
    ws = init_repo(tmp_path / "ws", {})
    head = git(ws, "rev-parse", "HEAD")
    event = run_cycle(CycleRequest(workspace=ws, mutator="command", seed=1,
                                   agent_cmd=shlex.join([sys.executable, "-c", AGENT])), env=dict(os.environ))
    assert event is not None and event.outcome.status == "failed"
    reasons = event.meta.failure_reasons or []
    assert len(reasons) == 1 and "\n" not in reasons[0], reasons
    assert reasons[0].startswith("git: the engine could not read the change: git add failed in ")
    assert "working-tree-encoding" in reasons[0] or "UTF-16" in reasons[0]
    # the change is saved, as raw bytes, and it applies
    patch = Path(event.meta.rescued_patch or "")
    assert patch.is_file() and "+    return sum(values) / len(values)" in patch.read_text()
    assert not [p for p in (ws / ".gep" / "worktrees").iterdir()]  # no clone, index or record left
    assert git(ws, "rev-parse", "HEAD") == head and git(ws, "status", "--porcelain") == ""
    subprocess.run(["git", "-C", str(ws), "apply", "--check", str(patch)], check=True)
