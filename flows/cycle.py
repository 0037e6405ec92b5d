"""The evolution cycle as a Prefect flow: each stage of gep/cycle.py is a named task.

The flow run is renamed for humans once the gene is known (``cycle-0042 repair gene_repair_from_errors``),
tagged (workspace, intent, gene, outcome) and publishes markdown and table artifacts keyed per workspace.
Every run ends in a terminal state: stage failures become a failed task, a recorded failed event and a
restored workspace.
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
from gep import cycle as C
from gep.errors import ConfigError, GepError, PendingCycleError
from gep.models import EvolutionEvent

SLOT_TIMEOUT_S = 1800  # how long a run waits for another cycle on the same workspace to finish

# The cycle context holds a lock and a database handle: tasks share it in-process, never cache it.
stage = task(cache_policy=NO_CACHE, persist_result=False)

collect_sources_task = stage(C.collect, name="collect sources")
extract_signals_task = stage(C.extract, name="extract signals")
analyse_history_task = stage(C.analyse, name="analyse history")
select_task = stage(C.select, name="select")
build_mutation_task = stage(C.mutate, name="build mutation")
begin_task = stage(C.begin, name="record baseline")
apply_task = stage(C.apply, name="apply")
solidify_task = stage(C.solidify_change, name="solidify")
record_task = stage(C.finish, name="record")


class ReviewDecision(RunInput):
    """Shown in the Prefect UI when a review-mode cycle waits: approve commits, reject rolls back."""

    approve: bool = False
    note: str = ""


def current_flow_run_id() -> str | None:
    ctx = FlowRunContext.get()
    return str(ctx.flow_run.id) if ctx and ctx.flow_run else None


@flow(name="evolution-cycle", log_prints=False, validate_parameters=True)
def evolution_cycle(
    workspace: str,
    mutator: str | None = None,
    strategy: str | None = None,
    agent_cmd: str | None = None,
    allow_dirty: bool = False,
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
        allow_dirty: Stash uncommitted changes to tracked files and restore them afterwards instead of refusing.
        abandon_pending: Roll back a cycle still awaiting changes and record it as abandoned, then run.
        branch: Commit on this evolution branch instead of the current one.
        review: Pause for approval in the Prefect UI after validation passes, before committing.
        scheduled: Set by the scheduled deployment: under steady state, most ticks are skipped with a reason.
        seed: Random seed for selection and mutation, to replay a cycle. Empty: random.
    """
    logger = get_run_logger()
    if not workspace.strip() or "{{" in workspace:
        # Path("") is ".", the flow's working directory: the engine's own checkout. Never evolve that.
        return refused(ConfigError("parameter 'workspace' is empty: deploy with GEP_WORKSPACE=/path/to/workspace "
                                   "or fill in the workspace field of the Run form"))
    options = C.CycleOptions(
        workspace=Path(workspace).expanduser(), mutator=mutator or None, strategy=strategy or None,
        agent_cmd=agent_cmd or None, allow_dirty=allow_dirty, abandon_pending=abandon_pending,
        branch=branch or None, review=review, seed=seed, flow_run_id=current_flow_run_id())
    # The Prefect slot first: an overlapping tick waits visibly in the UI instead of on the file lock.
    try:
        with reporting.workspace_slot(options.workspace, timeout_s=SLOT_TIMEOUT_S):
            try:
                ctx = C.prepare(options)
            except PendingCycleError as exc:
                if scheduled:  # a person is working on the pending cycle: ticks wait, they do not fail
                    logger.info("skipped: %s", exc)
                    return Completed(message=f"skipped: {exc}")
                return refused(exc)
            except GepError as exc:
                return refused(exc)
            try:
                return _run(ctx, scheduled=scheduled)
            finally:
                ctx.close()
    except TimeoutError:
        return Cancelled(message=f"another cycle held {options.workspace} for {SLOT_TIMEOUT_S} s; "
                                 "this run did not start")


def refused(exc: GepError) -> State:
    """A request refused before the cycle started (bad parameter, pending cycle, unusable workspace): a failed
    run whose message is the one-line reason, without a traceback in the log; the caller gets ``exc`` raised."""
    get_run_logger().error(str(exc))
    return Failed(message=str(exc), data=exc)


def _run(ctx: C.CycleContext, *, scheduled: bool) -> Any:
    logger = get_run_logger()
    try:
        sources = collect_sources_task(ctx)
        events = C.recent_events(ctx)
        signals = extract_signals_task(ctx, sources, events)
        history = analyse_history_task(events)
        if scheduled:
            reason = reporting.steady_state_gate(ctx, signals)
            if reason:
                logger.info("skipped: %s", reason)
                reporting.publish_skip(ctx, signals, reason)
                return Completed(message=f"skipped: {reason}")
        p = build_mutation_task(ctx, select_task(ctx, sources, signals, history, events))
    except Exception as exc:  # noqa: BLE001 - nothing changed yet: record the failed cycle, then fail the run
        event = record_task(ctx, C.fail_before_plan(ctx, exc))
        reporting.label_run(ctx, event)
        reporting.publish(ctx, event)
        raise
    event = C.draft_event(ctx, p)
    reporting.label_run(ctx, event)
    if p.gene is None or p.mutation is None:
        event = record_task(ctx, C.record_empty(ctx, event, "no gene matched the signals (or every match is banned)"))
        reporting.publish(ctx, event)
        return event
    begin_task(ctx, event)
    try:
        result = apply_task(ctx, p, event, sources)
        if result.status == "awaiting_changes":
            event = C.mark_awaiting(ctx, event, p, result)
            reporting.label_run(ctx, event)
            reporting.publish(ctx, event, prompt_file=result.prompt_file)
            logger.info("prompt written to %s; make the change, then run: gep solidify --workspace %s",
                        result.prompt_file, ctx.workspace.path)
            return event
        C.record_mutator_result(event, result)
        if result.status == "error":
            event = C.fail_cycle(ctx, event, f"mutator: {result.error}")
        else:
            approve = reporting.review_gate(ReviewDecision) if ctx.options.review else None
            event = solidify_task(ctx, event, p.gene, p.mutation, result.summary, approve).event
    except Exception as exc:  # noqa: BLE001 - restore the workspace and record, then fail the run
        event = C.fail_cycle(ctx, event, C.describe_error(exc))
        record_task(ctx, event)
        reporting.label_run(ctx, event)
        reporting.publish(ctx, event)
        raise
    event = record_task(ctx, event)
    reporting.label_run(ctx, event)
    reporting.publish(ctx, event)
    logger.info("cycle %s: %s", event.id, event.outcome.status)
    return event
