"""Waiting for a child process without polling it.

``Popen.wait(timeout=...)`` polls: it sleeps 0.5 ms, 1 ms, ... up to 50 ms between ``waitpid`` calls, about
20 wake-ups a second for as long as the child runs (a 5 s agent: ~100, each taking the interpreter lock
from the fleet's other cycles). A pidfd (Linux 5.3+) becomes readable when the child exits, so one
``poll`` sleeps until then or the timeout. Where there is none, ``Popen.wait`` as before.
"""

from __future__ import annotations

import os
import select
import subprocess


def wait_exit(proc: subprocess.Popen[bytes], timeout_s: float | None) -> int | None:
    """``proc``'s exit code once it has exited, or None when it still runs after ``timeout_s`` (None: no
    limit)."""
    if proc.returncode is not None:
        return proc.returncode
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # no pidfd here (older kernel, another OS): Popen's own polling
        try:
            return proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None
    try:
        waiter = select.poll()
        waiter.register(fd, select.POLLIN)
        # an interrupted poll is retried with the time left (PEP 475)
        ready = waiter.poll(None if timeout_s is None else max(0, round(timeout_s * 1000)))
    finally:
        os.close(fd)
    return proc.wait() if ready else proc.poll()
