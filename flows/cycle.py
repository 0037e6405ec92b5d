"""The evolution cycle as a Prefect flow: the engine's pipeline (gep/pipeline.py) with each stage run as a
named task.

The flow adds what Prefect is for and nothing of the cycle's logic: the per-workspace concurrency slot, the
run's name and tags once the gene is known (``cycle-0042 repair gene_repair_from_errors``), markdown and
table artifacts keyed per workspace, and review pauses answered in the UI.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import State
from prefect.context import FlowRunContext
from prefect.input import RunInput
from prefect.states import Cancelled, Completed, Failed

from flows import reporting
from flows.review import review_recorder
from gep import pipeline as P
from gep.context import Approve, CycleContext, CycleRequest, open_cycle, reveal_agent_cmd
from gep.errors import ConfigError, GepError, PendingCycleError
from gep.models import EvolutionEvent
from gep.stages import CycleState

SLOT_TIMEOUT_S = 1800  # how long a run waits for another cycle on the same workspace to finish


class ReviewDecision(RunInput):
    """Shown in the Prefect UI when a review-mode cycle waits: approve commits, reject discards the change
    (saved as a patch under .gep/rescued/); the note is kept as feedback on the cycle's gene (approve: helpful,
    reject: not helpful)."""

    approve: bool = False
    note: str = ""


class FlowHooks(P.Hooks):
    """Each stage a Prefect task; the run named, tagged and reported as the cycle goes."""

    def run(self, stage: P.Stage, ctx: CycleContext, state: CycleState) -> CycleState:
        # The context holds a lock and a database handle: tasks share it in-process, never cache it.
        return task(stage.fn, name=stage.name, cache_policy=NO_CACHE, persist_result=False)(ctx, state)

    def approver(self, ctx: CycleContext) -> Approve | None:
        return reporting.review_gate(ReviewDecision, on_decision=review_recorder(ctx))

    def drafted(self, ctx: CycleContext, event: EvolutionEvent) -> None:
        reporting.label_run(ctx, event)

    def finished(self, ctx: CycleContext, state: CycleState) -> None:
        if state.skipped is not None:
            get_run_logger().info("skipped: %s", state.skipped)
            reporting.publish_skip(ctx, state.signals, state.skipped)
            return
        assert state.event is not None
        reporting.label_run(ctx, state.event)
        prompt_file = state.result.prompt_file if state.result else None
        reporting.publish(ctx, state.event, prompt_file=prompt_file)
        if prompt_file:
            get_run_logger().info("prompt written to %s; make the change, then run: gep solidify --workspace %s",
                                  prompt_file, ctx.workspace.path)
        get_run_logger().info("cycle %s: %s", state.event.id, state.event.outcome.status)


def current_flow_run_id() -> str | None:
    ctx = FlowRunContext.get()
    return str(ctx.flow_run.id) if ctx and ctx.flow_run else None


@flow(name="evolution-cycle", log_prints=False, validate_parameters=True)
def evolution_cycle(
    workspace: str,
    mutator: str | None = None,
    strategy: str | None = None,
    agent_cmd: str | None = None,
    abandon_pending: bool = False,
    branch: str | None = None,
    review: bool = False,
    scheduled: bool = False,
    seed: int | None = None,
) -> EvolutionEvent | State | None:
    """Run one GEP evolution cycle on a workspace (a git repository an agent works in).

    Args:
        workspace: Path of the workspace (a git repository with at least one commit) on the worker's machine.
        mutator: Who makes the change: "anthropic" (Claude through tools; needs ANTHROPIC_API_KEY), "command"
            (an external agent CLI, see agent_cmd) or "prompt" (writes the GEP prompt and waits for
            `gep solidify`). Empty: anthropic when ANTHROPIC_API_KEY is set, else prompt.
        strategy: Strategy preset: balanced, innovate, harden, repair-only, early-stabilize or steady-state.
            Empty: automatic (GEP_STRATEGY, early cycles, saturation).
        agent_cmd: The external agent command for mutator "command", e.g. "claude -p" (split like a shell
            would, run without a shell; the prompt arrives on stdin and in GEP_PROMPT_FILE).
        abandon_pending: Give up a cycle still awaiting changes (its change saved as a patch under .gep/rescued/)
            and record it as abandoned, then run.
        branch: Commit on this evolution branch instead of the current one.
        review: Pause for approval in the Prefect UI after validation passes, before committing.
        scheduled: Set by the scheduled deployment: under steady state, most ticks are skipped with a reason.
        seed: Random seed for selection and mutation, to replay a cycle. Empty: random.
    """
    if not workspace.strip() or "{{" in workspace:
        # Path("") is ".", the flow's working directory: the engine's own checkout. Never evolve that.
        return refused(ConfigError("parameter 'workspace' is empty: deploy with GEP_WORKSPACE=/path/to/workspace "
                                   "or fill in the workspace field of the Run form"))
    request = CycleRequest(
        workspace=Path(workspace).expanduser(), mutator=mutator or None, strategy=strategy or None,
        agent_cmd=reveal_agent_cmd(agent_cmd) or None, abandon_pending=abandon_pending,
        branch=branch or None, review=review, scheduled=scheduled, seed=seed, flow_run_id=current_flow_run_id())
    # The Prefect slot first: an overlapping tick waits visibly in the UI instead of on the file lock.
    try:
        with reporting.workspace_slot(request.workspace, timeout_s=SLOT_TIMEOUT_S):
            return run_request(request)
    except TimeoutError:
        return Cancelled(message=f"another cycle held {request.workspace} for {SLOT_TIMEOUT_S} s; "
                                 "this run did not start")


def run_request(request: CycleRequest, resume: bool = False) -> Any:
    """Open and run the cycle (or finish the pending one) with Prefect hooks; refusals are a failed run."""
    try:
        ctx = open_cycle(request, resume=resume)
    except PendingCycleError as exc:
        if request.scheduled:  # a person is working on the pending cycle: ticks wait, they do not fail
            get_run_logger().info("skipped: %s", exc)
            return Completed(message=f"skipped: {exc}")
        return refused(exc)
    except GepError as exc:
        return refused(exc)
    assert ctx is not None
    try:
        state = P.resume_state(ctx) if resume else None
        try:
            state = P.run_pipeline(ctx, state, FlowHooks(), start=P.RESUME_AT if resume else None)
        except P.CycleFailed as failed:  # recorded and reported: the run fails with the stage's exception
            raise failed.__cause__ or failed from None
        if state.skipped is not None:
            return Completed(message=f"skipped: {state.skipped}")
        return state.event
    finally:
        ctx.close()


def refused(exc: GepError) -> State:
    """A request refused before the cycle started (bad parameter, pending cycle, unusable workspace): a failed
    run whose message is the one-line reason, without a traceback in the log; the caller gets ``exc`` raised."""
    get_run_logger().error(str(exc))
    return Failed(message=str(exc), data=exc)
