"""What a fleet refuses before any cycle starts, the fleet's table, a fleet run here (its cycles as subflows
of its run), and the slot's lease setting.

The dispatched fleet (two workers, PostgreSQL, a killed cycle's slot): tests/test_e2e_fleet.py."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from conftest import EXAMPLE, init_repo
from test_cli import one_line_error, run
from test_flows import prefect_server, run_state  # noqa: F401 - the session server, as the flow tests use it

from gep.core.errors import ConfigError
from gep.fleet import FleetRow, check_agent_cmd, check_workspaces, markdown

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("cmd", ["ANTHROPIC_API_KEY=sk-ant-api03-" + "a" * 40 + " claude -p",
                                 "agent --api-key sk-live-0123456789abcdef0123", "python /home/alice/agent.py",
                                 "claude --token=[REDACTED]"])
def test_an_agent_command_that_would_arrive_redacted_is_refused(cmd: str):
    with pytest.raises(ConfigError, match="gep.toml"):
        check_agent_cmd(cmd)


def test_a_plain_agent_command_passes_as_given():
    assert check_agent_cmd(" claude -p ") == "claude -p"
    assert check_agent_cmd('python -c "print(1)"') == 'python -c "print(1)"'
    assert check_agent_cmd("") == ""


@pytest.mark.parametrize("workspaces", [[], [""], ["/srv/a", "  "], ["{{ $GEP_WORKSPACE }}"]])
def test_workspaces_must_be_paths(workspaces: list[str]):
    with pytest.raises(ConfigError, match="workspaces"):
        check_workspaces(workspaces)


def test_the_table_keeps_one_row_per_workspace_whatever_the_cells_hold():
    rows = [FleetRow(workspace="/srv/a|b", run_id="1", run_name="cycle-0001 repair gene|x", link="http://ui/runs/1",
                     state="Failed", final=True, message="validation failed:\nexit 1"),
            FleetRow(workspace="/srv/c", run_id="2", state="Running")]
    text = markdown(rows, "a flow run of `evolution-cycle/evolve-now`")
    table = [line for line in text.splitlines() if line.startswith("| `")]
    assert len(table) == 2 and all(line.count(" | ") == 5 for line in table), text
    assert "[cycle-0001 repair gene\\|x](http://ui/runs/1)" in table[0]
    assert text.startswith("# Fleet: 2 cycles: 1 Failed, 1 Running; 1 not finished")
    assert "validation failed: exit 1" in text


# ------------------------------------------------------------------ the flow refuses, in one line


def test_the_flow_refuses_an_empty_list_and_a_command_with_a_secret(prefect_server):  # noqa: F811
    from flows.fleet import evolve_fleet

    state = run_state(evolve_fleet, workspaces=[])
    assert state.is_failed() and state.message.startswith("parameter 'workspaces' is empty")
    state = run_state(evolve_fleet, workspaces=["/srv/a"], agent_cmd="python /home/alice/agent.py")
    assert state.is_failed() and "gep.toml" in state.message and "alice" not in state.message


def test_the_flow_names_a_missing_deployment_and_how_to_create_it(prefect_server, repo: Path,  # noqa: F811
                                                                   monkeypatch: pytest.MonkeyPatch):
    import flows.fleet

    monkeypatch.setattr(flows.fleet, "CYCLE_DEPLOYMENT", "evolution-cycle/no-such-deployment")
    state = run_state(flows.fleet.evolve_fleet, workspaces=[str(repo)], mutator="prompt")
    assert state.is_failed()
    assert state.message == (f"deployment 'evolution-cycle/no-such-deployment' does not exist on "
                             f"{prefect_server.api_url}: create the deployments with `prefect deploy --all` from "
                             "the gep checkout (docs/deploy.md, step 3)")
    assert not (repo / ".gep").exists()  # nothing ran


def test_scheduled_fleet_ticks_run_the_scheduled_cycle(prefect_server, repo: Path,  # noqa: F811
                                                        monkeypatch: pytest.MonkeyPatch):
    import flows.fleet

    monkeypatch.setattr(flows.fleet, "SCHEDULED_DEPLOYMENT", "evolution-cycle/no-such-schedule")
    state = run_state(flows.fleet.evolve_fleet, workspaces=[str(repo)], scheduled=True)
    assert state.is_failed() and state.message.startswith("deployment 'evolution-cycle/no-such-schedule' does")


# ------------------------------------------------------------------ a fleet run here


def subflow_runs(server, fleet_run_id) -> list:
    """The flow runs whose parent task run belongs to the fleet's run: its subflows, as the UI nests them."""
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId, FlowRunFilterParentTaskRunId

    with server.client() as client:
        tasks = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[fleet_run_id])))
        return client.read_flow_runs(flow_run_filter=FlowRunFilter(
            parent_task_run_id=FlowRunFilterParentTaskRunId(any_=[t.id for t in tasks])))


def fleet_table(server, run_id, key: str = "gep-fleet") -> str:
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId, ArtifactFilterKey

    with server.client() as client:
        (artifact,) = client.read_artifacts(artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(
            any_=[run_id]), key=ArtifactFilterKey(any_=[key])))
    return artifact.data


def test_a_fleet_run_here_runs_each_cycle_as_its_subflow_never_two_on_one_workspace(
        prefect_server, example_ws: Path, tmp_path: Path):  # noqa: F811
    from flows.fleet import evolve_fleet

    other = init_repo(Path(shutil.copytree(EXAMPLE, tmp_path / "other")), {})
    # example_ws twice: the second cycle waits for the first's slot, then finds its cycle awaiting changes
    state = run_state(evolve_fleet, workspaces=[str(example_ws), str(other), str(example_ws)], mutator="prompt",
                      here=True, concurrency=3)
    assert state.is_completed(), state.message
    counts = state.message.removeprefix("3 cycles: ").split(", ")  # in the order the rows' states first appear
    assert sorted(counts) == ["1 Failed", "2 Awaiting changes"], state.message
    runs = subflow_runs(prefect_server, state.state_details.flow_run_id)
    assert sorted(r.state_name for r in runs) == ["Awaiting changes", "Awaiting changes", "Failed"]
    refused = next(r for r in runs if r.state_name == "Failed")
    assert refused.parameters["request"]["workspace"] == str(example_ws) and "still awaiting changes" in refused.state.message
    waiting = [r for r in runs if r.state_name == "Awaiting changes"]
    assert {r.parameters["request"]["workspace"] for r in waiting} == {str(example_ws), str(other)}
    first = next(r for r in waiting if r.parameters["request"]["workspace"] == str(example_ws))
    # one at a time on a workspace: the second waited (Running) for the slot the first held to its end
    assert first.end_time <= refused.end_time
    table = fleet_table(prefect_server, state.state_details.flow_run_id)
    assert "Each cycle is a subflow of this run." in table and table.count("| Awaiting changes | evt_") == 2
    charts = fleet_table(prefect_server, state.state_details.flow_run_id, "gep-fleet-report")  # gep report's
    assert "# GEP report: 2 cycles" in charts and "## Fleet" in charts and charts.count("| 🟦 |") == 2


def test_gep_fleet_here_runs_on_this_machine_and_prints_the_table(prefect_server, example_ws: Path):  # noqa: F811
    one_line_error(run("fleet", "-w", str(example_ws), "--here", "--as-given"), "--as-given", "--here")
    result = run("fleet", "-w", str(example_ws), "--here", "--mutator", "prompt", "--concurrency", "2")
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "fleet: 1 cycle in this process, up to 2 at once" in result.stdout and "/runs/flow-run/" in result.stdout
    assert "Awaiting changes   evt_" in result.stdout and "Completed: 1 cycle: 1 Awaiting changes" in result.stdout
    assert (example_ws / ".gep" / "prompts").is_dir()


def test_the_final_table_waits_for_the_server_to_record_a_completed_fleets_cycles(
        prefect_server, tmp_path: Path, capsys):  # noqa: F811
    """A fleet run here ends before the server has recorded its subflows (Prefect records task runs from events):
    the table printed at the end reads again until it agrees with the fleet, not "Not started" (seen in CI)."""
    import threading
    import time

    from prefect import flow, task
    from prefect.states import Completed

    from flows.fleet_launch import report

    @flow(name="evolve-fleet-late-rows")
    def fleet_stub(workspaces: list[str]) -> None: ...

    @flow(name="evolution-cycle-late-row")
    def cycle_stub(request: dict) -> None: ...

    @task(name="cycle-late-row")
    def slot() -> None: ...

    ws = str(tmp_path / "ws")
    with prefect_server.client() as client:
        fleet = client.create_flow_run(fleet_stub, parameters={"workspaces": [ws]}, state=Completed())

    def record_the_cycle_late() -> None:
        time.sleep(2)
        with prefect_server.client() as client:
            slot_run = client.create_task_run(slot, fleet.id, dynamic_key="0")
            client.create_flow_run(cycle_stub, parameters={"request": {"workspace": ws}},
                                   parent_task_run_id=slot_run.id, state=Completed(name="Awaiting changes"))

    late = threading.Thread(target=record_the_cycle_late)
    late.start()
    try:
        assert report(prefect_server.api_url, str(fleet.id)) == 0
    finally:
        late.join()
    out = capsys.readouterr().out
    assert "Awaiting changes" in out and "Not started" not in out, out


# ------------------------------------------------------------------ gep fleet


def test_gep_fleet_refuses_bad_input_in_one_line(repo: Path, tmp_path: Path):
    one_line_error(run("fleet"), "no workspace given", "--workspace")
    one_line_error(run("fleet", "-w", str(tmp_path / "nope")), "nope", "does not exist")
    one_line_error(run("fleet", "-w", str(tmp_path)), "not a git repository")
    one_line_error(run("fleet", "-w", str(repo), "--mutator", "gpt"), "unknown mutator 'gpt'")
    one_line_error(run("fleet", "-w", str(repo), "--strategy", "yolo"), "unknown strategy 'yolo'")
    one_line_error(run("fleet", "-w", str(repo), "--agent-cmd", "python /home/alice/agent.py"), "gep.toml")
    assert run("fleet", "-w", str(repo), "--mutator", "gpt").exit_code == 2


def test_gep_fleet_needs_a_server_it_does_not_start_one(repo: Path, tmp_path: Path, monkeypatch):
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect-home"))
    one_line_error(run("fleet", "-w", str(repo)), "no Prefect server is running", "gep server start")
    assert not (tmp_path / "prefect-home" / "gep-server.json").exists()
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")
    one_line_error(run("fleet", "-w", str(repo)), "cannot reach the Prefect server at http://127.0.0.1:9/api")


def test_gep_fleet_names_a_missing_deployment(prefect_server, repo: Path, monkeypatch):  # noqa: F811
    import gep.fleet

    monkeypatch.setenv("PREFECT_API_URL", prefect_server.api_url)
    monkeypatch.setattr(gep.fleet, "FLEET_DEPLOYMENT", "evolve-fleet/no-such-fleet")
    one_line_error(run("fleet", "-w", str(repo)), "deployment 'evolve-fleet/no-such-fleet' does not exist",
                   "prefect deploy --all")


def test_gep_fleet_help_explains_what_it_needs():
    result = run("fleet", "--help")
    # rich wraps the lines, some after a hyphen: join those first
    text = " ".join(re.sub(r"-\n\s+", "-", result.stdout).split())
    assert result.exit_code == 0
    for needle in ("--workspace", "--as-given", "--watch", "evolution-cycle/evolve-now", "prefect deploy --all",
                   "prefect worker start --pool gep-pool", "never two at once on one workspace", "--here",
                   "--concurrency", "runs on this machine"):
        assert needle in text, needle


# ------------------------------------------------------------------ the slot's lease


@pytest.mark.parametrize(("raw", "lease"), [("", 300.0), ("90", 90.0), (" 60 ", 60.0)])
def test_the_lease_setting(raw: str, lease: float):
    from flows.slot import lease_seconds

    assert lease_seconds({"GEP_SLOT_LEASE_S": raw}) == lease


@pytest.mark.parametrize("raw", ["59", "86401", "nan", "inf", "-1", "five"])
def test_a_bad_lease_setting_is_refused(raw: str):
    from flows.slot import lease_seconds

    with pytest.raises(ConfigError, match=f"GEP_SLOT_LEASE_S='{raw}' is not a number of seconds from 60 to 86400"):
        lease_seconds({"GEP_SLOT_LEASE_S": raw})


@pytest.mark.parametrize(("name", "message"), [
    ("GEP_SLOT_LEASE_S", "GEP_SLOT_LEASE_S='nan' is not a number of seconds from 60 to 86400"),
    ("GEP_VALIDATION_SLOTS", "GEP_VALIDATION_SLOTS='nan' is not a number of validations at once (0 for no limit, "
                             "at most 1024)"),
])
def test_a_bad_setting_refuses_the_run_in_one_line(prefect_server, example_ws: Path, monkeypatch,  # noqa: F811
                                                   name: str, message: str):
    from flows.cycle import evolution_cycle

    monkeypatch.setenv(name, "nan")
    state = run_state(evolution_cycle, workspace=str(example_ws), mutator="prompt")
    assert state.is_failed() and state.message == message
    assert not (example_ws / ".gep" / "gep.db").exists()
