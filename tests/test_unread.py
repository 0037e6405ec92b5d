"""The plain engine reads what is new (issue 41): a cycle's error signals come from the lines written since
the previous cycle looked, so an error fixed and not logged again is not chased, and one logged again is.

Real files in tmp workspaces, read with gep.signals.sources; signals from the real extractor; the cycle test
runs the real engine (learning off) with a command agent that changes nothing."""

from __future__ import annotations

import os
import shlex
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gep import CycleRequest, run_cycle
from gep.core.config import Settings
from gep.core.models import EvolutionEvent
from gep.signals.rules import extract_signals
from gep.signals.sources import collect_sources, collect_tails
from gep.signals.unread import READ_MARKS_KEY, ReadMarks, marks_of, unread_sources
from gep.store import Store

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
OLD = "2026-11-22T09:58:01Z [ERROR] report: KeyError: 'region' in load_config\n"
NEW = "2026-11-22T10:30:00Z [ERROR] report: ValueError: negative reading -3 in temp-2\n"
FINE = "2026-11-22T10:31:00Z INFO report: all good\n"


def write(path: Path, text: str, mode: str = "w") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open(mode, encoding="utf-8") as fh:
        fh.write(text)
    return path


def read(ws: Path, marks: ReadMarks | None, now: datetime,
         settings: Settings | None = None) -> tuple[list[str], ReadMarks, str]:
    """(signals, the marks this read leaves, the log text) as a cycle reads the workspace at ``now``."""
    settings = settings or Settings()
    bundle = collect_sources(ws, settings, now=now)
    tails = collect_tails(ws, settings, now, warnings=[])
    b = unread_sources(bundle, tails, marks)
    signals = extract_signals(recent_session_transcript=b.recent_session_transcript, today_log=b.today_log,
                              memory_snippet=b.memory_snippet, user_snippet=b.user_snippet)
    return signals, marks_of(tails, now), b.today_log


def errsigs(signals: list[str]) -> list[str]:
    return [s for s in signals if s.startswith("errsig:")]


def test_only_lines_written_since_the_last_read_give_error_signals(tmp_path: Path):
    log = write(tmp_path / "logs/app.log", OLD)
    first, marks, _ = read(tmp_path, None, T0)
    assert errsigs(first) == ["errsig:" + OLD.strip()]  # the first cycle reads the tail as before
    quiet, marks, text = read(tmp_path, marks, T0 + timedelta(hours=1))
    assert errsigs(quiet) == [] and "log_error" not in quiet and text == ""
    write(log, FINE, "a")
    assert errsigs(read(tmp_path, marks, T0 + timedelta(hours=1))[0]) == []
    write(log, NEW, "a")  # a new error after the old one: it, not the old first error line, drives repair
    again, _, text = read(tmp_path, marks, T0 + timedelta(hours=2))
    assert errsigs(again) == ["errsig:" + NEW.strip()] and "log_error" in again and OLD.strip() not in text


def test_the_same_error_logged_again_is_read_again(tmp_path: Path):
    log = write(tmp_path / "logs/plain.log", "starting\nError: cannot open sensors.csv\n")  # no timestamps
    _, marks, _ = read(tmp_path, None, T0)
    assert errsigs(read(tmp_path, marks, T0)[0]) == []
    write(log, "Error: cannot open sensors.csv\n", "a")
    assert errsigs(read(tmp_path, marks, T0)[0]) == ["errsig:Error: cannot open sensors.csv"]


def test_a_truncated_or_rewritten_log_is_read_but_for_lines_older_than_the_last_read(tmp_path: Path):
    log = write(tmp_path / "logs/app.log", "x" * 300 + "\n" + OLD)
    _, marks, _ = read(tmp_path, None, T0)
    write(log, "Error: cannot open sensors.csv\n")  # truncated (copytruncate) and written again
    assert errsigs(read(tmp_path, marks, T0)[0]) == ["errsig:Error: cannot open sensors.csv"]
    write(log, "y" * 400 + "\n" + OLD + NEW)  # rewritten, longer: other first bytes; OLD predates the read
    got, _, text = read(tmp_path, marks, T0 + timedelta(hours=1))
    assert errsigs(got) == ["errsig:" + NEW.strip()] and OLD.strip() not in text


def test_a_rotated_log_under_a_new_name_does_not_bring_its_old_errors_back(tmp_path: Path):
    write(tmp_path / "logs/app.log", OLD)
    _, marks, _ = read(tmp_path, None, T0)
    (tmp_path / "logs/app.log").rename(tmp_path / "logs/app-2026-11-22.log")
    write(tmp_path / "logs/app.log", FINE)
    got, _, text = read(tmp_path, marks, T0 + timedelta(hours=1))
    assert errsigs(got) == [] and "all good" in text


def test_a_line_still_being_written_is_read_again_whole(tmp_path: Path):
    log = write(tmp_path / "logs/plain.log", "starting\nError: cannot op")
    _, marks, _ = read(tmp_path, None, T0)
    write(log, "en sensors.csv\n", "a")
    assert errsigs(read(tmp_path, marks, T0)[0]) == ["errsig:Error: cannot open sensors.csv"]


def test_a_session_gives_signals_from_its_new_records_only(tmp_path: Path):
    settings = Settings(transcript_globs=["sessions/*.jsonl"], transcript_max_age_hours=0)
    rec = ('{"type": "user", "timestamp": "%s", "message": {"role": "user", "content": '
           '[{"type": "tool_result", "is_error": true, "content": "Error: %s"}]}}\n')
    session = write(tmp_path / "sessions/a.jsonl", rec % ("2026-11-22T09:00:00Z", "disk full on /var"))
    first, marks, _ = read(tmp_path, None, T0, settings)
    assert any("disk full" in s for s in errsigs(first))
    assert errsigs(read(tmp_path, marks, T0, settings)[0]) == []
    write(session, rec % ("2026-11-22T10:20:00Z", "permission denied on /srv"), "a")
    later = " ".join(errsigs(read(tmp_path, marks, T0, settings)[0]))
    assert "permission denied" in later and "disk full" not in later


# ------------------------------------------------------------------ through the engine

NOOP_AGENT = "import sys; sys.stdin.read(); print('nothing to change')"
EDIT_AGENT = ("import sys, pathlib; sys.stdin.read(); p = pathlib.Path('app.py'); "
              "p.write_text(p.read_text() + 'y = 2\\n'); print('GEP_SUMMARY: Handle the missing region')")


def test_with_learning_off_an_error_logged_before_the_last_change_is_not_chased(tmp_path: Path,
                                                                                monkeypatch: pytest.MonkeyPatch):
    from conftest import init_repo

    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    ws = init_repo(tmp_path / "ws", {"gep.toml": '[gep]\nlearning = "off"\nvalidation = ["python check.py"]\n'
                                                 'log_globs = ["logs/*.log"]\n',
                                     ".gitignore": "logs/\n", "app.py": "x = 1\n",
                                     "check.py": "import app\n"})
    write(ws / "logs/job.log", OLD)

    def cycle(agent: str, at: datetime) -> EvolutionEvent:
        cmd = shlex.join([sys.executable, "-c", agent])
        event = run_cycle(CycleRequest(workspace=ws, mutator="command", agent_cmd=cmd, seed=1),
                          env=dict(os.environ), clock=lambda: at)
        assert event is not None
        return event

    assert errsigs(cycle(NOOP_AGENT, T0).signals) == ["errsig:" + OLD.strip()]
    # an attempt that changed nothing leaves the error as live as it was
    assert errsigs(cycle(NOOP_AGENT, T0 + timedelta(hours=1)).signals) == ["errsig:" + OLD.strip()]
    changed = cycle(EDIT_AGENT, T0 + timedelta(hours=2))
    assert changed.outcome.status == "success" and changed.meta.commit, changed.meta.failure_reasons
    # nothing logged since the change: the old line is not chased (the old engine chased it every cycle)
    assert errsigs(cycle(NOOP_AGENT, T0 + timedelta(hours=3)).signals) == []
    with Store.for_workspace(ws) as store:
        marks = store.get_state(READ_MARKS_KEY, ReadMarks)
    assert marks is not None and marks.files[0].path == "logs/job.log"
    write(ws / "logs/job.log", NEW, "a")
    assert errsigs(cycle(NOOP_AGENT, T0 + timedelta(hours=4)).signals) == ["errsig:" + NEW.strip()]
