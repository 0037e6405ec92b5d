"""A live problem is never starved by the loop rules (gep/learning/live_problems.py): an error the seed's loop rules removed comes
back when a log line of it was written after the last cycle that tried it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from learning_helpers import ERROR_LINE, LOG, REPAIR, agent_workspace, cycle, finish, store_of, venv_first

from gep.core.models import EvolutionEvent, Outcome, iso
from gep.learning.live_problems import restore_live
from gep.signals.rules import extract_signals
from gep.signals.sources import FileTail, TailLine

pytestmark = pytest.mark.timeout(300)
T0 = datetime(2026, 11, 28, 1, 0, tzinfo=UTC)


def _stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def _empty(k: int, at: datetime, signals: list[str], gene: str = REPAIR) -> EvolutionEvent:
    e = EvolutionEvent(id=f"evt_empty_{k}", genes_used=[gene], signals=signals,
                       outcome=Outcome(status="empty", score=0.0))
    e.meta.at, e.meta.empty_cycle = iso(at), True
    return e


def _tail(*lines: tuple[datetime, str]) -> FileTail:
    return FileTail(path="logs/agent.log", kind="log", size=1000,
                    lines=[TailLine(start=i * 100, at=at, text=text) for i, (at, text) in enumerate(lines)])


def test_an_error_logged_after_the_last_attempt_is_put_back_and_an_old_one_is_not() -> None:
    old = f"{_stamp(T0)} {ERROR_LINE}"
    corpus = extract_signals(today_log=old + "\n", recent_events=[])
    errsig = next(s for s in corpus if s.startswith("errsig:"))
    events = [_empty(k, T0 + timedelta(minutes=k), corpus) for k in range(5)]
    final = extract_signals(today_log=old + "\n", recent_events=events)
    assert "empty_cycle_loop_detected" in final and errsig not in final  # the seed's rule, exact
    # only the old line: the loop rule stands
    assert restore_live(final, corpus, [_tail((T0, old))], events) == final
    # the same error at a later time than the last attempt: live
    new = f"{_stamp(T0 + timedelta(hours=1))} {ERROR_LINE}"
    got = restore_live(final, corpus, [_tail((T0, old), (T0 + timedelta(hours=1), new))], events)
    assert errsig in got and "log_error" in got and "empty_cycle_loop_detected" not in got, got


def test_a_live_error_reaches_repair_in_a_real_cycle_despite_an_empty_cycle_loop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    venv_first(monkeypatch)
    ws = agent_workspace(tmp_path / "ws")
    now = datetime.now(UTC)
    first = cycle(ws, 1)  # the example's error, read now
    signals = list(first.signals)
    with store_of(ws) as store:
        for k in range(5):  # five empty cycles of another gene on it, all before the next log line
            store.add_event(_empty(k, now - timedelta(minutes=30 - k), signals, "gene_optimize_code_quality"))
    with (ws / LOG).open("a") as fh:
        fh.write(f"{_stamp(now + timedelta(minutes=1))} {ERROR_LINE}\n")
    finish(ws)  # closes the first (prompt) cycle: nothing changed
    nxt = cycle(ws, 2)
    assert any(s.startswith("errsig:") for s in nxt.signals), nxt.signals
    assert "empty_cycle_loop_detected" not in nxt.signals
    assert nxt.genes_used == [REPAIR], nxt.meta.selector
