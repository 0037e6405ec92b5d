"""The Prefect state a cycle's flow run ends in: the outcome `gep history` shows, in Prefect's terms.

A failed cycle is a Failed state whose message is the one-line reason, so Prefect's automations and
notifications on failure fire for it. Success, awaiting changes, empty and skipped are Completed states
named for what happened. The event rides in the state's data: a Completed run returns it, a failed one
raises :class:`CycleFailedError` carrying it, so a caller (the CLI) always gets the recorded outcome back.
"""

from __future__ import annotations

from prefect.client.schemas.objects import State
from prefect.results import ResultRecord
from prefect.states import Completed, Failed

from gep.core.models import EvolutionEvent, OutcomeStatus

COMPLETED_NAMES: dict[str, str] = {
    OutcomeStatus.success: "Success",
    OutcomeStatus.awaiting_changes: "Awaiting changes",
    OutcomeStatus.empty: "Empty",
    OutcomeStatus.skipped: "Skipped",
    OutcomeStatus.abandoned: "Abandoned",  # the person gave the change up: nothing went wrong
}


class CycleFailedError(Exception):
    """A cycle ran and failed (its event is recorded): what a failed flow run of a cycle raises."""

    def __init__(self, event: EvolutionEvent):
        super().__init__(reason(event))
        self.event = event


def reason(event: EvolutionEvent) -> str:
    """The failure's one line (the last reason recorded, its line breaks folded), or the outcome itself."""
    reasons = event.meta.failure_reasons or []
    return " ".join(reasons[-1].split()) if reasons else str(event.outcome.status)


def outcome_state(event: EvolutionEvent, data: bool = True) -> State:
    """The state of the flow run whose cycle recorded ``event`` (``data``: carry the event)."""
    status = event.outcome.status
    if status in (OutcomeStatus.failed, OutcomeStatus.interrupted):
        return Failed(message=reason(event), data=CycleFailedError(event) if data else None)
    name = COMPLETED_NAMES.get(status, "Completed")
    return Completed(name=name, message=summary(event), data=event if data else None)


def summary(event: EvolutionEvent) -> str:
    m = event.meta
    gene = (event.gene_id or "no gene")
    if event.outcome.status == OutcomeStatus.success:
        return f"{event.id}: {gene} committed {(m.commit or '')[:12]}".strip()
    if event.outcome.status == OutcomeStatus.awaiting_changes:
        return f"{event.id}: {gene} is waiting for the change its prompt asks for; then `gep solidify`"
    if event.outcome.status == OutcomeStatus.empty:
        return f"{event.id}: nothing to do" + (f" ({m.empty_reason})" if m.empty_reason else "")
    if event.outcome.status == OutcomeStatus.abandoned:
        return f"{event.id}: {reason(event)}"
    return f"{event.id}: {event.outcome.status}"


def skipped_state(why: str) -> State:
    return Completed(name="Skipped", message=f"skipped: {why}", data=None)


def refused_state(exc: Exception) -> State:
    """A request refused before the cycle started: Failed with the one-line reason; raising ``exc``."""
    return Failed(message=str(exc), data=exc)


def event_of(state: State) -> EvolutionEvent | None:
    """The event a cycle's final state carries: completed, failed or abandoned alike (None when skipped).

    Raises what a refused run carries (a GepError), so callers see the one-line refusal. Reads the state's
    data as it is in memory (the flow ran in this process), so it works in sync and async code alike."""
    value = state.data.result if isinstance(state.data, ResultRecord) else state.data
    if isinstance(value, CycleFailedError):
        return value.event
    if isinstance(value, EvolutionEvent):
        return value
    if isinstance(value, BaseException):
        raise value
    return None
