"""The cyclic garbage collector, paused while a `gep` process starts (gep/entry.py).

Starting `gep cycle` imports Prefect, SQLAlchemy, the anthropic SDK's models and the engine: hundreds of
thousands of objects that live as long as the process, none of them garbage, which Python's collector walks
again and again while the heap grows (~12% of a `gep cycle`'s CPU, docs/performance.md). Paused at start, it
resumes after ``RESUME_AFTER_S`` with everything alive by then frozen (``gc.freeze``: left out of every later
pass), so a long command (a fleet, `gep serve`, a cycle waiting for its agent) collects as usual and a short
one ends first. Reference counting frees everything else meanwhile; only garbage in cycles waits.
"""

from __future__ import annotations

import gc
import threading

RESUME_AFTER_S = 10.0


def pause_while_starting(resume_after_s: float = RESUME_AFTER_S) -> threading.Timer | None:
    """Pause the collector, and resume it in ``resume_after_s`` (a daemon timer, returned). Nothing when the
    collector is already off: that is someone else's choice."""
    if not gc.isenabled():
        return None
    gc.disable()
    timer = threading.Timer(resume_after_s, resume)
    timer.daemon = True  # never keeps the process alive
    timer.start()
    return timer


def resume() -> None:
    """Freeze what is alive now (the imports' objects) and collect again from here on."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()
