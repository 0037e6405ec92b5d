"""Evolve many workspaces: one cycle each, spread over every worker of the work pool, or run here.

Dispatched (the default): each workspace's cycle is a flow run of the `evolution-cycle/evolve-now`
deployment (`scheduled`: of `evolution-cycle/scheduled`), created with Prefect's run_deployment as a subflow
of the fleet's run, so any worker polling the pool, on any machine, picks it up (process pools here; Docker
or Kubernetes pools the same way). The fleet waits for them all with one bounded poll.

Here (`here=True`, `gep fleet --here`): the cycles are subflows run in the fleet run's own process, at most
`concurrency` at once. A process worker starts a Python process per flow run (~2 s of CPU importing Prefect
and gep before a cycle of about half a second), so on one machine this runs a fleet several times faster;
dispatching pays when the workers are on other machines.

Here, each cycle's blocking pipeline runs in a thread of its own (flows/threads.py), so the cycles truly
overlap: their agents, validations and waits on the server.

While it runs, the fleet's progress artifact (`gep-fleet-progress`) says how many cycles are done, running
and failed; `gep fleet` shows the same in the terminal. The run is named like the cycles: `fleet-0007,
12 workspaces`. Either way the fleet reports a table artifact: workspace, run, final state, event and outcome. Never two
cycles on one workspace: each cycle holds its workspace's global concurrency slot (flows/slot.py), wherever
it runs; a workspace listed twice runs twice, one after the other.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from functools import partial
from typing import Annotated, Any
from uuid import UUID, uuid4

from prefect import flow, get_client, get_run_logger
from prefect.artifacts import MarkdownArtifact, acreate_progress_artifact, aupdate_progress_artifact
from prefect.client.schemas.filters import (
    ArtifactFilter,
    ArtifactFilterFlowRunId,
    ArtifactFilterKey,
    FlowFilter,
    FlowFilterName,
    FlowRunFilter,
    FlowRunFilterId,
    FlowRunFilterParentTaskRunId,
    TaskRunFilter,
    TaskRunFilterFlowRunId,
)
from prefect.client.schemas.objects import FlowRun, State
from prefect.context import FlowRunContext
from prefect.deployments.flow_runs import arun_deployment
from prefect.exceptions import ObjectNotFound
from prefect.settings import get_current_settings
from prefect.states import Completed, Failed
from pydantic import Field

from flows.cycle import Mutator, Strategy, evolution_cycle, scheduled_cycle
from flows.report_artifact import publish_fleet
from flows.threads import IN_THREAD
from gep.core.errors import ConfigError
from gep.core.request import CycleRequest, ScheduledRequest
from gep.cycle.handoff import real_agent_cmd, shown_agent_cmd
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
from gep.fleet_progress import FleetProgress
from gep.prefect_api import run_link

WAIT_S = 6 * 3600.0  # the bound on the fleet's wait: a cycle may first wait up to 30 min for its slot
POLL_S = 1.0  # one request for every run's state per poll
PAGE = 200  # the server's largest page of flow runs or artifacts
HERE_CONCURRENCY = 4  # cycles at once in a fleet run here: they wait on the server and git half the time
EVENT_IN_DESCRIPTION = re.compile(r"^GEP cycle (\S+) on ")  # flows/reporting.py's cycle artifact
FLEET_FLOW = "evolve-fleet"
PROGRESS_ARTIFACT = "gep-fleet-progress"
# Who else hears the fleet's progress in this process: `gep fleet --here` sets it to its terminal line.
PROGRESS_SINK: ContextVar[Callable[[FleetProgress], None] | None] = ContextVar("gep_fleet_progress", default=None)


@flow(name=FLEET_FLOW, validate_parameters=True, log_prints=False)
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
            await name_run(client, len(paths))
            progress = await Progress.start(client, len(paths))
            if here:
                started = time.monotonic()
                runs = await run_here(client, paths, params, scheduled, concurrency, progress)
                logger.info("%d cycles run in this process, %d at a time, in %.1f s", len(paths),
                            min(concurrency, len(paths)), time.monotonic() - started)
            else:
                runs = await run_dispatched(client, deployment, paths, params, api_url, progress)
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
    """What the cycles' runs get as agent_cmd. A cycle run here gets the real command from the hand-off of
    the command that started the fleet in this process (gep/cycle/handoff.py; it arrives redacted); a
    dispatched one runs elsewhere and gets only what may be recorded, so a command that needs its secret is
    refused (ConfigError)."""
    if here:
        return agent_cmd.strip()
    return shown_agent_cmd(check_agent_cmd(real_agent_cmd(agent_cmd) or "")) or ""


async def name_run(client: Any, workspaces: int) -> None:
    """Name this run like the cycles: ``fleet-0007, 12 workspaces`` (the 7th fleet run on the server)."""
    ctx = FlowRunContext.get()
    if ctx is None or ctx.flow_run is None:
        return
    number = await client.count_flow_runs(flow_filter=FlowFilter(name=FlowFilterName(any_=[FLEET_FLOW])))
    await client.update_flow_run(ctx.flow_run.id, name=f"fleet-{number:04d}, {workspaces} "
                                                       f"workspace{'s' if workspaces != 1 else ''}")


class Progress:
    """The fleet run's progress artifact (and PROGRESS_SINK), updated as the counts change."""

    def __init__(self, client: Any, total: int, artifact_id: UUID | None) -> None:
        self.client, self.artifact_id = client, artifact_id
        self.last = FleetProgress(total=total)
        self.lock = asyncio.Lock()

    @classmethod
    async def start(cls, client: Any, total: int) -> Progress:
        first = FleetProgress(total=total)
        artifact_id = await acreate_progress_artifact(0.0, key=PROGRESS_ARTIFACT, description=first.text())
        progress = cls(client, total, artifact_id)
        progress.tell(first)
        return progress

    def tell(self, counts: FleetProgress) -> None:
        sink = PROGRESS_SINK.get()
        if sink is not None:
            sink(counts)

    async def update(self, counts: Callable[[], FleetProgress]) -> None:
        """The counts as ``counts()`` gives them now (in order: the lock keeps an older update from landing
        last)."""
        async with self.lock:
            now = counts()
            if now == self.last:
                return
            self.last = now
            self.tell(now)
            if self.artifact_id is not None:
                try:
                    await aupdate_progress_artifact(self.artifact_id, now.percent, description=now.text(),
                                                    client=self.client)
                except Exception as exc:  # noqa: BLE001 - a progress figure never stops the fleet
                    get_run_logger().warning("could not update the fleet's progress: %s", exc)


async def run_dispatched(client: Any, deployment: str, workspaces: Sequence[str], params: dict[str, Any],
                         api_url: str | None, progress: Progress | None = None) -> list[FlowRun | Exception]:
    """Each workspace's cycle as a run of ``deployment`` for the workers; the runs once final (or as they are
    after WAIT_S). ConfigError when the deployment does not exist."""
    try:
        await client.read_deployment_by_name(deployment)
    except ObjectNotFound:
        raise ConfigError(missing_deployment(deployment, api_url)) from None
    started = await dispatch(client, deployment, workspaces, params)
    get_run_logger().info("%d cycles dispatched to %s", sum(isinstance(r, FlowRun) for r in started), deployment)
    final = await wait_for(client, [r.id for r in started if isinstance(r, FlowRun)], WAIT_S, progress)
    return [final.get(r.id, r) if isinstance(r, FlowRun) else r for r in started]


async def run_here(client: Any, workspaces: Sequence[str], params: dict[str, Any], scheduled: bool,
                   concurrency: int, progress: Progress | None = None) -> list[FlowRun | Exception]:
    """Each workspace's cycle as a subflow of this run, at most ``concurrency`` at once, each pipeline in a
    thread of its own; each cycle's run as the server has it at its end (a cycle that could not run at all:
    the exception)."""
    gate = asyncio.Semaphore(concurrency)
    running: list[str] = []
    ended: list[str | None] = []  # the final state types

    def counts() -> FleetProgress:
        return FleetProgress.of(len(workspaces), [*ended, *running])

    async def one(workspace: str) -> UUID:
        IN_THREAD.set(True)  # this task's context: its cycle's pipeline runs in a thread
        async with gate:
            running.append("RUNNING")
            if progress:
                await progress.update(counts)
            final_type = "CRASHED"  # unless the cycle returns a state
            try:
                state: State
                if scheduled:
                    state = await scheduled_cycle(request=ScheduledRequest(workspace=workspace, **params),
                                                  return_state=True)
                else:
                    state = await evolution_cycle(request=CycleRequest(workspace=workspace, **params),
                                                  return_state=True)
                final_type = state.type.value
            finally:
                running.pop()
                ended.append(final_type)
                if progress:
                    await progress.update(counts)
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
    ctx = FlowRunContext.get()
    fleet_id = str(ctx.flow_run.id) if ctx and ctx.flow_run else uuid4().hex
    for workspace in workspaces:
        try:
            # run_deployment's async form; timeout=0: create the run and return, the poll below waits. The key
            # makes a create the client retried (a slow answer under load) return the run already made, not a
            # second cycle of the same workspace (seen once in CI: 7 runs for 6 workspaces, one refused)
            runs.append(await arun_deployment(deployment, client=client, timeout=0, tags=["fleet"],
                                              idempotency_key=f"fleet:{fleet_id}:{workspace}",
                                              parameters={"request": {**params, "workspace": workspace}}))
        except Exception as exc:  # noqa: BLE001 - one run that could not be created does not stop the fleet
            runs.append(exc)
    return runs


async def wait_for(client: Any, ids: Sequence[UUID], within_s: float,
                   progress: Progress | None = None) -> dict[UUID, FlowRun]:
    """The runs once all are final, or as they are when ``within_s`` has passed (one request a poll)."""
    deadline = time.monotonic() + within_s
    while True:
        runs = {r.id: r for r in await read_runs(client, ids)}
        if progress:
            types = [r.state_type.value if r.state_type else None for r in runs.values()]
            await progress.update(partial(FleetProgress.of, progress.last.total, types))
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


async def subflow_runs(client: Any, fleet_run_id: UUID) -> list[FlowRun]:
    """The fleet run's cycle runs (the flow runs whose parent task run is one of its task runs), oldest
    first."""
    tasks: list[Any] = []
    while len(tasks) % PAGE == 0:
        page = await client.read_task_runs(task_run_filter=TaskRunFilter(
            flow_run_id=TaskRunFilterFlowRunId(any_=[fleet_run_id])), limit=PAGE, offset=len(tasks))
        tasks += page
        if not page:
            break
    ids = [t.id for t in tasks]
    pages = [ids[i:i + PAGE] for i in range(0, len(ids), PAGE)]
    found = await asyncio.gather(*(client.read_flow_runs(flow_run_filter=FlowRunFilter(
        parent_task_run_id=FlowRunFilterParentTaskRunId(any_=p)), limit=len(p)) for p in pages))
    return sorted((r for page in found for r in page), key=lambda r: r.created or r.expected_start_time)


def run_workspace(parameters: dict[str, Any]) -> str:
    """The workspace a cycle run was given: inside its typed request, or flat (runs of older deployments)."""
    request = parameters.get("request")
    given = request.get("workspace") if isinstance(request, dict) else None
    return str(given or parameters.get("workspace") or "").strip()


async def fleet_report(client: Any, fleet_run: FlowRun, api_url: str | None) -> list[FleetRow]:
    """The fleet's table as the server has it now: a row per listed workspace, its cycle run matched by
    its ``workspace`` parameter (a workspace listed twice: its runs in the order they were created)."""
    workspaces = [str(w).strip() for w in (fleet_run.parameters or {}).get("workspaces") or []]
    by_workspace: dict[str, list[FlowRun]] = {}
    for run in await subflow_runs(client, fleet_run.id):
        by_workspace.setdefault(run_workspace(run.parameters or {}), []).append(run)
    runs: list[FlowRun | Exception] = [by_workspace[w].pop(0) if by_workspace.get(w) else
                                       RuntimeError("no cycle run was created") for w in workspaces]
    return await fleet_rows(client, workspaces, runs, api_url)
