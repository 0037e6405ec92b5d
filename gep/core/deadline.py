"""The cycle's own wall-clock limit (``cycle_timeout_s``, default 30 minutes).

Every wait a cycle can meet has a limit of its own (the agent's ``agent_timeout_s``, each validation
command's ``validation_timeout_s``, the lock's ``lock_timeout_s``, each git command's ``GIT_TIMEOUT_S``,
each Messages API request and its retries): these are cut to what is left of the cycle's time, and the
pipeline checks the time between stages. A cycle past its limit then fails like any other failed cycle:
its change is saved as a patch, its lock and Prefect slot are released, the event says why.
"""

from __future__ import annotations

import time

from gep.core.config import Settings
from gep.core.errors import GepError

MIN_WAIT_S = 1.0  # a cut limit never falls under this (a limit of 0 means "try once" for the lock)


class CycleTimedOut(GepError):
    """The cycle ran past ``cycle_timeout_s``."""


def deadline_for(settings: Settings, started: float | None = None) -> float:
    """The ``time.monotonic()`` value by which a cycle started at ``started`` (default: now) must end."""
    return (time.monotonic() if started is None else started) + settings.cycle_timeout_s


def left(deadline: float | None) -> float:
    """Seconds left before ``deadline`` (infinite without one)."""
    return float("inf") if deadline is None else deadline - time.monotonic()


def check(deadline: float | None, settings: Settings, where: str) -> None:
    """Raise :class:`CycleTimedOut` when ``deadline`` has passed."""
    if left(deadline) <= 0:
        raise CycleTimedOut(f"the cycle ran past its time limit (cycle_timeout_s = {settings.cycle_timeout_s:g} s) "
                            f"{where}")


def bounded(settings: Settings, deadline: float | None) -> Settings:
    """``settings`` with every wait cut to the time left before ``deadline``."""
    remaining = left(deadline)
    if remaining == float("inf"):
        return settings
    cut = max(MIN_WAIT_S, remaining)
    update = {name: min(getattr(settings, name), cut)
              for name in ("agent_timeout_s", "validation_timeout_s", "lock_timeout_s")}
    return settings.model_copy(update=update)
