"""Issue 32 finding 8: one record a source cannot parse costs that record, never the cycle.

A transcript timestamp at the edge of datetime's range (``9999-12-31T23:59:59-14:00`` is valid ISO-8601 but
has no UTC time) made every cycle fail in "collect sources" with OverflowError; a record nested past the
JSON parser's depth raised RecursionError. They are now skipped and counted."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gep.core.config import Settings
from gep.cycle.context import CycleRequest
from gep.cycle.pipeline import run_cycle
from gep.signals.sources import (
    collect_exchanges,
    collect_tails,
    parse_line_time,
    render_transcript,
    transcript_exchanges,
)

EDGE = "9999-12-31T23:59:59-14:00"
BAD_TIMES: list[object] = [EDGE, "0001-01-01T00:00:00+14:00", "not a time", 10**30, float("inf")]


def _record(ts: object, text: str) -> str:
    return json.dumps({"type": "user", "sessionId": "s1", "timestamp": ts,
                       "message": {"role": "user", "content": text}})


def _session(bad: list[str]) -> str:
    good = [_record("2026-11-28T01:00:00Z", "no, that's wrong: use tabs, not spaces"),
            json.dumps({"type": "assistant", "sessionId": "s1", "timestamp": "2026-11-28T01:00:05Z",
                        "message": {"role": "assistant", "content": [{"type": "text", "text": "done"}]}}),
            _record("2026-11-28T01:01:00Z", "thanks, that works")]
    return "\n".join([good[0], *bad, *good[1:]]) + "\n"


def test_each_unreadable_record_is_skipped_and_counted() -> None:
    bad = [_record(ts, f"bad {i}") for i, ts in enumerate(BAD_TIMES)] + ["[" * 5_000, "{not json"]
    parsed = transcript_exchanges(_session(bad))
    assert [e.user for e in parsed.exchanges] == ["no, that's wrong: use tabs, not spaces", "thanks, that works"]
    assert parsed.skipped_records == len(bad)
    assert all(e.ts is not None and e.ts.tzinfo is UTC for e in parsed.exchanges)
    assert "thanks, that works" in render_transcript(_session(bad))
    assert parse_line_time(f"{EDGE} ERROR boom") is None
    assert parse_line_time(f'{{"ts": "{EDGE}", "msg": "boom"}}') is None


@pytest.mark.timeout(120)
def test_a_cycle_reads_around_them(example_ws: Path) -> None:
    sessions = example_ws / "sessions"
    sessions.mkdir()
    (sessions / "edge.jsonl").write_text(_session([_record(EDGE, "bad"), "[" * 5_000]))
    with (example_ws / "logs" / "app.log").open("a") as log:
        log.write(f"{EDGE} ERROR a line from the end of time\n")
    warnings: list[object] = []
    collect_exchanges(example_ws, Settings(), datetime.now(UTC), warnings)  # type: ignore[arg-type]
    assert [str(w) for w in warnings] and "2 records skipped: they cannot be parsed" in str(warnings[0])
    assert collect_tails(example_ws, Settings(), datetime.now(UTC), [])
    event = run_cycle(CycleRequest(workspace=example_ws, mutator="prompt", seed=1), env={})
    assert event is not None and event.outcome.status != "failed", event.meta.failure_reasons
    # counted where the cycle keeps what it read (it was only in the helper's list, thrown away by the cycle)
    assert event.meta.behavior is not None
    assert [w.reason for w in event.meta.behavior.warnings] == ["2 records skipped: they cannot be parsed"]
