"""The evolution cycle as a Prefect flow: the engine's pipeline (gep/cycle/pipeline.py) with each stage run as a
named task.

The flow adds what Prefect is for and nothing of the cycle's logic: the per-workspace concurrency slot, the
run's name, tags and artifacts (``cycle-0042 repair gene_repair_from_errors``), a final state that tells
the outcome (flows/states.py), and review pauses answered in the UI. It is an async flow: the run does not
wait on a heartbeat thread when it ends, and its report goes out in one batch of concurrent requests. The
stages themselves are sync tasks and run in the flow's thread, one after the other.

`evolution_cycle` is the manual entry (CLI, the Run form, `evolve-now`); `scheduled_cycle` is the same flow
for schedules, whose ticks may be skipped under steady state.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

from prefect import get_run_logger
from prefect.client.schemas.objects import State
from prefect.context import FlowRunContext, SyncClientContext
from prefect.input import RunInput
from prefect.logging.handlers import APILogHandler
from prefect.states import Cancelled
from pydantic.json_schema import SkipJsonSchema

from flows import reporting, states
from flows.flowdef import gep_flow
from flows.review import ReviewChoice, announced_wait, review_recorder
from flows.slot import lease_seconds, workspace_slot
from flows.stage_tasks import run_stage
from flows.threads import IN_THREAD, in_thread
from gep.core.errors import ConfigError, GepError, PendingCycleError, WorkspaceError
from gep.core.models import EvolutionEvent, OutcomeStatus
from gep.core.request import CycleRequest, ScheduledRequest
from gep.core.request import Mutator as Mutator  # the Run form's choices, for `gep serve` and the fleet
from gep.core.request import Strategy as Strategy
from gep.core.workspace_id import WorkspaceIdentity, workspace_identity
from gep.cycle import pipeline
from gep.cycle.context import CycleContext, open_cycle
from gep.cycle.handoff import HANDOFF, Opened, real_agent_cmd
from gep.cycle.stages import CycleState
from gep.cycle.state import Approve
from gep.prefect_api import workspace_key
from gep.report.cycle_text import solidify_command
from gep.validation.slots import slot_count

SLOT_TIMEOUT_S = 1800  # how long a run waits for another cycle on the same workspace to finish


# Told each stage as it starts, when a caller of the flow in this process wants to show progress (gep mcp's
# gep_cycle: flows/mcp_cycle.py); a context variable, so it reaches this run's hooks and nothing else.
STAGE_PROGRESS: ContextVar[Callable[[pipeline.Stage], None] | None] = ContextVar("gep_stage_progress", default=None)


class ReviewDecision(RunInput):
    """Shown in the Prefect UI when a review-mode cycle waits (flows/review.py says what each choice does).
    The decision has no default: the form cannot be submitted untouched, so no choice is ever made for the
    reviewer."""

    decision: ReviewChoice
    note: str = ""


class FlowHooks(pipeline.Hooks):
    """Each stage a Prefect task; the run named as soon as its gene is known when the cycle takes a while."""

    def __init__(self, early_label: bool) -> None:
        self.early_label = early_label
        self.label_thread: Any = None

    def run(self, stage: pipeline.Stage, ctx: CycleContext, state: CycleState) -> CycleState:
        progress = STAGE_PROGRESS.get()
        if progress is not None:
            progress(stage)
        return run_stage(stage, ctx, state)  # a task whose state tells what the stage did

    def approver(self, ctx: CycleContext) -> Approve | None:
        return reporting.review_gate(ReviewDecision, on_decision=review_recorder(ctx),
                                     waiting=functools.partial(announced_wait, ctx))

    def drafted(self, ctx: CycleContext, event: EvolutionEvent) -> None:
        run = reporting.current_run()
        if self.early_label and run is not None:
            self.label_thread = reporting.label_now(reporting.run_name(ctx.cycle_number, event),
                                                    reporting.run_tags(run[1], ctx.repo.path, event, None))

    def finished(self, ctx: CycleContext, state: CycleState) -> None:
        if state.event is None:
            return
        handoff = HANDOFF.get()
        if handoff is not None:  # the command that started this run reads it when Prefect fails after it
            handoff.recorded = state.event.id
        prompt_file = state.result.prompt_file if state.result else None
        if prompt_file and state.event.outcome.status == OutcomeStatus.awaiting_changes:
            get_run_logger().info("prompt written to %s; make the change, then run: %s", prompt_file,
                                  solidify_command(ctx.repo.path))
        if state.event.outcome.status in (OutcomeStatus.failed, OutcomeStatus.interrupted):
            get_run_logger().error("cycle %s %s: %s", state.event.id, state.event.outcome.status,
                                   states.reason(state.event))
        else:
            get_run_logger().info("cycle %s: %s", state.event.id, state.event.outcome.status)

    def join(self) -> None:
        if self.label_thread is not None:
            self.label_thread.join(10)


def current_flow_run_id() -> str | None:
    ctx = FlowRunContext.get()
    return str(ctx.flow_run.id) if ctx and ctx.flow_run else None


# An old run's flat field: bound, then folded into the request before the flow runs (flows/flowdef.py)
Flat = SkipJsonSchema[Any]


@gep_flow(name="evolution-cycle", log_prints=False, request_model=CycleRequest)
async def evolution_cycle(request: CycleRequest | SkipJsonSchema[None] = None, workspace: Flat = None,
                          mutator: Flat = None, strategy: Flat = None, agent_cmd: Flat = None,
                          abandon_pending: Flat = None, branch: Flat = None, review: Flat = None, seed: Flat = None,
                          llm_signals: Flat = None) -> State:
    """Run one GEP evolution cycle on a workspace (a git repository an agent works in).

    Args:
        request: The workspace, who makes the change and how (`gep cycle` fills it in from its options).
    """
    assert request is not None  # GepFlow.validate_parameters made it, or refused the run
    return await run_in_slot(_for_this_run(request))


@gep_flow(name="evolution-cycle", log_prints=False, request_model=ScheduledRequest)
async def scheduled_cycle(request: ScheduledRequest | SkipJsonSchema[None] = None, workspace: Flat = None,
                          mutator: Flat = None, strategy: Flat = None, agent_cmd: Flat = None) -> State:
    """A scheduled GEP evolution cycle: under steady state most ticks are skipped with a recorded reason.

    Args:
        request: The workspace, who makes the change and how.
    """
    assert request is not None
    fields = request.model_dump(include=set(ScheduledRequest.model_fields))
    return await run_in_slot(_for_this_run(CycleRequest(**fields, scheduled=True)))


def _for_this_run(request: CycleRequest) -> CycleRequest:
    """The request with this flow run's id, and the agent command the CLI hid from Prefect's records."""
    return request.model_copy(update={"agent_cmd": real_agent_cmd(request.agent_cmd),
                                      "flow_run_id": current_flow_run_id()})


@dataclass(frozen=True)
class Opening:
    """What this run starts from: what the command that started it in this process opened and checked (its
    hand-off, gep/cycle/handoff.py), else the workspace's identity; worked out once, it names the slot, scopes
    the store and keys the run's artifacts."""

    request: CycleRequest
    resume: bool
    opened: Opened | None
    identity: WorkspaceIdentity | None
    key: str

    @classmethod
    def of(cls, request: CycleRequest, resume: bool) -> Opening:
        handoff = HANDOFF.get()
        opened = handoff.opened_for(request, resume) if handoff is not None else None
        if opened is not None:
            return cls(request, resume, opened, None, workspace_key(request.workspace, opened.store.workspace_id))
        try:
            identity: WorkspaceIdentity | None = workspace_identity(request.workspace)
        except (WorkspaceError, OSError):  # no id (not a directory): the path names the slot, opening refuses it
            identity = None
        return cls(request, resume, None, identity, workspace_key(request.workspace, identity.id if identity else None))


async def run_in_slot(request: CycleRequest, resume: bool = False) -> State:
    """Run the request holding the workspace's slot (an empty or unrendered workspace never gets here: the
    request refuses it). The run's report goes out while the slot is released: both are requests to the
    server."""
    try:
        lease_s = lease_seconds()
        slot_count()  # GEP_VALIDATION_SLOTS: refused before the cycle starts, not when it validates
    except ConfigError as exc:
        return await refuse(request.workspace, exc)
    opening = Opening.of(request, resume)
    # The Prefect slot first: an overlapping tick waits visibly in the UI instead of on the file lock.
    try:
        async with workspace_slot(request.workspace, SLOT_TIMEOUT_S, holder=_run_id(), lease_s=lease_s,
                                  key=opening.key):
            final, report = await run_request(opening)
            publishing = asyncio.ensure_future(reporting.publish(report))
    except TimeoutError:
        return Cancelled(message=f"another cycle held {request.workspace} for {SLOT_TIMEOUT_S} s; "
                                 "this run did not start")
    await publishing
    if final.is_failed():  # its reason reaches the server (and `prefect deployment run --watch`) first
        await APILogHandler.aflush()
    return final


async def run_request(opening: Opening) -> tuple[State, reporting.RunReport]:
    """Open and run the cycle (or finish the pending one) with Prefect hooks: the run's final state, and
    what to publish about it. In a fleet run here, in a thread of its own (flows/threads.py)."""
    if IN_THREAD.get():
        return await in_thread(blocking_request, opening)
    return blocking_request(opening)


def blocking_request(opening: Opening) -> tuple[State, reporting.RunReport]:
    request, resume = opening.request, opening.resume
    try:
        ctx, opened = open_cycle(request, resume=resume, opened=opening.opened, identity=opening.identity)
    except PendingCycleError as exc:
        if request.scheduled:  # a person is working on the pending cycle: ticks wait, they do not fail
            return skip(request.workspace, [], str(exc), opening.key)
        return refuse_report(request.workspace, exc)
    except GepError as exc:
        return refuse_report(request.workspace, exc)
    hooks = FlowHooks(early_label=ctx.request.review or ctx.mutator != "prompt")
    try:
        state = opened
        try:
            # one sync client for every stage task: an async flow has none, and each task would build its own
            with SyncClientContext.get_or_create():
                state = pipeline.run_pipeline(ctx, state, hooks, start=pipeline.RESUME_AT if resume else None)
        except pipeline.CycleFailed as failed:  # recorded, and the failing task's traceback is in its log
            state = failed.state
        abandoned = [e for e in (ctx.store.get_event(i) for i in state.abandoned)
                     if e is not None and e.outcome.status == OutcomeStatus.abandoned]
    finally:
        ctx.close()
    hooks.join()
    key = workspace_key(ctx.repo.path, ctx.store.workspace_id)  # the id the store settled on (a copy's own)
    if state.skipped is not None:
        return skip(ctx.repo.path, state.signals, state.skipped, key)
    assert state.event is not None
    run = reporting.current_run()
    report = reporting.cycle_report(run[0] if run else None, run[1] if run else [], ctx.repo.path,
                                    ctx.cycle_number, state.event,
                                    prompt_file=state.result.prompt_file if state.result else None,
                                    abandoned=abandoned, key=key)
    return states.outcome_state(state.event), report


def refuse_report(workspace: Path | None, exc: GepError) -> tuple[State, reporting.RunReport]:
    """A request refused before the cycle started (bad parameter, pending cycle, unusable workspace): a
    Failed run whose message is the one-line reason, without a traceback; the caller gets ``exc`` raised."""
    if _from_deployment():  # the Run form names the field as the UI spells it
        exc = type(exc)(str(exc).replace("--abandon-pending", "abandon_pending"))
    get_run_logger().error(str(exc))
    run = reporting.current_run()
    report = reporting.RunReport(None)
    if run is not None and workspace is not None:
        report = reporting.skip_report(run[0], run[1], workspace, [], str(exc), outcome="refused")
    return states.refused_state(exc), report


async def refuse(workspace: Path | None, exc: GepError) -> State:
    final, report = refuse_report(workspace, exc)
    await reporting.publish(report)
    await APILogHandler.aflush()
    return final


def skip(workspace: Path, signals: list[str], why: str, key: str | None = None) -> tuple[State, reporting.RunReport]:
    """A scheduled tick that did nothing: a Completed run named for it, tagged with its workspace."""
    get_run_logger().info("skipped: %s", why)
    run = reporting.current_run()
    report = reporting.skip_report(run[0] if run else None, run[1] if run else [], workspace, signals, why,
                                   key=key)
    return states.skipped_state(why), report


def _run_id() -> UUID | None:
    run = reporting.current_run()
    return run[0] if run else None


def _from_deployment() -> bool:
    ctx = FlowRunContext.get()
    return bool(ctx and ctx.flow_run and ctx.flow_run.deployment_id)
