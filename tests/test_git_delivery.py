"""Delivering a cycle's commit (gep/git/delivery.py, landing.py, rebase.py) while a person works in the
same repository: their edits, new files, staged work and commits are never touched, whatever the outcome."""

from __future__ import annotations

from pathlib import Path

import pytest
from git_scenario import AGENT_PATHS, agent_edit, commit_clone, files_of, git, make_repo, snapshot, user_edits

from gep.git import clone_change, commit_change, deliver, discard_clone, open_clone, open_repo


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = make_repo(tmp_path / "ws")
    user_edits(path)
    return path


def user_works_meanwhile(ws: Path) -> None:
    (ws / "notes.txt").write_text("edited during the cycle\n")
    (ws / "new-during-cycle.txt").write_text("a new file of mine\n")
    (ws / "check.py").write_text((ws / "check.py").read_text() + "# my edit during the cycle\n")


def unchanged_except(before: dict[str, object], after: dict[str, object], paths: set[str]) -> None:
    """Every file of the user's side byte for byte as before, except ``paths``."""
    b, a = files_of(before), files_of(after)
    assert {k: v for k, v in a.items() if k not in paths} == {k: v for k, v in b.items() if k not in paths}


def test_success_fast_forwards_and_leaves_the_user_work_alone(ws: Path) -> None:
    repo = open_repo(ws)
    rec = open_clone(repo, "evt_1")
    agent_edit(rec.path)
    commit = commit_clone(repo, rec)
    user_works_meanwhile(ws)
    before = snapshot(ws)
    staged_before = git(ws, "diff", "--cached", "--name-only").split()
    d = deliver(repo, rec, commit)
    assert d.status == "landed" and d.branch == "main"
    assert git(ws, "rev-parse", "main").strip() == commit
    after = snapshot(ws)
    unchanged_except(before, after, AGENT_PATHS)
    assert (ws / "feature.py").read_text() == "VALUE = 1\n" and not (ws / "MEMORY.md").exists()
    assert (ws / "pkg" / "sub" / "new.py").exists()
    assert git(ws, "diff", "--cached", "--name-only").split() == staged_before  # staged work still staged
    status = git(ws, "status", "--porcelain").splitlines()
    assert not any(line[3:] in AGENT_PATHS for line in status)  # the landed paths are clean
    assert not rec.path.exists() and git(ws, "for-each-ref", "refs/gep/") == ""


def test_user_commit_meanwhile_is_rebased_on_then_validated_again(ws: Path) -> None:
    repo = open_repo(ws)
    rec = open_clone(repo, "evt_1")
    agent_edit(rec.path)
    commit = commit_clone(repo, rec)
    git(ws, "commit", "-q", "-m", "the user's commit during the cycle")  # their staged work
    user_commit = git(ws, "rev-parse", "HEAD").strip()
    user_works_meanwhile(ws)
    before = snapshot(ws)
    d = deliver(repo, rec, commit)
    assert d.status == "needs_revalidation" and d.record.base == user_commit
    assert git(ws, "rev-parse", "main").strip() == user_commit  # nothing landed yet
    # the clone now holds what would land: the user's commit and the cycle's change
    assert (rec.path / "draft.md").read_text() == "a staged new file\n"
    assert (rec.path / "feature.py").read_text() == "VALUE = 1\n"
    again = clone_change(repo, d.record)
    assert again.tree == git(ws, "rev-parse", f"{d.commit}^{{tree}}").strip()
    assert {f.path for f in again.committable} == AGENT_PATHS
    final = deliver(repo, d.record, d.commit)
    assert final.status == "landed"
    assert git(ws, "rev-parse", "main^").strip() == user_commit
    unchanged_except(before, snapshot(ws), AGENT_PATHS)


def test_conflicting_user_commit_keeps_the_cycle_on_its_branch(ws: Path) -> None:
    repo = open_repo(ws)
    rec = open_clone(repo, "evt_1")
    agent_edit(rec.path)
    commit = commit_clone(repo, rec)
    (ws / "app.py").write_text("def add(a, b):\n    return b + a\n")
    git(ws, "commit", "-q", "-am", "the user rewrites app.py")
    before = snapshot(ws)
    d = deliver(repo, rec, commit)
    assert d.status == "kept" and d.branch == "gep/evt_1"
    assert d.command == f"git -C {ws} merge gep/evt_1"
    assert "conflicts in app.py" in d.reasons[0]
    assert git(ws, "rev-parse", "gep/evt_1").strip() == commit
    assert snapshot(ws) == before


@pytest.mark.parametrize("touch", ["modified", "staged", "untracked at a new path", "ignored at a new path",
                                   "ignored file where a folder goes"])
def test_user_edit_on_a_path_of_the_commit_is_never_overwritten(ws: Path, touch: str) -> None:
    repo = open_repo(ws)
    rec = open_clone(repo, "evt_1")
    agent_edit(rec.path)
    (rec.path / "out.log").write_text("x\n")
    commit = commit_clone(repo, rec)
    if touch == "modified":
        (ws / "app.py").write_text("my own version\n")
    elif touch == "staged":
        (ws / "app.py").write_text("my own version\n")
        git(ws, "add", "app.py")
        (ws / "app.py").write_text("def add(a, b):\n    return a + b\n")
    elif touch == "untracked at a new path":
        (ws / "feature.py").write_text("mine\n")
    elif touch == "ignored at a new path":  # git itself would overwrite an ignored file: the engine does not
        (ws / "pkg" / "sub").mkdir(parents=True)
        (ws / "pkg" / "sub" / "new.py").write_text("mine\n")
        with (ws / ".git" / "info" / "exclude").open("a") as fh:
            fh.write("pkg/\n")
    else:
        (ws / "pkg").write_text("mine\n")
        with (ws / ".git" / "info" / "exclude").open("a") as fh:
            fh.write("/pkg\n")
    before = snapshot(ws)
    d = deliver(repo, rec, commit)
    assert d.status == "kept", d
    assert "your uncommitted changes touch" in d.reasons[0]
    assert snapshot(ws) == before


def test_a_git_command_of_the_user_holding_the_index_keeps_the_cycle(ws: Path) -> None:
    repo = open_repo(ws)
    rec = open_clone(repo, "evt_1")
    agent_edit(rec.path)
    commit = commit_clone(repo, rec)
    (ws / ".git" / "index.lock").write_text("")
    before = snapshot(ws)
    d = deliver(repo, rec, commit)
    assert d.status == "kept" and "index.lock" in d.reasons[0]
    assert git(ws, "rev-parse", "main").strip() == rec.baseline  # swapped back, compare-and-swap
    (ws / ".git" / "index.lock").unlink()
    assert snapshot(ws) == before


def test_a_user_commit_at_the_last_instant_is_never_overwritten(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gep.git.landing as landing

    repo = open_repo(ws)
    rec = open_clone(repo, "evt_1")
    agent_edit(rec.path)
    commit = commit_clone(repo, rec)
    checked = landing.dirty_paths

    def check_then_user_commits(*args: object) -> list[str]:
        found = checked(*args)  # type: ignore[arg-type]
        git(ws, "commit", "-q", "-m", "the user commits right after the engine looked")
        return found

    monkeypatch.setattr(landing, "dirty_paths", check_then_user_commits)
    theirs_before = snapshot(ws)["files"]
    d = deliver(repo, rec, commit)
    assert d.status == "kept" and "moved meanwhile" in d.reasons[0]  # compare-and-swap refused
    assert git(ws, "log", "-1", "--format=%s", "main").strip() == "the user commits right after the engine looked"
    assert snapshot(ws)["files"] == theirs_before


def test_failure_leaves_everything_of_the_user_and_saves_the_change(ws: Path) -> None:
    before = snapshot(ws)
    repo = open_repo(ws)
    rec = open_clone(repo, "evt_1")
    agent_edit(rec.path)
    user_works_meanwhile(ws)
    during = snapshot(ws)
    rescue = discard_clone(repo, rec, clone_change(repo, rec))
    assert rescue.patch is not None and rescue.patch.is_file()
    assert snapshot(ws) == during and during != before
    assert git(ws, "rev-parse", "main").strip() == rec.baseline


CRLF_FILES = {"README.md": "hello\n", "app.py": "x = 1\n", ".gitattributes": "* text=auto\n",
              ".gitignore": ".env\n", "MEMORY.md": "m\n"}


@pytest.mark.parametrize("autocrlf", [None, "true"])
def test_crlf_with_text_auto_comes_out_as_git_would_check_it_out(tmp_path: Path, autocrlf: str | None) -> None:
    ws = make_repo(tmp_path / "ws", CRLF_FILES)
    if autocrlf:
        git(ws, "config", "core.autocrlf", autocrlf)
    (ws / "README.md").write_bytes(b"hello\r\nmy CRLF edit\r\n")  # the user's edit, CRLF, uncommitted
    repo = open_repo(ws)
    rec = open_clone(repo, "evt_1")
    (rec.path / "app.py").write_bytes(b"x = 1\r\ny = 2\r\n")  # the agent writes CRLF too
    commit = commit_clone(repo, rec)
    d = deliver(repo, rec, commit)
    assert d.status == "landed"
    assert (ws / "README.md").read_bytes() == b"hello\r\nmy CRLF edit\r\n"  # the user's bytes untouched
    assert git(ws, "cat-file", "-p", f"{commit}:app.py") == "x = 1\ny = 2\n"  # normalised in the commit
    # as a fresh checkout would write it
    fresh = tmp_path / "fresh"
    git(tmp_path, "clone", "-q", *(["-c", f"core.autocrlf={autocrlf}"] if autocrlf else []), str(ws), str(fresh))
    assert (ws / "app.py").read_bytes() == (fresh / "app.py").read_bytes()
    assert "app.py" not in git(ws, "status", "--porcelain")


def test_commit_on_a_moved_base_is_refused(ws: Path) -> None:
    repo = open_repo(ws)
    rec = open_clone(repo, "evt_1")
    agent_edit(rec.path)
    change = clone_change(repo, rec)
    rec.base = git(ws, "rev-parse", "HEAD~1").strip()
    with pytest.raises(ValueError, match="measured against"):
        commit_change(repo, rec, change, "x")
