"""One cycle for ``gep mcp``'s ``gep_cycle``, in a child process: ``python -m flows.mcp_cycle``.

The cycle is a Prefect flow run like any other: the `evolution-cycle` flow `gep cycle` runs, reporting to
PREFECT_API_URL when set, else to gep's background server (started when none runs, as `gep cycle` does), so
it is named, tagged and shown in the UI. It runs in a process of its own because the server speaks MCP on its
stdout while the cycle (its agent, validation, Prefect) prints: stdout here is a pipe back to the server. The
request comes as JSON on stdin (never on the command line, where an agent command's key would show in the
process list), and JSON lines go out: ``{"stage": NAME, "step": I, "of": N}`` as each stage starts (the
flow's STAGE_PROGRESS), then ``{"event": {...}}`` with the outcome, or ``{"error": "one line"}`` for a
request refused before the cycle started or a run that did not start. SIGINT (the server's answer to a
cancelled call) stops it as Ctrl-C stops `gep cycle`: at once, nothing committed after it, and the next
cycle or `gep recover` records it as interrupted (gep/cycle/interrupt.py).
"""

from __future__ import annotations

import json
import os
import sys
from typing import IO, Any

from flows.cycle import STAGE_PROGRESS, evolution_cycle
from flows.runtime import foreground_run, run_flow
from flows.states import event_of
from gep import server
from gep.core.errors import GepError
from gep.core.request import CycleRequest, parse_request
from gep.core.sanitize import redact
from gep.cycle.context import check_cycle
from gep.cycle.handoff import handing_off, shown_agent_cmd
from gep.cycle.pipeline import RECORD, STAGES, Stage

STEPS = len(STAGES) + 1  # the stages, then record


def say(out: IO[str], line: dict[str, Any]) -> None:
    out.write(json.dumps(line, ensure_ascii=False) + "\n")
    out.flush()


def progress_to(out: IO[str]) -> Any:
    def told(stage: Stage) -> None:
        step = STEPS if stage is RECORD else [s.name for s in STAGES].index(stage.name) + 1
        say(out, {"stage": stage.name, "step": step, "of": STEPS})

    return told


def api_url() -> str:
    """PREFECT_API_URL, else gep's background server (started if need be), as `gep cycle` reports to."""
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    url = server.api_for_run(progress=lambda note: print(f"gep: {note}", file=sys.stderr))
    os.environ["PREFECT_API_URL"] = url  # Prefect's own threads (logs, events) read it too
    return url


def run(fields: dict[str, Any], out: IO[str]) -> Any:
    """The cycle's event as JSON (or None), run as `gep cycle` runs it."""
    request = parse_request(CycleRequest, fields)
    opened = check_cycle(request)  # handed to the flow's run, which takes it over (gep/cycle/handoff.py)
    # the flow run's parameters keep the agent command redacted (the hand-off carries the real one)
    shown = request.model_copy(update={"agent_cmd": shown_agent_cmd(request.agent_cmd)})
    token = STAGE_PROGRESS.set(progress_to(out))
    try:
        with opened, handing_off(opened, request.agent_cmd), foreground_run(api_url()):
            call: Any = evolution_cycle(request=shown, return_state=True)  # typed as an awaitable
            state = run_flow(call)
    finally:
        STAGE_PROGRESS.reset(token)
    if state.is_cancelled():
        raise GepError(f"the cycle did not run: {state.message}")
    event = event_of(state)
    return event.model_dump(mode="json") if event is not None else None


def main() -> int:
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # whatever else prints goes to stderr, never the pipe
    try:
        event = run(json.loads(sys.stdin.read()), out)
    except GepError as exc:
        say(out, {"error": redact(str(exc))})
        return 2
    except ValueError as exc:
        say(out, {"error": f"bad request: {redact(str(exc))}"})
        return 2
    say(out, {"event": event})
    return 0


if __name__ == "__main__":
    sys.exit(main())
