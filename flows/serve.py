"""`gep serve`: serve the cycle flow for one workspace on a schedule until Ctrl-C."""

from __future__ import annotations

from pathlib import Path

from flows.cycle import evolution_cycle
from flows.reporting import workspace_key


def serve_workspace(workspace: Path, *, cron: str, mutator: str | None = None, strategy: str | None = None,
                    agent_cmd: str | None = None) -> None:
    params = {"workspace": str(workspace), "mutator": mutator, "strategy": strategy, "agent_cmd": agent_cmd}
    scheduled = evolution_cycle.to_deployment(
        name=f"scheduled-{workspace_key(workspace)}", cron=cron, parameters={**params, "scheduled": True},
        description=f"Scheduled GEP cycles on {workspace}")
    manual = evolution_cycle.to_deployment(
        name=f"evolve-now-{workspace_key(workspace)}", parameters=params,
        description=f"Run one GEP cycle on {workspace} now")
    from prefect import serve

    serve(scheduled, manual)  # returns on Ctrl-C after Prefect stops the runner cleanly
