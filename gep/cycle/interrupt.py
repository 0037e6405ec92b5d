"""Ctrl-C during a cycle stops it the way SIGTERM or a crash does: at once, nothing committed after it.

``asyncio.run`` turns SIGINT into a cancellation of the flow's main task, and Prefect then waits for the
stage running in its worker thread: the cycle went on to validate, commit and land the change before the
process exited 130. While a flow runs from the command line, SIGINT instead says so in one line and ends
the process by the signal itself (the shell sees 130). The engine is built to survive a kill at any point
(gep/cycle/recovery.py): the agent dies with the process, the user's tree is restored or the landing finished,
and the next cycle or `gep recover` records the cycle as interrupted with its change saved as a patch.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

MESSAGE = (b"\ngep: interrupted: the cycle stops here, nothing more is committed; the next cycle or "
           b"`gep recover` records it as interrupted\n")


def _stop_now(signum: int, _frame: FrameType | None) -> None:
    try:
        os.write(2, MESSAGE)
    except OSError:
        pass
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)  # the default action: the process ends by this signal, no cleanup runs


@contextmanager
def interrupt_stops_the_cycle() -> Iterator[None]:
    """While the block runs (in the main thread), SIGINT ends the process as SIGTERM would."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, _stop_now)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
