"""`make demo`'s script, run as the Makefile runs it, against the session's Prefect server: the whole loop
(cycle 1 awaiting changes, the person's fix, solidify committing it, cycle 2 not repairing it again, the
history), its temporary folder removed; and an honest non-zero exit when a step fails."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest
from live_prefect import BIN, ROOT, LiveServer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
DEMO = ROOT / "examples" / "run_demo.py"


def demo_dirs() -> set[Path]:
    return set(Path(tempfile.gettempdir()).glob("gep-demo-*"))


def test_the_demo_runs_the_whole_loop_and_cleans_up(live_prefect: LiveServer):
    before = demo_dirs()
    done = live_prefect.run([str(BIN / "python"), str(DEMO)], timeout_s=240)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    steps = ["$ gep cycle --workspace", "$ git diff", "$ gep solidify --workspace", "$ git log -1",
             "$ gep cycle --workspace", "$ gep history --workspace"]
    at = 0
    for step in steps:  # in this order, each printed as a person would type it
        at = out.index(step, at) + len(step)
    assert re.search(r"GEP-Event: evt_\w+\n\s+GEP-Gene: gene_repair_from_errors", out), out
    assert re.search(r"the log.s lines predate [0-9a-f]{12}: the fixed error is not repaired again", out), out
    # the history shows cycle 2, and the fix as what it is: nothing ran after it, so it is not judged yet
    assert "awaiting_changes" in out and "not yet judged" in out, out
    assert "verified fix" not in out.replace("0 verified fixes", "") and "not a trigger" not in out, out
    table = out[out.index("$ gep history --workspace"):].split("\n\n")[0].splitlines()[1:]
    assert table and max(len(line) for line in table) <= 80, "\n".join(table)  # the demo's terminal: 80 columns
    assert demo_dirs() == before  # its temporary folder is gone


def test_the_demo_exits_non_zero_naming_the_step_that_failed(live_prefect: LiveServer):
    before = demo_dirs()
    # a store URL no engine can open: the first cycle is refused before it starts
    done = live_prefect.run([str(BIN / "python"), str(DEMO)], env={"GEP_DATABASE_URL": "nosuchdb://x"},
                            timeout_s=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "demo: `gep cycle --workspace" in done.stderr and "exited with 2" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert demo_dirs() == before
