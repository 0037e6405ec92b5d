"""The Prefect side of `gep fleet` (gep/cli/fleet_cmd.py): start a run of the evolve-fleet deployment on
the server `gep` uses, and optionally wait for it and print the fleet's table; or (--here) run the fleet's
flow in this process, its cycles as its subflows."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from uuid import UUID

import typer

from gep.core.errors import GepError

WATCH_POLL_S = 1.0
REPORT_SETTLE_S = 15.0  # how long the final table waits for the server to record a completed fleet's cycles


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
    typer.echo(f"fleet run started: {n} cycle{'s' if n != 1 else ''} as runs of {CYCLE_DEPLOYMENT}")
    typer.echo(f"  flow run: {run_link(api_url, str(run.id))}")
    return str(run.id)


def run_here(api_url: str, params: dict[str, Any]) -> int:
    """Run the evolve-fleet flow in this process (``here``: its cycles as subflows), its progress on stderr;
    print its table. 0 when every cycle finished, else 1."""
    from flows.fleet import PROGRESS_SINK, evolve_fleet
    from flows.runtime import foreground_run, run_flow
    from gep.fleet_progress import FleetProgress, ProgressPrinter
    from gep.prefect_api import run_link

    n = len(params["workspaces"])
    typer.echo(f"fleet: {n} cycle{'s' if n != 1 else ''} in this process, up to {params['concurrency']} at once")
    printer = ProgressPrinter()

    def show(counts: FleetProgress) -> None:
        printer.show(counts.text())

    call: Any = evolve_fleet(**params, here=True, return_state=True)  # a coroutine: the flow is async
    token = PROGRESS_SINK.set(show)
    try:
        with foreground_run(api_url):
            state = run_flow(call)
    finally:
        PROGRESS_SINK.reset(token)
        printer.end()
    run_id = state.state_details.flow_run_id
    if run_id is None:
        raise GepError(f"the fleet did not run: {state.message}")
    typer.echo(f"  flow run: {run_link(api_url, str(run_id))}")
    return report(api_url, str(run_id))


def watch_run(api_url: str, run_id: str) -> int:
    """Wait for the fleet's run, its progress on stderr from the start; print its table. 0 when it
    completed, else 1."""
    from gep.fleet_progress import ProgressPrinter

    printer = ProgressPrinter()
    try:
        asyncio.run(_watch(api_url, run_id, printer))
    finally:
        printer.end()
    return report(api_url, run_id)


async def _watch(api_url: str, run_id: str, printer: Any) -> None:
    from prefect import get_client
    from prefect.settings import temporary_settings

    from flows.fleet import subflow_runs
    from gep.fleet_progress import FleetProgress

    with temporary_settings(updates={"api.url": api_url}):
        async with get_client() as client:
            while True:
                run = await client.read_flow_run(UUID(run_id))
                final = run.state is not None and run.state.is_final()
                label = run.name if run.name.startswith("fleet-") else "fleet run"
                if not final and (run.state_type is None or run.state_type.value in ("SCHEDULED", "PENDING")):
                    printer.show(f"{label}: {run.state_name}, waiting for a worker to pick it up")
                else:
                    # once more when the fleet has ended: its last cycles may have finished since the last poll
                    total = len((run.parameters or {}).get("workspaces") or [])
                    types = [c.state_type.value if c.state_type else None for c in await subflow_runs(client, run.id)]
                    printer.show(f"{label}: {FleetProgress.of(total, types).text()}")
                if final:
                    return
                await asyncio.sleep(WATCH_POLL_S)


def report(api_url: str, run_id: str) -> int:
    """Print the fleet's table as the server has it (80 columns) and its final state. 0 when it completed."""

    from prefect import get_client
    from prefect.settings import temporary_settings

    from flows.fleet import fleet_report
    from gep.fleet_progress import table_text

    async def read() -> tuple[Any, list[Any]]:
        with temporary_settings(updates={"api.url": api_url}):
            async with get_client() as client:
                deadline = time.monotonic() + REPORT_SETTLE_S
                while True:
                    run = await client.read_flow_run(UUID(run_id))
                    rows = await fleet_report(client, run, api_url)
                    # a completed fleet's cycles have all ended, but the server records subflows' task runs and
                    # states from events, a moment later: seen once in CI, "1 Pending, 1 Not started" printed
                    # under "2/2 done". Read again until the table agrees, for a few seconds at most
                    settled = not (run.state is not None and run.state.is_completed()) or all(r.final for r in rows)
                    if settled or time.monotonic() > deadline:
                        return run, rows
                    await asyncio.sleep(WATCH_POLL_S / 2)

    run, rows = asyncio.run(read())
    if rows:
        typer.echo(table_text(rows))
    typer.echo(f"{run.name}: {run.state_name}: {run.state.message or ''}".rstrip(": "))
    return 0 if run.state is not None and run.state.is_completed() else 1
