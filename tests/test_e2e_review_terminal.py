"""The review flow from two terminals (issue 44, point 3), as a person runs it against a real Prefect server:
`gep cycle --review` says at once what it waits for and the commands that decide it; `gep status`,
`gep approve ID --note` and `gep reject ID --note`, run from another process, answer it, and the waiting
cycle ends (committed, or rolled back) with nothing else to do in the Prefect UI."""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import pytest
from conftest import git
from live_prefect import BIN, LiveServer

from gep.learning.feedback import FeedbackKind
from gep.store import Store

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]
GEP = str(BIN / "gep")
FIX_AGENT = ("import pathlib, sys\nsys.stdin.read()\np = pathlib.Path('stats.py')\n"
             "p.write_text(p.read_text().replace('(len(values) - 1)', 'len(values)'))\nprint('fixed the mean')\n")
NOTICE = re.compile(r"cycle (\w+) waits for your review")


def waiting_cycle(live: LiveServer, ws: Path, tmp_path: Path) -> tuple[object, Path, str]:
    """Start `gep cycle --review` in its own process; return it, its output file and the id it printed."""
    agent = tmp_path / "fix.py"
    agent.write_text(FIX_AGENT)
    log = tmp_path / "cycle.out"
    proc = live.spawn([GEP, "cycle", "--review", "--mutator", "command", "--agent-cmd",
                       f"{sys.executable} {agent}"], cwd=ws, log=log)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None and not NOTICE.search(log.read_text()):
        time.sleep(0.5)
    out = log.read_text()
    found = NOTICE.search(out)
    assert found, f"no review notice (exit {proc.poll()}):\n{out}"
    return proc, log, found.group(1)


def test_approve_from_another_terminal_commits_and_ends_the_waiting_cycle(live_prefect: LiveServer,
                                                                           example_ws: Path, tmp_path: Path):
    proc, log, sid = waiting_cycle(live_prefect, example_ws, tmp_path)
    out = log.read_text()
    assert f"approve: gep approve {sid} [--note TEXT]" in out and f"reject:  gep reject {sid} --note TEXT" in out
    assert git(example_ws, "log", "-1", "--format=%s").strip() == "initial"  # nothing committed while it waits
    status = live_prefect.run([GEP, "status", "--json"], cwd=example_ws)
    pending = json.loads(status.stdout)["pending"]
    assert [(p["id"], p["state"]) for p in pending] == [(sid, "awaiting_review")], status.stdout + status.stderr
    done = live_prefect.run([GEP, "approve", sid[:4], "--note", "the mean divides by n"], cwd=example_ws,
                            timeout_s=200)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"cycle {sid}: committed " in done.stdout and "(landed on " in done.stdout, done.stdout
    assert proc.wait(120) == 0, log.read_text()  # type: ignore[attr-defined]
    assert "GEP-Event: evt_" in git(example_ws, "log", "-1", "--format=%B")
    assert "sum(values) / len(values)" in (example_ws / "stats.py").read_text()
    with Store.for_workspace(example_ws) as store:
        helpful = [f for f in store.list_feedback() if f.kind is FeedbackKind.helpful]
    assert [f.note for f in helpful] == ["the mean divides by n"]
    after = json.loads(live_prefect.run([GEP, "status", "--json"], cwd=example_ws).stdout)
    assert after["pending"] == [] and after["last"]["id"] == sid and after["last"]["outcome"] == "success"


def test_reject_from_another_terminal_rolls_back_and_ends_the_waiting_cycle(live_prefect: LiveServer,
                                                                            example_ws: Path, tmp_path: Path):
    proc, log, sid = waiting_cycle(live_prefect, example_ws, tmp_path)
    no_note = live_prefect.run([GEP, "reject", sid], cwd=example_ws)
    assert no_note.returncode == 2 and "--note" in no_note.stderr and proc.poll() is None  # type: ignore[attr-defined]
    done = live_prefect.run([GEP, "reject", sid, "--note", "not this way"], cwd=example_ws, timeout_s=200)
    assert done.returncode == 0 and f"cycle {sid}: rejected, nothing committed" in done.stdout, done.stdout
    assert proc.wait(120) == 1, log.read_text()  # type: ignore[attr-defined]  # the cycle ended: failed
    assert git(example_ws, "log", "-1", "--format=%s").strip() == "initial"
    assert "(len(values) - 1)" in (example_ws / "stats.py").read_text()
    again = live_prefect.run([GEP, "approve", sid], cwd=example_ws)
    assert again.returncode == 2 and "no cycle waits for a review" in again.stderr
