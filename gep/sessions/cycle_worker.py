"""One cycle for ``gep mcp``'s ``gep_cycle``, in a child process: ``python -m gep.sessions.cycle_worker``.

The server speaks MCP on its stdout, so the cycle (its agent, validation commands, anything that prints) runs
in a process of its own whose stdout is a pipe back to the server: the request comes as JSON on stdin (never
on the command line, where an agent command's key would show in the process list), and JSON lines go out, one
``{"stage": NAME, "step": I, "of": N}`` as each stage starts, then ``{"event": {...}}`` with the outcome or
``{"error": "one line"}`` for a request refused before the cycle started. The cycle is the library's
(gep/cycle/pipeline.py ``run_cycle``), recorded in the store as any cycle is; it is not a Prefect flow run.
SIGINT (the server's answer to a cancelled call) stops it as Ctrl-C stops `gep cycle`: at once, nothing
committed after it, and the next cycle or `gep recover` records it as interrupted (gep/cycle/interrupt.py).
"""

from __future__ import annotations

import json
import os
import sys
from typing import IO, Any

from gep.core.errors import GepError
from gep.core.request import CycleRequest, parse_request
from gep.core.sanitize import redact
from gep.cycle.context import CycleContext
from gep.cycle.interrupt import interrupt_stops_the_cycle
from gep.cycle.pipeline import RECORD, STAGES, Hooks, Stage, run_cycle
from gep.cycle.state import CycleState

STEPS = len(STAGES) + 1  # the stages, then record


class Progress(Hooks):
    """Says which stage starts, as a JSON line on ``out``."""

    def __init__(self, out: IO[str]):
        self.out = out

    def run(self, stage: Stage, ctx: CycleContext, state: CycleState) -> CycleState:
        step = STEPS if stage is RECORD else [s.name for s in STAGES].index(stage.name) + 1
        say(self.out, {"stage": stage.name, "step": step, "of": STEPS})
        return super().run(stage, ctx, state)


def say(out: IO[str], line: dict[str, Any]) -> None:
    out.write(json.dumps(line, ensure_ascii=False) + "\n")
    out.flush()


def main() -> int:
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # whatever else prints goes to stderr, never the pipe
    try:
        fields = json.loads(sys.stdin.read())
        request = parse_request(CycleRequest, fields)
        with interrupt_stops_the_cycle():  # a cancelled call: as Ctrl-C in `gep cycle` (recorded by the next)
            event = run_cycle(request, hooks=Progress(out))
    except GepError as exc:
        say(out, {"error": redact(str(exc))})
        return 2
    except ValueError as exc:
        say(out, {"error": f"bad request: {redact(str(exc))}"})
        return 2
    say(out, {"event": event.model_dump(mode="json") if event is not None else None})
    return 0


if __name__ == "__main__":
    sys.exit(main())
