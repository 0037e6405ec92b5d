"""Landing after a person's `gep solidify` (issue 44, point 2): the in-place commit writes index entries
without stat data, and an edit made in the same second as the index write is racily clean; a clean tree must
still land (no "not uptodate"), and a merge hint names the person's edits to commit or stash first."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from conftest import git, init_repo

from gep.git import (
    begin_in_place,
    close_in_place,
    commit_in_place,
    deliver,
    in_place_change,
    open_clone,
    open_repo,
)
from gep.git.isolated import clone_change, commit_change
from gep.git.kept import kept_branch

FILES = {"app.py": "def add(a, b):\n    return a + b\n", "README.md": "hello\n"}


def solidified_by_hand(ws: Path) -> None:
    """The person edits app.py and `gep solidify` commits it at once (the same second)."""
    repo = open_repo(ws)
    rec = begin_in_place(repo, "evt_person", [".venv"])
    (ws / "app.py").write_text("def add(a, b):\n    return b + a\n")
    done = commit_in_place(repo, rec, in_place_change(repo, rec), "gep(repair): add\n\nGEP-Event: evt_person\n")
    close_in_place(repo, rec)
    assert done.commit is not None
    now = (ws / ".git" / "index").stat().st_mtime
    os.utime(ws / "app.py", (now, now))  # racily clean: the file's time is the index's own


def agent_commit(ws: Path, text: str) -> tuple[object, object, str]:
    repo = open_repo(ws)
    rec = open_clone(repo, "evt_agent")
    (rec.path / "app.py").write_text(text)
    change = clone_change(repo, rec)
    return repo, rec, commit_change(repo, rec, change, "gep(repair): agent\n\nGEP-Event: evt_agent\n")


def test_a_cycle_lands_on_a_clean_tree_right_after_a_solidify_of_the_same_file(tmp_path: Path) -> None:
    ws = init_repo(tmp_path / "ws", FILES)
    solidified_by_hand(ws)
    clean = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ws, capture_output=True,
                           text=True, env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"}, check=True)
    assert clean.stdout == ""  # clean, as git says (a status that does not refresh the index for us)
    repo, rec, commit = agent_commit(ws, "def add(a, b):\n    return a + b  # the agent's\n")
    d = deliver(repo, rec, commit)  # type: ignore[arg-type]
    assert d.status == "landed", d.reasons
    assert (ws / "app.py").read_text().endswith("# the agent's\n")
    assert git(ws, "status", "--porcelain", "--untracked-files=no").strip() == ""


def test_the_merge_hint_names_the_files_to_commit_or_stash_first(tmp_path: Path) -> None:
    ws = init_repo(tmp_path / "ws", FILES)
    repo, rec, commit = agent_commit(ws, "def add(a, b):\n    return a + b  # the agent's\n")
    (ws / "app.py").write_text("def add(a, b):\n    return a + b  # mine, not committed\n")
    d = deliver(repo, rec, commit)  # type: ignore[arg-type]
    assert d.status == "kept" and d.branch == "gep/evt_agent"
    hint = kept_branch(open_repo(ws), "evt_agent", "gep/evt_agent").hint()
    assert hint.startswith("commit or stash your edits to app.py first, then: git -C "), hint
    assert hint.endswith("merge gep/evt_agent")
    git(ws, "stash", "-q")
    assert kept_branch(open_repo(ws), "evt_agent", "gep/evt_agent").hint().startswith("git -C ")
