"""kill -9 of a process holding a clone, at every step and at random moments, then recover_git: the user's
tree is byte for byte as they left it (plus the landed change when the landing had begun), no clone, lock
or pin is left, and the cycle's change is never lost (landed, on gep/<event>, or in a patch)."""

from __future__ import annotations

import os
import random
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from crash_driver import run_and_kill
from git_crash_driver import EVENT_ID
from git_scenario import files_of, git, make_repo, snapshot, user_edits
from zygote import Zygote, module_zygote

from gep.git import open_repo, recover_git, salvage, workspace_lock
from gep.git.indexwrite import marker_path

DRIVER = Path(__file__).with_name("git_crash_driver.py")
RANDOM_KILLS = 16  # every step is also killed deterministically (test_kill_at_each_step_then_recover)


def _scenario(path: Path) -> Path:
    ws = make_repo(path)
    user_edits(path)
    return ws


_ZYGOTE: list[Zygote] = []  # the module's zygote (its fixture, which every test that drives asks for)


@pytest.fixture(scope="module")
def zygote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Zygote]:
    """The driver's imports paid once: every run of this module is a child forked from one process."""
    with module_zygote(DRIVER, tmp_path_factory.mktemp("zygote"), _ZYGOTE) as z:
        yield z


def _drive(ws: Path, point: str, kill_after: float | None = None) -> tuple[int, float]:
    """Run the driver: (exit code, seconds from the start of its cycle to its end). With ``kill_after``,
    SIGKILL it that many seconds after it started its cycle (imports done)."""
    return run_and_kill([sys.executable, str(DRIVER), str(ws), point], ws, kill_after, zygote=_ZYGOTE[-1])


def _recover(ws: Path, live: set[str] = frozenset()) -> list[str]:  # type: ignore[assignment]
    repo = open_repo(ws)
    with workspace_lock(repo, 5):
        return recover_git(repo, live).actions


def _progress(ws: Path) -> list[str]:
    p = ws.parent / "progress"
    return p.read_text().split("\n") if p.exists() else []


@pytest.fixture(scope="module")
def landed(tmp_path_factory: pytest.TempPathFactory, zygote: Zygote) -> dict[str, object]:
    """The user's side after the same cycle ran to the end without a kill."""
    ws = _scenario(tmp_path_factory.mktemp("reference") / "ws")
    assert _drive(ws, "none")[0] == 0
    assert "delivered landed" in _progress(ws)
    return snapshot(ws)


def _check(ws: Path, before: dict[str, object], landed: dict[str, object], actions: list[str]) -> None:
    after = snapshot(ws)
    head = git(ws, "rev-parse", "HEAD").strip()
    if head == before["head"]:
        assert files_of(after) == files_of(before), actions
        assert after["index"] == before["index"] and after["status"] == before["status"]
        progress = _progress(ws)
        if "mutation" in progress:  # the change existed: it is on its branch or in a patch, never lost
            saved = git(ws, "branch", "--list", "gep/*").strip() or list((ws / ".gep" / "rescued").glob("*.patch"))
            assert saved, (progress, actions)
    else:
        assert git(ws, "rev-parse", "HEAD^").strip() == before["head"]
        assert f"GEP-Event: {EVENT_ID}" in git(ws, "log", "-1", "--format=%B")
        assert files_of(after) == files_of(landed), actions
        assert after["index"] == landed["index"] and after["status"] == landed["status"]
    assert after["stash"] == before["stash"] and after["git"] == before["git"]
    assert not (ws / ".git" / "index.lock").exists() and not marker_path(open_repo(ws)).exists()
    assert list((ws / ".gep" / "worktrees").iterdir()) == []
    assert git(ws, "for-each-ref", "refs/gep/pin/", "refs/gep/baseline/") == ""
    assert _recover(ws) == []  # a second recovery finds nothing


@pytest.mark.parametrize("point", ["after_clone", "after_mutation", "after_commit", "after_cas", "in_read_tree",
                                   "after_landing"])
def test_kill_at_each_step_then_recover(tmp_path: Path, landed: dict[str, object], point: str) -> None:
    ws = _scenario(tmp_path / "ws")
    before = snapshot(ws)
    assert _drive(ws, point)[0] == -signal.SIGKILL
    if point == "in_read_tree":
        assert (ws / ".git" / "index.lock").exists()
    actions = _recover(ws)
    assert actions, "recovery said nothing"
    if point == "in_read_tree":
        assert any(f"removed {ws / '.git' / 'index.lock'}" in a for a in actions), actions
    if point in ("after_cas", "in_read_tree"):
        assert any("finished landing" in a for a in actions), actions
    if point == "after_landing":  # landed before the kill: no patch of a change that is already in
        assert any("its change is already on main" in a for a in actions), actions
        assert not (ws / ".gep" / "rescued").exists()
    if point in ("after_mutation", "after_commit"):
        assert any("its change is saved in" in a for a in actions), actions
    _check(ws, before, landed, actions)


def test_random_kills_never_leave_the_user_tree_changed(tmp_path: Path, landed: dict[str, object]) -> None:
    code, duration = _drive(_scenario(tmp_path / "template" / "ws"), "random")
    assert code == 0
    rng = random.Random(1234)
    outcomes: dict[str, int] = {}
    for i in range(RANDOM_KILLS):
        ws = tmp_path / f"run{i}" / "ws"
        _scenario(ws)
        before = snapshot(ws)
        delay = rng.uniform(0.0, duration)
        code, _elapsed = _drive(ws, "random", kill_after=delay)
        actions = _recover(ws)
        _check(ws, before, landed, actions)
        key = "finished" if code == 0 else (_progress(ws)[-2] if len(_progress(ws)) > 1 else "start")
        outcomes[key] = outcomes.get(key, 0) + 1
    assert sum(outcomes.values()) == RANDOM_KILLS
    print(outcomes, duration)
    assert len(outcomes) >= 3, outcomes  # the kills really landed at different steps


@pytest.mark.parametrize("point", ["inplace_after_cas", "inplace_in_index"])
@pytest.mark.usefixtures("zygote")
def test_kill_during_the_prompt_mode_commit_then_recover(tmp_path: Path, point: str) -> None:
    ws = _scenario(tmp_path / "ws")
    assert _drive(ws, point)[0] == -signal.SIGKILL
    during = snapshot(ws)
    actions = _recover(ws, live={EVENT_ID})
    assert any("finished committing" in a for a in actions), actions
    if point == "inplace_in_index":
        assert any("index.lock" in a for a in actions)
    after = snapshot(ws)
    assert files_of(after) == files_of(during)  # the person's files are never written
    assert set(git(ws, "show", "--name-only", "--format=", "HEAD").split()) == {"app.py", "feature.py"}
    status = git(ws, "status", "--porcelain").splitlines()
    assert not any(line[3:] in ("app.py", "feature.py") for line in status), status
    assert " M README.md" in status  # the person's own uncommitted edit is still theirs
    assert git(ws, "rev-parse", f"refs/gep/baseline/{EVENT_ID}")  # a live cycle keeps its baseline


@pytest.mark.usefixtures("zygote")
def test_a_live_clone_is_left_alone_and_a_foreign_index_lock_too(tmp_path: Path) -> None:
    ws = _scenario(tmp_path / "ws")
    assert _drive(ws, "after_mutation")[0] == -signal.SIGKILL
    (ws / ".git" / "index.lock").write_text("")  # someone's git, no engine marker: not ours to remove
    assert _recover(ws, live={EVENT_ID}) == []
    assert (ws / ".gep" / "worktrees" / EVENT_ID).is_dir() and (ws / ".git" / "index.lock").exists()
    os.unlink(ws / ".git" / "index.lock")


def test_salvage_moves_an_unreadable_record_aside_and_keeps_going() -> None:
    moved: list[tuple[str, str]] = []
    rows = [("run-1", '{"n": 1}'), ("run-2", "{not json"), ("run-3", '{"n": 3}')]

    def parse(raw: object) -> int:
        import json

        return int(json.loads(str(raw))["n"])

    good, warnings = salvage(rows, parse, lambda key, why: moved.append((key, why)))
    assert good == [1, 3]
    assert [k for k, _ in moved] == ["run-2"]
    assert len(warnings) == 1 and warnings[0].startswith("record run-2 could not be read and was moved aside:")
