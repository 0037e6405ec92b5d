"""The garbage collector paused while a `gep` process imports, then resumed with the imports' objects frozen
(gep/core/collector.py); the console script does it, `gep capture` (the quick hook) does not."""

from __future__ import annotations

import gc
import subprocess
import sys
import time

from gep.core.collector import pause_while_starting, resume


def test_paused_then_resumed_with_what_was_alive_frozen() -> None:
    assert gc.isenabled()
    frozen_before = gc.get_freeze_count()
    try:
        timer = pause_while_starting(0.2)
        assert timer is not None and timer.daemon and not gc.isenabled()
        timer.join(10)
        assert gc.isenabled() and gc.get_freeze_count() > frozen_before
    finally:
        gc.enable()  # what was frozen stays so, as tests/conftest.py leaves a worker's imports


def test_a_collector_someone_turned_off_is_left_off() -> None:
    gc.disable()
    try:
        assert pause_while_starting(0.01) is None
        time.sleep(0.05)
        assert not gc.isenabled()
    finally:
        gc.enable()
    frozen = gc.get_freeze_count()
    resume()  # on an enabled collector: nothing, not even a freeze
    assert gc.isenabled() and gc.get_freeze_count() == frozen


# the console script's entry point with the commands' mains replaced by a probe that prints the collector's state
PROBE = """
import gc, sys
import gep.cli.root as root
import gep.sessions.capture as capture
def probe(*_args):
    print("enabled" if gc.isenabled() else "paused", flush=True)
    return 0
root.main = capture.main = probe
from gep.entry import main
sys.argv = ["gep", *sys.argv[1:]]
main()
"""


def test_the_console_script_pauses_it_but_not_for_capture() -> None:
    def state(*args: str) -> str:
        out = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=60)
        return out.stdout.strip() + out.stderr.strip()

    assert state("history") == "paused"
    assert state("capture", "--workspace", ".") == "enabled"  # the hook's ~0.1 s: nothing to gain
