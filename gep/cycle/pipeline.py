"""The one definition of a cycle: its stages in order, and what happens when one of them ends it or fails.

``STAGES`` is read on every run, by the plain runner here (the CLI without Prefect, tests, benchmarks) and
by flows/cycle.py, which passes :class:`Hooks` that run each stage as a Prefect task and label and report
the flow run. Neither restates the order or the branching.

Branching: a stage that settles the outcome sets ``state.done`` and the remaining stages are skipped
(nothing to do, a scheduled tick skipped, a prompt written for someone else, a mutator error, a solidified
change). A stage that raises ends what the cycle made and records a failed cycle. Either way ``record``
runs last.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import NamedTuple

from gep.core import deadline
from gep.core.models import EvolutionEvent, utc_now
from gep.cycle import stages as cycle_stages
from gep.cycle.context import Clock, CycleContext, CycleRequest, open_cycle
from gep.cycle.outcomes import describe_error
from gep.cycle.state import Approve

StageFn = Callable[[CycleContext, cycle_stages.CycleState], cycle_stages.CycleState]


class Stage(NamedTuple):
    name: str
    fn: StageFn


STAGES: list[Stage] = [
    Stage("collect sources", cycle_stages.collect),
    Stage("extract signals", cycle_stages.extract),
    Stage("analyse history", cycle_stages.analyse),
    Stage("gate", cycle_stages.gate),
    Stage("select", cycle_stages.select),
    Stage("build mutation", cycle_stages.mutate),
    Stage("record baseline", cycle_stages.begin),
    Stage("apply", cycle_stages.apply),
    Stage("solidify", cycle_stages.solidify_stage),
]
RECORD = Stage("record", cycle_stages.record)  # after every cycle, whatever its outcome
RESUME_AT = "solidify"  # where finishing a cycle that awaited changes starts


class Hooks:
    """How a runner wraps the pipeline. The plain runner calls stages directly; the flow overrides these."""

    def run(self, stage: Stage, ctx: CycleContext, state: cycle_stages.CycleState) -> cycle_stages.CycleState:
        return stage.fn(ctx, state)

    def approver(self, ctx: CycleContext) -> Approve | None:
        """Review mode: who approves a validated change before it is committed (None: nobody asked)."""
        return None

    def drafted(self, ctx: CycleContext, event: EvolutionEvent) -> None:
        """The event's gene and intent are known (the flow names and tags its run)."""

    def finished(self, ctx: CycleContext, state: cycle_stages.CycleState) -> None:
        """The outcome is recorded (or the tick skipped); ``state.event`` is the final event."""


class CycleFailed(Exception):
    """A stage raised; the failure is recorded in ``state.event``. ``__cause__`` is what the stage raised."""

    def __init__(self, state: cycle_stages.CycleState):
        super().__init__(state.event.meta.failure_reasons[-1] if state.event and state.event.meta.failure_reasons
                         else "the cycle failed")
        self.state = state


def run_pipeline(ctx: CycleContext, state: cycle_stages.CycleState | None = None, hooks: Hooks | None = None,
                 start: str | None = None) -> cycle_stages.CycleState:
    """Run the stages from ``start`` (default: the first) until one settles the outcome, then ``record``.

    Raises :class:`CycleFailed` (after recording the failed cycle) when a stage raised."""
    hooks = hooks or Hooks()
    state = state or cycle_stages.CycleState()
    state.approve = hooks.approver(ctx) if ctx.request.review else None
    stages = list(STAGES)
    names = [s.name for s in stages]
    stages = stages[names.index(start):] if start else stages
    try:
        for stage in stages:
            deadline.check(ctx.deadline, ctx.settings, f"before {stage.name}")
            drafted = state.event
            state = hooks.run(stage, ctx, state)
            if state.event is not None and drafted is None:
                hooks.drafted(ctx, state.event)
            if state.done:
                break
    except Exception as exc:  # whatever broke, the workspace is restored and the cycle recorded (then re-raised)
        state = cycle_stages.fail(ctx, state, describe_error(exc))
        state = hooks.run(RECORD, ctx, state)
        hooks.finished(ctx, state)
        raise CycleFailed(state) from exc
    state = hooks.run(RECORD, ctx, state)
    hooks.finished(ctx, state)
    return state


# ------------------------------------------------------------------ the library's entry points


def run_cycle(request: CycleRequest, env: Mapping[str, str] | None = None, clock: Clock = utc_now,
              hooks: Hooks | None = None) -> EvolutionEvent | None:
    """One cycle without Prefect: the final event (None for a skipped scheduled tick, unless the tick asked
    Claude for signals: its skipped event keeps the tokens counted toward the daily budget).

    Raises GepError for a request refused before the cycle started; a stage's failure is recorded and
    returned as a failed event."""
    ctx, state = open_cycle(request, env=env, clock=clock)
    try:
        return run_pipeline(ctx, state, hooks=hooks).event
    except CycleFailed as failed:
        return failed.state.event
    finally:
        ctx.close()


def solidify_pending(request: CycleRequest, env: Mapping[str, str] | None = None, clock: Clock = utc_now,
                     hooks: Hooks | None = None) -> EvolutionEvent | None:
    """Finish the cycle awaiting changes on ``request.workspace``: check, then commit; a failed change stays
    and the cycle keeps awaiting (``request.abandon_pending``: give it up, saved as a patch)."""
    ctx, state = open_cycle(request, resume=True, env=env, clock=clock)
    try:
        return run_pipeline(ctx, state, hooks=hooks, start=RESUME_AT).event
    except CycleFailed as failed:
        return failed.state.event
    finally:
        ctx.close()

