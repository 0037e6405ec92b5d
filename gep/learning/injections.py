"""Whether what reached an agent's session helped: each injection of context is recorded, and later judged.

``gep capture`` (the ``SessionStart`` hook) appends one ``inject`` line per session to
``<workspace>/.gep/context/injections.jsonl``: the session, the time, and each item it carried (a lesson id,
a behavioural signal's ref) with the problems it was about; ``gep mcp`` appends one per answer of
``gep_recall`` (``"via": "recall"``: what the agent asked for and was given), judged the same way. The next cycle judges every injection made before it
started, once (a ``judge`` line per item, seed 003's kinds):

* an item about a problem: **ignored** when a log or transcript line written after the injection shows the
  problem again, else **used**;
* a preference or correction: **ignored** when the same signal was captured again after the injection, else
  **used**.

Each item's usefulness is folded as seed 003 folds a gene's (used +0.1, ignored -0.05 at confidence 1, decaying
toward 0.5 by 0.95 a week); an item ignored at least :data:`MIN_IGNORED` times whose score fell below
:data:`DROP_BELOW` is no longer injected. One file per workspace: the hook appends a line without the store.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from gep.core.config import Settings
from gep.learning.agent_context import ContextItem, signal_ref
from gep.learning.context_cache import LOG, SESSION_START, append_injection
from gep.learning.feedback import FeedbackKind, clamp01, decayed, score_delta
from gep.learning.resolved import line_shows, normalized_line
from gep.signals.behavior import BehaviorSignal
from gep.signals.behavior_log import read_signals
from gep.signals.sources import FileTail, collect_tails

MIN_IGNORED = 2
DROP_BELOW = 0.45
CONFIDENCE = 1.0
Verdict = Literal["used", "ignored"]


class Injected(BaseModel):
    ref: str
    kind: str
    problems: list[str] = Field(default_factory=list)


class Injection(BaseModel):
    type: Literal["inject"] = "inject"
    id: str
    at: datetime
    session: str = ""
    via: str = SESSION_START  # or "recall": the agent asked for it mid-task (gep mcp's gep_recall)
    items: list[Injected] = Field(default_factory=list)


class Judgment(BaseModel):
    type: Literal["judge"] = "judge"
    injection: str
    ref: str
    verdict: Verdict
    at: datetime


class ItemScore(BaseModel):
    ref: str
    injections: int = 0
    recalled: int = 0  # of the injections, those an agent asked for (gep mcp's gep_recall)
    used: int = 0
    ignored: int = 0
    score: float = 0.5


def log_path(workspace: Path) -> Path:
    return Path(workspace) / LOG


def _append(workspace: Path, records: Sequence[BaseModel]) -> None:
    if not records:
        return
    path = log_path(workspace)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(r.model_dump_json() + "\n" for r in records)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, data.encode("utf-8"))  # one write: concurrent hooks do not interleave their lines
    finally:
        os.close(fd)


def read_log(workspace: Path) -> tuple[list[Injection], list[Judgment]]:
    """Every injection and judgment recorded (lines that do not parse are skipped: a hand edit costs itself)."""
    injections: list[Injection] = []
    judgments: list[Judgment] = []
    try:
        text = log_path(workspace).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return injections, judgments
    for line in text.splitlines():
        try:
            data = json.loads(line)
            if data.get("type") == "inject":
                injections.append(Injection.model_validate(data))
            elif data.get("type") == "judge":
                judgments.append(Judgment.model_validate(data))
        except (ValueError, AttributeError, ValidationError):
            continue
    return injections, judgments


def record_injection(workspace: Path, *, session: str, items: Sequence[ContextItem], now: datetime,
                     via: str = SESSION_START) -> str | None:
    """Append what a session received (nothing when it received nothing); the injection's id. ``via``
    "recall": what an agent asked for and was given (judged as a session's context is)."""
    return append_injection(workspace, session=session, items=[i.model_dump(mode="json") for i in items], now=now,
                            via=via)


def _problem_back(problems: Sequence[str], since: datetime, tails: Sequence[FileTail]) -> bool:
    lines = [normalized_line(x.text) for t in tails for x in t.lines if x.at is not None and x.at > since]
    return any(line_shows(p, line) for p in problems for line in lines)


def _verdict(item: Injected, at: datetime, tails: Sequence[FileTail], signals: Sequence[BehaviorSignal]) -> Verdict | None:
    if item.problems:
        return "ignored" if _problem_back(item.problems, at, tails) else "used"
    if item.ref.startswith("signal:"):
        again = any(signal_ref(s) == item.ref and s.at > at for s in signals)
        return "ignored" if again else "used"
    return None  # a person's note: nothing to judge it by


def judge_injections(workspace: Path, *, started_at: datetime, tails: Sequence[FileTail],
                     signals: Sequence[BehaviorSignal], now: datetime) -> list[Judgment]:
    """Judge, once, every injection made before this cycle started; returns the judgments appended."""
    injections, judgments = read_log(workspace)
    done = {(j.injection, j.ref) for j in judgments}
    out: list[Judgment] = []
    for inj in injections:
        if inj.at >= started_at:
            continue
        for item in inj.items:
            verdict = None if (inj.id, item.ref) in done else _verdict(item, inj.at, tails, signals)
            if verdict is not None:
                out.append(Judgment(injection=inj.id, ref=item.ref, verdict=verdict, at=now))
    _append(workspace, out)
    return out


def pending(workspace: Path, started_at: datetime) -> list[Injection]:
    """Injections made before ``started_at`` with an item not judged yet."""
    injections, judgments = read_log(workspace)
    done = {(j.injection, j.ref) for j in judgments}
    return [i for i in injections if i.at < started_at and any((i.id, x.ref) not in done for x in i.items)]


def judge_for_cycle(workspace: Path, settings: Settings, started_at: datetime) -> list[Judgment]:
    """The extract stage's call: judge what sessions received since the last cycle (reads the logs' tails and
    the behavioural signals only when an injection waits for its verdict)."""
    waiting = pending(workspace, started_at)
    if not waiting:
        return []
    since = min(i.at for i in waiting)
    tails = collect_tails(workspace, settings, started_at)
    signals = read_signals(workspace, since=since).signals
    return judge_injections(workspace, started_at=started_at, tails=tails, signals=signals, now=started_at)


def scores(injections: Iterable[Injection], judgments: Iterable[Judgment], now: datetime) -> dict[str, ItemScore]:
    """Per item ref: how often injected, used, ignored, and its usefulness now (seed 003's arithmetic)."""
    out: dict[str, ItemScore] = {}
    for inj in injections:
        for item in inj.items:
            s = out.setdefault(item.ref, ItemScore(ref=item.ref))
            s.injections += 1
            s.recalled += inj.via == "recall"
    last: dict[str, datetime] = {}
    for j in sorted(judgments, key=lambda j: (j.at, j.injection, j.ref)):
        s = out.setdefault(j.ref, ItemScore(ref=j.ref))
        base = s.score if j.ref not in last else decayed(s.score, (j.at - last[j.ref]).total_seconds() / 86400)
        s.score = clamp01(base + score_delta(FeedbackKind(j.verdict), CONFIDENCE))
        last[j.ref] = j.at
        setattr(s, j.verdict, getattr(s, j.verdict) + 1)
    for ref, s in out.items():
        if ref in last:
            s.score = round(decayed(s.score, (now - last[ref]).total_seconds() / 86400), 6)
    return out


def ignored_refs(workspace: Path, now: datetime | None = None) -> set[str]:
    """Items sessions kept ignoring: no longer injected."""
    injections, judgments = read_log(workspace)
    table = scores(injections, judgments, now or datetime.now(UTC))
    return {ref for ref, s in table.items() if s.ignored >= MIN_IGNORED and s.score < DROP_BELOW}
