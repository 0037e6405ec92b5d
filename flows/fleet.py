"""Evolve many workspaces: one cycle each, in parallel, never two at once on the same repository."""

from __future__ import annotations

import asyncio

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import State
from prefect.task_runners import ThreadPoolTaskRunner

from flows.cycle import Mutator, Strategy, evolution_cycle, scheduled_cycle
from flows.states import event_of
from gep.context import hide_agent_cmd, reveal_agent_cmd

# Cycles at once: a local Prefect server keeps its runs in SQLite, one writer at a time; more cycles in
# parallel than this wait on its lock instead of running (bench/cli.py measures the fleet).
FLEET_PARALLEL = 3


@task(name="workspace cycle", cache_policy=NO_CACHE, persist_result=False)
def workspace_cycle(workspace: str, mutator: Mutator, strategy: Strategy, agent_cmd: str, scheduled: bool) -> str:
    # the cycle holds the workspace's global concurrency slot, so a workspace listed twice, or an
    # overlapping tick of another deployment, waits instead of interleaving with this one.
    run = scheduled_cycle if scheduled else evolution_cycle
    # its own event loop in this worker thread: the cycle's stages block the loop they run on, and the
    # fleet's cycles must not share one
    state: State = asyncio.run(run(  # type: ignore[arg-type]  # Prefect types the call as Awaitable: a coroutine
        workspace=workspace, mutator=mutator, strategy=strategy, agent_cmd=agent_cmd, return_state=True))
    event = event_of(state)
    return event.id if event is not None else "skipped"


# Prefect's own ThreadPoolTaskRunner does not match flow()'s invariant TaskRunner[PrefectFuture] annotation
@flow(name="evolve-fleet", validate_parameters=True,
      task_runner=ThreadPoolTaskRunner(max_workers=FLEET_PARALLEL))  # type: ignore[arg-type]
def evolve_fleet(
    workspaces: list[str],
    mutator: Mutator = "auto",
    strategy: Strategy = "auto",
    agent_cmd: str = "",
    scheduled: bool = False,
) -> dict[str, str]:
    """Run one evolution cycle per workspace, in parallel.

    Args:
        workspaces: Paths of the workspaces (git repositories) to evolve, on the worker's machine.
        mutator: anthropic, command or prompt; auto: anthropic when ANTHROPIC_API_KEY is set, else prompt.
        strategy: Strategy preset for every cycle; auto: chosen per workspace.
        agent_cmd: External agent command for mutator "command". Empty: each workspace's gep.toml.
        scheduled: Set by schedules: under steady state, most ticks are skipped with a recorded reason.
    """
    shown_cmd = hide_agent_cmd(reveal_agent_cmd(agent_cmd)) or ""  # what the cycles' runs record: redacted
    futures = {ws: workspace_cycle.submit(ws, mutator, strategy, shown_cmd, scheduled) for ws in workspaces}
    results: dict[str, str] = {}
    for ws, fut in futures.items():
        try:
            results[ws] = fut.result()
        except Exception as exc:  # noqa: BLE001 - one failing workspace does not stop the fleet's report
            get_run_logger().error("%s: %s", ws, exc)
            results[ws] = f"error: {exc}"
    return results
