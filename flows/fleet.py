"""Evolve many workspaces: one cycle each, spread over every worker of the work pool, or run here.

Dispatched (the default): each workspace's cycle is a flow run of the `evolution-cycle/evolve-now`
deployment (`scheduled`: of `evolution-cycle/scheduled`), created with Prefect's run_deployment as a subflow
of the fleet's run, so any worker polling the pool, on any machine, picks it up (process pools here; Docker
or Kubernetes pools the same way). The fleet waits for them all with one bounded poll.

Here (`here=True`, `gep fleet --here`): the cycles are subflows run in the fleet run's own process, at most
`concurrency` at once. A process worker starts a Python process per flow run (~2 s of CPU importing Prefect
and gep before a cycle of about half a second), so on one machine this runs a fleet several times faster;
dispatching pays when the workers are on other machines.

Either way the fleet reports a table artifact: workspace, run, final state, event and outcome. Never two
cycles on one workspace: each cycle holds its workspace's global concurrency slot (flows/slot.py), wherever
it runs; a workspace listed twice runs twice, one after the other.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Sequence
from typing import Annotated, Any
from uuid import UUID

from prefect import flow, get_client, get_run_logger
from prefect.artifacts import MarkdownArtifact
from prefect.client.schemas.filters import (
    ArtifactFilter,
    ArtifactFilterFlowRunId,
    ArtifactFilterKey,
    FlowRunFilter,
    FlowRunFilterId,
)
from prefect.client.schemas.objects import FlowRun, State
from prefect.deployments.flow_runs import arun_deployment
from prefect.exceptions import ObjectNotFound
from prefect.settings import get_current_settings
from prefect.states import Completed, Failed
from pydantic import Field

from flows.cycle import Mutator, Strategy, evolution_cycle, scheduled_cycle
from flows.report_artifact import publish_fleet
from gep.context import hide_agent_cmd, reveal_agent_cmd
from gep.errors import ConfigError
from gep.fleet import (
    CYCLE_DEPLOYMENT,
    FLEET_ARTIFACT,
    SCHEDULED_DEPLOYMENT,
    FleetRow,
    check_agent_cmd,
    check_workspaces,
    markdown,
    missing_deployment,
    summary,
)
from gep.prefect_api import run_link
from gep.request import CycleRequest, ScheduledRequest

WAIT_S = 6 * 3600.0  # the bound on the fleet's wait: a cycle may first wait up to 30 min for its slot
POLL_S = 1.0  # one request for every run's state per poll
PAGE = 200  # the server's largest page of flow runs or artifacts
HERE_CONCURRENCY = 4  # cycles at once in a fleet run here: they wait on the server and git half the time
EVENT_IN_DESCRIPTION = re.compile(r"^GEP cycle (\S+) on ")  # flows/reporting.py's cycle artifact


@flow(name="evolve-fleet", validate_parameters=True, log_prints=False)
async def evolve_fleet(
    workspaces: list[str],
    mutator: Mutator = "auto",
    strategy: Strategy = "auto",
    agent_cmd: str = "",
    scheduled: bool = False,
    here: bool = False,
    concurrency: Annotated[int, Field(ge=1, le=64)] = HERE_CONCURRENCY,
) -> State:
    """Run one evolution cycle per workspace: each a flow run of the evolve-now deployment on any worker, or
    (here) a subflow of this run, in its process.

    Args:
        workspaces: Paths of the workspaces (git repositories) to evolve, on the workers' machines.
        mutator: anthropic, command or prompt; auto: anthropic when ANTHROPIC_API_KEY is set, else prompt.
        strategy: Strategy preset for every cycle; auto: chosen per workspace.
        agent_cmd: External agent command for mutator "command" (no secrets: the cycles' runs record it).
            Empty: each workspace's gep.toml.
        scheduled: Set by schedules: under steady state, most ticks are skipped with a recorded reason.
        here: Run the cycles in this run's own process (its worker's machine) instead of dispatching each to
            a worker: no new process per cycle, so a fleet on one machine finishes several times sooner.
        concurrency: With here: how many cycles run at once (1-64).
    """
    logger = get_run_logger()
    deployment = SCHEDULED_DEPLOYMENT if scheduled else CYCLE_DEPLOYMENT
    api_url = _api_url()
    async with get_client() as client:
        try:
            paths = check_workspaces(workspaces)
            params = {"mutator": mutator, "strategy": strategy, "agent_cmd": _shown_cmd(agent_cmd, here)}
            if here:
                runs = await run_here(client, paths, params, scheduled, concurrency)
                logger.info("%d cycles run in this process, %d at a time", len(paths), concurrency)
            else:
                runs = await run_dispatched(client, deployment, paths, params, api_url)
        except ConfigError as exc:
            logger.error(str(exc))
            return Failed(message=str(exc))
        rows = await fleet_rows(client, paths, runs, api_url)
        each = "a subflow of this run" if here else f"a flow run of `{deployment}`"
        await MarkdownArtifact(key=FLEET_ARTIFACT, markdown=markdown(rows, each),
                               description=f"GEP fleet: {summary(rows)}").acreate(client)
        await publish_fleet(paths)  # gep report's charts of every workspace, as an artifact of this run
    for r in rows:
        logger.info("%s: %s %s %s", r.workspace, r.state, r.event_id or "-", r.link or "")
    if not all(r.final for r in rows):  # a run not created, or not finished in time
        late = any(r.run_id and not r.final for r in rows)
        return Failed(message=summary(rows) + (f" within {WAIT_S:.0f} s" if late else ""), data=rows)
    return Completed(message=summary(rows), data=rows)


def _shown_cmd(agent_cmd: str, here: bool) -> str:
    """What the cycles' runs get as agent_cmd. A cycle run here gets the real command from this process's
    memory (it arrives redacted); a dispatched one runs elsewhere and gets only what may be recorded, so a
    command that needs its secret is refused (ConfigError)."""
    if here:
        return agent_cmd.strip()
    return hide_agent_cmd(check_agent_cmd(reveal_agent_cmd(agent_cmd) or "")) or ""


async def run_dispatched(client: Any, deployment: str, workspaces: Sequence[str], params: dict[str, Any],
                         api_url: str | None) -> list[FlowRun | Exception]:
    """Each workspace's cycle as a run of ``deployment`` for the workers; the runs once final (or as they are
    after WAIT_S). ConfigError when the deployment does not exist."""
    try:
        await client.read_deployment_by_name(deployment)
    except ObjectNotFound:
        raise ConfigError(missing_deployment(deployment, api_url)) from None
    started = await dispatch(client, deployment, workspaces, params)
    get_run_logger().info("%d cycles dispatched to %s", sum(isinstance(r, FlowRun) for r in started), deployment)
    final = await wait_for(client, [r.id for r in started if isinstance(r, FlowRun)], WAIT_S)
    return [final.get(r.id, r) if isinstance(r, FlowRun) else r for r in started]


async def run_here(client: Any, workspaces: Sequence[str], params: dict[str, Any], scheduled: bool,
                   concurrency: int) -> list[FlowRun | Exception]:
    """Each workspace's cycle as a subflow of this run, at most ``concurrency`` at once; each cycle's run as
    the server has it at its end (a cycle that could not run at all: the exception)."""
    gate = asyncio.Semaphore(concurrency)

    async def one(workspace: str) -> UUID:
        async with gate:
            if scheduled:
                state = await scheduled_cycle(request=ScheduledRequest(workspace=workspace, **params),
                                              return_state=True)
            else:
                state = await evolution_cycle(request=CycleRequest(workspace=workspace, **params), return_state=True)
        if state.state_details.flow_run_id is None:
            raise RuntimeError(f"the cycle ended {state.name} without a flow run: {state.message}")
        return state.state_details.flow_run_id

    ids: list[UUID | BaseException] = await asyncio.gather(*(one(w) for w in workspaces), return_exceptions=True)
    found = {r.id: r for r in await read_runs(client, [i for i in ids if isinstance(i, UUID)])}
    return [found.get(i, RuntimeError(f"flow run {i} not found")) if isinstance(i, UUID) else _error(i)
            for i in ids]


def _error(exc: BaseException) -> Exception:
    if isinstance(exc, Exception):
        return exc
    raise exc  # a cancellation or an interrupt ends the fleet's run


def _api_url() -> str | None:
    url = get_current_settings().api.url
    return str(url).rstrip("/") if url else None


async def dispatch(client: Any, deployment: str, workspaces: Sequence[str],
                   params: dict[str, Any]) -> list[FlowRun | Exception]:  # params: the runs' JSON parameters
    """One flow run of ``deployment`` per workspace, linked to this run as subflows; none waited for here.

    One after another: each is three requests (about 0.1 s), and a server on SQLite takes concurrent writes
    slower than serial ones. A run that could not be created is reported, and the others still run."""
    runs: list[FlowRun | Exception] = []
    for workspace in workspaces:
        try:
            # run_deployment's async form; timeout=0: create the run and return, the poll below waits
            runs.append(await arun_deployment(deployment, client=client, timeout=0, tags=["fleet"],
                                              parameters={"request": {**params, "workspace": workspace}}))
        except Exception as exc:  # noqa: BLE001 - one run that could not be created does not stop the fleet
            runs.append(exc)
    return runs


async def wait_for(client: Any, ids: Sequence[UUID], within_s: float) -> dict[UUID, FlowRun]:
    """The runs once all are final, or as they are when ``within_s`` has passed (one request a poll)."""
    deadline = time.monotonic() + within_s
    while True:
        runs = {r.id: r for r in await read_runs(client, ids)}
        if all(r.state is not None and r.state.is_final() for r in runs.values()) or time.monotonic() > deadline:
            return runs
        await asyncio.sleep(POLL_S)


async def read_runs(client: Any, ids: Sequence[UUID]) -> list[FlowRun]:
    pages = [list(ids[i:i + PAGE]) for i in range(0, len(ids), PAGE)]
    found = await asyncio.gather(*(client.read_flow_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=p)),
                                                         limit=len(p)) for p in pages))
    return [run for page in found for run in page]


async def fleet_rows(client: Any, workspaces: Sequence[str], runs: Sequence[FlowRun | Exception],
                     api_url: str | None) -> list[FleetRow]:
    """A row per workspace: its run, state and outcome, and the event its cycle artifact names."""
    events = await event_ids(client, [r.id for r in runs if isinstance(r, FlowRun)])
    return [row(w, run, events.get(run.id), api_url) if isinstance(run, FlowRun) else
            FleetRow(workspace=w, state="Not started",
                     message=f"the run could not be created or run: {type(run).__name__}: {run}")
            for w, run in zip(workspaces, runs, strict=True)]


def row(workspace: str, run: FlowRun, event_id: str | None, api_url: str | None) -> FleetRow:
    state = run.state
    final = state is not None and state.is_final()
    outcome = next((t.split(":", 1)[1] for t in run.tags or [] if t.startswith("outcome:")), None)
    took = run.total_run_time.total_seconds() if final and run.start_time else None
    return FleetRow(workspace=workspace, run_id=str(run.id), run_name=run.name or "-", state=run.state_name or "-",
                    link=run_link(api_url, str(run.id)) if api_url else None, final=final, event_id=event_id,
                    outcome=outcome, duration_s=took, message=state.message if state else None)


async def event_ids(client: Any, ids: Sequence[UUID]) -> dict[UUID, str]:
    """The event each run's cycle recorded, from its cycle artifact (the fleet may run on another machine than
    the workspaces' stores: Prefect is what both see)."""
    pages = [list(ids[i:i + PAGE]) for i in range(0, len(ids), PAGE)]
    found = await asyncio.gather(*(client.read_artifacts(
        artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=p),
                                       key=ArtifactFilterKey(like_="gep-%-cycle"))) for p in pages))
    events: dict[UUID, str] = {}
    for artifact in (a for page in found for a in page):
        match = EVENT_IN_DESCRIPTION.match(artifact.description or "")
        if match and artifact.flow_run_id is not None:
            events[artifact.flow_run_id] = match.group(1)
    return events
