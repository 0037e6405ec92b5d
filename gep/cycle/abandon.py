"""Giving up a cycle that awaits changes (`gep solidify --abandon`, `gep cycle --abandon-pending`).

Nothing of the person's is lost: their change is saved as ``.gep/rescued/<event>.patch`` first (the event
and the output carry the ``git apply`` line that brings it back), then only the cycle's paths are put back
as they were at its baseline (gep/git/inplace_abandon.py). Empty only if nothing had been changed: edits
that were given up were still made (as for a failed cycle, seed 002 counts a 0-file blast radius as empty).
"""

from __future__ import annotations

from gep.core.errors import WorkspaceError
from gep.core.models import BlastRadius, CycleRun, EvolutionEvent, Outcome, OutcomeStatus
from gep.cycle.tree import TreeChange
from gep.git import Repo, Rescue, abandon_in_place, in_place_change, load_in_place
from gep.store import Store


def abandon_run(repo: Repo, store: Store, run: CycleRun, reason: str) -> EvolutionEvent:
    """Save the pending change as a patch, restore only its paths, record the cycle as abandoned."""
    event = store.get_event(run.event_id) or EvolutionEvent(id=run.event_id)
    rec = load_in_place(repo, run.event_id) if run.mode == "in_place" else None
    rescue = Rescue()
    if rec is not None:
        try:
            ch = in_place_change(repo, rec)
            radius = TreeChange(change=ch.change, root=repo.path).radius
            event.blast_radius = BlastRadius(files=radius.files, lines=radius.lines, bytes=radius.bytes)
        except WorkspaceError:  # abandoning must not fail on reading the change; its size stays unknown
            pass
        rescue = abandon_in_place(repo, rec)
    event.outcome = Outcome(status=OutcomeStatus.abandoned, score=0.0)
    event.meta.failure_reasons = [reason]
    event.meta.empty_cycle = rescue.patch is None
    if rescue.patch is not None:
        event.meta.rescued_patch, event.meta.rescue_command = str(rescue.patch), rescue.command
    store.add_event(event)
    store.close_run(run.event_id)
    return event


def abandoned_line(event: EvolutionEvent) -> str:
    """What the person is told: where their change is and the line that brings it back."""
    if event.meta.rescued_patch:
        return (f"abandoned {event.id}: your change is saved in {event.meta.rescued_patch}; "
                f"bring it back with: {event.meta.rescue_command}")
    return f"abandoned {event.id}: nothing had been changed"
