"""A review-mode cycle waiting for a person's decision: what it waits for, where, and the commands that decide.

When a ``--review`` cycle's change has passed validation, the cycle pauses its flow run until someone
answers. The pause is recorded in the workspace's store (the cycle, its flow run, the API it reports to, the
change in short), so that another terminal can list it (`gep status`) and answer it (`gep approve ID`,
`gep reject ID --note`) without the Prefect UI; the record is removed when the answer (or the time limit)
ends the pause. A record whose process is gone (killed) is not a wait any more. Plain data and the store.
"""

from __future__ import annotations

import os
import time
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, TypeVar

from pydantic import BaseModel, Field

from gep.core.errors import GepError
from gep.core.event_ids import resolve, short_id
from gep.core.models import EvolutionEvent, iso, utc_now
from gep.git.indexwrite import pid_alive
from gep.prefect_api import resume_run

if TYPE_CHECKING:
    from gep.store import Store

M = TypeVar("M", bound=BaseModel)


class StateReader(Protocol):
    """Where the waits are read from: the full store, or the quick one (gep/store/quick_read.py)."""

    def get_state(self, key: str, cls: type[M]) -> M | None: ...


STATE_KEY = "review_waits"
PAUSE_START_S = 15.0  # how long an answer waits for a run announced as waiting to be Paused in Prefect


class ReviewWait(BaseModel):
    """One cycle paused for review."""

    event_id: str
    flow_run_id: str | None = None
    api_url: str | None = None  # the Prefect API the paused run reports to (the answer goes there)
    subject: str = ""  # the commit message's first line
    files: list[str] = Field(default_factory=list)
    lines: int = 0
    since: str = Field(default_factory=lambda: iso(utc_now()))
    pid: int = Field(default_factory=os.getpid)

    def commands(self, workspace_arg: str = "") -> list[str]:
        """The commands that decide it, as a person types them."""
        sid = short_id(self.event_id)
        return [f"gep approve {sid}{workspace_arg} [--note TEXT]", f"gep reject {sid}{workspace_arg} --note TEXT"]

    def notice(self, workspace_arg: str = "") -> list[str]:
        """What the waiting terminal prints at once (each line under 80 columns for short paths)."""
        files = ", ".join(self.files[:3]) + (f" (+{len(self.files) - 3} more)" if len(self.files) > 3 else "")
        approve, reject = self.commands(workspace_arg)
        return [f"cycle {short_id(self.event_id)} waits for your review: {_cut(self.subject, 42)}",
                f"  change: {files or '-'} ({self.lines} line(s)); validation passed",
                f"  approve: {approve}", f"  reject:  {reject}",
                "  (from any terminal, or in the Prefect UI; nothing is committed until then)"]


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n - 1] + "\u2026"


class ReviewWaits(BaseModel):
    waits: list[ReviewWait] = Field(default_factory=list)


def announce(store: Store, wait: ReviewWait) -> None:
    """Record that ``wait.event_id`` waits for a decision."""
    now = _read(store)
    now.waits = [w for w in now.waits if w.event_id != wait.event_id] + [wait]
    store.set_state(STATE_KEY, now)


def clear(store: Store, event_id: str) -> None:
    """The pause of ``event_id`` is over (answered, timed out or failed)."""
    now = _read(store)
    if any(w.event_id == event_id for w in now.waits):
        store.set_state(STATE_KEY, ReviewWaits(waits=[w for w in now.waits if w.event_id != event_id]))


def waiting(store: StateReader) -> list[ReviewWait]:
    """The cycles waiting for a review now: their process lives (a killed one waits for nobody)."""
    return [w for w in _read(store).waits if pid_alive(w.pid)]


def _read(store: StateReader) -> ReviewWaits:
    try:
        return store.get_state(STATE_KEY, ReviewWaits) or ReviewWaits()
    except ValueError:  # a record of another version: no wait is better than a wrong one
        return ReviewWaits()


def waited_s(wait: ReviewWait, now: datetime | None = None) -> float:
    """How long it has waited, in seconds."""
    start = datetime.fromisoformat(wait.since.replace("Z", "+00:00"))
    return max(0.0, ((now or utc_now()) - start).total_seconds())


def find_wait(store: Store, typed: str) -> ReviewWait:
    """The waiting cycle ``typed`` names (short id, unique prefix or full id); a one-line GepError otherwise."""
    waits = waiting(store)
    if not waits:
        raise GepError("no cycle waits for a review in this workspace (`gep status` says what waits)")
    event_id = resolve(typed, sorted({*store.event_ids(), *(w.event_id for w in waits)}))
    wait = next((w for w in waits if w.event_id == event_id), None)
    if wait is None:
        raise GepError(f"cycle {short_id(event_id)} does not wait for a review (`gep status` says what waits)")
    return wait


def answer(store: Store, typed: str, approve: bool, note: str) -> ReviewWait:
    """Answer the review ``typed`` waits for, as the Prefect UI's form would: the paused run resumes with the
    decision and note (the cycle records them as feedback and commits or rolls back)."""
    wait = find_wait(store, typed)
    if not wait.flow_run_id or not wait.api_url:
        raise GepError(f"cycle {short_id(wait.event_id)} waits in a run gep cannot reach: answer it in the "
                       "Prefect UI")
    decision = "approve" if approve else "reject"
    deadline = time.monotonic() + PAUSE_START_S
    why = resume_run(wait.api_url, wait.flow_run_id, {"decision": decision, "note": note})
    while why is not None and "not paused" in why and time.monotonic() < deadline:
        time.sleep(0.5)  # announced a moment before the run's state turns Paused: answered as soon as it is
        why = resume_run(wait.api_url, wait.flow_run_id, {"decision": decision, "note": note})
    if why is not None:
        raise GepError(f"could not {decision} cycle {short_id(wait.event_id)}: {why}")
    return wait


def recorded_outcome(store: Store, event_id: str) -> EvolutionEvent | None:
    """The cycle's recorded event once its outcome is final (None while it still runs)."""
    event = store.get_event(event_id)
    return event if event is not None and str(event.outcome.status) != "running" else None
