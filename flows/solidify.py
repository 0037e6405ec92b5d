"""`gep solidify` as a flow run: finish a cycle left awaiting changes (prompt mode)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import flow

from flows.cycle import current_flow_run_id, run_request
from gep.context import CycleRequest


@flow(name="evolution-solidify")
def solidify_pending(workspace: str, summary: str | None = None) -> Any:
    """Check the changes made since a prompt-mode cycle, then commit them or roll them back.

    Args:
        workspace: Path of the workspace with a cycle awaiting changes.
        summary: One line describing the change: the commit subject (default: the mutation's expected effect).
    """
    request = CycleRequest(workspace=Path(workspace).expanduser(), summary=summary,
                           flow_run_id=current_flow_run_id())
    return run_request(request, resume=True)
