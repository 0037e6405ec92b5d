"""Prompt mode in the person's own tree (gep/git/inplace*.py): the baseline touches nothing, the commit
holds exactly the cycle's paths (not the person's earlier uncommitted edits), and abandoning saves a patch
before putting back only the cycle's paths, byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest
from git_scenario import BIG, ODD, UNICODE, files_of, git, make_repo, snapshot, user_edits

from gep.core.errors import WorkspaceError
from gep.git import abandon_in_place, begin_in_place, commit_in_place, in_place_change, open_repo
from gep.git.inplace import load_in_place


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = make_repo(tmp_path / "ws")
    user_edits(path)
    return path


def person_works(ws: Path) -> None:
    """The person (or their agent) during the cycle: a clean file edited, a dirty one edited further,
    a file created, one deleted, an ignored secret changed."""
    (ws / "app.py").write_text('def add(a, b):\n    """Sum."""\n    return a + b\n')
    (ws / "README.md").write_text("hello\nwork in progress\nmore during the cycle\n")
    (ws / "feature.py").write_text("VALUE = 1\n")
    (ws / "check.py").unlink()
    (ws / ".env").write_text("API_KEY=changed\n")


def test_begin_touches_nothing_and_records_the_dirty_paths(ws: Path) -> None:
    before = snapshot(ws)
    index_before = (ws / ".git" / "index").read_bytes()
    repo = open_repo(ws)
    rec = begin_in_place(repo, "evt_1", [".venv"])
    assert snapshot(ws) == before
    assert (ws / ".git" / "index").read_bytes() == index_before  # not even rewritten
    assert sorted(rec.dirty) == sorted(["README.md", "draft.md", "lib/util.py", "notes.txt", ODD, UNICODE,
                                        "big.bin"])
    assert rec.unsaved == []
    assert {f.path for f in rec.ignored} >= {".env", "build/out.bin"}
    assert not any(f.path.startswith(".venv/") for f in rec.ignored)
    assert git(ws, "rev-parse", "refs/gep/baseline/evt_1").strip() == rec.raw
    assert load_in_place(repo, "evt_1") == rec
    assert in_place_change(repo, rec).change.empty


def test_change_flags_dirty_paths_and_sees_ignored_ones(ws: Path) -> None:
    repo = open_repo(ws)
    rec = begin_in_place(repo, "evt_1", [".venv"])
    person_works(ws)
    ch = in_place_change(repo, rec)
    by = {f.path: f for f in ch.change.files}
    assert ch.flagged == ["README.md"]
    assert {f.path for f in ch.committable} == {"app.py", "feature.py", "check.py"}
    assert by[".env"].kind == "ignored" and by[".env"].status == "modified"


def test_commit_holds_only_the_cycle_paths_and_leaves_the_person_work(ws: Path) -> None:
    repo = open_repo(ws)
    rec = begin_in_place(repo, "evt_1", [".venv"])
    person_works(ws)
    (ws / ".gitignore").write_text(".venv/\n")  # un-ignores .env: still never committed
    ch = in_place_change(repo, rec)
    assert {f.path for f in ch.committable} == {"app.py", "feature.py", "check.py", ".gitignore"}
    before = snapshot(ws)
    staged = git(ws, "diff", "--cached", "--name-only").split()
    done = commit_in_place(repo, rec, ch, "gep(repair): x\n\nGEP-Event: evt_1\n")
    assert done.commit and done.flagged == ["README.md"]
    assert set(git(ws, "show", "--name-only", "--format=", done.commit).split()) == {
        "app.py", "feature.py", "check.py", ".gitignore"}
    assert files_of(snapshot(ws)) == files_of(before)  # not one file of the person's written
    assert git(ws, "diff", "--cached", "--name-only").split() == staged  # their staged work still staged
    status = git(ws, "status", "--porcelain").splitlines()
    assert " M README.md" in status  # flagged: still the person's uncommitted edit
    assert not any(line[3:] in ("app.py", "feature.py", "check.py") for line in status)


def test_crlf_edit_with_text_auto_stays_crlf(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws", {"a.txt": "one\n", ".gitattributes": "* text=auto\n", "MEMORY.md": "m\n"})
    repo = open_repo(ws)
    rec = begin_in_place(repo, "evt_1")
    (ws / "a.txt").write_bytes(b"one\r\ntwo\r\n")
    ch = in_place_change(repo, rec)
    done = commit_in_place(repo, rec, ch, "gep: crlf\n")
    assert done.commit
    assert (ws / "a.txt").read_bytes() == b"one\r\ntwo\r\n"
    assert git(ws, "cat-file", "-p", f"{done.commit}:a.txt") == "one\ntwo\n"
    assert "a.txt" not in git(ws, "status", "--porcelain")


def test_untracked_with_rm_cached_then_edited_is_committed_without_losing_anything(ws: Path) -> None:
    repo = open_repo(ws)
    git(ws, "rm", "-q", "--cached", "app.py")
    rec = begin_in_place(repo, "evt_1")
    (ws / "app.py").write_text("edited after rm --cached\n")
    ch = in_place_change(repo, rec)
    assert ch.flagged == ["app.py"]  # it was uncommitted work (an untracking) before the cycle
    commit_in_place(repo, rec, ch, "gep: x\n")
    assert (ws / "app.py").read_text() == "edited after rm --cached\n"


def test_person_commit_meanwhile_the_cycle_commits_on_top(ws: Path) -> None:
    repo = open_repo(ws)
    rec = begin_in_place(repo, "evt_1")
    (ws / "app.py").write_text("changed\n")
    git(ws, "commit", "-q", "-m", "the person commits their staged work")
    mine = git(ws, "rev-parse", "HEAD").strip()
    done = commit_in_place(repo, rec, in_place_change(repo, rec), "gep: x\n")
    assert done.commit and git(ws, "rev-parse", "HEAD^").strip() == mine
    assert git(ws, "show", "--name-only", "--format=", "HEAD").split() == ["app.py"]


def test_abandon_saves_a_patch_then_restores_only_the_cycle_paths(ws: Path, tmp_path: Path) -> None:
    (ws / ".git" / "info" / "attributes").write_text("* text=auto\n")  # git stores LF, the person has CRLF
    (ws / "README.md").write_bytes(b"hello\r\nmy CRLF work in progress\r\n")
    before = snapshot(ws)
    repo = open_repo(ws)
    rec = begin_in_place(repo, "evt_1", [".venv"])
    person_works(ws)
    during = snapshot(ws)
    rescue = abandon_in_place(repo, rec)
    assert rescue.patch == ws / ".gep" / "rescued" / "evt_1.patch"
    assert rescue.command == f"git -C {ws} apply {rescue.patch}"
    assert sorted(rescue.restored) == ["README.md", "app.py", "check.py", "feature.py"]
    after = snapshot(ws)
    # the cycle's paths are back, byte for byte (the CRLF work in progress included); .env (ignored,
    # never part of a patch) is left as the person made it; index and stash as before
    expected = dict(files_of(before))
    expected[".env"] = files_of(during)[".env"]
    assert files_of(after) == expected
    assert after["index"] == before["index"] and after["stash"] == before["stash"]
    assert git(ws, "for-each-ref", "refs/gep/") == "" and load_in_place(repo, "evt_1") is None
    # and the printed line brings the change back
    git(ws, "apply", str(rescue.patch))
    back = files_of(snapshot(ws))
    for rel in ("app.py", "feature.py", "README.md"):
        assert back[rel] == files_of(during)[rel]
    assert "check.py" not in back


def test_abandon_leaves_a_file_it_has_no_copy_of(ws: Path) -> None:
    repo = open_repo(ws)
    rec = begin_in_place(repo, "evt_1", copy_max_bytes=1024)
    assert "big.bin" in rec.unsaved
    (ws / "big.bin").write_bytes(b"rewritten during the cycle")
    rescue = abandon_in_place(repo, rec)
    assert rescue.kept == ["big.bin"]
    assert (ws / "big.bin").read_bytes() == b"rewritten during the cycle"
    assert BIG > 1024


def test_begin_refuses_a_merge_in_progress_naming_it(ws: Path) -> None:
    (ws / ".git" / "MERGE_HEAD").write_text(git(ws, "rev-parse", "HEAD"))
    with pytest.raises(WorkspaceError, match="a merge is in progress"):
        begin_in_place(open_repo(ws), "evt_1")
