"""Odd paths (gep/git/*): a newline, spaces and unicode in the workspace path and in file names work end to
end, in a clone and in prompt mode; opening a repository refuses what it cannot use in one line; the
workspace lock waits, then names its holder."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from git_scenario import (
    ODD,
    UNICODE,
    agent_edit,
    commit_clone,
    files_of,
    git,
    make_repo,
    snapshot,
    user_edits,
)

from gep.core.errors import WorkspaceError
from gep.git import (
    abandon_in_place,
    begin_in_place,
    clone_change,
    commit_in_place,
    deliver,
    discard_clone,
    holds_lock,
    in_place_change,
    open_clone,
    open_repo,
    workspace_lock,
)
from gep.git.plumbing import shell_quote

ODD_DIR = "we ird\nspäce ünï"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = make_repo(tmp_path / ODD_DIR / "ws")
    user_edits(path)
    return path


def test_isolated_cycle_with_odd_workspace_and_file_names(ws: Path) -> None:
    repo = open_repo(ws)
    rec = open_clone(repo, "evt_1", [".venv"])
    # the agent's own git works in its clone (it borrows the user's objects through a relative alternates
    # entry: an absolute one, as `git clone --shared` writes, breaks on this path)
    assert git(rec.path, "log", "--format=%s") == "second\ninitial\n"
    assert git(rec.path, "status", "--porcelain") == ""
    agent_edit(rec.path)
    (rec.path / "new\nline.py").write_text("A = 1\n")
    (rec.path / "ça va.py").write_text("B = 2\n")
    change = clone_change(repo, rec)
    assert {"new\nline.py", "ça va.py"} <= {f.path for f in change.committable}
    before = snapshot(ws)
    d = deliver(repo, rec, commit_clone(repo, rec))
    assert d.status == "landed"
    assert (ws / "new\nline.py").read_text() == "A = 1\n" and (ws / "ça va.py").read_text() == "B = 2\n"
    after = files_of(snapshot(ws))
    for rel in (ODD, UNICODE, "big.bin", ".env", "notes.txt"):
        assert after[rel] == files_of(before)[rel]


def test_failed_cycle_patch_carries_odd_names(ws: Path, tmp_path: Path) -> None:
    repo = open_repo(ws)
    rec = open_clone(repo, "evt_1")
    (rec.path / "new\nline.py").write_text("A = 1\n")
    rescue = discard_clone(repo, rec)
    assert rescue.patch is not None
    copy = tmp_path / "copy"
    git(tmp_path, "clone", "-q", str(ws), str(copy))
    assert "\n" not in rescue.command  # one line, the newline of the workspace path escaped ($'...')
    command = rescue.command.replace(f"-C {shell_quote(str(ws))} ", f"-C {shell_quote(str(copy))} ", 1)
    subprocess.run(["bash", "-c", command], check=True)  # the printed line, as a person would paste it
    assert (copy / "new\nline.py").read_text() == "A = 1\n"


def test_prompt_mode_with_odd_names(ws: Path) -> None:
    repo = open_repo(ws)
    rec = begin_in_place(repo, "evt_1", [".venv"])
    (ws / "new\nline.py").write_text("A = 1\n")
    (ws / ODD).write_text("the person's untracked file, edited\n")
    ch = in_place_change(repo, rec)
    assert ch.flagged == [ODD] and [f.path for f in ch.committable] == ["new\nline.py"]
    rec2 = begin_in_place(repo, "evt_2")
    (ws / "ça va.py").write_text("B = 2\n")
    abandon_in_place(repo, rec2)
    assert not (ws / "ça va.py").exists()
    done = commit_in_place(repo, rec, ch, "gep: odd\n")
    assert git(ws, "show", "--name-only", "-z", "--format=", done.commit or "").split("\0")[0] == "new\nline.py"


def test_open_repo_refuses_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError, match="does not exist"):
        open_repo(tmp_path / "nope")
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(WorkspaceError, match="not a git repository"):
        open_repo(plain)
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    git(fresh, "init", "-q")
    with pytest.raises(WorkspaceError, match="no commit yet"):
        open_repo(fresh)
    repo = make_repo(tmp_path / "repo")
    with pytest.raises(WorkspaceError, match="top directory"):
        open_repo(repo / "lib")
    bare = tmp_path / "bare.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    with pytest.raises(WorkspaceError, match="bare"):
        open_repo(bare)


def test_lock_waits_then_names_the_holder(ws: Path) -> None:
    code = ("import sys, time\nfrom gep.git import open_repo, workspace_lock\n"
            "with workspace_lock(open_repo(sys.argv[1]), 5):\n    print('locked', flush=True); time.sleep(3)\n")
    holder = subprocess.Popen([sys.executable, "-c", code, str(ws)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        repo = open_repo(ws)
        with pytest.raises(WorkspaceError, match=rf"another cycle is running on .* \(pid {holder.pid}\)") as exc:
            with workspace_lock(repo, 0.3):
                pass
        assert "\n" not in str(exc.value) and "we ird\\nspäce" in str(exc.value)  # one line
        waited = time.monotonic()
        with workspace_lock(repo, 15):
            assert holds_lock(repo) and time.monotonic() - waited > 1.0
            assert (ws / ".gep" / "cycle.lock").read_text().strip() == str(os.getpid())
        assert not holds_lock(repo)
    finally:
        holder.kill()
        holder.wait()
