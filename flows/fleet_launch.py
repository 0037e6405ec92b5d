"""The Prefect side of `gep fleet` (gep/commands/fleet_cmd.py): start a run of the evolve-fleet deployment on
the server `gep` uses, and optionally wait for it and print the fleet's table; or (--here) run the fleet's
flow in this process, its cycles as its subflows."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import typer

from gep.errors import GepError

WATCH_POLL_S = 1.0


@contextmanager
def prefect_client(api_url: str) -> Iterator[Any]:
    from prefect import get_client
    from prefect.settings import temporary_settings

    with temporary_settings(updates={"api.url": api_url}), get_client(sync_client=True) as client:
        yield client



def start(client: Any, api_url: str, params: dict[str, Any]) -> str:
    """Create the fleet's run (both deployments checked first); print its link. The run's id."""
    from prefect.exceptions import ObjectNotFound

    from gep.fleet import CYCLE_DEPLOYMENT, FLEET_DEPLOYMENT, missing_deployment
    from gep.prefect_api import run_link

    deployments = {}
    for name in (FLEET_DEPLOYMENT, CYCLE_DEPLOYMENT):
        try:
            deployments[name] = client.read_deployment_by_name(name)
        except ObjectNotFound:
            raise GepError(missing_deployment(name, api_url)) from None
    fleet_deployment = deployments[FLEET_DEPLOYMENT]
    pool = fleet_deployment.work_pool_name
    if pool and not any(w.status == "ONLINE" for w in client.read_workers_for_work_pool(pool)):
        typer.echo(f"gep: no worker is polling the work pool {pool}: the runs wait until one starts "
                   f"(`prefect worker start --pool {pool}`)", err=True)
    run = client.create_flow_run_from_deployment(fleet_deployment.id, parameters=params)
    n = len(params["workspaces"])
    typer.echo(f"fleet run {run.name}: {n} cycle{'s' if n != 1 else ''} as runs of {CYCLE_DEPLOYMENT}")
    typer.echo(f"  flow run: {run_link(api_url, str(run.id))}")
    return str(run.id)


def run_here(api_url: str, params: dict[str, Any]) -> int:
    """Run the evolve-fleet flow in this process (``here``: its cycles as subflows); print its table.
    0 when every cycle finished, else 1."""
    from flows.fleet import evolve_fleet
    from flows.runtime import foreground_run, run_flow
    from gep.prefect_api import run_link

    call: Any = evolve_fleet(**params, here=True, return_state=True)  # a coroutine: the flow is async
    with foreground_run(api_url):
        state = run_flow(call)
    run_id = state.state_details.flow_run_id
    if run_id is None:
        raise GepError(f"the fleet did not run: {state.message}")
    n = len(params["workspaces"])
    typer.echo(f"fleet run: {n} cycle{'s' if n != 1 else ''} in this process")
    typer.echo(f"  flow run: {run_link(api_url, str(run_id))}")
    with prefect_client(api_url) as client:
        return watch_run(client, str(run_id))


def watch_run(client: Any, run_id: str) -> int:
    """Wait for the fleet's run; print its table. 0 when it completed, else 1."""
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId, ArtifactFilterKey

    from gep.fleet import FLEET_ARTIFACT

    while True:
        run = client.read_flow_run(run_id)
        if run.state is not None and run.state.is_final():
            break
        time.sleep(WATCH_POLL_S)
    tables = client.read_artifacts(artifact_filter=ArtifactFilter(
        flow_run_id=ArtifactFilterFlowRunId(any_=[run.id]), key=ArtifactFilterKey(any_=[FLEET_ARTIFACT])))
    if tables:
        typer.echo(tables[0].data)
    typer.echo(f"{run.state_name}: {run.state.message or ''}".rstrip(": "))
    return 0 if run.state.is_completed() else 1
