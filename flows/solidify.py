"""`gep solidify` as a flow run: finish a cycle left awaiting changes (prompt mode)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import flow

from flows.cycle import current_flow_run_id, run_request
from gep.context import CycleRequest


@flow(name="evolution-solidify")
def solidify_pending(workspace: str, summary: str | None = None, abandon: bool = False) -> Any:
    """Check the changes made since a prompt-mode cycle, then commit them; when they fail, nothing is rolled
    back and the cycle keeps awaiting changes.

    Args:
        workspace: Path of the workspace with a cycle awaiting changes.
        summary: One line describing the change: the commit subject (default: the mutation's expected effect).
        abandon: Give the pending cycle up instead: the change is saved as a patch under .gep/rescued/, then
            only its files are put back.
    """
    request = CycleRequest(workspace=Path(workspace).expanduser(), summary=summary, abandon_pending=abandon,
                           flow_run_id=current_flow_run_id())
    return run_request(request, resume=True)
