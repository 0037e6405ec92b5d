"""Each stage of the cycle as a Prefect task, whose final state says what the stage did.

A stage that settles the cycle as failed without raising (validation failed and the change was rescued, the
agent's change refused) used to end its task Completed: a green bar in the timeline of a failed run. Its
task now returns a Failed state with the cycle's one-line reason, and the cycle's state rides along so the
flow carries on (record, report) exactly as before; the flow run's own final state is unchanged.

Prefect logs a task that returned a Failed state twice at ERROR: "Task run failed with state: <repr>" and
"Finished in state Failed(...)". The flow run already logs the failure in one line, so the first is dropped
and the second kept at INFO: the run's logs in the UI keep it, the terminal (warnings only) stays as it was.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import Any, cast

from prefect import Task, task
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import State
from prefect.context import TaskRunContext
from prefect.results import ResultRecord
from prefect.states import Failed
from prefect.utilities.annotations import quote

from flows import states
from gep.core.models import OutcomeStatus
from gep.cycle import pipeline
from gep.cycle.context import CycleContext
from gep.cycle.stages import CycleState

FAILED = (OutcomeStatus.failed, OutcomeStatus.interrupted)


class Settled:
    """The cycle's state in a Failed task state's data; its repr is one short line (Prefect logs it)."""

    def __init__(self, state: CycleState) -> None:
        self.state = state

    def __repr__(self) -> str:
        event = self.state.event
        return f"<cycle {event.id if event else '?'} settled as failed>"


class _SettledLogs(logging.Filter):
    """Prefect's own lines about the task runs this module failed on purpose (see the module's docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.runs: set[str] = set()
        self.lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        run = getattr(record, "task_run_id", None)
        if run is None or run not in self.runs:
            return True
        message = record.getMessage()
        if message.startswith("Task run failed with state"):
            return False
        if message.startswith("Finished in state"):
            record.levelno, record.levelname = logging.INFO, "INFO"
            with self.lock:
                self.runs.discard(run)
        return True


SETTLED_LOGS = _SettledLogs()


@functools.cache
def stage_task(stage: pipeline.Stage) -> Task[..., Any]:
    """The stage as a task, made once per stage (name and function: building a Task inspects its source)."""
    # The context holds a lock and a database handle: tasks share it in-process, never cache it.
    return task(name=stage.name, cache_policy=NO_CACHE, persist_result=False)(settling(stage))


def settling(stage: pipeline.Stage) -> Callable[[CycleContext, CycleState], CycleState | State]:
    """The stage, returning a Failed state when it settled the cycle as failed. ``record`` only writes an
    outcome down: its bar stays green."""

    @functools.wraps(stage.fn)
    def run(ctx: CycleContext, state: CycleState) -> CycleState | State:
        state = stage.fn(ctx, state)
        event = state.event
        if stage.name == pipeline.RECORD.name or not state.done or event is None or event.outcome.status not in FAILED:
            return state
        _quiet_prefect_lines()
        return Failed(message=states.reason(event), data=Settled(state))

    return run


def _quiet_prefect_lines() -> None:
    logger = logging.getLogger("prefect.task_runs")
    if SETTLED_LOGS not in logger.filters:  # Prefect may have configured its logging again since
        logger.addFilter(SETTLED_LOGS)
    context = TaskRunContext.get()
    if context is not None:
        with SETTLED_LOGS.lock:
            SETTLED_LOGS.runs.add(str(context.task_run.id))


def run_stage(stage: pipeline.Stage, ctx: CycleContext, state: CycleState) -> CycleState:
    """Run the stage as its task: the cycle's state it returned (settled as failed or not), or raise what
    the stage raised, as calling the task directly does."""
    # quote: Prefect would otherwise walk every field of the context and state looking for futures
    final = cast(State, stage_task(stage)(quote(ctx), quote(state), return_state=True))
    # the value as it is in memory (the task ran here): State.result would be a coroutine in the async flow
    value = final.data.result if isinstance(final.data, ResultRecord) else final.data
    if isinstance(value, Settled):
        return value.state
    if isinstance(value, CycleState):
        return value
    if isinstance(value, BaseException):
        raise value
    raise RuntimeError(f"{stage.name}: {final.message or final.name}")
