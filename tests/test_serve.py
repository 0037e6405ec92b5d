"""`gep serve`: the one-command alternative to deployments and a worker (docs/deploy.md)."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import EXAMPLE, init_repo
from live_prefect import BIN, LiveServer, clean_env, free_port, kill_group

from gep.store import Store

GEP = str(BIN / "gep")


def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "served-ws"
    shutil.copytree(EXAMPLE, ws)
    return init_repo(ws, {})


def gep(args: list[str], env: dict[str, str], timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([GEP, *args], env=env, capture_output=True, text=True, timeout=timeout_s,
                          stdin=subprocess.DEVNULL)


def one_line_error(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gep: "), r.stderr
    return lines[0]


def test_serve_without_a_server_is_one_line(tmp_path: Path):
    ws = workspace(tmp_path)
    env = clean_env(PREFECT_HOME=str(tmp_path / "home"))  # no PREFECT_API_URL anywhere
    line = one_line_error(gep(["serve", "--workspace", str(ws)], env))
    assert "gep server start" in line and "PREFECT_API_URL" in line

    line = one_line_error(gep(["serve", "--workspace", str(ws), "--mutator", "claude"],
                              {**env, "PREFECT_API_URL": f"http://127.0.0.1:{free_port()}/api"}))
    assert "unknown mutator 'claude'; valid: anthropic, command, prompt" in line  # as `gep cycle` says it
    # a strategy is read as `gep cycle` reads it (repair_only is repair-only): the next thing missing is the server
    line = one_line_error(gep(["serve", "--workspace", str(ws), "--strategy", "repair_only"], env))
    assert "needs a running Prefect server" in line, line

    dead = f"http://127.0.0.1:{free_port()}/api"
    line = one_line_error(gep(["serve", "--workspace", str(ws)], {**env, "PREFECT_API_URL": dead}))
    assert f"cannot reach the Prefect server at {dead}" in line

    line = one_line_error(gep(["serve", "--workspace", str(ws), "--cron", "every 5 minutes"], env))
    assert "'every 5 minutes' is not a cron expression" in line

    line = one_line_error(gep(["serve", "--workspace", str(tmp_path / "missing")], env))
    assert "missing" in line


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_serve_registers_runs_and_stops_on_ctrl_c(live_prefect: LiveServer, tmp_path: Path):
    from flows.serve import deployment_names

    server = live_prefect
    ws = workspace(tmp_path)
    scheduled_name, manual_name = deployment_names(ws)
    log = tmp_path / "serve.log"
    proc = server.spawn([GEP, "serve", "--workspace", str(ws), "--cron", "*/30 * * * *", "--mutator", "prompt"],
                        cwd=tmp_path, log=log)
    try:
        deadline = time.monotonic() + 90
        deployments = {}
        with server.client() as client:
            while time.monotonic() < deadline and len(deployments) < 2:
                assert proc.poll() is None, f"gep serve exited {proc.returncode}:\n{log.read_text()}"
                deployments = {d.name: d for d in client.read_deployments()
                               if d.name in (scheduled_name, manual_name)}
                time.sleep(0.5)
            assert len(deployments) == 2, f"gep serve registered {sorted(deployments)}:\n{log.read_text()}"
            scheduled, manual = deployments[scheduled_name], deployments[manual_name]
            assert scheduled_name == f"scheduled-{ws.name}-{scheduled_name.rsplit('-', 1)[1]}"  # as documented
            assert f"evolution-cycle/{manual_name}" in log.read_text()  # it says what it registered
            [sched] = scheduled.schedules
            assert sched.schedule.cron == "*/30 * * * *" and sched.active
            assert scheduled.parameters == {"request": {"workspace": str(ws), "mutator": "prompt", "strategy": "auto"}}
            assert list(scheduled.parameter_openapi_schema["properties"]) == ["request"]
            assert manual.parameters["request"]["workspace"] == str(ws) and not manual.schedules

            # the served process runs what the UI's Run button creates; here a run in the flat shape of the
            # deployments made before the request was one parameter (its stand-ins: "" and -1 for not set)
            old = {"workspace": str(ws), "mutator": "prompt", "agent_cmd": "", "branch": "", "seed": -1}
            run = client.create_flow_run_from_deployment(manual.id, parameters=old)
            state = "?"
            while time.monotonic() < deadline + 60:
                done = client.read_flow_run(run.id)
                state = done.state_name
                if done.state_type and done.state_type.value in {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}:
                    break
                time.sleep(0.5)
            assert state == "Awaiting changes", log.read_text()[-4000:]
        with Store.for_workspace(ws) as store:
            [event] = store.list_events(limit=5)
        assert event.meta.flow_run_id == str(run.id) and event.outcome.status == "awaiting_changes"

        # Ctrl-C: the terminal sends SIGINT to the foreground process group
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(20)
        took = time.monotonic() - started
    finally:
        kill_group(proc, grace_s=5)
    text = log.read_text()
    assert rc == 0, text[-3000:]
    assert took < 10, f"gep serve took {took:.1f} s to stop"
    assert "Traceback" not in text, text[-3000:]
    with server.client() as client:  # stopping pauses the schedule, so no run piles up while nobody serves
        assert client.read_deployment(scheduled.id).paused and client.read_deployment(manual.id).paused
