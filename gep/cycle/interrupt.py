"""Ctrl-C during a cycle stops it the way SIGTERM or a crash does: at once, nothing committed after it.

``asyncio.run`` turns SIGINT into a cancellation of the flow's main task, and Prefect then waits for the
stage running in its worker thread: the cycle went on to validate, commit and land the change before the
process exited 130. While a flow runs from the command line, SIGINT and SIGTERM instead say so in one line,
give back the workspace slots the process holds (gep/prefect_api.py; the next cycle then starts at once instead
of waiting out the lease) and end the process by the signal itself (the shell sees 130). The engine is built to survive a kill at any point
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

from gep.prefect_api import release_own_slots

MESSAGE = "\ngep: {name}: the cycle stops here, slot given back; `gep recover` records it\n"


def stop_now(signum: int, _frame: FrameType | None = None) -> None:
    """Say so in one line, give back the workspace slots this process holds, end the process by ``signum``."""
    signal.signal(signum, signal.SIG_IGN)  # a second Ctrl-C while the slot is given back changes nothing
    try:
        os.write(2, MESSAGE.format(name="interrupted" if signum == signal.SIGINT else "terminated").encode())
    except OSError:
        pass
    try:
        release_own_slots()  # one request per slot, 3 s at most; else the lease frees it (or `gep recover`)
    except Exception:  # noqa: BLE001 - the process ends by the signal whatever happened here
        pass
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)  # the default action: the process ends by this signal, no cleanup runs


@contextmanager
def interrupt_stops_the_cycle() -> Iterator[None]:
    """While the block runs (in the main thread), SIGINT and SIGTERM end the process at once (``stop_now``)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, stop_now) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
