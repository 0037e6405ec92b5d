"""Evolve many workspaces: one cycle each, in parallel, never two at once on the same repository."""

from __future__ import annotations

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from flows.cycle import evolution_cycle
from gep.context import hide_agent_cmd, reveal_agent_cmd


@task(name="workspace cycle", cache_policy=NO_CACHE, persist_result=False)
def workspace_cycle(workspace: str, mutator: str | None, strategy: str | None, agent_cmd: str | None,
                    scheduled: bool) -> str:
    # evolution_cycle holds the workspace's global concurrency slot, so a workspace listed twice, or an
    # overlapping tick of another deployment, waits instead of interleaving with this one.
    event = evolution_cycle(workspace=workspace, mutator=mutator, strategy=strategy, agent_cmd=agent_cmd,
                            scheduled=scheduled)
    return getattr(event, "id", None) or "skipped"


@flow(name="evolve-fleet")
def evolve_fleet(
    workspaces: list[str],
    mutator: str | None = None,
    strategy: str | None = None,
    agent_cmd: str | None = None,
    scheduled: bool = False,
) -> dict[str, str]:
    """Run one evolution cycle per workspace, in parallel.

    Args:
        workspaces: Paths of the workspaces (git repositories) to evolve.
        mutator: anthropic, command or prompt (default: anthropic when ANTHROPIC_API_KEY is set, else prompt).
        strategy: Strategy preset for every cycle (default: automatic per workspace).
        agent_cmd: External agent command for mutator "command".
        scheduled: Set by schedules: under steady state, most ticks are skipped with a recorded reason.
    """
    shown_cmd = hide_agent_cmd(reveal_agent_cmd(agent_cmd))  # what the cycles' runs record: redacted
    futures = {ws: workspace_cycle.submit(ws, mutator, strategy, shown_cmd, scheduled) for ws in workspaces}
    results: dict[str, str] = {}
    for ws, fut in futures.items():
        try:
            results[ws] = fut.result()
        except Exception as exc:  # noqa: BLE001 - one failing workspace does not stop the fleet's report
            get_run_logger().error("%s: %s", ws, exc)
            results[ws] = f"error: {exc}"
    return results
