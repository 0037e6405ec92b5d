"""Verified fixes: old log lines do not drive repair; a recurrence does, and counts against the fix.

Real files in a tmp workspace, read with gep.signals.sources' timelines; signals from the real extractor."""

from __future__ import annotations

import json
import random
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from conftest import EXAMPLE

from gep.assets.gene_files import load_genes_dir, seed_genes_dir
from gep.core.config import Settings
from gep.genes.selector import select_gene_and_capsule
from gep.learning.resolved import Resolution, check_resolutions, resolution_for_commit, signal_identity
from gep.signals.rules import extract_signals
from gep.signals.sources import collect_sources, collect_tails, file_marks, parse_line_time

COMMIT = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
LATER = COMMIT + timedelta(hours=2)
OLD_LOG = ("2026-11-22T09:58:00Z INFO report: start\n"
           "2026-11-22T09:58:01Z [ERROR] report: KeyError: 'sensor-9' in load_config (config.py line 12)\n"
           "Traceback (most recent call last):\n"
           "  File \"config.py\", line 12, in load_config\n")
RECUR = "2026-11-22T11:30:00Z [ERROR] report: KeyError: 'sensor-9' in load_config (config.py line 14)\n"
OTHER = "2026-11-22T11:31:00Z [ERROR] report: ValueError: negative reading -3 in temp-2\n"


def write(path: Path, text: str, mode: str = "w") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open(mode, encoding="utf-8") as fh:
        fh.write(text)
    return path


def signals_of(ws: Path, now: datetime) -> list[str]:
    b = collect_sources(ws, Settings(), now=now)
    return extract_signals(recent_session_transcript=b.recent_session_transcript, today_log=b.today_log,
                           memory_snippet=b.memory_snippet, user_snippet=b.user_snippet)


def fix(ws: Path, signals: list[str], at: datetime = COMMIT) -> Resolution:
    res = resolution_for_commit(event_id="evt_fix", gene_id="gene_repair", signals=signals, commit_sha="c0ffee",
                                committed_at=at, files=file_marks(ws, Settings(), at))
    assert res is not None
    return res


def check(ws: Path, res: list[Resolution], now: datetime = LATER):
    return check_resolutions(signals_of(ws, now), res, collect_tails(ws, Settings(), now), now)


def errsigs(signals: list[str]) -> list[str]:
    return [s for s in signals if s.startswith("errsig:")]


# ------------------------------------------------------------------ timelines


@pytest.mark.parametrize("line, expected", [
    ("2026-11-21T09:14:03Z [ERROR] x", datetime(2026, 11, 21, 9, 14, 3, tzinfo=UTC)),
    ("[2026-11-21 09:14:03,250] ERROR x", datetime(2026, 11, 21, 9, 14, 3, 250000, tzinfo=UTC)),
    ("2026-11-21T10:14:03+01:00 x", datetime(2026, 11, 21, 9, 14, 3, tzinfo=UTC)),
    ("2026-11-21 09:14 x", datetime(2026, 11, 21, 9, 14, tzinfo=UTC)),
    ("  2026-11-21T09:14:03.123456789Z x", datetime(2026, 11, 21, 9, 14, 3, 123456, tzinfo=UTC)),
    ("Error at 2026-11-21T09:14:03Z", None),  # not at the start of the line
    ("2026-13-45T09:14:03Z nonsense date", None),
    ("plain line", None),
    # a log line that is a JSON object: its time field
    ('{"ts": "2026-11-21T09:14:03+00:00", "status": "error"}', datetime(2026, 11, 21, 9, 14, 3, tzinfo=UTC)),
    ('{"level": "error", "@timestamp": "2026-11-21T09:14:03Z"}', datetime(2026, 11, 21, 9, 14, 3, tzinfo=UTC)),
    ('{"level": "error", "msg": "2026-11-21T09:14:03Z"}', None),  # a time in the message is not the line's
])
def test_parse_line_time(line, expected):
    assert parse_line_time(line) == expected


def test_tails_give_offsets_inherited_times_and_redacted_text(tmp_path: Path):
    log = write(tmp_path / "logs/app.log", OLD_LOG + "untimed token=abcd1234efgh5678\n")
    sessions = tmp_path / "sessions"
    write(sessions / "s.jsonl", json.dumps({"type": "user", "timestamp": "2026-11-22T09:00:00.000Z",
                                            "message": {"role": "user", "content": "please fix it"}}) + "\n")
    tails = {t.path: t for t in collect_tails(tmp_path, Settings(transcript_max_age_hours=0), COMMIT)}
    app = tails["logs/app.log"]
    raw = log.read_bytes()
    assert app.kind == "log" and app.size == len(raw)
    assert [raw[x.start:].split(b"\n", 1)[0].decode()[:10] for x in app.lines] == [
        "2026-11-22", "2026-11-22", "Traceback ", "  File \"co", "untimed to"]
    # the traceback continues the timestamped line before it: it inherits its time
    assert [x.at.minute if x.at else None for x in app.lines] == [58, 58, 58, 58, 58]
    assert "abcd1234efgh5678" not in app.lines[-1].text
    session = tails["sessions/s.jsonl"]
    assert session.kind == "transcript" and session.lines[0].at == datetime(2026, 11, 22, 9, 0, tzinfo=UTC)
    marks = {m.path: m.size for m in file_marks(tmp_path, Settings(transcript_max_age_hours=0), COMMIT)}
    assert marks == {"logs/app.log": len(raw), "sessions/s.jsonl": (sessions / "s.jsonl").stat().st_size}


def test_a_truncated_tail_keeps_true_file_offsets(tmp_path: Path):
    log = write(tmp_path / "logs/big.log", "".join(f"line {k:05d}\n" for k in range(5000)))
    tail = collect_tails(tmp_path, Settings(log_tail_bytes=1000), COMMIT)[0]
    raw = log.read_bytes()
    assert tail.lines and all(raw[x.start:x.start + len(x.text)].decode() == x.text for x in tail.lines)
    assert tail.lines[-1].text == "line 04999"


def test_a_key_block_spanning_lines_leaves_no_line_behind(tmp_path: Path):
    body = "MIIEowIBAAKCAQEAuQ1234567890abcdefghijklmnopqrstuvwxyzABCDEF"
    write(tmp_path / "logs/k.log", f"start\n-----BEGIN RSA PRIVATE KEY-----\n{body}\n{body}\n"
                                   "-----END RSA PRIVATE KEY-----\nafter\n")
    texts = [x.text for x in collect_tails(tmp_path, Settings(), COMMIT)[0].lines]
    assert texts[0] == "start" and texts[-1] == "after"
    assert not any(body in t for t in texts)


# ------------------------------------------------------------------ the rule


def test_signal_identity_ignores_time_numbers_and_counts():
    a = signal_identity("errsig:2026-11-21T09:14:03Z [ERROR] report: KeyError: 'sensor-9' in load (x.py line 12)")
    b = signal_identity("errsig:2026-11-23T18:00:00Z [ERROR] report: KeyError: 'sensor-9' in load (x.py line 14)")
    assert a == b and a.startswith("errsig:[error] report: keyerror")
    assert signal_identity("recurring_errsig(3x):Error: x 1") == signal_identity("recurring_errsig(7x):Error: x 2")
    assert signal_identity("log_error") == "log_error"
    assert signal_identity("stable_success_plateau") is None


def test_old_lines_do_not_drive_repair_and_a_recurrence_does(tmp_path: Path):
    write(tmp_path / "logs/app.log", OLD_LOG)
    before = signals_of(tmp_path, COMMIT)
    assert "log_error" in before and errsigs(before)
    res = fix(tmp_path, before)
    assert res.signals == before

    quiet = check(tmp_path, [res])
    assert quiet.signals == ["stable_success_plateau"]
    assert [r.signal for r in quiet.resolved] == before and quiet.resolved[0].commit_sha == "c0ffee"
    # nothing ran since the commit (no new line): resolved for repair, but the fix is not judged yet
    assert quiet.verdicts == [] and quiet.updated == []

    # a line from an unrelated log is no evidence that the code that failed ran again
    write(tmp_path / "logs/other.log", "2026-11-22T10:30:00Z INFO cron: tick\n")
    assert check(tmp_path, [res]).verdicts == []

    # the log that showed the error grew, without it: verified, on the lines it wrote
    write(tmp_path / "logs/app.log", "2026-11-22T11:00:00Z INFO report: all good\n", "a")
    ran = check(tmp_path, [res])
    assert ran.signals == ["stable_success_plateau"]
    assert [(v.verdict, v.new_lines) for v in ran.verdicts] == [("verified", 1)]
    verified = ran.updated[0]
    assert verified.status == "verified" and verified.checked_at == LATER

    # the same error with a later timestamp: live again, and the fix did not hold
    write(tmp_path / "logs/app.log", RECUR, "a")
    live = check(tmp_path, [verified])
    assert "log_error" in live.signals and errsigs(live.signals) == errsigs(before)
    assert {r.signal for r in live.live_again} == set(before) and live.resolved == []
    assert [(v.verdict, v.event_id, v.live_signals) for v in live.verdicts] == [
        ("did_not_hold", "evt_fix", errsigs(before))]
    assert live.updated[0].status == "did_not_hold"
    # a fix that did not hold resolves nothing any more
    assert check(tmp_path, live.updated).signals == live.signals
    assert check(tmp_path, live.updated).verdicts == []


def test_appended_lines_without_timestamps_count_by_the_size_at_commit(tmp_path: Path):
    log = write(tmp_path / "logs/plain.log", "starting\nError: cannot open sensors.csv\nretrying\n")
    before = signals_of(tmp_path, COMMIT)
    res = fix(tmp_path, before)
    assert res.files[0].size == log.stat().st_size
    assert check(tmp_path, [res]).signals == ["stable_success_plateau"]
    write(log, "done\n", "a")
    assert check(tmp_path, [res]).verdicts[0].verdict == "verified"
    write(log, "Error: cannot open sensors.csv\n", "a")
    again = check(tmp_path, [res])
    assert errsigs(again.signals) == errsigs(before) and again.verdicts[0].verdict == "did_not_hold"


def test_a_rotated_log_is_all_new(tmp_path: Path):
    log = write(tmp_path / "logs/plain.log", "x" * 200 + "\nError: cannot open sensors.csv\n")
    res = fix(tmp_path, signals_of(tmp_path, COMMIT))
    write(log, "Error: cannot open sensors.csv\n")  # truncated and written again: not the bytes we saw
    assert check(tmp_path, [res]).verdicts[0].verdict == "did_not_hold"


def test_a_log_rewritten_as_long_or_longer_is_all_new(tmp_path: Path):
    # a log written anew each run (not appended to) that is no shorter than at the commit: its first bytes
    # differ, so its lines are not the ones the fix saw
    log = write(tmp_path / "logs/plain.log", "run 1 starting\nError: cannot open sensors.csv\n")
    res = fix(tmp_path, signals_of(tmp_path, COMMIT))
    write(log, "run 2 starting\nError: cannot open sensors.csv\nretrying\n")
    assert check(tmp_path, [res]).verdicts[0].verdict == "did_not_hold"
    write(log, "run 1 starting\nError: cannot open sensors.csv\nretrying\n")  # the same start: appended to
    assert check(tmp_path, [res]).verdicts[0].verdict == "verified"


def test_a_new_error_takes_the_place_of_the_resolved_one(tmp_path: Path):
    write(tmp_path / "logs/app.log", OLD_LOG)
    res = fix(tmp_path, signals_of(tmp_path, COMMIT))
    write(tmp_path / "logs/app.log", OTHER, "a")
    got = check(tmp_path, [res])
    # the old KeyError line is still the first error line of the log, but it no longer drives repair
    assert errsigs(got.signals) == ["errsig:" + OTHER.strip()]
    assert "log_error" in got.signals and [r.signal for r in got.live_again] == ["log_error"]
    assert got.verdicts[0].verdict == "verified"  # the KeyError did not come back


def test_the_newest_fix_decides(tmp_path: Path):
    write(tmp_path / "logs/app.log", OLD_LOG)
    first = fix(tmp_path, signals_of(tmp_path, COMMIT))
    write(tmp_path / "logs/app.log", RECUR, "a")  # came back at 11:30 ...
    second_at = COMMIT + timedelta(hours=2)
    second = resolution_for_commit(event_id="evt_fix2", gene_id="gene_repair", signals=signals_of(tmp_path, second_at),
                                   commit_sha="beef", committed_at=second_at,
                                   files=file_marks(tmp_path, Settings(), second_at))
    got = check(tmp_path, [second, first], now=second_at + timedelta(hours=1))
    # ... and was fixed again at 12:00: resolved by the second fix; the first did not hold
    assert got.signals == ["stable_success_plateau"]
    assert {r.commit_sha for r in got.resolved} == {"beef"}
    # the second fix: nothing ran since it, so not judged yet
    assert sorted((v.event_id, v.verdict) for v in got.verdicts) == [("evt_fix", "did_not_hold")]
    write(tmp_path / "logs/app.log", "2026-11-22T12:30:00Z INFO report: done\n", "a")
    later = check(tmp_path, [second], now=second_at + timedelta(hours=1))
    assert [(v.event_id, v.verdict) for v in later.verdicts] == [("evt_fix2", "verified")]


def test_transcript_records_count_by_their_timestamps(tmp_path: Path):
    def record(at: str, text: str) -> str:
        return json.dumps({"type": "user", "timestamp": at, "message": {"role": "user", "content": text}}) + "\n"

    settings = Settings(transcript_max_age_hours=0)
    session = write(tmp_path / "sessions/s.jsonl", record("2026-11-22T09:00:00Z", "Error: the export crashed"))
    b = collect_sources(tmp_path, settings, now=COMMIT)
    before = extract_signals(recent_session_transcript=b.recent_session_transcript, today_log=b.today_log)
    assert errsigs(before)
    res = resolution_for_commit(event_id="e", gene_id="g", signals=before, commit_sha="s", committed_at=COMMIT,
                                files=file_marks(tmp_path, settings, COMMIT))
    tails = collect_tails(tmp_path, settings, LATER)
    assert check_resolutions(before, [res], tails, LATER).verdicts == []  # the session said nothing since
    write(session, record("2026-11-22T10:30:00Z", "thanks, the export works"), "a")
    tails = collect_tails(tmp_path, settings, LATER)
    assert check_resolutions(before, [res], tails, LATER).verdicts[0].verdict == "verified"
    write(session, record("2026-11-22T11:00:00Z", "Error: the export crashed"), "a")
    tails = collect_tails(tmp_path, settings, LATER)
    assert check_resolutions(before, [res], tails, LATER).verdicts[0].verdict == "did_not_hold"


def test_no_problem_signal_no_resolution():
    assert resolution_for_commit(event_id="e", gene_id="g", signals=["stable_success_plateau", "ban_gene:x"],
                                 commit_sha="s", committed_at=COMMIT, files=[]) is None


def test_demo_cycle_two_does_not_repair_what_cycle_one_fixed(tmp_path: Path):
    """The example workspace: cycle 1 repairs stats.mean from logs/agent.log; nothing new is logged; cycle 2
    must not choose repair again from the same, already fixed, log lines."""
    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLE, ws)
    genes = load_genes_dir(seed_genes_dir())
    t1 = datetime(2026, 11, 23, 8, 0, tzinfo=UTC)  # after the log's 2026-11-21 lines

    def pick(signals: list[str]) -> str | None:
        sel = select_gene_and_capsule(genes=genes, capsules=[], failed_capsules=[], signals=signals,
                                      recent_events=[], settings=Settings(), rng=random.Random(1), now=t1)
        return sel.gene.id if sel.gene else None

    cycle1 = signals_of(ws, t1)
    assert pick(cycle1) == "gene_repair_from_errors"
    res = fix(ws, cycle1, at=t1 + timedelta(minutes=3))
    t2 = t1 + timedelta(minutes=10)
    cycle2 = check(ws, [res], now=t2)
    assert not any(s == "log_error" or s.startswith("errsig") for s in cycle2.signals)
    assert pick(cycle2.signals) != "gene_repair_from_errors"
    assert cycle2.verdicts == []  # nothing was logged since the fix: committed, not yet judged


def test_a_failing_test_re_run_and_passing_is_evidence_without_new_lines(tmp_path: Path):
    """Issue 44: a fix is verified with nothing new in the logs only when its failing check ran again after it
    (its own validation re-ran the failing test) and passed; an error line alone is not judged yet."""
    write(tmp_path / "logs/ci.log", "2026-11-22T09:58:00Z FAILED tests/test_m.py::test_mean - AssertionError: assert 6.0 == 4.0\n")
    before = signals_of(tmp_path, COMMIT)
    failing = errsigs(before)
    assert failing
    plain = fix(tmp_path, before)
    rerun = plain.model_copy(update={"rerun": failing})
    assert check(tmp_path, [plain]).verdicts == []
    [v] = check(tmp_path, [rerun]).verdicts
    assert (v.verdict, v.evidence, v.new_lines) == ("verified", "rerun", 0)
    # it comes back anyway: did not hold, whatever the re-run said
    write(tmp_path / "logs/ci.log", "2026-11-22T11:00:00Z FAILED tests/test_m.py::test_mean - AssertionError: assert 6.0 == 4.0\n", "a")
    assert [x.verdict for x in check(tmp_path, [rerun]).verdicts] == ["did_not_hold"]
