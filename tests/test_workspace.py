"""Workspace facade on real temporary repositories: opening, baseline, lock, blast radius, rollback, commit."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import init_repo
from crash_driver import git, make_scenario, mutate, snapshot, user_dirty_edits

from gep.errors import PendingCycleError, WorkspaceError
from gep.store import Store
from gep.workspace import Workspace


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    return make_scenario(tmp_path / "ws")


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store.open(f"sqlite:///{tmp_path / 'gep.db'}")
    yield s  # type: ignore[misc]
    s.close()


# ------------------------------------------------------------------ open


def test_open_rejects_missing_non_git_uncommitted_and_subdirectory(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError, match="does not exist"):
        Workspace.open(tmp_path / "nope")
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(WorkspaceError, match="not a git repository"):
        Workspace.open(plain)
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    git(fresh, "init", "-q")
    with pytest.raises(WorkspaceError, match="no commit yet"):
        Workspace.open(fresh)
    repo = init_repo(tmp_path / "repo", {"a/b.txt": "x\n"})
    with pytest.raises(WorkspaceError, match="top directory"):
        Workspace.open(repo / "a")
    ws = Workspace.open(repo)
    assert ws.path == repo.resolve()


def test_ensure_gep_dir_excludes_it_once(repo: Path) -> None:
    ws = Workspace.open(repo)
    ws.ensure_gep_dir()
    ws.ensure_gep_dir()
    (repo / ".gep" / "gep.db").write_text("x")
    exclude = (repo / ".git" / "info" / "exclude").read_text()
    assert exclude.count(".gep/") == 1
    assert git(repo, "status", "--porcelain") == ""


# ------------------------------------------------------------------ begin


def test_dirty_tree_is_refused_naming_files_and_untouched(scenario: Path, store: Store) -> None:
    user_dirty_edits(scenario)
    before = snapshot(scenario)
    ws = Workspace.open(scenario)
    assert ws.dirty_tracked_files() == ["README.md", "check.py", "draft.md"]
    with pytest.raises(WorkspaceError, match=r"README\.md, check\.py, draft\.md.*--allow-dirty"):
        ws.begin(event_id="evt_1", store=store)
    assert snapshot(scenario) == before
    assert store.get_run("evt_1") is None


def test_begin_records_baseline_before_anything_changes(scenario: Path, store: Store) -> None:
    ws = Workspace.open(scenario)
    run = ws.begin(event_id="evt_1", store=store)
    saved = store.get_run("evt_1")
    assert saved is not None and saved.status == "running" and saved.pid == os.getpid()
    assert saved.head_sha == git(scenario, "rev-parse", "HEAD").strip()
    assert saved.branch == "main"
    assert saved.untracked == ["notes.txt"]
    assert saved.ignored == [".venv/", "debug.log"]
    assert saved.empty_dirs == ["data/"]
    assert saved.stash_sha is None and run == saved


def test_begin_refuses_while_another_cycle_is_recorded(scenario: Path, store: Store) -> None:
    ws = Workspace.open(scenario)
    run = ws.begin(event_id="evt_1", store=store)
    with pytest.raises(WorkspaceError, match="evt_1.*still recorded as running.*gep recover"):
        ws.begin(event_id="evt_2", store=store)
    run.status = "awaiting_changes"
    store.save_run(run)
    with pytest.raises(PendingCycleError, match="awaiting changes"):
        ws.begin(event_id="evt_2", store=store)


def test_allow_dirty_stashes_and_restores_byte_for_byte(scenario: Path, store: Store) -> None:
    user_dirty_edits(scenario)
    before = snapshot(scenario)
    ws = Workspace.open(scenario)
    run = ws.begin(event_id="evt_1", store=store, allow_dirty=True)
    assert run.stash_sha and store.get_run("evt_1").stash_sha == run.stash_sha  # type: ignore[union-attr]
    assert ws.dirty_tracked_files() == []  # the cycle starts from the clean baseline
    assert not (scenario / "draft.md").exists()
    assert sorted(ws.user_stashed_paths(run)) == ["README.md", "check.py", "draft.md"]
    assert ws.restore_user_changes(run)
    assert snapshot(scenario) == before  # bytes, index (staged vs unstaged) and an empty stash list
    assert ws.restore_user_changes(run)  # idempotent: a second call changes nothing
    assert snapshot(scenario) == before


# ------------------------------------------------------------------ lock


def test_second_lock_waits_then_fails_naming_the_holder(scenario: Path) -> None:
    code = ("import sys, time; from gep.workspace import Workspace\n"
            "with Workspace.open(sys.argv[1]).lock(5):\n"
            "    print('locked', flush=True); time.sleep(3)\n")
    holder = subprocess.Popen([sys.executable, "-c", code, str(scenario)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        ws = Workspace.open(scenario)
        started = time.monotonic()
        with pytest.raises(WorkspaceError, match=rf"another cycle is running on .* \(pid {holder.pid}\)"):
            with ws.lock(0.5):
                pass
        assert time.monotonic() - started >= 0.5
        waited_from = time.monotonic()
        with ws.lock(15):  # waits for the holder to finish, then runs
            assert ws.holds_lock()
            assert time.monotonic() - waited_from > 1.0
            assert (scenario / ".gep" / "cycle.lock").read_text().strip() == str(os.getpid())
        assert not ws.holds_lock()
    finally:
        holder.kill()
        holder.wait()


# ------------------------------------------------------------------ blast radius and diff


def test_blast_radius_counts_cycle_changes_only(scenario: Path, store: Store) -> None:
    (scenario / "notes.txt").write_text("older user file, edited before the cycle\n")
    ws = Workspace.open(scenario)
    run = ws.begin(event_id="evt_1", store=store)
    (scenario / "notes.txt").write_text("a pre-existing untracked file is not the cycle's\n")
    mutate(scenario)
    (scenario / ".gep" / "scratch.txt").write_text("engine state\n")
    blast = ws.blast_radius(run)
    by_path = {c.path: c for c in blast.changes}
    assert sorted(by_path) == ["app.py", "feature.py", "pkg/sub/new.py", "slow.py"]
    assert (by_path["app.py"].added, by_path["app.py"].deleted, by_path["app.py"].status) == (1, 0, "modified")
    assert by_path["slow.py"].status == "deleted" and by_path["slow.py"].deleted == 3
    assert by_path["feature.py"].untracked and by_path["feature.py"].added == 1
    assert blast.files == 4 and blast.lines == 1 + 3 + 1 + 1
    diff = ws.diff_snapshot(run)
    assert "+    \"\"\"Sum of a and b.\"\"\"" in diff and "feature.py" in diff and "notes.txt" not in diff
    assert len(ws.diff_snapshot(run, limit=50)) <= 50 + len("\n... [TRUNCATED]")


# ------------------------------------------------------------------ rollback


def test_rollback_restores_baseline_and_never_touches_prior_files(scenario: Path, store: Store) -> None:
    before = snapshot(scenario)
    ws = Workspace.open(scenario)
    run = ws.begin(event_id="evt_1", store=store)
    mutate(scenario)
    (scenario / "newdir").mkdir()  # an empty dir the cycle made
    git(scenario, "add", "feature.py", "notes.txt")  # the mutator staged a new file AND the user's file
    ws.rollback(run)
    assert snapshot(scenario) == before  # notes.txt, .venv/, debug.log and data/ all as they were


def test_rollback_undoes_mutator_commits_and_keeps_them_in_a_rescue_ref(scenario: Path, store: Store) -> None:
    before = snapshot(scenario)
    ws = Workspace.open(scenario)
    run = ws.begin(event_id="evt_1", store=store)
    mutate(scenario)
    git(scenario, "add", "-A")
    git(scenario, "commit", "-q", "-m", "agent committed on its own")
    rogue = git(scenario, "rev-parse", "HEAD").strip()
    ws.rollback(run)
    assert snapshot(scenario) == before
    assert git(scenario, "rev-parse", "refs/gep/rescued/evt_1").strip() == rogue


# ------------------------------------------------------------------ commit


def test_commit_stages_only_the_cycle_files_with_repo_identity(scenario: Path, store: Store) -> None:
    ws = Workspace.open(scenario)
    run = ws.begin(event_id="evt_1", store=store)
    mutate(scenario)
    sha = ws.commit(run, message="gep(repair): test\n\nGEP-Event: evt_1\n")
    assert git(scenario, "rev-parse", "HEAD").strip() == sha
    assert set(git(scenario, "show", "--name-only", "--format=", sha).split()) == {
        "app.py", "feature.py", "pkg/sub/new.py", "slow.py"}
    assert git(scenario, "log", "-1", "--format=%an <%ae>").strip() == "Test <test@example.invalid>"
    assert "notes.txt" in git(scenario, "status", "--porcelain")  # the user's file stays untracked
    assert ws.find_cycle_commit(run) == sha


def test_commit_uses_engine_identity_without_a_configured_user(tmp_path: Path, store: Store,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    ws_path = make_scenario(tmp_path / "ws")
    git(ws_path, "config", "--unset", "user.name")
    git(ws_path, "config", "--unset", "user.email")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "none"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    ws = Workspace.open(ws_path)
    run = ws.begin(event_id="evt_1", store=store)
    mutate(ws_path)
    sha = ws.commit(run, message="gep(repair): x")
    assert git(ws_path, "log", "-1", "--format=%an <%ae>|%cn", sha).strip() == "gep <gep@localhost>|gep"
    assert "GIT_AUTHOR_NAME" not in os.environ  # attribution never leaks into the process environment


def test_commit_on_an_evolution_branch(scenario: Path, store: Store) -> None:
    ws = Workspace.open(scenario)
    base = git(scenario, "rev-parse", "HEAD").strip()
    run = ws.begin(event_id="evt_1", store=store)
    mutate(scenario)
    sha = ws.commit(run, message="gep(repair): x", branch="evolution")
    assert git(scenario, "rev-parse", "main").strip() == base
    assert git(scenario, "rev-parse", "evolution").strip() == sha
    assert git(scenario, "symbolic-ref", "--short", "HEAD").strip() == "evolution"
    assert ws.find_cycle_commit(run, "evolution") is None  # no trailer in this message
    # a later cycle from main may not commit onto an "evolution" that moved on: refused, not clobbered
    assert ws.check_branch(run, "evolution") is not None
    assert ws.check_branch(run, "bad..name") is not None
    assert ws.check_branch(run, "fresh-branch") is None


def test_commit_runs_no_git_hooks(scenario: Path, store: Store) -> None:
    marker = scenario.parent / "hook-ran"
    ws = Workspace.open(scenario)
    run = ws.begin(event_id="evt_1", store=store)
    mutate(scenario)
    for name in ("pre-commit", "prepare-commit-msg", "commit-msg", "post-commit"):
        hook = scenario / ".git" / "hooks" / name
        hook.write_text(f"#!/bin/sh\necho {name} >> {marker}\n")
        hook.chmod(0o755)
    ws.commit(run, message="gep(repair): x")
    assert not marker.exists()
