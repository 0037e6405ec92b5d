"""`gep serve`: serve the cycle flow for one workspace on a schedule until Ctrl-C."""

from __future__ import annotations

from pathlib import Path

from flows.cycle import evolution_cycle
from flows.reporting import workspace_key
from gep.errors import ConfigError

START_SERVER = "start one with `prefect server start` and set PREFECT_API_URL=http://127.0.0.1:4200/api"


def require_server() -> str:
    """The configured Prefect API URL, checked to answer; a one-line ConfigError otherwise.

    Without this, `serve` falls back to a temporary in-process server that dies with the process: the
    schedule and the UI would be gone on exit, and an unreachable URL would surface as a long traceback.
    """
    from prefect import get_client
    from prefect.settings import PREFECT_API_URL

    url = PREFECT_API_URL.value()
    if not url:
        raise ConfigError(f"gep serve needs a running Prefect server: {START_SERVER}")
    with get_client(sync_client=True) as client:
        problem = client.api_healthcheck()
    if problem is not None:
        detail = str(problem).strip().splitlines()[0] if str(problem).strip() else type(problem).__name__
        raise ConfigError(f"cannot reach the Prefect server at {url} ({detail}): {START_SERVER}")
    return url


def check_cron(cron: str) -> None:
    from prefect.client.schemas.schedules import CronSchedule

    try:
        CronSchedule(cron=cron)
    except ValueError:
        raise ConfigError(f"--cron {cron!r} is not a cron expression (e.g. '*/30 * * * *')") from None


def serve_workspace(workspace: Path, *, cron: str, mutator: str | None = None, strategy: str | None = None,
                    agent_cmd: str | None = None) -> None:
    """Register `scheduled-<ws>` (on ``cron``, UTC) and `evolve-now-<ws>` and run their flow runs here.

    Returns when the user presses Ctrl-C: Prefect pauses both deployments and stops the runner.
    """
    check_cron(cron)
    require_server()
    params = {"workspace": str(workspace), "mutator": mutator, "strategy": strategy, "agent_cmd": agent_cmd}
    scheduled = evolution_cycle.to_deployment(
        name=f"scheduled-{workspace_key(workspace)}", cron=cron, parameters={**params, "scheduled": True},
        description=f"Scheduled GEP cycles on {workspace}")
    manual = evolution_cycle.to_deployment(
        name=f"evolve-now-{workspace_key(workspace)}", parameters=params,
        description=f"Run one GEP cycle on {workspace} now")
    from prefect import serve

    serve(scheduled, manual)  # returns on Ctrl-C after Prefect stops the runner cleanly
