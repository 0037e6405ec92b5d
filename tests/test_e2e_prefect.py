"""End to end, as docs/deploy.md tells a user to do it, in the order written: `gep server start`, the work
pool, `prefect deploy --all` from this repository's prefect.yaml, a worker, a run created the way the UI's Run
button creates it, `gep solidify`, runs from `prefect deployment run --watch` (one awaiting changes, one
refused with its reason, one failed with its reason), `gep history`, artifacts and the fleet.

The commands are read from docs/deploy.md's numbered steps and run as written (only the workspace paths, the
port and the artifact key are this test's), so the page and the test cannot drift apart.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import time
from pathlib import Path
from uuid import UUID

import pytest
from conftest import git
from live_prefect import BIN, ROOT, LiveServer, kill_group, wait_for_flow_run_processes

from gep.core.event_ids import short_id

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

DOC = ROOT / "docs" / "deploy.md"
TERMINAL = {"Completed", "Failed", "Crashed", "Cancelled"}
DOC_WS = "/tmp/agent-ws"
DOC_KEY = "gep-agent-ws-1a2b3c4d-cycle"


def documented_commands() -> list[str]:
    """The shell commands of docs/deploy.md's numbered steps (and what comes before them), in order."""
    text = DOC.read_text()
    text = text[: text.index("## The one-command alternative")]
    blocks = re.findall(r"^```sh\n(.*?)^```", text, re.S | re.M)  # the walkthrough; indented examples are not run
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip()]


class Doc:
    """Runs docs/deploy.md's commands one by one, as a shell would, against the test's server."""

    def __init__(self, server: LiveServer, ws: Path, tmp_path: Path) -> None:
        self.server, self.ws, self.tmp = server, ws, tmp_path
        self.commands = documented_commands()
        self.done = 0
        # a user's shell: PREFECT_HOME where `gep server start` keeps its record, the port the test server
        # uses, no git identity of its own (the documented commands name one), .venv/bin on PATH
        self.env = {**server.home_env, "PREFECT_SERVER_API_PORT": str(server.port), "GIT_CONFIG_NOSYSTEM": "1",
                    "GIT_CONFIG_GLOBAL": str(tmp_path / "no-gitconfig"), "COLUMNS": "250",
                    "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
        self.key: str | None = None

    def next(self, starts: str) -> str:
        """The next documented command, checked to be the one the test expects there."""
        assert self.done < len(self.commands), f"docs/deploy.md has no command left for {starts!r}"
        cmd = self.commands[self.done]
        assert cmd.startswith(starts), f"docs/deploy.md step {self.done}: expected {starts!r}, found {cmd!r}"
        self.done += 1
        cmd = cmd.replace(DOC_WS, str(self.ws)).replace("4200", str(self.server.port))
        return cmd.replace(DOC_KEY, self.key) if self.key else cmd

    def argv(self, cmd: str) -> tuple[list[str], dict[str, str]]:
        words = shlex.split(cmd, comments=True)
        env: dict[str, str] = {}
        while words and re.match(r"^[A-Z_]+=", words[0]):
            name, value = words.pop(0).split("=", 1)
            env[name] = value
        return words, env

    def run(self, starts: str, expect: int = 0, timeout_s: float = 180) -> str:
        cmd = self.next(starts)
        words, env = self.argv(cmd)
        if words[0] == "export":
            name, value = words[1].split("=", 1)
            self.env[name] = value
            return ""
        if words[0] == "source":
            return ""  # the test's PATH already has .venv/bin
        r = self.server.run(words, env=env, base=self.env, cwd=ROOT, timeout_s=timeout_s)
        assert r.returncode == expect, f"{cmd}\nexited {r.returncode}, expected {expect}:\n{r.stdout}\n{r.stderr}"
        return r.stdout + r.stderr

    def spawn(self, starts: str, log: Path):
        words, env = self.argv(self.next(starts))
        return self.server.spawn(words, env={**env, "PREFECT_WORKER_QUERY_SECONDS": "1",
                                             "PREFECT_WORKER_PREFETCH_SECONDS": "5"}, base=self.env, cwd=ROOT,
                                 log=log)


def wait_for_run(server: LiveServer, run_id: UUID, worker_log: Path, timeout_s: float = 120):
    deadline = time.monotonic() + timeout_s
    state = "?"
    with server.client() as client:
        while time.monotonic() < deadline:
            run = client.read_flow_run(run_id)
            if run.state_type and run.state_type.value in {s.upper() for s in TERMINAL}:
                return run
            state = run.state_name
            time.sleep(0.5)
    pytest.fail(f"flow run {run_id} still {state} after {timeout_s} s; worker log:\n"
                + worker_log.read_text(errors="replace")[-4000:])


def run_id_in(output: str, server: LiveServer) -> UUID:
    run_id = UUID(re.search(r"UUID: ([0-9a-f-]{36})", output).group(1))
    assert f"{server.url}/runs/flow-run/{run_id}" in output
    return run_id


def test_deploy_md_as_written(live_prefect: LiveServer, tmp_path: Path):
    server = live_prefect
    ws = tmp_path / "agent-ws"
    doc = Doc(server, ws, tmp_path)

    # before you start: the venv on PATH, a copy of the example committed with the identity the command names
    doc.run("source .venv/bin/activate")
    for starts in ("cp -r examples/workspace", "git -C", "git -C", "git -C"):
        doc.run(starts)
    assert git(ws, "log", "-1", "--format=%an").strip() == "GEP example"

    # 1. gep server start (the session's server is running already: it says so) and the export
    out = doc.run("gep server start")
    assert f"already running: UI {server.url}" in out, out
    assert "Prefect server started" in server.start_output and server.url in server.start_output
    doc.run("export PREFECT_API_URL=")
    assert doc.env["PREFECT_API_URL"] == server.api_url
    status = server.run([str(BIN / "gep"), "server", "status"], base=server.home_env)
    assert status.returncode == 0 and status.stdout.startswith(f"running at {server.url}")

    # 2.-3. work pool and deployments
    doc.run("prefect work-pool create gep-pool")
    out = doc.run("GEP_WORKSPACE=", timeout_s=180)
    for name in ("evolution-cycle/scheduled", "evolution-cycle/evolve-now", "evolve-fleet/evolve-fleet",
                 "distill-genes/daily"):
        assert name in out, out
    check_deployments(server, ws)

    # 4. a worker, from any directory: the pull step sets the checkout
    worker_log = tmp_path / "worker.log"
    worker = doc.spawn("prefect worker start --pool gep-pool", worker_log)
    try:
        ui_run = step5_ui_run(server, ws, worker_log)
        step6_finish(doc, server, ws, ui_run)
        step7_8_cli_runs(doc, server, ws, worker_log)
        step9_results(doc, server, ws)
        step10_fleet(doc, server, ws, worker_log)
        assert doc.done == len(doc.commands), f"commands of docs/deploy.md not run: {doc.commands[doc.done:]}"
    finally:
        wait_for_flow_run_processes(worker)  # the fleet's runs are final: their processes may still be exiting
        kill_group(worker, signal.SIGINT, grace_s=15)  # Ctrl-C, as a user stops the worker
    assert worker.returncode == 0, worker_log.read_text()[-3000:]  # stopped cleanly by Ctrl-C, not killed


def check_deployments(server: LiveServer, ws: Path) -> None:
    with server.client() as client:
        scheduled = client.read_deployment_by_name("evolution-cycle/scheduled")
        manual = client.read_deployment_by_name("evolution-cycle/evolve-now")
        fleet = client.read_deployment_by_name("evolve-fleet/evolve-fleet")
    assert scheduled.entrypoint == "flows/cycle.py:scheduled_cycle"
    assert manual.entrypoint == "flows/cycle.py:evolution_cycle" and fleet.entrypoint == "flows/fleet.py:evolve_fleet"
    for d in (scheduled, manual, fleet):
        assert d.work_pool_name == "gep-pool" and d.description
        assert d.pull_steps == [{"prefect.deployments.steps.set_working_directory": {"directory": str(ROOT)}}]
    for d in (scheduled, manual):
        assert d.parameters == {"request": {"workspace": str(ws)}}
        # what the UI's Run -> Custom run form shows: the request's fields with descriptions, dropdowns,
        # workspace required
        schema = d.parameter_openapi_schema
        assert list(schema["properties"]) == ["request"]
        model = schema["definitions"][schema["properties"]["request"]["$ref"].split("/")[-1]]
        props = model["properties"]
        for name in ("workspace", "mutator", "strategy"):
            assert props[name].get("description"), f"{d.name}: no description for {name}"
        assert "prompt" in props["mutator"]["description"] and "balanced" in props["strategy"]["description"]
        assert model["required"] == ["workspace"] and '"null"' not in json.dumps(schema)
        assert "scheduled" not in props
    assert "review" in manual.parameter_openapi_schema["definitions"]["CycleRequest"]["properties"]
    assert fleet.parameter_openapi_schema["required"] == ["workspaces"]
    [sched] = scheduled.schedules
    assert sched.schedule.cron == "*/30 * * * *" and sched.active
    assert manual.schedules == []
    # the fleet's schedule is there, off until workspaces are listed; its ticks run scheduled cycles
    [tick] = fleet.schedules
    assert tick.schedule.cron == "0 */6 * * *" and not tick.active and tick.parameters == {"scheduled": True}
    with server.client() as client:  # gene distillation, once a day (issue 16)
        distill = client.read_deployment_by_name("distill-genes/daily")
    assert distill.entrypoint == "flows/distill.py:distill_genes" and distill.parameters["workspace"] == str(ws)
    [daily] = distill.schedules
    assert daily.active and len(daily.schedule.cron.split()) == 5 and daily.schedule.cron.split()[2:] == ["*"] * 3


def step5_ui_run(server: LiveServer, ws: Path, worker_log: Path):
    """The UI's Run -> Custom run button: a run of evolve-now with the form's parameters."""
    with server.client() as client:
        manual = client.read_deployment_by_name("evolution-cycle/evolve-now")
        run = client.create_flow_run_from_deployment(manual.id, parameters={"request": {"workspace": str(ws),
                                                                                      "mutator": "prompt"}})
    done = wait_for_run(server, run.id, worker_log)
    assert done.state_name == "Awaiting changes" and done.state_type.value == "COMPLETED", done.state
    assert done.name.startswith("cycle-0001 repair gene_repair_from_errors"), done.name
    assert {"intent:repair", "gene:gene_repair_from_errors", "outcome:awaiting_changes", "workspace:agent-ws",
            "gep", "manual"} <= set(done.tags)
    return done


def step6_finish(doc: Doc, server: LiveServer, ws: Path, ui_run) -> None:
    doc.run("sed -i")
    out = doc.run("gep solidify --workspace")
    assert "success" in out and f"{server.url}/runs/flow-run/" in out, out
    assert "GEP-Event: evt_" in git(ws, "log", "-1", "--format=%B")
    with server.client() as client:
        original = client.read_flow_run(ui_run.id)
    # the run that started the cycle now says what became of it
    assert "outcome:success" in original.tags and "outcome:awaiting_changes" not in original.tags
    assert original.state_name == "Success"


def step7_8_cli_runs(doc: Doc, server: LiveServer, ws: Path, worker_log: Path) -> None:
    doc.run("python -c")  # the job fails again: a cycle reads only lines written since the fix landed
    out = doc.run("prefect deployment run 'evolution-cycle/evolve-now'", timeout_s=180)
    waiting = wait_for_run(server, run_id_in(out, server), worker_log, timeout_s=5)
    assert waiting.state_name == "Awaiting changes", out

    # refused while it waits: Failed, and --watch shows why (the field named as the form names it)
    out = doc.run("prefect deployment run 'evolution-cycle/evolve-now'", expect=1, timeout_s=180)
    refused = wait_for_run(server, run_id_in(out, server), worker_log, timeout_s=5)
    assert refused.state_name == "Failed" and "is still awaiting changes" in refused.state.message
    assert "abandon_pending" in refused.state.message and "--abandon-pending" not in refused.state.message
    assert "is still awaiting changes" in out, out
    assert "Traceback" not in worker_log.read_text(errors="replace")

    # 8. a failed cycle: Failed with the reason as its message, rolled back; the abandoned one says so
    out = doc.run("prefect deployment run 'evolution-cycle/evolve-now'", expect=1, timeout_s=180)
    failed = wait_for_run(server, run_id_in(out, server), worker_log, timeout_s=5)
    assert failed.state_type.value == "FAILED" and failed.state_name == "Failed"
    assert failed.state.message.startswith("validation"), failed.state.message
    assert "\n" not in failed.state.message and failed.state.message[:60] in out, out
    assert "outcome:failed" in failed.tags
    assert "def mean" in (ws / "stats.py").read_text()  # rolled back
    with server.client() as client:
        abandoned = client.read_flow_run(waiting.id)
    assert abandoned.state_name == "Abandoned" and "outcome:abandoned" in abandoned.tags


def step9_results(doc: Doc, server: LiveServer, ws: Path) -> None:
    table = doc.run("gep history --workspace")
    events = json_history(server, ws)
    assert [e["outcome"]["status"] for e in events] == ["failed", "abandoned", "success"]
    for e in events:
        row = next(line for line in table.splitlines() if short_id(e["id"]) in line)  # the id people type
        assert f"{server.url}/runs/flow-run/{e['meta']['flow_run_id']}" in row, table
        assert e["flow_run"]["state"] in row
    assert "Failed" in table and "Abandoned" in table and "Success" in table
    all_runs = doc.run("gep history --workspace")
    refused_rows = [line for line in all_runs.splitlines() if "refused" in line]
    assert len(refused_rows) == 1 and "Failed" in refused_rows[0], all_runs
    listed = json.loads(doc.run("gep history --workspace"))
    assert [e["id"] for e in listed] == [e["id"] for e in events]

    from gep.prefect_api import workspace_key

    doc.key = f"gep-{workspace_key(ws)}-cycle"
    assert doc.key in doc.run("prefect artifact ls")
    inspected = doc.run("prefect artifact inspect")
    assert events[0]["id"] in inspected and "gene_repair_from_errors" in inspected


def json_history(server: LiveServer, ws: Path) -> list[dict]:
    r = server.run([str(BIN / "gep"), "history", "--workspace", str(ws), "--json"], base=server.home_env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def step10_fleet(doc: Doc, server: LiveServer, ws: Path, worker_log: Path) -> None:
    other = Path(f"{ws}-2")
    for starts in ("cp -r examples/workspace", "git -C", "git -C", "git -C"):
        doc.run(starts)
    out = doc.run("gep fleet --workspace", timeout_s=240)
    link = re.search(rf"flow run: {re.escape(server.url)}/runs/flow-run/([0-9a-f-]{{36}})", out)
    assert link, out
    fleet = wait_for_run(server, UUID(link.group(1)), worker_log, timeout_s=5)
    assert fleet.state_name == "Completed", out
    for w in (ws, other):
        [latest, *_] = json_history(server, w)
        assert latest["outcome"]["status"] == "awaiting_changes" and latest["flow_run"]["state"] == "Awaiting changes"
        # --watch printed the fleet's table: the workspace, its cycle's run and state, and its event
        # (the terminal table names a workspace by its last two path parts, cut to fit 80 columns: the row is
        # found by the workspace's event)
        row = next((line for line in out.splitlines() if latest["id"] in line), "")
        assert "Awaiting changes" in row, out
        assert latest["meta"]["flow_run_id"], latest  # the cycle's run, recorded with its event
    # the same fleet on this machine: no worker, the cycles as subflows of the fleet's run in the gep process
    doc.run("gep solidify --abandon")
    doc.run("gep solidify --abandon")
    out = doc.run("gep fleet --workspace", timeout_s=240)
    assert "fleet: 2 cycles in this process" in out and "Fleet: 2 cycles: 2 Awaiting changes" in out, out
    link = re.search(rf"flow run: {re.escape(server.url)}/runs/flow-run/([0-9a-f-]{{36}})", out)
    assert link, out
    for w in (ws, other):
        [latest, previous, *_] = json_history(server, w)
        assert previous["outcome"]["status"] == "abandoned" and latest["outcome"]["status"] == "awaiting_changes"
        row = next((line for line in out.splitlines() if latest["id"] in line), "")  # found by its event
        assert "Awaiting changes" in row, out
        with server.client() as client:
            cycle_run = client.read_flow_run(UUID(latest["meta"]["flow_run_id"]))
            parent = client.read_task_run(cycle_run.parent_task_run_id)
        assert str(parent.flow_run_id) == link.group(1)  # nested under the fleet's run in the UI
    shutil.rmtree(other)


def test_gep_cycle_uses_the_running_gep_server(live_prefect: LiveServer, example_ws: Path):
    """No PREFECT_API_URL: `gep cycle` finds the server `gep server start` runs, and its run is in that UI."""
    server = live_prefect
    env = {**server.home_env, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    r = server.run([str(BIN / "gep"), "cycle", "--workspace", str(example_ws), "--mutator", "prompt"],
                   base=env, timeout_s=120)
    assert r.returncode == 0, r.stderr
    assert "starting" not in r.stderr  # no second server, no temporary one
    line = next(ln for ln in r.stdout.splitlines() if "flow run:" in ln)
    run_id = line.rsplit("/", 1)[1]
    assert line.strip() == f"flow run: {server.url}/runs/flow-run/{run_id}"
    with server.client() as client:
        assert client.read_flow_run(run_id).state_name == "Awaiting changes"
    # the "next:" line works as printed
    next_line = next(ln for ln in r.stdout.splitlines() if "next:" in ln)
    command = next_line.split("then run:", 1)[1].strip()
    stats = example_ws / "stats.py"
    stats.write_text(stats.read_text().replace("(len(values) - 1)", "len(values)"))
    done = server.run(shlex.split(command), base=env, timeout_s=120)
    assert done.returncode == 0 and "success" in done.stdout, (command, done.stdout, done.stderr)


def test_gep_server_batches_the_task_run_recorders_writes(live_prefect: LiveServer):
    """`gep server start` runs Prefect on SQLite with the task-run recorder's writes batched (fewer writes that
    collide and wait ~2 s on a 503); a setting the user gives wins."""
    import urllib.request

    from gep.server import TASK_RUN_BATCHING, _server_env

    with urllib.request.urlopen(f"{live_prefect.api_url}/admin/settings", timeout=10) as r:
        recorder = json.load(r)["server"]["services"]["task_run_recorder"]
    assert (recorder["batch_size"], recorder["read_batch_size"], recorder["flush_interval"]) == (200, 200, 2.0)
    mine = {"PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_BATCH_SIZE": "1", "PREFECT_API_URL": "http://x/api"}
    child = _server_env(mine, 4242)
    assert child["PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_BATCH_SIZE"] == "1" and "PREFECT_API_URL" not in child
    assert all(child[k] == v for k, v in TASK_RUN_BATCHING.items() if k not in mine)
