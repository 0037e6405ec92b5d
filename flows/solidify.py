"""`gep solidify` as a flow run: finish a cycle left awaiting changes (prompt mode)."""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger
from prefect.client.schemas.objects import State

from flows import reporting
from flows.cycle import ReviewDecision, current_flow_run_id, record_task, refused, solidify_task
from gep import cycle as C
from gep.errors import GepError
from gep.models import EvolutionEvent


@flow(name="evolution-solidify")
def solidify_pending(workspace: str, summary: str | None = None) -> EvolutionEvent | State:
    """Check the changes made since a prompt-mode cycle, then commit them or roll them back.

    Args:
        workspace: Path of the workspace with a cycle awaiting changes.
        summary: One line describing the change: the commit subject (default: the mutation's expected effect).
    """
    try:
        pc = C.open_pending(Path(workspace).expanduser(), flow_run_id=current_flow_run_id())
    except GepError as exc:
        return refused(exc)
    try:
        approve = reporting.review_gate(ReviewDecision) if pc.review else None
        event = solidify_task(pc.ctx, pc.event, pc.gene, pc.mutation,
                              (summary or "").strip() or C.default_summary(pc.gene, pc.mutation), approve).event
        event = record_task(pc.ctx, event)
        reporting.label_run(pc.ctx, event)
        reporting.publish(pc.ctx, event)
        get_run_logger().info("cycle %s: %s", event.id, event.outcome.status)
        return event
    finally:
        pc.ctx.close()
