"""A daily token budget per workspace for Claude-driven cycles (``daily_token_budget``).

The tokens a day used are what the mutator's metrics recorded on that day's events (input, output and cache
tokens, ``MutatorMetrics.total_tokens``), read from the store: nothing to keep in step. Once they reach the
budget, a cycle that would be Claude-driven (the anthropic mutator) is skipped at the gate, recorded as an
event with outcome ``skipped`` and its reason, until the next UTC day. Other mutators spend no tokens of the
engine's and are never skipped.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

from gep.context import CycleContext
from gep.memory_graph import parse_at
from gep.models import EvolutionEvent, Outcome, OutcomeStatus, iso
from gep.outcomes import event_base
from gep.store import Store

_PAGE = 100


def tokens_used_on(store: Store, day: date) -> int:
    """Tokens the mutator recorded on the events of ``day`` (UTC), newest events first until an older day."""
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
            result = event.meta.mutator_result
            used += result.metrics.total_tokens if result is not None else 0
        offset += len(page)
    return used


def claude_driven(ctx: CycleContext) -> bool:
    return ctx.mutator == "anthropic"


def budget_spent(ctx: CycleContext) -> str | None:
    """Why this cycle may not run today (None: it may)."""
    budget = ctx.settings.daily_token_budget
    if budget is None or not claude_driven(ctx):
        return None
    day = ctx.started_at.astimezone(UTC).date()
    used = tokens_used_on(ctx.store, day)
    if used < budget:
        return None
    resume = datetime.combine(day + timedelta(days=1), time(), UTC)
    return (f"daily token budget spent: Claude-driven cycles used {used} of {budget} tokens on {day} (UTC); "
            f"they run again from {iso(resume)}")


def record_skipped(ctx: CycleContext, reason: str) -> EvolutionEvent:
    """A cycle that did not run: its event says why (no gene, no change, not a cycle for the loop rules)."""
    event = event_base(ctx)
    event.outcome = Outcome(status=OutcomeStatus.skipped, score=0.0)
    event.meta.skip_reason = reason
    ctx.store.add_event(event)
    return event
