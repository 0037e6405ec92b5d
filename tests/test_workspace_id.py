"""A workspace's id: kept in the git common dir, stable across moves, worktrees and a deleted .gep/."""

from __future__ import annotations

import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from conftest import ROOT, git, init_repo
from sqlmodel import select

from gep.core.config import Settings
from gep.core.errors import WorkspaceError
from gep.core.models import EvolutionEvent
from gep.core.workspace_id import id_file, workspace_identity
from gep.store import Store
from gep.store.tables import WorkspaceRow


def test_id_lives_in_the_git_common_dir_and_survives_losing_dot_gep(repo: Path) -> None:
    first = workspace_identity(repo)
    assert uuid.UUID(first.id) and first.path == str(repo.resolve()) and first.name == "repo"
    assert (repo / ".git" / "gep" / "workspace-id").read_text().strip() == first.id
    assert git(repo, "status", "--porcelain") == ""  # nothing shows in the work tree
    shutil.rmtree(repo / ".gep", ignore_errors=True)
    assert workspace_identity(repo).id == first.id


def test_moved_repository_keeps_its_id_and_the_store_learns_the_new_path(repo: Path, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fleet.db'}"
    settings = Settings(database_url=url)
    with Store.for_workspace(repo, settings) as s:
        wid = s.workspace_id
        s.add_event(EvolutionEvent(id="evt_1"))
    moved = repo.rename(tmp_path / "renamed")
    with Store.for_workspace(moved, settings) as s:
        assert s.workspace_id == wid and s.workspace_name == "renamed"
        assert s.last_event_id() == "evt_1"  # the history followed the repository
        with s.session() as db:
            rows = db.exec(select(WorkspaceRow)).all()
    assert [(r.id, r.path, r.name) for r in rows] == [(wid, str(moved.resolve()), "renamed")]


def test_worktrees_of_one_repository_share_the_id(repo: Path, tmp_path: Path) -> None:
    git(repo, "worktree", "add", "-q", str(tmp_path / "wt"), "-b", "side")
    assert workspace_identity(tmp_path / "wt").id == workspace_identity(repo).id


def test_separate_repositories_and_plain_folders_get_their_own_ids(tmp_path: Path) -> None:
    a, b = init_repo(tmp_path / "a"), init_repo(tmp_path / "b")
    plain = tmp_path / "plain"
    plain.mkdir()
    nested = a / "sub"
    nested.mkdir()
    ids = {workspace_identity(p).id for p in (a, b, plain, nested)}
    assert len(ids) == 4
    assert id_file(plain.resolve()) == plain.resolve() / ".gep" / "workspace-id"
    assert id_file(nested.resolve()) == nested.resolve() / ".gep" / "workspace-id"  # not the parent's id


def test_bad_id_file_and_missing_folder_are_one_line_errors(repo: Path, tmp_path: Path) -> None:
    (repo / ".git" / "gep").mkdir()
    (repo / ".git" / "gep" / "workspace-id").write_text("not a uuid\n")
    with pytest.raises(WorkspaceError, match="does not hold a workspace id") as err:
        workspace_identity(repo)
    assert "\n" not in str(err.value)
    with pytest.raises(WorkspaceError, match="not a directory"):
        workspace_identity(tmp_path / "missing")
    assert not (tmp_path / "missing").exists()


_CREATE = "import sys; from gep.core.workspace_id import workspace_identity; print(workspace_identity(sys.argv[1]).id)"


def test_processes_creating_the_id_at_once_agree(repo: Path) -> None:
    procs = [subprocess.Popen([sys.executable, "-c", _CREATE, str(repo)], stdout=subprocess.PIPE, text=True,
                              env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}) for _ in range(6)]
    ids = {p.communicate(timeout=60)[0].strip() for p in procs}
    assert len(ids) == 1 and ids == {workspace_identity(repo).id}
    assert sorted(p.name for p in (repo / ".git" / "gep").iterdir()) == ["workspace-home", "workspace-id"]  # no leftovers


def test_a_copy_gets_its_own_id_and_says_so_while_a_move_keeps_it(repo: Path, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 32, finding 9: `cp -r` of a workspace copied .git/gep/workspace-id, so the copy read and wrote
    the original's rows in a shared store."""
    original = workspace_identity(repo).id
    capsys.readouterr()
    shutil.copytree(repo, tmp_path / "copy", symlinks=True)
    copy = workspace_identity(tmp_path / "copy")
    assert copy.id != original and copy.copied_from == str(repo.resolve())
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{(tmp_path / 'copy').resolve()} is a copy of the workspace" in err
    assert workspace_identity(tmp_path / "copy").id == copy.id and workspace_identity(repo).id == original
    assert capsys.readouterr().err == ""  # said once
    # a copy of the copy, made after the original moved away: still a copy of the copy
    moved = repo.rename(tmp_path / "moved")
    assert workspace_identity(moved).id == original  # the original moved: the history follows it
    shutil.copytree(tmp_path / "copy", tmp_path / "copy2", symlinks=True)
    assert workspace_identity(tmp_path / "copy2").id not in (original, copy.id)


def test_an_id_from_before_the_copy_check_keeps_working(repo: Path, tmp_path: Path) -> None:
    wid = workspace_identity(repo).id
    (repo / ".git" / "gep" / "workspace-home").unlink()  # as every workspace made before issue 32 is
    assert workspace_identity(repo).id == wid  # kept (no data orphaned), and bound where it is
    assert (repo / ".git" / "gep" / "workspace-home").read_text().splitlines()[0] == str((repo / ".git" / "gep").resolve())
    shutil.copytree(repo, tmp_path / "later-copy", symlinks=True)
    assert workspace_identity(tmp_path / "later-copy").id != wid
