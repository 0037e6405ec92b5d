"""Issue 32, finding 2: a change holding a symlink that points outside the tree, or a special file, is refused
with a one-line reason, whoever made it; validation replacing a tracked file with a symlink (to /etc/passwd)
never reaches the commit (it ran in a throw-away copy)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from crash_driver import git, snapshot
from test_solidify import cycle, store, venv_python_first, ws_path  # noqa: F401 - fixtures and the helper

from gep.cycle.unsafe_entries import escapes
from gep.store import Store


def _readme_to_passwd(p: Path) -> None:
    (p / "README.md").unlink()
    os.symlink("/etc/passwd", p / "README.md")


def _relative_link_up(p: Path) -> None:
    (p / "docs").mkdir()
    os.symlink("../../../.aws/credentials", p / "docs" / "creds")


def _fifo(p: Path) -> None:
    os.mkfifo(p / "pipe")


ATTACKS: dict[str, tuple[Callable[[Path], None], str]] = {
    "tracked file replaced by a symlink to /etc/passwd": (
        _readme_to_passwd, "constraint: symlink pointing outside the tree: README.md -> '/etc/passwd'"),
    "a relative symlink climbing out": (
        _relative_link_up, "constraint: symlink pointing outside the tree: docs/creds -> '../../../.aws/credentials'"),
    "a FIFO": (_fifo, "constraint: special file in the change (FIFO, socket or device): pipe"),
}


@pytest.mark.parametrize("name", list(ATTACKS))
def test_an_unsafe_entry_fails_the_cycle_with_one_line(ws_path: Path, store: Store, name: str) -> None:  # noqa: F811
    make, reason = ATTACKS[name]
    before, head = snapshot(ws_path), git(ws_path, "rev-parse", "HEAD")

    def change(p: Path) -> None:
        (p / "feature.py").write_text("VALUE = 1\n")
        make(p)

    res = cycle(ws_path, store, change)
    assert res.event.outcome.status == "failed"
    assert reason in res.event.meta.failure_reasons, res.event.meta.failure_reasons
    assert all("\n" not in r for r in res.event.meta.failure_reasons)
    assert git(ws_path, "rev-parse", "HEAD") == head and snapshot(ws_path) == before


def test_a_symlink_inside_the_tree_is_a_change_like_any_other(ws_path: Path, store: Store) -> None:  # noqa: F811
    def change(p: Path) -> None:
        (p / "docs").mkdir()
        os.symlink("../README.md", p / "docs" / "readme")

    res = cycle(ws_path, store, change)
    assert res.event.outcome.status == "success", res.event.meta.failure_reasons
    assert git(ws_path, "ls-tree", "HEAD", "docs/readme").startswith("120000")


def test_validation_replacing_a_tracked_file_with_a_symlink_never_reaches_the_commit(
        ws_path: Path, store: Store) -> None:  # noqa: F811
    def change(p: Path) -> None:
        (p / "feature.py").write_text("VALUE = 1\n")
        (p / "check.py").write_text("import os\nos.unlink('README.md')\nos.symlink('/etc/passwd', 'README.md')\n")

    res = cycle(ws_path, store, change)
    assert res.event.outcome.status == "success", res.event.meta.failure_reasons
    assert git(ws_path, "ls-tree", "HEAD", "README.md").startswith("100644")
    assert not (ws_path / "README.md").is_symlink()


def test_escapes() -> None:
    assert escapes("a", "/etc/passwd") and escapes("a/b", "../../x") and escapes("a", "..") and escapes("a", "")
    assert not escapes("a/b", "../x") and not escapes("a", "b/../c") and not escapes("a/b", "./c")
