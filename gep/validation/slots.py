"""How many validations run at once in one process.

A fleet run here (`gep fleet --here`, flows/fleet.py) runs its cycles in threads of one process, up to
``--concurrency`` at once. A cycle's validation (the workspace's tests in the sandbox, then the canary) is
most of its CPU. Eight test suites started together on two cores share them evenly and all finish late and
together; the next eight cycles then start together and their agents all wait at once while the cores idle.
Run one validation per core at a time instead and they finish one after another: the cycles drift apart, and
one cycle's agent waits while another's tests run (measured in docs/performance.md: a slow-agent fleet).

``GEP_VALIDATION_SLOTS`` sets the number (0: no limit, for test suites that mostly wait on the network);
unset, it is the number of CPUs this process may use. A single `gep cycle` takes one slot and never waits.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from gep.core.errors import ConfigError

SLOTS_ENV = "GEP_VALIDATION_SLOTS"
MAX_SLOTS = 1024



class _Semaphores:
    """The process's validation slots, one semaphore per count (a changed setting gets its own). Process-wide
    on purpose: the slots share this process's CPUs between every cycle it runs (a fleet's threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_count: dict[int, threading.BoundedSemaphore] = {}

    def of(self, count: int) -> threading.BoundedSemaphore:
        with self._lock:
            return self._by_count.setdefault(count, threading.BoundedSemaphore(count))


SEMAPHORES = _Semaphores()


def cpus() -> int:
    """The CPUs this process may run on (its affinity mask, not the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


def slot_count(env: Mapping[str, str] | None = None) -> int:
    """GEP_VALIDATION_SLOTS (0: no limit), else the CPUs; a one-line ConfigError for anything else."""
    raw = (os.environ if env is None else env).get(SLOTS_ENV, "").strip()
    if not raw:
        return cpus()
    if not raw.isdigit() or int(raw) > MAX_SLOTS:
        raise ConfigError(f"{SLOTS_ENV}={raw!r} is not a number of validations at once (0 for no limit, "
                          f"at most {MAX_SLOTS})")
    return int(raw)


@contextmanager
def validation_slot(env: Mapping[str, str] | None = None) -> Iterator[None]:
    """Hold one of the process's validation slots for the block (waits while they are all taken)."""
    count = slot_count(env)
    if count == 0:
        yield
        return
    with SEMAPHORES.of(count):
        yield
