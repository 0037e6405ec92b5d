"""How a cycle's outcome is recorded when it is not a solidified change: nothing to do (empty), a prompt
written for someone else (awaiting changes), or a failure anywhere (failed: a clone discarded with its
change saved as a patch; a person's tree never touched).
"""

from __future__ import annotations

from gep.core import constants
from gep.core.config import RunLimits
from gep.core.errors import GepError
from gep.core.models import (
    BlastRadius,
    CycleRun,
    EvolutionEvent,
    Gene,
    Mutation,
    Outcome,
    OutcomeStatus,
    RunPending,
    iso,
)
from gep.core.records import MutatorResult
from gep.cycle.context import CycleContext
from gep.cycle.state import CycleState
from gep.cycle.tree import CycleTree
from gep.genes.personality import PersonalityStats, personality_key, update_stats
from gep.learning.attribution import is_host_failure

# outcomes of a cycle that ran (the history rules and the memory graph read only these)
TERMINAL = frozenset({OutcomeStatus.success, OutcomeStatus.failed, OutcomeStatus.empty, OutcomeStatus.abandoned,
                      OutcomeStatus.interrupted})


def event_base(ctx: CycleContext, state: CycleState) -> EvolutionEvent:
    """The event every outcome starts from: its id, parent and when/which cycle it was."""
    event = EvolutionEvent(id=ctx.event_id, parent=ctx.store.last_event_id())
    event.meta.at = iso(ctx.started_at)
    event.meta.cycle = ctx.cycle_number
    event.meta.seed = ctx.seed
    if ctx.holdout is not None:  # no draw (holdout off): the key stays out of the record
        event.meta.holdout = ctx.holdout
    event.meta.flow_run_id = ctx.request.flow_run_id
    event.meta.recovered = state.recovered
    event.meta.start_notes = list(state.notes) or None
    return event


def describe_error(exc: BaseException) -> str:
    """One line for the event: user errors as they are, bugs with their type."""
    if isinstance(exc, GepError):
        return str(exc)
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:500]


def record_mutator_result(event: EvolutionEvent, result: MutatorResult) -> None:
    event.meta.mutator_result = result


def record_empty(ctx: CycleContext, event: EvolutionEvent, reason: str) -> EvolutionEvent:
    """Nothing to do (no gene matched): an empty cycle, recorded as such."""
    event.outcome = Outcome(status=OutcomeStatus.empty, score=0.0)
    event.meta.empty_cycle = True
    event.meta.empty_reason = reason
    ctx.store.add_event(event)
    return event


def mark_awaiting(ctx: CycleContext, state: CycleState, event: EvolutionEvent, gene: Gene, mutation: Mutation,
                  result: MutatorResult) -> EvolutionEvent:
    """Prompt mode: keep the run open for `gep solidify` (with the settings that widen what runs, as read
    now) and record the event as awaiting changes."""
    run = state.run
    assert run is not None
    record_mutator_result(event, result)
    event.outcome = Outcome(status=OutcomeStatus.awaiting_changes, score=0.0)
    run.status = "awaiting_changes"
    run.stage = "awaiting_changes"
    run.awaited = True
    run.pending = RunPending(event=event, gene=gene, mutation=mutation, review=ctx.request.review,
                                 branch=ctx.branch, limits=RunLimits.of(ctx.settings))
    ctx.store.save_run(run)
    ctx.store.add_event(event)
    return event


def _end_tree(ctx: CycleContext, tree: CycleTree | None, event: EvolutionEvent) -> None:
    """The cycle failed before its change was checked: a clone is discarded (its change saved as a patch
    that the event names); a prompt-mode baseline is dropped (nothing of the person's is touched)."""
    if tree is None:
        return
    try:
        tc = tree.read()
        radius = tc.radius
        event.blast_radius = BlastRadius(files=radius.files, lines=radius.lines, bytes=radius.bytes)
        # a change that was made is not an empty cycle (seed 002 counts 0 files / 0 lines)
        event.meta.empty_cycle = radius.files == 0 if event.meta.empty_cycle is None else event.meta.empty_cycle
    except GepError:  # the failure being recorded matters more; empty by default
        tc = None
    event.outcome = Outcome(status=OutcomeStatus.failed, score=constants.FAILURE_SCORE)
    ctx.store.add_event(event)  # the final record first: a crash while discarding keeps the real reasons
    if tree.mode == "clone":
        rescue = tree.discard(tc)
        if rescue.patch is not None:
            event.meta.rescued_patch, event.meta.rescue_command = str(rescue.patch), rescue.command
    else:
        tree.close()


def _await_again(ctx: CycleContext, run: CycleRun, event: EvolutionEvent, reason: str) -> EvolutionEvent:
    """`gep solidify` broke on something else than the change: the person's edits stay, the cycle awaits."""
    event.outcome = Outcome(status=OutcomeStatus.awaiting_changes, score=0.0)
    event.meta.add_failure(reason)
    event.meta.solidify_attempts = (event.meta.solidify_attempts or 0) + 1
    ctx.store.add_event(event)
    run.status, run.stage = "awaiting_changes", "awaiting_changes"
    run.pending.event, run.pending.solidify = event.model_copy(deep=True), None
    ctx.store.save_run(run)
    return event


def fail_cycle(ctx: CycleContext, state: CycleState, event: EvolutionEvent | None, reason: str) -> EvolutionEvent:
    """A stage raised or the mutator failed: end whatever the cycle made and record the failure (never a
    hung run). Before the plan there is no event yet: one is made, with no gene to blame. A person's change
    that awaited `gep solidify` is never failed away: it keeps awaiting, with the reason."""
    event = event or event_base(ctx, state)
    run = state.run
    if run is not None and run.status == "running" and run.mode == "in_place" and run.awaited:
        return _await_again(ctx, run, event, reason)
    event.meta.add_failure(reason)
    if run is not None and run.status == "running":
        _end_tree(ctx, state.tree, event)
        ctx.store.close_run(run.event_id)
    event.outcome = Outcome(status=OutcomeStatus.failed, score=constants.FAILURE_SCORE)
    if event.meta.empty_cycle is None:
        event.meta.empty_cycle = True
    ctx.store.add_event(event)
    return event


def update_personality(ctx: CycleContext, event: EvolutionEvent) -> None:
    """After every finished cycle: the personality that ran it learns from its outcome."""
    if event.personality_state is None or event.outcome.status not in TERMINAL or is_host_failure(event):
        return
    stats = ctx.store.get_state("personality.stats", PersonalityStats) or PersonalityStats()
    stats = update_stats(stats, personality_key(event.personality_state), event.outcome.status,
                         event.outcome.score, ctx.clock())
    ctx.store.set_state("personality.stats", stats)
    ctx.store.set_state("personality.current", event.personality_state)
