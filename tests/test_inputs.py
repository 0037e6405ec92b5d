"""gep/core/safe_files.py: regular files only, size caps, iterative depth-capped walks and globs (the one way the
engine reads what other programs write)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from input_traps import DEEP_LEVELS, REASONS, TRAPS, plant, sparse

from gep.core import constants
from gep.core.records import InputWarning
from gep.core.safe_files import (
    Unreadable,
    append_regular,
    glob_files,
    note,
    open_regular,
    read_capped,
    shown,
    walk,
)

pytestmark = [pytest.mark.timeout(30), pytest.mark.usefixtures("memory_cap")]


@pytest.mark.parametrize("kind", TRAPS)
def test_only_regular_files_in_their_folder_are_read(tmp_path: Path, outside: Path, kind: str) -> None:
    ws = tmp_path / "ws"
    trap = plant(ws / "trap.json", kind, outside)
    with pytest.raises(Unreadable) as info:
        read_capped(trap, 1000, within=ws)
    assert info.value.reason.startswith(REASONS[kind])
    assert info.value.warning(ws) == InputWarning(path="trap.json", reason=f"skipped: {info.value.reason}")
    assert isinstance(info.value, OSError)  # a caller that only expects I/O errors survives it too


def test_a_socket_is_not_opened(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        with pytest.raises(Unreadable, match="a socket"), open_regular(path):
            pass


def test_symlinks_inside_their_folder_are_followed(tmp_path: Path) -> None:
    (tmp_path / "real.txt").write_text("hello")
    os.symlink("real.txt", tmp_path / "link.txt")
    assert read_capped(tmp_path / "link.txt", 100, within=tmp_path) == b"hello"


def test_a_file_over_the_cap_is_refused_not_cut(tmp_path: Path) -> None:
    big = sparse(tmp_path / "big.json", 10 * 1024**3)  # 10 GB, no disk used
    with pytest.raises(Unreadable, match="larger than 1,000 bytes"):
        read_capped(big, 1000)
    (tmp_path / "small").write_bytes(b"x" * 1000)
    assert read_capped(tmp_path / "small", 1000) == b"x" * 1000


def test_appending_never_goes_through_a_symlink_or_into_a_fifo(tmp_path: Path, outside: Path) -> None:
    fifo = plant(tmp_path / "fifo.log", "fifo", outside)
    link = tmp_path / "link.log"
    os.symlink(outside / "victim.log", link)
    with pytest.raises(Unreadable, match="a FIFO"):
        append_regular(fifo, b"x\n")
    with pytest.raises(Unreadable, match="a symlink"):
        append_regular(link, b"x\n")
    assert not (outside / "victim.log").exists()
    (tmp_path / "sub").symlink_to(outside, target_is_directory=True)
    with pytest.raises(Unreadable, match="out of the workspace"):
        append_regular(tmp_path / "sub" / "x.log", b"x\n", within=tmp_path)
    append_regular(tmp_path / "ok.log", b"a\n")
    append_regular(tmp_path / "ok.log", b"b\n")
    assert (tmp_path / "ok.log").read_bytes() == b"a\nb\n"


def test_a_1500_level_tree_is_walked_without_recursion_and_cut_with_one_warning(tmp_path: Path, deep) -> None:
    deep(tmp_path / "top")
    (tmp_path / "top" / "shallow.log").write_text("x")
    warnings: list[InputWarning] = []
    entries = list(walk(tmp_path / "top", warnings=warnings, root=tmp_path))
    assert len(entries) == constants.WALK_MAX_DEPTH + 1  # the folders down to the cap, and shallow.log
    assert [w.reason for w in warnings] == [f"skipped: deeper than {constants.WALK_MAX_DEPTH} folder levels"]
    assert warnings[0].path == "top/" + "/".join(["d"] * constants.WALK_MAX_DEPTH)
    assert not any(e.path.name == "deep.log" for e in entries)
    assert DEEP_LEVELS > constants.WALK_MAX_DEPTH


def test_walk_order_is_os_walks_and_symlinked_folders_are_not_entered(tmp_path: Path, outside: Path) -> None:
    for rel in ("b/2.txt", "a/x/3.txt", "a/1.txt", "0.txt"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(rel)
    (outside / "o.txt").write_text("o")
    (tmp_path / "link").symlink_to(outside, target_is_directory=True)
    files = [e.rel for e in walk(tmp_path) if not e.is_dir]
    expected = []
    for d, dirs, fs in os.walk(tmp_path):
        dirs.sort()
        expected += [str(Path(d, f).relative_to(tmp_path)) for f in sorted(fs)]
    assert files == ["0.txt", "link", "a/1.txt", "a/x/3.txt", "b/2.txt"]  # the link listed, never entered
    assert [f for f in files if f != "link"] == expected


def test_walk_stops_after_its_entry_budget(tmp_path: Path) -> None:
    for i in range(30):
        (tmp_path / f"f{i:02}").write_text("x")
    warnings: list[InputWarning] = []
    assert len(list(walk(tmp_path, max_entries=10, warnings=warnings))) == 10
    assert warnings[0].reason == "walk stopped: more than 10 entries"


@pytest.mark.parametrize("pattern", ["logs/**/*.log", "**/*.log", "*/*.log", "logs/*.log", "logs/a/*.log",
                                     "logs/?.log", "logs/[!1].log", "logs/[[]x].log", "sessions/**/*.jsonl",
                                     "logs/a/2.log", "s*/x/*.jsonl"])
def test_glob_matches_as_pathlib_does(tmp_path: Path, pattern: str) -> None:
    for rel in ("logs/1.log", "logs/a/2.log", "logs/a/b/3.log", "logs/.h/4.log", "logs/a/5.txt", "logs/[x].log",
                "sessions/x/s.jsonl", "sessions/t.jsonl", "other/o.log"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(rel)
    mine = [p.relative_to(tmp_path) for p in glob_files(tmp_path, pattern)]
    assert mine == sorted(p.relative_to(tmp_path) for p in tmp_path.glob(pattern) if p.is_file())


def test_glob_skips_named_folders_and_goes_only_as_deep_as_the_pattern(tmp_path: Path, deep) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "x.log").write_text("x")
    deep(tmp_path / "logs")
    warnings: list[InputWarning] = []
    assert glob_files(tmp_path, "*/*.log", skip_names=frozenset({".git"}), warnings=warnings) == []
    assert warnings == []  # the pattern never reaches the depth cap: nothing to warn about
    assert glob_files(tmp_path, "logs/**/*.log", warnings=warnings, root=tmp_path) == []
    assert [w.reason for w in warnings] == [f"skipped: deeper than {constants.WALK_MAX_DEPTH} folder levels"]


def test_warnings_are_capped_and_the_rest_counted() -> None:
    sink: list[InputWarning] = []
    for i in range(constants.INPUT_WARNINGS_MAX + 7):
        note(sink, InputWarning(path=f"f{i}", reason="skipped: a FIFO"))
    assert len(sink) == constants.INPUT_WARNINGS_MAX
    assert str(sink[-1]) == "...: 8 more inputs skipped (not listed)"


def test_paths_in_warnings_are_one_line_and_redacted(tmp_path: Path) -> None:
    assert shown(tmp_path / "new\nline.log", tmp_path) == "new\\nline.log"
    assert shown(Path("/home/alice/.claude/x.jsonl"), tmp_path) == "/home/[REDACTED]/.claude/x.jsonl"
