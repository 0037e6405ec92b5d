"""Behavioural signals in a cycle (issue 17): captured from the transcripts the cycle reads, merged into its
signals, kept in the store, and approvals after GEP changes counted as feedback.

Collect (:func:`capture_behavior`): the exchanges of the sessions the cycle reads are captured by the rules
(each exchange once, whether a ``gep capture`` hook or an earlier cycle saw it first; the daily and
per-exchange caps hold in gep/signals/behavior_log.py), then, with ``llm_signals``, the Claude pass asks about the
exchanges the rules found nothing in (its tokens and cost go on the event).

Extract (:func:`use_behavior`): the signals said since the last cycle (hooks' and this cycle's, from the
workspace's files) and those this cycle captured become GEP signals beside the log rules'; they are added to
the store; an approval after a GEP change counts as ``helpful`` for its gene (gep/learning/approval.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path

from pydantic import BaseModel, Field

from gep.core.config import Settings
from gep.core.models import EvolutionEvent
from gep.core.records import BehaviorRecord, InputWarning, LlmPassRecord
from gep.learning.approval import record_approvals
from gep.learning.corrections import is_correction, record_corrections
from gep.learning.memory_graph import parse_at
from gep.signals.behavior import StoredSignal, gep_signals
from gep.signals.behavior_log import Busy, capture_sessions, read_signals
from gep.signals.claude_pass import capture_llm
from gep.signals.rules import PLATEAU
from gep.signals.sources import SKIPPED_RECORDS, TranscriptExchange, collect_exchanges
from gep.store import Store


class BehaviorCapture(BaseModel):
    """What collect found, for extract: the record so far, the signals written, the Claude pass's signals."""

    record: BehaviorRecord = Field(default_factory=BehaviorRecord)
    written: list[StoredSignal] = Field(default_factory=list)
    llm_signals: list[str] = Field(default_factory=list)
    # the exchanges that correct the agent (in memory only: matched against what GEP changes touched)
    corrections: list[TranscriptExchange] = Field(default_factory=list)


def capture_behavior(workspace: Path, *, settings: Settings, env: Mapping[str, str], now: datetime,
                     cycle_number: int, no_llm: str | None = None) -> BehaviorCapture:
    """Capture the behavioural signals of the sessions the cycle reads. Never raises for a capture problem
    (a held lock, an unwritable folder): the cycle goes on without them and the event says why.
    ``no_llm``: why the Claude pass may not run this cycle (its exchanges wait for a later one)."""
    out = BehaviorCapture()
    # the transcripts' own problems are the sources' warnings already (the same files): not noted twice; the
    # records skipped inside a readable file are counted here only (the sources' rendering does not parse times)
    seen: list[InputWarning] = []
    sessions = collect_exchanges(workspace, settings, now, warnings=seen)
    out.record.warnings += [w for w in seen if w.reason.endswith(SKIPPED_RECORDS)]
    out.record.exchanges = sum(len(s.exchanges) for s in sessions)
    out.corrections = [ex for s in sessions for ex in s.exchanges if is_correction(ex)]
    try:
        report = capture_sessions(workspace, sessions, now=now)
        out.written = report.written
        out.record.warnings += report.warnings
        out.record.new_exchanges, out.record.captured, out.record.capped = (report.new, len(report.written),
                                                                            report.capped)
        if settings.llm_signals and no_llm:
            out.record.llm = LlmPassRecord(not_run=no_llm)
        elif settings.llm_signals:
            llm = capture_llm(workspace, sessions, settings=settings, env=env, now=now, cycle_number=cycle_number)
            out.llm_signals = llm.gep_signals
            out.record.llm = llm.record
    except (Busy, OSError) as exc:
        out.record.errors.append(f"behavioural capture: {type(exc).__name__}: {exc}"[:300])
    return out


def signals_since(events: Sequence[EvolutionEvent], settings: Settings, now: datetime) -> datetime | None:
    """From when the signals said are new to this cycle: the last cycle's start (to the second, as signals are
    stamped: one said in the second that cycle started is not lost), else the transcripts' window."""
    last = parse_at(events[-1].meta.at) if events else None
    if last is not None:
        return last.replace(microsecond=0)
    hours = settings.transcript_max_age_hours
    return now - timedelta(hours=hours) if hours > 0 else None


def merge_signals(corpus: Sequence[str], behavioural: Sequence[str]) -> list[str]:
    """The log rules' signals, then the behavioural ones; "nothing to do" goes when a person said something."""
    base = [s for s in corpus if not (behavioural and s == PLATEAU and len(corpus) == 1)]
    return list(dict.fromkeys([*base, *behavioural]))


def use_behavior(capture: BehaviorCapture, *, corpus: Sequence[str], workspace: Path, store: Store,
                 events: Sequence[EvolutionEvent], settings: Settings, now: datetime) -> list[str]:
    """The cycle's signals with the behavioural ones merged in (``capture.record`` completed in place).
    ``events``: the recent finished events, oldest first (the previous cycle is the last)."""
    record = capture.record
    read = read_signals(workspace, since=signals_since(events, settings, now), trusted=True)
    record.malformed = read.malformed
    record.warnings += [w for w in read.warnings if w not in record.warnings]
    said = list({(s.key, s.type, s.summary, s.ts): s for s in [*read.signals, *capture.written]}.values())
    said.sort(key=lambda s: s.at)
    record.stored = store.add_behavior_signals(said)
    record.signals = list(dict.fromkeys([*gep_signals(said), *capture.llm_signals]))
    record.approvals = record_approvals(store, said, events)
    if capture.corrections:  # recorded in every arm, as approvals are; only its use is gated (learning_switch)
        record.corrected = record_corrections(store, capture.corrections, events, store.recent_resolutions())
    return merge_signals(corpus, record.signals)
