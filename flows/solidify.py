"""`gep solidify` as a flow run: finish a cycle left awaiting changes (prompt mode).

The run is named `solidify cycle-NNNN …`, tagged `cycle-run:<id>` with the run that started the cycle, and
updates that run's outcome tag, state and cycle artifact when it ends (flows/reporting.py)."""

from __future__ import annotations

from prefect.client.schemas.objects import State

from flows.cycle import current_flow_run_id, refuse, run_in_slot
from flows.flowdef import gep_flow
from gep.core.errors import ConfigError
from gep.core.request import CycleRequest, parse_request


@gep_flow(name="evolution-solidify")
async def solidify_pending(workspace: str, summary: str = "", abandon: bool = False) -> State:
    """Check the changes made since a prompt-mode cycle, then commit them; when they fail, nothing is rolled
    back and the cycle keeps awaiting changes.

    Args:
        workspace: Path of the workspace with a cycle awaiting changes.
        summary: One line describing the change: the commit subject. Empty: the mutation's expected effect.
        abandon: Give the pending cycle up instead: the change is saved as a patch under .gep/rescued/, then
            only its files are put back.
    """
    try:  # an empty or unrendered workspace: one line
        request = parse_request(CycleRequest, {"workspace": workspace, "summary": summary or None,
                                               "abandon_pending": abandon, "flow_run_id": current_flow_run_id()})
    except ConfigError as exc:
        return await refuse(None, exc)
    return await run_in_slot(request, resume=True)
