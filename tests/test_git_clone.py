"""A cycle's clone (gep/git/clone.py, isolated.py) on real repositories: made without touching the user's
side, isolated from every git operation an agent can run in it, and read by the engine without trusting it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from git_scenario import (
    AGENT_PATHS,
    BIG,
    agent_edit,
    commit_clone,
    git,
    make_repo,
    snapshot,
    user_edits,
)

from gep.core.errors import WorkspaceError
from gep.git import (
    clone_change,
    clone_git_actions,
    deliver,
    discard_clone,
    drift_paths,
    open_clone,
    open_repo,
)
from gep.git.clone import clone_paths


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = make_repo(tmp_path / "ws")
    user_edits(path)
    return path


def test_open_clone_leaves_the_user_side_as_it_was(ws: Path) -> None:
    before = snapshot(ws)
    refs_before = git(ws, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads", "refs/tags")
    repo = open_repo(ws)
    rec = open_clone(repo, "evt_1", [".venv", "node_modules", "missing"])
    assert snapshot(ws) == before
    assert git(ws, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads", "refs/tags") == refs_before
    # the clone: the baseline commit's files only, detached, own refs; the user's ignored env linked
    assert (rec.path / "app.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert not (rec.path / "notes.txt").exists() and not (rec.path / ".env").exists()
    assert (rec.path / "README.md").read_text() == "hello\n"  # the baseline, not the user's edit
    assert (rec.path / ".venv").is_symlink() and os.readlink(rec.path / ".venv") == str(ws / ".venv")
    assert [link.path for link in rec.env_links] == [".venv"]
    assert git(rec.path, "rev-parse", "HEAD").strip() == rec.baseline == git(ws, "rev-parse", "HEAD").strip()
    assert subprocess.run(["git", "symbolic-ref", "-q", "HEAD"], cwd=rec.path).returncode == 1  # detached
    assert git(rec.path, "status", "--porcelain") == ""  # the link is excluded in the clone too
    assert git(ws, "rev-parse", f"refs/gep/baseline/{rec.event_id}").strip() == rec.baseline
    assert (rec.path / ".git" / "objects" / "info" / "alternates").read_text().startswith("../")
    assert clone_git_actions(rec) == [] and clone_change(repo, rec).empty


def test_open_clone_refuses_a_bad_id_and_a_second_clone(ws: Path) -> None:
    repo = open_repo(ws)
    with pytest.raises(WorkspaceError, match="cannot name a clone"):
        open_clone(repo, "../evil")
    open_clone(repo, "evt_1")
    with pytest.raises(WorkspaceError, match="already exists.*gep recover"):
        open_clone(repo, "evt_1")


def test_change_counts_files_lines_bytes_ignored_and_refused(ws: Path) -> None:
    repo = open_repo(ws)
    rec = open_clone(repo, "evt_1", [".venv"])
    agent_edit(rec.path)
    (rec.path / "huge.dat").write_bytes(b"x" * BIG)
    (rec.path / ".env").write_text("STOLEN=1\n")  # ignored by the baseline: seen, never committed
    os.mkfifo(rec.path / "pipe")
    (rec.path / "nested").mkdir()
    git(rec.path / "nested", "init", "-q")
    change = clone_change(repo, rec)
    by = {f.path: f for f in change.files}
    assert {f.path for f in change.committable} == AGENT_PATHS | {"huge.dat"}
    assert by["app.py"].added == 1 and by["MEMORY.md"].status == "deleted" and by["MEMORY.md"].deleted == 2
    assert by["huge.dat"].bytes == BIG
    assert by[".env"].kind == "ignored" and by["build.log"].kind == "ignored"
    assert by["nested/"].kind == "refused"  # a repository inside: cannot be committed, named
    assert "pipe" not in by  # a FIFO is invisible to git: never read (no hang), never committed
    total = change.radius()
    assert total.files == len(change.files) and total.bytes >= BIG + 9
    assert change.radius(["tracked"]).files == 5
    (rec.path / "zero").symlink_to("/dev/zero")  # a link is committed as a link, never read through
    assert {f.path: f for f in clone_change(repo, rec).files}["zero"].bytes == len("/dev/zero")
    tree = git(ws, "ls-tree", "-r", "--name-only", change.tree).split("\n")
    assert ".env" not in tree and "build.log" not in tree and ".venv" not in tree and "feature.py" in tree


def test_baseline_rules_decide_what_is_ignored_whatever_the_change_does_to_gitignore(ws: Path) -> None:
    repo = open_repo(ws)
    rec = open_clone(repo, "evt_1")
    (rec.path / ".gitignore").write_text("*.py\n")  # un-ignores .env, ignores the new module
    (rec.path / ".env").write_text("SECRET=1\n")
    (rec.path / "feature.py").write_text("VALUE = 1\n")
    change = clone_change(repo, rec)
    by = {f.path: f for f in change.files}
    assert by[".env"].kind == "ignored"
    assert by["feature.py"].kind == "tracked" and by[".gitignore"].kind == "tracked"
    names = git(ws, "ls-tree", "-r", "--name-only", change.tree).split("\n")
    assert ".env" not in names and "feature.py" in names


# a cycle killed (SIGKILL) while the baseline's ignore rules are checked: the check's scratch work tree is left
KILLED_IN_THE_CHECK = """
import os, signal, sys
from pathlib import Path
from gep.git import clone_change, open_clone, open_repo
from gep.git import ignore
ignore._materialize = lambda *_a: os.kill(os.getpid(), signal.SIGKILL)
repo = open_repo(Path(sys.argv[1]))
rec = open_clone(repo, "evt_1")
(rec.path / ".env").write_text("SECRET=1\\n")
clone_change(repo, rec)
"""


def test_a_cycle_killed_while_checking_ignore_rules_leaves_nothing_once_recovered(ws: Path, tmp_path: Path) -> None:
    """The baseline's `.gitignore` files are written to a scratch work tree: it was in the system's temporary
    folder, where a cycle killed meanwhile left it for good; now in `.gep/tmp`, which recovery empties."""
    from gep.git import recover_git, workspace_lock

    system_tmp = tmp_path / "system-tmp"
    system_tmp.mkdir()
    run = subprocess.run([sys.executable, "-c", KILLED_IN_THE_CHECK, str(ws)], capture_output=True, text=True,
                         env={**os.environ, "TMPDIR": str(system_tmp)}, timeout=60)
    assert run.returncode == -9, run.stderr
    assert not list(system_tmp.iterdir())  # nothing in the system's temporary folder
    assert "ignore-" in {p.name[:7] for p in (ws / ".gep" / "tmp").iterdir()}  # beside scan's own scratch
    repo = open_repo(ws)
    with workspace_lock(repo, 5):
        recover_git(repo, live=[])
    assert not (ws / ".gep" / "tmp").exists()


AGENT_GIT = {
    "stash clear": [["stash", "clear"]],
    "reflog expire + gc --prune=now": [["reflog", "expire", "--expire=now", "--all"], ["gc", "-q", "--prune=now"]],
    "branch -D main": [["branch", "-D", "main"]],
    "checkout -b": [["checkout", "-q", "-b", "agent-branch"]],
    "detached HEAD elsewhere": [["checkout", "-q", "--detach", "HEAD~1"]],
    "reset --hard HEAD~1": [["reset", "-q", "--hard", "HEAD~1"]],
    "tag -f": [["tag", "-f", "v1", "HEAD~1"]],
    "refs/replace": [["replace", "-f", "HEAD", "HEAD~1"]],
    "commit": [["add", "-A"], ["commit", "-q", "-m", "agent commits on its own"]],
    "stash": [["stash", "-q"]],
}


@pytest.mark.parametrize("op", list(AGENT_GIT))
def test_agent_git_in_its_clone_never_reaches_the_user(ws: Path, op: str) -> None:
    before = snapshot(ws)
    user_refs = git(ws, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads", "refs/tags",
                    "refs/replace", "refs/stash")
    stash_before = git(ws, "stash", "list")
    repo = open_repo(ws)
    rec = open_clone(repo, "evt_1")
    agent_edit(rec.path)
    for args in AGENT_GIT[op]:
        git(rec.path, *args)
    assert snapshot(ws) == before
    assert git(ws, "stash", "list") == stash_before
    assert git(ws, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads", "refs/tags",
               "refs/replace", "refs/stash") == user_refs
    assert subprocess.run(["git", "fsck", "--no-dangling"], cwd=ws, capture_output=True).returncode == 0
    found = clone_git_actions(rec)
    if op in ("stash clear", "reflog expire + gc --prune=now"):
        assert found == []  # harmless in the clone: nothing to fail for
        delivered = deliver(repo, rec, commit_clone(repo, rec))  # and the cycle still works end to end
        assert delivered.status == "landed"
    else:
        assert found, op  # a commit, checkout, reset, branch, tag, replace or stash in the clone is named
        discard_clone(repo, rec)
        assert snapshot(ws) == before


def test_engine_never_runs_what_the_agent_plants_in_the_clone_config(ws: Path, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    script = tmp_path / "evil.sh"
    script.write_text(f"#!/bin/sh\ntouch {marker}\ncat\n")
    script.chmod(0o755)
    git_before = snapshot(ws)["git"]
    repo = open_repo(ws)
    rec = open_clone(repo, "evt_1")
    agent_edit(rec.path)
    for key, value in (("core.fsmonitor", str(script)), ("filter.evil.clean", str(script)),
                       ("filter.evil.smudge", str(script)), ("core.hooksPath", str(tmp_path))):
        git(rec.path, "config", key, value)
    (rec.path / ".gitattributes").write_text("* filter=evil\n")
    (tmp_path / "post-commit").write_text(f"#!/bin/sh\ntouch {marker}\n")
    change = clone_change(repo, rec)
    assert deliver(repo, rec, commit_clone(repo, rec)).status == "landed"
    assert not marker.exists()
    assert change.committable
    assert snapshot(ws)["git"] == git_before  # the agent's config and hooks stayed in its clone


def test_drift_names_what_validation_changed(ws: Path) -> None:
    repo = open_repo(ws)
    rec = open_clone(repo, "evt_1")
    agent_edit(rec.path)
    before = clone_change(repo, rec)
    (rec.path / "__pycache__").mkdir()
    (rec.path / "__pycache__" / "app.pyc").write_bytes(b"\0")  # ignored output: not drift
    assert drift_paths(repo, before, clone_change(repo, rec)) == []
    (rec.path / "app.py").write_text("broken by a check\n")
    assert drift_paths(repo, before, clone_change(repo, rec)) == ["app.py"]


def test_discard_writes_the_patch_that_brings_the_change_back(ws: Path, tmp_path: Path) -> None:
    before = snapshot(ws)
    repo = open_repo(ws)
    rec = open_clone(repo, "evt_1", [".venv"])
    agent_edit(rec.path)
    (rec.path / "bin.dat").write_bytes(bytes(range(256)))
    change = clone_change(repo, rec)
    rescue = discard_clone(repo, rec, change)
    assert rescue.patch == ws / ".gep" / "rescued" / "evt_1.patch"
    assert rescue.command == f"git -C {ws} apply {rescue.patch}"
    clone, index, record = clone_paths(repo, "evt_1")
    assert not clone.exists() and not index.exists() and not record.exists()
    assert (ws / ".venv" / "lib" / "site.py").exists()  # the link was removed, never followed
    assert git(ws, "for-each-ref", "refs/gep/") == ""
    assert snapshot(ws) == before
    # the patch reproduces the change exactly on the baseline
    copy = tmp_path / "copy"
    git(tmp_path, "clone", "-q", str(ws), str(copy))
    git(copy, "apply", str(rescue.patch))
    git(copy, "add", "-A")
    assert git(copy, "write-tree").strip() == change.tree


def test_config_values_read_as_git_config_get_does(tmp_path: Path) -> None:
    """The settings a clone copies, read together as `git config --get` reads each: the last value of a repeated
    key, a key set without a value, a subsection's case kept and regular-expression characters taken literally."""
    from gep.git.plumbing import Git

    repo = make_repo(tmp_path / "ws")
    with open(repo / ".git" / "config", "a") as fh:
        fh.write('[core]\n\tsymlinks\n\tautocrlf = input\n\tautocrlf = false\n[filter "L.fs"]\n\tclean = lfs %f\n'
                 '[filter "Lxfs"]\n\tclean = other\n')
    keys = ("core.autoCRLF", "core.symlinks", "core.eol", "filter.L.fs.clean", "filter.l.fs.clean")
    found = Git(repo).config_values(keys)
    assert found == {"core.autoCRLF": "false", "core.symlinks": None, "filter.L.fs.clean": "lfs %f"}
    assert found["core.autoCRLF"] == git(repo, "config", "--get", "core.autocrlf").strip()


def test_a_clone_keeps_a_boolean_the_user_set_without_a_value(ws: Path) -> None:
    with open(ws / ".git" / "config", "a") as fh:
        fh.write("[core]\n\tprecomposeunicode\n")
    clone = open_clone(open_repo(ws), "evt_1")
    assert git(clone.path, "config", "--get", "--type=bool", "core.precomposeunicode").strip() == "true"
    discard_clone(open_repo(ws), clone)
