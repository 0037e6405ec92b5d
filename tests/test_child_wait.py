"""gep/core/child_wait.py: a child's exit awaited on its pidfd, with a timeout."""

from __future__ import annotations

import subprocess
import sys
import time

from gep.core.child_wait import wait_exit


def child(code: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code])


def test_the_exit_code_once_the_child_ends() -> None:
    proc = child("import time, sys; time.sleep(0.3); sys.exit(3)")
    assert wait_exit(proc, 30) == 3
    assert proc.returncode == 3  # reaped: no zombie left


def test_none_while_the_child_still_runs_after_the_timeout() -> None:
    proc = child("import time; time.sleep(30)")
    try:
        started = time.monotonic()
        assert wait_exit(proc, 0.2) is None
        assert time.monotonic() - started >= 0.19  # it waited, it did not return at once
        assert proc.returncode is None
    finally:
        proc.kill()
    assert wait_exit(proc, None) == -9


def test_a_child_that_already_ended_and_one_already_reaped() -> None:
    proc = child("pass")
    time.sleep(0.5)
    assert wait_exit(proc, 0) == 0
    assert wait_exit(proc, 0) == 0  # returncode known: no pidfd asked for
