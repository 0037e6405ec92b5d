"""The cycle's tree (gep/cycle/tree.py) and its delivery (gep/cycle/commit_change.py) on real repositories: made without
touching the user's side, read the same way in both modes, committed with the right identity and no hooks."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from conftest import init_repo
from crash_driver import git, make_scenario, mutate, snapshot, user_dirty_edits

from gep.core.config import Settings
from gep.core.errors import PendingCycleError, WorkspaceError
from gep.core.models import CycleRun
from gep.cycle.commit_change import deliver_change
from gep.cycle.context import CycleRequest, open_cycle
from gep.cycle.tree import CycleTree
from gep.git import ensure_gep_dir, open_repo
from gep.store import Store

MESSAGE = "gep(repair): test\n\nGEP-Event: evt_1\n"


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    return make_scenario(tmp_path / "ws")


def _no_revalidation(_tc: object) -> list[str]:
    raise AssertionError("nothing moved: no rebase, no second validation")


# ------------------------------------------------------------------ opening


def test_open_refuses_missing_non_git_uncommitted_and_subdirectory(tmp_path: Path) -> None:
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
    repo = init_repo(tmp_path / "repo", {"a/b.txt": "x\n"})
    with pytest.raises(WorkspaceError, match="top directory"):
        open_repo(repo / "a")
    assert open_repo(repo).path == repo.resolve()


def test_ensure_gep_dir_excludes_it_once(repo: Path) -> None:
    ensure_gep_dir(open_repo(repo))
    ensure_gep_dir(open_repo(repo))
    (repo / ".gep" / "gep.db").write_text("x")
    exclude = (repo / ".git" / "info" / "exclude").read_text()
    assert exclude.count(".gep/") == 1
    assert git(repo, "status", "--porcelain") == ""


@pytest.mark.parametrize("mode", ["clone", "in_place"])
def test_a_dirty_tree_is_a_baseline_like_any_other_and_stays_untouched(scenario: Path, mode: str) -> None:
    user_dirty_edits(scenario)
    before = snapshot(scenario)
    tree = CycleTree.open(open_repo(scenario), "evt_1", Settings(), mode, "agent")  # type: ignore[arg-type]
    assert snapshot(scenario) == before and tree.mode == mode
    assert tree.path == (scenario / ".gep" / "worktrees" / "evt_1" if mode == "clone" else scenario.resolve())
    tc = tree.read()
    assert tc.empty and tc.change.files == []  # the user's uncommitted work is not the cycle's change
    tree.close()
    assert snapshot(scenario) == before and git(scenario, "for-each-ref", "refs/gep/") == ""


def test_a_second_cycle_is_refused_while_one_awaits_changes(scenario: Path) -> None:
    with Store.for_workspace(scenario) as store:
        store.save_run(CycleRun(event_id="evt_1", workspace=str(scenario), head_sha=open_repo(scenario).head(),
                                status="awaiting_changes", mode="in_place"))
    with pytest.raises(PendingCycleError, match="evt_1.*awaiting changes.*gep solidify"):
        open_cycle(CycleRequest(workspace=scenario, mutator="prompt"), env={})


# ------------------------------------------------------------------ reading the change


def test_the_change_is_the_cycles_only(scenario: Path) -> None:
    (scenario / "notes.txt").write_text("the user's untracked file, edited\n")
    tree = CycleTree.open(open_repo(scenario), "evt_1", Settings(), "clone", "agent")
    mutate(tree.path)
    tc = tree.read()
    by_path = {f.path: f for f in tc.change.files}
    assert tc.paths == ["app.py", "feature.py", "pkg/sub/new.py", "slow.py"]
    assert by_path["build.log"].kind == "ignored"  # seen, never committed
    assert (by_path["app.py"].added, by_path["app.py"].deleted, by_path["app.py"].status) == (1, 0, "modified")
    assert by_path["slow.py"].status == "deleted" and by_path["slow.py"].deleted == 3
    assert tc.radius.files == 4 and tc.radius.lines == 1 + 1 + 1 + 3
    diff = tree.diff(tc, 10_000)
    assert '+    """Sum of a and b."""' in diff and "feature.py" in diff and "notes.txt" not in diff
    assert len(tree.diff(tc, 50)) <= 50 + len("\n... [TRUNCATED]")
    tree.close()


@pytest.mark.parametrize("mode", ["clone", "in_place"])
def test_a_same_size_edit_right_after_the_baseline_is_seen(scenario: Path, mode: str) -> None:
    """git trusts an index entry's stat data unless the file is as new as the index: a copy of the index with
    a fresh mtime hid an edit of the same size made in the same second (found wiring the layer in)."""
    tree = CycleTree.open(open_repo(scenario), "evt_1", Settings(), mode, "agent")  # type: ignore[arg-type]
    (tree.path / "app.py").write_text("def add(a, b):\n    return a - b\n")  # same size, same second
    time.sleep(1.1)  # read later, as recovery does: a fresh copy of the index would be newer than the edit
    assert tree.read().paths == ["app.py"]
    tree.close()


def test_validation_effects_tell_output_from_drift(scenario: Path) -> None:
    tree = CycleTree.open(open_repo(scenario), "evt_1", Settings(), "clone", "agent")
    mutate(tree.path)
    before = tree.read()
    started = time.time()
    (tree.path / "reports").mkdir()
    (tree.path / "reports" / "out.txt").write_text("a test report\n")
    (tree.path / "app.py").write_text("changed by the check\n")
    (tree.path / "slow.py").write_text("a deleted file the check put back\n")
    removed, drift = tree.validation_effects(before, tree.read(), started)
    assert removed == ["reports/out.txt"] and not (tree.path / "reports").exists()
    assert sorted(drift) == ["app.py", "slow.py"]
    tree.close()


# ------------------------------------------------------------------ committing


def test_commit_uses_the_engine_identity_without_a_configured_user(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    ws = make_scenario(tmp_path / "ws")
    git(ws, "config", "--unset", "user.name")
    git(ws, "config", "--unset", "user.email")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "none"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    tree = CycleTree.open(open_repo(ws), "evt_1", Settings(), "clone", "agent")
    mutate(tree.path)
    d = deliver_change(tree, tree.read(), MESSAGE, branch=None, max_rebases=3, revalidate=_no_revalidation)
    assert d.status == "landed"
    assert git(ws, "log", "-1", "--format=%an <%ae>|%cn", "HEAD").strip() == "gep <gep@localhost>|gep"
    assert "GIT_AUTHOR_NAME" not in os.environ  # attribution never leaks into the process environment


@pytest.mark.parametrize("mode", ["clone", "in_place"])
def test_committing_runs_no_git_hooks(scenario: Path, mode: str) -> None:
    marker = scenario.parent / "hook-ran"
    for name in ("pre-commit", "prepare-commit-msg", "commit-msg", "post-commit", "post-checkout",
                 "reference-transaction", "post-index-change"):
        hook = scenario / ".git" / "hooks" / name
        hook.parent.mkdir(exist_ok=True)
        hook.write_text(f"#!/bin/sh\necho {name} >> {marker}\n")
        hook.chmod(0o755)
    tree = CycleTree.open(open_repo(scenario), "evt_1", Settings(), mode, "agent")  # type: ignore[arg-type]
    mutate(tree.path)
    d = deliver_change(tree, tree.read(), MESSAGE, branch=None, max_rebases=3, revalidate=_no_revalidation)
    assert d.status == "landed" and git(scenario, "rev-parse", "HEAD").strip() == d.commit
    assert not marker.exists()


def test_the_sandbox_shows_the_users_environment_folders_read_only(scenario: Path) -> None:
    tree = CycleTree.open(open_repo(scenario), "evt_1", Settings(), "clone", "agent")
    box = tree.sandbox(Settings())
    assert box.tree == tree.path.resolve() and box.readonly == [scenario / ".venv"]
    assert box.state_dir == (scenario / ".gep").resolve()
    tree.close()
