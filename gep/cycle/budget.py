"""A daily token budget per workspace for what the engine asks Claude (``daily_token_budget``).

The tokens a day used are what that day's events recorded (input, output and cache tokens): the mutator's
(``meta.mutator_result``) and the Claude signal pass's (``meta.behavior.llm``), read from the store: nothing to
keep in step. Once they reach the budget, until the next UTC day, a cycle that would be Claude-driven (the
anthropic mutator) is skipped at the gate, recorded as an event with outcome ``skipped`` and its reason, and no
cycle runs the signal pass (its record says why; the exchanges wait for a later cycle). Other mutators spend no
tokens of the engine's and are never skipped.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

from gep.core.models import EvolutionEvent, Outcome, OutcomeStatus, iso
from gep.core.records import BehaviorRecord
from gep.cycle.context import CycleContext
from gep.cycle.outcomes import event_base
from gep.cycle.state import CycleState
from gep.learning.memory_graph import parse_at
from gep.store import Store

_PAGE = 100


def event_tokens(event: EvolutionEvent) -> int:
    """Claude tokens one event recorded: its mutator's and its signal pass's."""
    result, behavior = event.meta.mutator_result, event.meta.behavior
    llm = behavior.llm if behavior is not None else None
    return (result.metrics.total_tokens if result is not None else 0) + (llm.metrics.total_tokens if llm else 0)


def tokens_used_on(store: Store, day: date) -> int:
    """Claude tokens recorded on the events of ``day`` (UTC), newest events first until an older day."""
    start = datetime.combine(day, time(), UTC)
    end = start + timedelta(days=1)
    used, offset = 0, 0
    while page := store.list_events(limit=_PAGE, offset=offset):
        for event in page:
            at = parse_at(event.meta.at)
            if at is None or at >= end:
                continue
            if at < start:
                return used
            used += event_tokens(event)
        offset += len(page)
    return used


def claude_driven(ctx: CycleContext) -> bool:
    return ctx.mutator == "anthropic"


def daily_budget_spent(ctx: CycleContext, waits: str = "the Claude signal pass runs") -> str | None:
    """Why nothing more may be asked of Claude today (None: it may); ``waits``: what runs again tomorrow."""
    budget = ctx.settings.daily_token_budget
    if budget is None:
        return None
    day = ctx.started_at.astimezone(UTC).date()
    used = tokens_used_on(ctx.store, day)
    if used < budget:
        return None
    resume = datetime.combine(day + timedelta(days=1), time(), UTC)
    return (f"daily token budget spent: Claude used {used} of {budget} tokens on {day} (UTC); "
            f"{waits} again from {iso(resume)}")


def budget_spent(ctx: CycleContext) -> str | None:
    """Why this cycle may not run today (None: it may): only Claude-driven cycles wait for the next day."""
    return daily_budget_spent(ctx, "Claude-driven cycles run") if claude_driven(ctx) else None


def record_skipped(ctx: CycleContext, state: CycleState, reason: str, behavior: BehaviorRecord | None = None) -> EvolutionEvent:
    """A cycle that did not run: its event says why (no gene, no change, not a cycle for the loop rules), and
    what its behavioural capture did before the gate stopped it."""
    event = event_base(ctx, state)
    event.meta.behavior = behavior
    event.outcome = Outcome(status=OutcomeStatus.skipped, score=0.0)
    event.meta.skip_reason = reason
    ctx.store.add_event(event)
    return event
