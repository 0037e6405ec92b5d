"""How a fleet is doing while it runs, and its final table, for a terminal (the UI has the fleet run's
progress and table artifacts: flows/fleet.py).

A fleet's progress is counted from its cycles' states (Prefect's state types): finished ones are done,
and of those, failed, crashed and cancelled ones are also failed. ``ProgressPrinter`` shows it as one live
line on a terminal, or as plain lines (one per change of the counts) when the output is a file or a pipe.
No Prefect import here.
"""

from __future__ import annotations

import io
import sys
import time
from collections.abc import Iterable, Sequence
from typing import TextIO

from pydantic import BaseModel

from gep.fleet import TROUBLE, FleetRow, summary

FINAL_TYPES = frozenset({"COMPLETED", "FAILED", "CRASHED", "CANCELLED"})
FAILED_TYPES = frozenset({"FAILED", "CRASHED", "CANCELLED"})
ACTIVE_TYPES = frozenset({"RUNNING", "PENDING", "PAUSED", "CANCELLING"})
WIDTH = 80  # the table and the live line fit an 80-column terminal


class FleetProgress(BaseModel):
    """A fleet's cycles by where they are: ``total`` of them, ``done`` finished (``failed`` among them),
    ``running`` started and not finished; the rest wait (for a worker, or for their turn)."""

    total: int
    done: int = 0
    running: int = 0
    failed: int = 0

    @classmethod
    def of(cls, total: int, state_types: Iterable[str | None]) -> FleetProgress:
        types = list(state_types)
        return cls(total=total, done=sum(t in FINAL_TYPES for t in types),
                   running=sum(t in ACTIVE_TYPES for t in types), failed=sum(t in FAILED_TYPES for t in types))

    @property
    def percent(self) -> float:
        return 100.0 * self.done / self.total if self.total else 100.0

    def text(self) -> str:
        """``12/40 done, 8 running, 1 failed`` (and how many wait)."""
        waiting = self.total - self.done - self.running
        return (f"{self.done}/{self.total} done, {self.running} running, {self.failed} failed"
                + (f", {waiting} waiting" if waiting > 0 else ""))


def elapsed(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}:{secs:02d}"


class ProgressPrinter:
    """Shows progress lines: on a terminal one line rewritten in place, elsewhere a line per change."""

    def __init__(self, stream: TextIO | None = None, started: float | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.live = bool(getattr(self.stream, "isatty", lambda: False)())
        self.started = time.monotonic() if started is None else started
        self.last = ""
        self.shown = False

    def show(self, what: str) -> None:
        """``what`` (a label and the counts), with the time since the start."""
        if self.live:
            line = f"{what}, {elapsed(time.monotonic() - self.started)}"[:WIDTH - 1]
            self.stream.write(f"\r\x1b[K{line}")
            self.stream.flush()
            self.shown = True
        elif what != self.last:
            self.stream.write(f"{what}, {elapsed(time.monotonic() - self.started)}\n")
            self.stream.flush()
        self.last = what

    def end(self) -> None:
        """Close the live line (the next output starts on a line of its own)."""
        if self.live and self.shown:
            self.stream.write("\n")
            self.stream.flush()
            self.shown = False


def _workspace_cell(path: str) -> str:
    parts = path.rstrip("/").rsplit("/", 2)
    return "/".join(parts[-2:]) if len(parts) > 1 else path


def table_text(rows: Sequence[FleetRow], width: int = WIDTH) -> str:
    """The fleet's table as a terminal shows it (at most ``width`` columns): each workspace's cycle, its
    state, event and time; then the failures' reasons, one line each."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, title=f"Fleet: {summary(rows)}", title_justify="left", pad_edge=False)
    table.add_column("workspace", overflow="ellipsis", no_wrap=True, max_width=width - 58)
    table.add_column("state", no_wrap=True, overflow="ellipsis", min_width=16, max_width=16)
    table.add_column("event", no_wrap=True, min_width=24)
    table.add_column("time", justify="right", no_wrap=True, min_width=7)
    for r in rows:
        took = f"{r.duration_s:.1f} s" if r.duration_s is not None else "-"
        table.add_row(_workspace_cell(str(r.workspace)), r.state, r.event_id or "-", took)
    console = Console(width=width, force_terminal=False, no_color=True, highlight=False, record=True,
                      file=io.StringIO())
    console.print(table)
    for r in rows:
        if r.message and r.state in TROUBLE:
            console.print(f"{r.workspace}: {' '.join(r.message.split())}", overflow="fold", crop=False)
    return "\n".join(line.rstrip() for line in console.export_text().splitlines()).strip("\n")

