"""A fleet run: one cycle per workspace, each a flow run of the `evolve-now` deployment, on any worker.

What the `evolve-fleet` flow (flows/fleet.py) and `gep fleet` share: the checks on what a fleet is asked to
do, the deployments it needs, and its report (a row per workspace, shown as a markdown table). No Prefect
import here.
"""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Sequence

from pydantic import BaseModel

from gep.core.errors import ConfigError
from gep.core.sanitize import REDACTED, redact_command
from gep.core.stored_path import StoredPath

CYCLE_DEPLOYMENT = "evolution-cycle/evolve-now"
SCHEDULED_DEPLOYMENT = "evolution-cycle/scheduled"  # the same cycle for schedules: ticks may be skipped
FLEET_DEPLOYMENT = "evolve-fleet/evolve-fleet"
FLEET_ARTIFACT = "gep-fleet"
TROUBLE = ("Failed", "Crashed", "Cancelled", "Not started")  # states whose message the table repeats


class FleetRow(BaseModel):
    """One workspace's cycle in a fleet run, as the fleet's artifact table shows it."""

    workspace: StoredPath
    run_id: str | None = None
    run_name: str = "-"
    link: str | None = None
    state: str = "-"  # the run's state name (Awaiting changes, Success, Failed, ...), or the last one seen
    final: bool = False
    event_id: str | None = None
    outcome: str | None = None  # the cycle's outcome tag (success, awaiting_changes, refused, skipped ...)
    duration_s: float | None = None
    message: str | None = None


def missing_deployment(name: str, api_url: str | None) -> str:
    where = f" on {api_url}" if api_url else ""
    return (f"deployment '{name}' does not exist{where}: create the deployments with `prefect deploy --all` "
            "from the gep checkout (docs/deploy.md, step 3)")


def check_workspaces(workspaces: Sequence[str]) -> list[str]:
    """The workspace paths, stripped; ConfigError for an empty list, an empty path or an unrendered template."""
    paths = [w.strip() for w in workspaces]
    if not paths:
        raise ConfigError("parameter 'workspaces' is empty: list the workspace paths (on the workers' machines)")
    for path in paths:
        if not path or "{{" in path:
            # Path("") is ".", the worker's working directory: the engine's own checkout. Never evolve that.
            raise ConfigError(f"workspace {path!r} in 'workspaces' is not a path: list the workspace paths "
                              "(on the workers' machines)")
    return paths


def check_agent_cmd(cmd: str) -> str:
    """The agent command to hand to every cycle's flow run, which Prefect keeps as a parameter.

    In-process runs record a redacted command and keep the real one in memory; a fleet's cycles run in
    other processes, on other machines, so they can only get what may be recorded. A command that
    redaction would change (a secret, a home directory) would reach them broken: refused, in one line."""
    cmd = cmd.strip()
    if not cmd:
        return ""
    try:
        same = shlex.split(redact_command(cmd)) == shlex.split(cmd)
    except ValueError:
        raise ConfigError(f"agent_cmd is not a command line: {redact_command(cmd)}") from None
    if REDACTED in cmd or not same:
        raise ConfigError("agent_cmd holds a secret or a home directory, which the cycles' flow runs would "
                          "record redacted and could not run: set agent_cmd in each workspace's gep.toml, "
                          "and secrets in the workers' environment")
    return cmd


def summary(rows: Sequence[FleetRow]) -> str:
    """``6 cycles: 4 Awaiting changes, 2 Failed`` (and how many had not finished)."""
    counts = Counter(r.state for r in rows)
    text = f"{len(rows)} cycle{'s' if len(rows) != 1 else ''}: " + ", ".join(f"{n} {s}" for s, n in counts.items())
    unfinished = sum(1 for r in rows if r.run_id and not r.final)  # a run never created is no run
    return text + (f"; {unfinished} not finished" if unfinished else "")


def _cell(text: str | None) -> str:
    return (text or "-").replace("|", "\\|").replace("\n", " ")


def markdown(rows: Sequence[FleetRow], each: str) -> str:
    """The fleet's artifact: a table of the workspaces' cycles, their runs, states and events. ``each``: what
    each cycle is ("a flow run of `evolution-cycle/evolve-now`", "a subflow of this run")."""
    lines = [f"# Fleet: {summary(rows)}", "", f"Each cycle is {each}.", "",
             "| workspace | flow run | state | event | outcome | duration |", "|---|---|---|---|---|---|"]
    for r in rows:
        run = f"[{_cell(r.run_name)}]({r.link})" if r.link else _cell(r.run_name)
        took = f"{r.duration_s:.1f} s" if r.duration_s is not None else "-"
        lines.append(f"| `{_cell(str(r.workspace))}` | {run} | {_cell(r.state)} | {_cell(r.event_id)} | "
                     f"{_cell(r.outcome)} | {took} |")
    notes = [f"- `{_cell(str(r.workspace))}`: {_cell(r.message)}" for r in rows if r.message and r.state in TROUBLE]
    return "\n".join(lines + (["", "## Failures", *notes] if notes else []))
