"""How a cycle's outcome is recorded when it is not a solidified change: nothing to do (empty), a prompt
written for someone else (awaiting changes), or a failure anywhere (failed, with the workspace restored).
"""

from __future__ import annotations

from gep import constants as C
from gep.context import CycleContext
from gep.errors import GepError, WorkspaceError
from gep.models import (
    EvolutionEvent,
    Gene,
    Mutation,
    MutatorRecord,
    Outcome,
    OutcomeStatus,
    RunPending,
    iso,
)
from gep.personality import PersonalityStats, personality_key, update_stats
from gep.records import MutatorResult

# outcomes of a cycle that ran (the history rules and the memory graph read only these)
TERMINAL = frozenset({OutcomeStatus.success, OutcomeStatus.failed, OutcomeStatus.empty, OutcomeStatus.abandoned,
                      OutcomeStatus.interrupted})


def event_base(ctx: CycleContext) -> EvolutionEvent:
    """The event every outcome starts from: its id, parent and when/which cycle it was."""
    event = EvolutionEvent(id=ctx.event_id, parent=ctx.store.last_event_id())
    event.meta.at = iso(ctx.started_at)
    event.meta.cycle = ctx.cycle_number
    event.meta.seed = ctx.seed
    event.meta.flow_run_id = ctx.request.flow_run_id
    event.meta.recovered = ctx.recovered
    return event


def describe_error(exc: BaseException) -> str:
    """One line for the event: user errors as they are, bugs with their type."""
    if isinstance(exc, GepError):
        return str(exc)
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:500]


def record_mutator_result(event: EvolutionEvent, result: MutatorResult) -> None:
    event.meta.mutator_result = MutatorRecord.model_validate(result.model_dump())


def record_empty(ctx: CycleContext, event: EvolutionEvent, reason: str) -> EvolutionEvent:
    """Nothing to do (no gene matched): an empty cycle, recorded as such."""
    event.outcome = Outcome(status=OutcomeStatus.empty, score=0.0)
    event.meta.empty_cycle = True
    event.meta.empty_reason = reason
    ctx.store.add_event(event)
    return event


def mark_awaiting(ctx: CycleContext, event: EvolutionEvent, gene: Gene, mutation: Mutation,
                  result: MutatorResult) -> EvolutionEvent:
    """Prompt mode: keep the run open for `gep solidify` and record the event as awaiting changes."""
    assert ctx.run is not None
    record_mutator_result(event, result)
    event.outcome = Outcome(status=OutcomeStatus.awaiting_changes, score=0.0)
    ctx.run.status = "awaiting_changes"
    ctx.run.stage = "awaiting_changes"
    ctx.run.pending = RunPending(event=event, gene=gene, mutation=mutation, review=ctx.request.review,
                                 branch=ctx.branch)
    ctx.store.save_run(ctx.run)
    ctx.store.add_event(event)
    return event


def _undo_change(ctx: CycleContext, event: EvolutionEvent) -> None:
    """Roll back what the cycle changed (its blast radius recorded first) and close its run."""
    assert ctx.run is not None
    try:
        # what is about to be undone: a change that was made is not an empty cycle (seed 002 counts
        # 0 files / 0 lines), as for a change that failed validation or an interrupted cycle
        blast = ctx.workspace.blast_radius(ctx.run, ctx.settings)
        event.blast_radius = blast.radius
        if event.meta.empty_cycle is None:
            event.meta.empty_cycle = blast.files == 0
    except WorkspaceError:  # the failure being recorded matters more; empty by default
        pass
    try:
        ctx.workspace.rollback(ctx.run)
    finally:
        ctx.workspace.restore_user_changes(ctx.run)
        ctx.store.close_run(ctx.run.event_id)


def fail_cycle(ctx: CycleContext, event: EvolutionEvent | None, reason: str) -> EvolutionEvent:
    """A stage raised or the mutator failed: undo whatever the cycle changed and record the failure (never a
    hung run). Before the plan there is no event yet: one is made, with no gene to blame."""
    event = event or event_base(ctx)
    if ctx.run is not None and ctx.run.status == "running":
        _undo_change(ctx, event)
    event.outcome = Outcome(status=OutcomeStatus.failed, score=C.FAILURE_SCORE)
    event.meta.add_failure(reason)
    if event.meta.empty_cycle is None:
        event.meta.empty_cycle = True
    ctx.store.add_event(event)
    return event


def update_personality(ctx: CycleContext, event: EvolutionEvent) -> None:
    """After every finished cycle: the personality that ran it learns from its outcome."""
    if event.personality_state is None or event.outcome.status not in TERMINAL:
        return
    stats = ctx.store.get_state("personality.stats", PersonalityStats) or PersonalityStats()
    stats = update_stats(stats, personality_key(event.personality_state), event.outcome.status,
                         event.outcome.score, ctx.clock())
    ctx.store.set_state("personality.stats", stats)
    ctx.store.set_state("personality.current", event.personality_state)
