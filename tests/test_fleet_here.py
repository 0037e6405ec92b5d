"""A fleet run here truly runs its cycles at once (issue 30): three workspaces whose agent sleeps, their
working intervals recorded by the agent itself, overlap under concurrency 3; the fleet's run is named like
the cycles, its progress artifact ends at 100 %, and `gep fleet --here` shows progress lines and an
80-column table.

The session's Prefect server, real git repositories (copies of the example), the command mutator running a
Python agent, validation in bubblewrap."""

from __future__ import annotations

import json
import shutil
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLE, init_repo
from test_cli import run
from test_fleet import subflow_runs
from test_flows import prefect_server, run_state  # noqa: F401 - the session server, as the flow tests use it

from gep.fleet import FleetRow
from gep.fleet_progress import FleetProgress, ProgressPrinter, table_text

pytestmark = pytest.mark.timeout(240)

SLEEP_S = 2
MEET_S = 60
# The agent fixes the example's bug. It first waits (up to MEET_S) until argv[2] agents have arrived (one
# file each in a folder outside the workspaces), so agents that run at once are sure to meet whatever the
# machine's load, and agents run one after another never do; then it works SLEEP_S and appends when it
# worked and whether it met the others to a log outside the workspace (argv[1]), one JSON line per run.
SLEEPY_AGENT = textwrap.dedent(f"""
    import json, os, pathlib, sys, time
    sys.stdin.read()
    log, n = pathlib.Path(sys.argv[1]), int(sys.argv[2])
    arrived = log.parent / "arrived"
    arrived.mkdir(exist_ok=True)
    (arrived / str(os.getpid())).touch()
    deadline = time.time() + {MEET_S}
    while len(list(arrived.iterdir())) < n and time.time() < deadline:
        time.sleep(0.05)
    met = len(list(arrived.iterdir())) >= n
    start = time.time()
    time.sleep({SLEEP_S})
    p = pathlib.Path("stats.py")
    p.write_text(p.read_text().replace("(len(values) - 1)", "len(values)"))
    line = json.dumps({{"workspace": os.getcwd(), "start": start, "end": time.time(), "met": met}})
    with open(log, "a") as out:
        out.write(line + "\\n")
""")


def workspaces(tmp_path: Path, n: int) -> list[Path]:
    return [init_repo(Path(shutil.copytree(EXAMPLE, tmp_path / f"team-{i}")), {}) for i in range(n)]


def sleepy_agent(tmp_path: Path, meet: int) -> tuple[str, Path]:
    """The agent's command (its agents meet once ``meet`` of them have arrived) and its log."""
    script, log = tmp_path / "sleepy.py", tmp_path / "intervals.jsonl"
    script.write_text(SLEEPY_AGENT)
    return f"{sys.executable} {script} {log} {meet}", log


def sleepy_fleet(tmp_path: Path, n: int, concurrency: int) -> tuple[Any, list[Path], list[dict]]:
    """A fleet of ``n`` workspaces run here whose agents sleep (meeting when ``concurrency`` allows all to
    be there): its final state, the workspaces and the agents' working intervals."""
    from flows.fleet import evolve_fleet

    spaces = workspaces(tmp_path, n)
    cmd, log = sleepy_agent(tmp_path, n if concurrency >= n else 1)
    state = run_state(evolve_fleet, workspaces=[str(w) for w in spaces], mutator="command", agent_cmd=cmd,
                      here=True, concurrency=concurrency)
    assert state.is_completed(), state.message
    return state, spaces, [json.loads(line) for line in log.read_text().splitlines()]


def test_three_cycles_here_work_at_once_each_a_subflow_of_the_named_fleet(prefect_server, tmp_path: Path):  # noqa: F811
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    from flows.fleet import run_workspace

    state, spaces, intervals = sleepy_fleet(tmp_path, 3, concurrency=3)
    assert state.message == "3 cycles: 3 Success", state.message
    # each agent works in its cycle's clone of the workspace (WORKSPACE/.gep/worktrees/EVENT)
    assert sorted(i["workspace"].split("/.gep/")[0] for i in intervals) == sorted(str(w) for w in spaces)
    # the three agents were running at once (each saw the others arrive), then worked together: the
    # latest start is before the earliest end
    assert all(i["met"] for i in intervals), intervals
    assert max(i["start"] for i in intervals) < min(i["end"] for i in intervals), intervals
    fleet_id = state.state_details.flow_run_id
    runs = subflow_runs(prefect_server, fleet_id)
    assert sorted(run_workspace(r.parameters) for r in runs) == sorted(str(w) for w in spaces)
    assert all(r.state_name == "Success" for r in runs)
    with prefect_server.client() as client:
        fleet = client.read_flow_run(fleet_id)
        artifacts = client.read_artifacts(artifact_filter=ArtifactFilter(
            flow_run_id=ArtifactFilterFlowRunId(any_=[fleet_id])))
    assert fleet.name.startswith("fleet-") and fleet.name.endswith(", 3 workspaces"), fleet.name
    assert int(fleet.name[6:10]) >= 1
    (progress,) = [a for a in artifacts if a.type == "progress"]
    assert progress.key == "gep-fleet-progress" and progress.data == 100.0
    assert progress.description == "3/3 done, 0 running, 0 failed"


def test_one_at_a_time_the_cycles_do_not_overlap(prefect_server, tmp_path: Path):  # noqa: F811
    """The yardstick of the test above: with concurrency 1 the same agents never work at once."""
    _, _, intervals = sleepy_fleet(tmp_path, 2, concurrency=1)
    first, second = sorted(intervals, key=lambda i: i["start"])
    assert first["end"] <= second["start"]


def test_gep_fleet_here_shows_progress_and_an_80_column_table(prefect_server, tmp_path: Path):  # noqa: F811
    spaces = workspaces(tmp_path, 2)
    result = run("fleet", *(a for w in spaces for a in ("-w", str(w))), "--here", "--mutator", "prompt")
    assert result.exit_code == 0, result.stdout + result.stderr
    # not a terminal: plain progress lines on stderr, from the first (nothing done) to the last
    progress = [line for line in result.stderr.splitlines() if " done, " in line]
    assert progress[0].startswith("0/2 done, 0 running, 0 failed, 2 waiting, 0:0"), result.stderr
    assert progress[-1].startswith("2/2 done, 0 running, 0 failed, "), result.stderr
    out = result.stdout
    assert "fleet: 2 cycles in this process, up to 4 at once" in out and "/runs/flow-run/" in out
    assert "|" not in out and "---" not in out  # a table for a terminal, not markdown
    assert all(len(line) <= 80 for line in out.splitlines() if "flow run: " not in line), out
    assert "Fleet: 2 cycles: 2 Awaiting changes" in out and out.count("Awaiting changes   evt_") == 2, out
    last = out.splitlines()[-1]
    assert last.startswith("fleet-") and ", 2 workspaces: Completed: 2 cycles: 2 Awaiting changes" in last, last


def test_the_table_fits_80_columns_and_keeps_event_ids_whole():
    rows = [FleetRow(workspace="/srv/" + "very-long-team-name/" * 6 + "ws", state="Awaiting changes", final=True,
                     event_id="evt_1764300000000_abcdef", duration_s=12.25),
            FleetRow(workspace="/srv/b", state="Failed", final=True, event_id="evt_1764300000001_012345",
                     message="validation failed:\n" + "x" * 120),
            FleetRow(workspace="/srv/c", state="Not started", message="the run could not be created")]
    text = table_text(rows)
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines), text
    assert "evt_1764300000000_abcdef" in text and "evt_1764300000001_012345" in text and "12.2 s" in text
    assert lines[0] == "Fleet: 3 cycles: 1 Awaiting changes, 1 Failed, 1 Not started", text
    assert "/srv/b: validation failed:" in text and "x" * 60 in text and "/srv/c: the run could not be created" in text


def test_progress_counts_and_lines():
    counts = FleetProgress.of(5, ["COMPLETED", "FAILED", "CRASHED", "RUNNING", "PENDING"])
    assert (counts.done, counts.failed, counts.running) == (3, 2, 2)
    assert FleetProgress.of(4, ["COMPLETED", "RUNNING", None]).text() == "1/4 done, 1 running, 0 failed, 2 waiting"
    assert FleetProgress.of(2, ["COMPLETED", "CANCELLED"]).text() == "2/2 done, 0 running, 1 failed"

    class Tty(list):
        def write(self, s: str) -> None:
            self.append(s)

        def flush(self) -> None:
            pass

        def isatty(self) -> bool:
            return True

    tty = Tty()
    printer = ProgressPrinter(tty)
    printer.show("1/4 done, 1 running, 0 failed")
    printer.show("2/4 done, 1 running, 0 failed")
    printer.end()
    assert tty[0].startswith("\r\x1b[K1/4 done") and tty[1].startswith("\r\x1b[K2/4 done") and tty[-1] == "\n"
