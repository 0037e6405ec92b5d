"""End to end, as docs/deploy.md tells a user to do it: a real `prefect server start`, the work pool,
`prefect deploy --all` from this repository's prefect.yaml, a worker, a run created the way the UI's Run
button creates it, then `gep history`. Every command docs/deploy.md shows is run here.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import time
from pathlib import Path
from uuid import UUID

import pytest
from conftest import EXAMPLE, git, init_repo
from live_prefect import BIN, ROOT, LiveServer, kill_group

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

PREFECT = str(BIN / "prefect")
GEP = str(BIN / "gep")
TERMINAL = {"Completed", "Failed", "Crashed", "Cancelled"}


def ok(result) -> str:
    assert result.returncode == 0, f"{result.args} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def wait_for_run(server: LiveServer, run_id: UUID, worker_log: Path, timeout_s: float = 120) -> str:
    deadline = time.monotonic() + timeout_s
    state = "?"
    with server.client() as client:
        while time.monotonic() < deadline:
            state = client.read_flow_run(run_id).state_name or "?"
            if state in TERMINAL:
                return state
            time.sleep(0.5)
    pytest.fail(f"flow run {run_id} still {state} after {timeout_s} s; worker log:\n"
                + worker_log.read_text(errors="replace")[-4000:])


def example_workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "agent-ws"
    shutil.copytree(EXAMPLE, ws)
    return init_repo(ws, {})


def test_deploy_worker_ui_run_and_history(live_prefect: LiveServer, tmp_path: Path):
    server = live_prefect
    ws = example_workspace(tmp_path)

    # docs: prefect work-pool create gep-pool --type process
    ok(server.run([PREFECT, "work-pool", "create", "gep-pool", "--type", "process"]))

    # docs: GEP_WORKSPACE=... prefect deploy --all   (from the repository root)
    out = ok(server.run([PREFECT, "deploy", "--all"], cwd=ROOT, env={"PWD": str(ROOT), "GEP_WORKSPACE": str(ws)},
                        timeout_s=120))
    assert "evolution-cycle/scheduled" in out and "evolution-cycle/evolve-now" in out
    assert "distill-genes/daily" in out

    with server.client() as client:
        scheduled = client.read_deployment_by_name("evolution-cycle/scheduled")
        manual = client.read_deployment_by_name("evolution-cycle/evolve-now")
    for d in (scheduled, manual):
        assert d.work_pool_name == "gep-pool"
        assert d.entrypoint == "flows/cycle.py:evolution_cycle"
        assert d.pull_steps == [{"prefect.deployments.steps.set_working_directory": {"directory": str(ROOT)}}]
        assert d.parameters["workspace"] == str(ws)
        assert d.description
        # what the UI's Run -> Custom run form shows: every field with a description, workspace required
        props = d.parameter_openapi_schema["properties"]
        for name in ("workspace", "mutator", "strategy"):
            assert props[name].get("description"), f"{d.name}: no description for {name}"
        assert "prompt" in props["mutator"]["description"] and "balanced" in props["strategy"]["description"]
        assert d.parameter_openapi_schema["required"] == ["workspace"]
    assert scheduled.parameters["scheduled"] is True and "scheduled" not in manual.parameters
    [sched] = scheduled.schedules
    assert sched.schedule.cron == "*/30 * * * *" and sched.active
    assert manual.schedules == []
    with server.client() as client:  # gene distillation, once a day (issue 16)
        distill = client.read_deployment_by_name("distill-genes/daily")
    assert distill.entrypoint == "flows/distill.py:distill_genes" and distill.parameters["workspace"] == str(ws)
    [daily] = distill.schedules
    assert daily.active and len(daily.schedule.cron.split()) == 5 and daily.schedule.cron.split()[2:] == ["*"] * 3

    # docs: prefect worker start --pool gep-pool   (from any directory: the pull step sets the checkout)
    worker_log = tmp_path / "worker.log"
    worker = server.spawn([PREFECT, "worker", "start", "--pool", "gep-pool"], cwd=tmp_path,
                          env={"PREFECT_WORKER_QUERY_SECONDS": "1", "PREFECT_WORKER_PREFETCH_SECONDS": "5"},
                          log=worker_log)
    try:
        # The UI's Run -> Custom run button: a run of evolve-now with the form's parameters.
        with server.client() as client:
            run = client.create_flow_run_from_deployment(
                manual.id, parameters={"workspace": str(ws), "mutator": "prompt"})
        assert wait_for_run(server, run.id, worker_log) == "Completed", worker_log.read_text()[-4000:]
        with server.client() as client:
            done = client.read_flow_run(run.id)
        assert done.name.startswith("cycle-0001 repair gene_repair_from_errors"), done.name
        assert {"intent:repair", "gene:gene_repair_from_errors", "outcome:awaiting_changes"} <= set(done.tags)

        # docs: gep history --workspace WS --json / gep history --workspace WS
        events = json.loads(ok(server.run([GEP, "history", "--workspace", str(ws), "--json"])))
        [event] = [e for e in events if e["meta"].get("flow_run_id") == str(run.id)]
        assert event["outcome"]["status"] == "awaiting_changes"
        assert event["genes_used"] == ["gene_repair_from_errors"]
        table = ok(server.run([GEP, "history", "--workspace", str(ws)], env={"COLUMNS": "250"}))
        row = next(line for line in table.splitlines() if event["id"] in line)
        assert "Completed" in row and f"{server.url}/runs/flow-run/{run.id}" in row, table

        # docs: prefect artifact ls / prefect artifact inspect gep-<workspace>-cycle
        from flows.reporting import workspace_key

        key = f"gep-{workspace_key(ws)}-cycle"
        assert key in ok(server.run([PREFECT, "artifact", "ls"], env={"COLUMNS": "250"}))
        inspected = ok(server.run([PREFECT, "artifact", "inspect", key], env={"COLUMNS": "250"}))
        assert event["id"] in inspected and str(run.id) in inspected and "gene_repair_from_errors" in inspected

        # docs: the human makes the change, then gep solidify commits it
        stats = ws / "stats.py"
        stats.write_text(stats.read_text().replace("(len(values) - 1)", "len(values)"))
        solid = json.loads(ok(server.run([GEP, "solidify", "--workspace", str(ws), "--json"], timeout_s=120)))
        assert solid["id"] == event["id"] and solid["outcome"]["status"] == "success", solid["meta"]
        assert f"GEP-Event: {event['id']}" in git(ws, "log", "-1", "--format=%B")

        # docs: prefect deployment run 'evolution-cycle/evolve-now' --param workspace=... --param mutator=prompt
        #       (--watch waits for the run to finish)
        out = ok(server.run([PREFECT, "deployment", "run", "evolution-cycle/evolve-now",
                             "--param", f"workspace={ws}", "--param", "mutator=prompt", "--watch"], timeout_s=150))
        cli_run = UUID(re.search(r"UUID: ([0-9a-f-]{36})", out).group(1))
        assert f"{server.url}/runs/flow-run/{cli_run}" in out
        assert wait_for_run(server, cli_run, worker_log, timeout_s=5) == "Completed", worker_log.read_text()[-4000:]
        events = json.loads(ok(server.run([GEP, "history", "--workspace", str(ws), "--json"])))
        assert [e["meta"].get("flow_run_id") for e in events[:2]] == [str(cli_run), str(run.id)]
    finally:
        # Ctrl-C, as a user stops the worker
        kill_group(worker, signal.SIGINT, grace_s=15)
    assert worker.returncode == 0, worker_log.read_text()[-3000:]  # stopped cleanly by Ctrl-C, not killed
