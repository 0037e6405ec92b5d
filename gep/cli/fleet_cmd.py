"""`gep fleet --workspace A --workspace B ...`: start a run of the evolve-fleet deployment, or run it here.

Each workspace's cycle becomes a flow run of `evolution-cycle/evolve-now` that any worker of the pool picks
up (flows/fleet.py). This command only checks what it is given, starts the fleet's run on the server `gep`
uses and prints its link; `--watch` waits for it and prints the fleet's table. With `--here` the fleet's
flow runs in this process, its cycles as subflows (no deployment or worker needed), and prints the table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from gep.cli.prefect_console import VerboseOpt, quiet_prefect_console
from gep.core.errors import ConfigError


def register(app: typer.Typer, friendly: Callable[[Any], Any]) -> None:
    """Add the `fleet` command to ``app``; ``friendly`` turns errors into one line (gep.cli.root's)."""
    app.command("fleet")(friendly(fleet))


def fleet(
    workspace: Annotated[list[Path] | None, typer.Option(
        "--workspace", "-w", help="A workspace to evolve (repeat for each); a git repository with a commit.")] = None,
    mutator: Annotated[str, typer.Option(help="auto | anthropic | command | prompt, for every cycle (auto: "
                                         "anthropic when the worker has ANTHROPIC_API_KEY, else prompt).")] = "auto",
    strategy: Annotated[str, typer.Option(help="auto | balanced | innovate | harden | repair-only | "
                                          "early-stabilize | steady-state, for every cycle.")] = "auto",
    agent_cmd: Annotated[str | None, typer.Option("--agent-cmd", help="External agent command for --mutator "
                                                  "command (the cycles' runs record it: no secrets; default: "
                                                  "each workspace's gep.toml).")] = None,
    as_given: Annotated[bool, typer.Option("--as-given", help="Send the paths unchecked, as typed: they are "
                                           "paths on the workers' machines, not on this one.")] = False,
    watch: Annotated[bool, typer.Option("--watch", help="Wait until every cycle finished, showing "
                                        "progress; print each workspace's state and event.")] = False,
    here: Annotated[bool, typer.Option("--here", help="Run the cycles in this process, as subflows of the fleet's "
                                       "run, instead of on workers: no deployment or worker needed, and several "
                                       "times faster on one machine. Waits and prints the table.")] = False,
    concurrency: Annotated[int, typer.Option(min=1, max=64, help="With --here: cycles at once (their validations: one per core at a time, GEP_VALIDATION_SLOTS).")] = 4,
    verbose: VerboseOpt = False,
) -> None:
    """Evolve several workspaces at once: one cycle each, spread over the workers
    of the work pool.

    Starts a run of the evolve-fleet deployment; each workspace's cycle is then a
    flow run of evolution-cycle/evolve-now that any worker polling the pool picks
    up, on any machine, never two at once on one workspace (a workspace listed
    twice runs twice, one after the other). Needs a Prefect server
    (PREFECT_API_URL, or `gep server start`), the deployments (`prefect deploy
    --all` from the gep checkout) and a worker (`prefect worker start --pool
    gep-pool`): docs/deploy.md, steps 1-4 and 10. Prints the fleet run's link.

    With --here, the fleet runs on this machine instead: its run and each cycle's
    run (a subflow of it) are on the server `gep cycle` uses (PREFECT_API_URL, or
    gep's background server, started if need be).

    --watch and --here show the fleet's progress on stderr (done, running,
    failed, elapsed), then its table.

    Exit status: 0 started (--watch, --here: every cycle finished); 1 the fleet
    failed or could not start; 2 bad input.
    """
    from gep.fleet import check_workspaces

    if not workspace:
        raise ConfigError("no workspace given: name each with --workspace DIR")
    if here and as_given:
        raise ConfigError("--as-given sends paths on the workers' machines; --here runs the cycles on this one")
    paths = check_workspaces([str(p) for p in workspace])
    params = {"workspaces": paths if as_given else local_workspaces(paths), "mutator": _mutator(mutator),
              "strategy": _strategy(strategy)}
    if here:
        raise typer.Exit(_run_here(params, agent_cmd, concurrency, verbose))
    _dispatch(params, agent_cmd, watch)


def _run_here(params: dict[str, Any], agent_cmd: str | None, concurrency: int, verbose: bool) -> int:
    """`gep fleet --here`: the cycles run in this process, which keeps the real command (runs record it
    redacted); the exit status."""
    from gep.cycle.handoff import handing_off, shown_agent_cmd

    quiet_prefect_console(verbose)
    from flows.fleet_launch import run_here
    from gep.cli.prefect_link import prefect_api_for_run

    real = agent_cmd.strip() if agent_cmd else ""
    params["agent_cmd"] = shown_agent_cmd(real) or ""
    with handing_off(agent_cmd=real):  # the real command reaches the fleet's cycles, run in this context
        return run_here(prefect_api_for_run(), {**params, "concurrency": concurrency})


def _dispatch(params: dict[str, Any], agent_cmd: str | None, watch: bool) -> None:
    """Start the fleet's run on the server `gep` uses, for the pool's workers; with ``watch``, wait for it."""
    from gep.fleet import check_agent_cmd

    params["agent_cmd"] = check_agent_cmd(agent_cmd or "")
    api_url = fleet_api()
    from flows.fleet_launch import prefect_client, start, watch_run  # Prefect lives in flows/

    with prefect_client(api_url) as client:
        run_id = start(client, api_url, params)
    if watch:
        raise typer.Exit(watch_run(api_url, run_id))


def local_workspaces(paths: Sequence[str]) -> list[str]:
    """Each path checked as a cycle checks it (a git repository's top, with a commit), made absolute: the
    workers run in the gep checkout, where a relative path would mean something else."""
    from gep.git import open_repo

    return [str(open_repo(p).path) for p in paths]


def _mutator(name: str) -> str:
    from gep.mutators import MUTATORS

    value = name.strip().lower() or "auto"
    if value not in ("auto", *MUTATORS):
        raise ConfigError(f"unknown mutator {name!r}: auto, {', '.join(MUTATORS)}")
    return value


def _strategy(name: str) -> str:
    from gep.genes.strategy import PRESETS

    value = name.strip().lower().replace("_", "-") or "auto"
    if value not in ("auto", *PRESETS):
        raise ConfigError(f"unknown strategy {name!r}: auto, {', '.join(PRESETS)}")
    return value


def fleet_api() -> str:
    """PREFECT_API_URL when set (it must answer), else gep's running background server; never a new one: a
    server started now would have no deployments and no workers."""
    from gep import prefect_api as api
    from gep import server

    configured = api.configured_api_url()
    if configured:
        if not api.healthy(configured, timeout_s=5.0):
            raise server.ServerError(f"cannot reach the Prefect server at {configured} (PREFECT_API_URL)")
        return configured
    running = server.running_api_url()
    if running:
        return running
    raise server.ServerError("no Prefect server is running: a fleet runs on the workers of a server's work pool; "
                             "start one (`gep server start`), deploy and start a worker (docs/deploy.md)")
