"""Daily JSONL files of behavioural signals: append-only, validated, capped, idempotent, safe with several
writers, tolerant of lines other tools wrote."""

from __future__ import annotations

import json
import multiprocessing
import subprocess
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from gep.signals.behavior import MAX_PER_DAY, BehaviorSignal, Detected
from gep.signals.behavior_log import Busy, locked, read_signals, record, seen, signals_dir

NOW = datetime(2026, 3, 14, 12, 0, tzinfo=UTC)


def detected(key: str, *kinds: str, source: str = "claude_code", at: datetime = NOW) -> Detected:
    sigs = [BehaviorSignal(ts=at.strftime("%Y-%m-%dT%H:%M:%SZ"), type=k, summary=f"User {k} signal", intensity=3)
            for k in kinds]
    return Detected(key=key, source=source, session_id="s1", ts=at, signals=sigs)


def lines(ws: Path, day: str = "2026-03-14") -> list[dict[str, object]]:
    path = signals_dir(ws) / f"{day}.jsonl"
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


def test_written_lines_have_the_seed_fields_in_order_then_source_key_and_seal(tmp_path: Path) -> None:
    report = record(tmp_path, [detected("k1", "correction", "emotion")])
    assert report.new == 1 and len(report.written) == 2
    got = lines(tmp_path)
    # the seal (this machine's, gep/core/machine_key.py) is what makes the line trusted as context (issue 45)
    assert [list(x) for x in got] == [["ts", "type", "summary", "intensity", "source", "key", "mac"]] * 2
    assert all(len(x["mac"]) == 64 for x in got)
    assert got[0]["type"] == "correction" and got[0]["key"] == "k1" and got[0]["source"] == "claude_code"
    assert (tmp_path / "memory" / "growth" / "signals" / "2026-03-14.jsonl").is_file()


def test_each_exchange_is_captured_once_however_often_it_is_read(tmp_path: Path) -> None:
    first = record(tmp_path, [detected("k1", "correction"), detected("k2")])
    again = record(tmp_path, [detected("k1", "correction"), detected("k2"), detected("k1", "correction")])
    assert (first.new, len(first.written)) == (2, 1)
    assert (again.new, len(again.written)) == (0, 0)
    assert len(lines(tmp_path)) == 1
    assert seen(tmp_path, "rules") == {"k1", "k2"} and seen(tmp_path, "llm") == set()


def test_a_lost_index_does_not_duplicate_what_the_day_file_holds(tmp_path: Path) -> None:
    record(tmp_path, [detected("k1", "correction")])
    (tmp_path / ".gep" / "behavior" / "seen").unlink()
    assert record(tmp_path, [detected("k1", "correction")]).written == []
    assert len(lines(tmp_path)) == 1


def test_the_llm_pass_has_its_own_index(tmp_path: Path) -> None:
    record(tmp_path, [detected("k1")])
    assert record(tmp_path, [detected("k1", "preference")], pass_="llm").new == 1
    assert seen(tmp_path, "llm") == {"k1"} and len(lines(tmp_path)) == 1


def test_at_most_ten_signals_per_day_and_source(tmp_path: Path) -> None:
    batch = [detected(f"k{i}", "approval", "emotion") for i in range(8)]  # 16 signals offered
    report = record(tmp_path, batch)
    assert len(report.written) == MAX_PER_DAY and report.capped == 6
    # another source has its own ten; the next day starts again; later calls respect what the file holds
    other = record(tmp_path, [detected(f"o{i}", "approval", source="openclaw") for i in range(12)])
    assert len(other.written) == MAX_PER_DAY
    assert record(tmp_path, [detected("late", "approval")]).capped == 1
    tomorrow = record(tmp_path, [detected("t1", "approval", at=NOW + timedelta(days=1))])
    assert len(tomorrow.written) == 1
    assert len(lines(tmp_path)) == 2 * MAX_PER_DAY


def test_malformed_and_foreign_lines_are_skipped_and_counted_never_fatal(tmp_path: Path) -> None:
    folder = signals_dir(tmp_path)
    folder.mkdir(parents=True)
    foreign = [
        '{"ts":"2026-03-14T10:15:00","type":"correction","summary":"User corrected: X is not Y","intensity":4}',
        "not json at all",
        '{"ts":"2026-03-14T10:16:00","type":"mood","summary":"x","intensity":3}',
        '{"ts":"2026-03-14T10:17:00","type":"approval","summary":"ok","intensity":9}',
        "[1, 2]",
        '{"ts":"2026-03-14T10:18:00","type":"style","summary":"User sent 4 short messages","intensity":3,'
        '"context":"Agent sent one long paragraph","tool":"kairos"}',
        '\xff\xfe{"broken',
    ]
    (folder / "2026-03-14.jsonl").write_text("\n".join(foreign), encoding="utf-8")  # no final newline
    report = record(tmp_path, [detected("k1", "preference")])
    assert len(report.written) == 1
    raw = (folder / "2026-03-14.jsonl").read_text(encoding="utf-8").splitlines()
    assert raw[:len(foreign)] == foreign and json.loads(raw[-1])["key"] == "k1"  # appended on its own line
    read = read_signals(tmp_path)
    assert read.malformed == 5 and read.files == 1
    assert [s.type for s in read.signals] == ["correction", "style", "preference"]
    assert read.signals[0].source is None  # another tool's line: no source, no key


def test_read_filters_by_day_type_and_time(tmp_path: Path) -> None:
    record(tmp_path, [detected("a", "correction"), detected("b", "approval", at=NOW + timedelta(days=1))])
    assert [s.type for s in read_signals(tmp_path).signals] == ["correction", "approval"]
    assert [s.type for s in read_signals(tmp_path, day=date(2026, 3, 15)).signals] == ["approval"]
    assert [s.type for s in read_signals(tmp_path, type_="correction").signals] == ["correction"]
    assert [s.type for s in read_signals(tmp_path, since=NOW + timedelta(hours=1)).signals] == ["approval"]
    assert read_signals(tmp_path / "nowhere").signals == []


def test_a_new_gep_dir_ignores_itself_in_git(tmp_path: Path) -> None:
    record(tmp_path, [detected("k1")])
    assert (tmp_path / ".gep" / ".gitignore").read_text() == "*\n"
    (tmp_path / ".gep" / ".gitignore").write_text("mine\n")
    record(tmp_path, [detected("k2")])
    assert (tmp_path / ".gep" / ".gitignore").read_text() == "mine\n"  # an existing .gep/ is not touched


def test_capture_leaves_git_status_clean_unless_the_user_tracks_the_folder(tmp_path: Path) -> None:
    """Issue 31, point 8: capture wrote memory/growth/signals/ and left `?? memory/` in `git status`."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    record(tmp_path, [detected("k1", "correction")])
    assert lines(tmp_path) and git_status(tmp_path) == ""
    (signals_dir(tmp_path) / ".gitignore").unlink()  # the user opts in: the folder is theirs to commit
    record(tmp_path, [detected("k2", "correction")])
    assert git_status(tmp_path) == "?? memory/\n"
    assert not (signals_dir(tmp_path) / ".gitignore").exists()  # an existing folder is not touched


def git_status(ws: Path) -> str:
    return subprocess.run(["git", "status", "--porcelain"], cwd=ws, capture_output=True, text=True,
                          check=True).stdout


def test_a_held_lock_makes_writers_wait_then_give_up(tmp_path: Path) -> None:
    with locked(tmp_path, 1.0), pytest.raises(Busy, match="held by another writer"):
        record(tmp_path, [detected("k1", "approval")], timeout_s=0.05)
    assert lines(tmp_path) == [] and seen(tmp_path, "rules") == set()
    assert len(record(tmp_path, [detected("k1", "approval")]).written) == 1


def _writer(ws: str, n: int) -> None:
    for i in range(5):
        record(Path(ws), [detected(f"w{n}-{i}", "approval", source=f"src{n}")])


def test_concurrent_writers_never_interleave_or_lose_lines(tmp_path: Path) -> None:
    # separate interpreters, as the hook's workers are (forking pytest-xdist's threaded worker can deadlock)
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), n)) for n in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    assert [p.exitcode for p in procs] == [0] * 4
    got = lines(tmp_path)  # every line parses: nothing interleaved
    assert sorted(str(x["key"]) for x in got) == sorted(f"w{n}-{i}" for n in range(4) for i in range(5))
    assert len(seen(tmp_path, "rules")) == 20
