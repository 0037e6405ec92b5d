"""`gep serve`: serve the cycle flow for one workspace on a schedule until Ctrl-C."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from flows.cycle import evolution_cycle, scheduled_cycle
from flows.flowdef import form_values
from gep.core.errors import ConfigError
from gep.core.request import ScheduledRequest, parse_request
from gep.prefect_api import workspace_key
from gep.server import START_SERVER


def require_server(api_url: str) -> None:
    """A one-line ConfigError unless the Prefect API at ``api_url`` answers.

    Without this, `serve` would fall back to a temporary in-process server that dies with the process: the
    schedule and the UI would be gone on exit, and an unreachable URL would surface as a long traceback.
    """
    from prefect import get_client

    with get_client(sync_client=True) as client:
        problem = client.api_healthcheck()
    if problem is not None:
        detail = str(problem).strip().splitlines()[0] if str(problem).strip() else type(problem).__name__
        raise ConfigError(f"cannot reach the Prefect server at {api_url} ({detail}): {START_SERVER}")


class ServeRequest(BaseModel):
    """What `gep serve` serves, checked before any server is asked."""

    workspace: Path
    cron: str
    params: dict[str, Any]  # the deployments' parameters: {"request": the Run form's fields}

    @classmethod
    def checked(cls, workspace: Path, *, cron: str, mutator: str | None, strategy: str | None,
                agent_cmd: str | None) -> ServeRequest:
        from prefect.client.schemas.schedules import CronSchedule

        try:
            CronSchedule(cron=cron)
        except ValueError:
            raise ConfigError(f"--cron {cron!r} is not a cron expression (e.g. '*/30 * * * *')") from None
        fields = {"workspace": str(workspace), "mutator": mutator, "strategy": strategy, "agent_cmd": agent_cmd}
        params = {"request": form_values(parse_request(ScheduledRequest, fields))}
        return cls(workspace=workspace, cron=cron, params=params)


def deployment_names(workspace: Path) -> tuple[str, str]:
    """The names `gep serve` registers for ``workspace``: scheduled-<ws> and evolve-now-<ws>."""
    key = workspace_key(workspace)
    return f"scheduled-{key}", f"evolve-now-{key}"


def serve_workspace(request: ServeRequest, *, api_url: str, say: Callable[[str], None] = print) -> None:
    """Register `scheduled-<ws>` (on the cron, UTC) and `evolve-now-<ws>` and run their flow runs here.

    Returns when the user presses Ctrl-C: Prefect pauses both deployments and stops the runner.
    """
    from prefect import serve
    from prefect.settings import temporary_settings

    with temporary_settings(updates={"api.url": api_url}):
        require_server(api_url)
        scheduled_name, manual_name = deployment_names(request.workspace)
        scheduled = scheduled_cycle.to_deployment(
            name=scheduled_name, cron=request.cron, parameters=request.params,
            description=f"Scheduled GEP cycles on {request.workspace}")
        manual = evolution_cycle.to_deployment(
            name=manual_name, parameters=request.params, description=f"Run one GEP cycle on {request.workspace} now")
        say(f"serving evolution-cycle/{scheduled_name} (cron {request.cron}, UTC) and "
            f"evolution-cycle/{manual_name}; Ctrl-C stops")
        # returns on Ctrl-C after Prefect stops the runner cleanly; SIGTERM takes the same path
        _sigterm_as_ctrl_c()
        try:
            serve(scheduled, manual)  # type: ignore[arg-type]  # from sync code to_deployment returns the deployment
        except KeyboardInterrupt:  # before the runner started: nothing to stop
            pass


def _raise_interrupt(*_args: object, **_kwargs: object) -> None:
    raise KeyboardInterrupt


def _sigterm_as_ctrl_c() -> None:
    """Prefect's runner answers SIGTERM by calling its async stop from sync code inside its event loop, which
    prints "coroutine 'Runner.astop' was never awaited" and stops nothing: in this process (the `gep serve`
    command) SIGTERM is handled as Ctrl-C instead, which Prefect stops cleanly (both deployments paused)."""
    import signal

    from prefect.runner import Runner

    Runner.handle_sigterm = _raise_interrupt  # type: ignore[method-assign]
    signal.signal(signal.SIGTERM, _raise_interrupt)  # until the runner installs its own
