"""`gep feedback` as a flow: the Prefect UI's run form of the `feedback` deployment says whether a cycle's
change helped, exactly as `gep feedback EVENT_ID helpful|not_helpful --note TEXT` does."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from prefect import flow, get_run_logger
from prefect.client.schemas.objects import State

from flows.states import refused_state
from gep.api import open_store
from gep.core.errors import GepError
from gep.core.models import utc_now
from gep.learning.feedback import FeedbackSignal
from gep.learning.human_verdicts import give_feedback


@flow(name="evolution-feedback", validate_parameters=True)
def feedback(workspace: str, event_id: str, verdict: Literal["helpful", "not_helpful"], note: str = "",
             author: str = "Prefect UI") -> FeedbackSignal | State:
    """Record a person's verdict on one cycle's change: it moves the usefulness score of the gene the cycle used.

    Args:
        workspace: Path of the workspace on the worker's machine.
        event_id: The cycle's event id (evt_..., as `gep history` or the cycle's flow run shows it).
        verdict: helpful or not_helpful.
        note: Why (kept with the feedback; the next prompts for this gene can recall it).
        author: Who says so.
    """
    try:
        with open_store(Path(workspace).expanduser()) as store:
            signal = give_feedback(store, event_id, verdict, now=utc_now(), note=note or None, author=author)
    except GepError as exc:  # an unknown event, an unusable workspace: the run fails with the one-line reason
        return refused_state(exc)
    get_run_logger().info("recorded %s on %s (%s)", verdict, event_id, signal.gene_id)
    return signal
