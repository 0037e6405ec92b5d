"""Joins stored events with their Prefect flow runs (state, duration, link to the UI)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from uuid import UUID

from pydantic import BaseModel

from gep.models import EvolutionEvent


class RunInfo(BaseModel):
    id: str
    name: str
    state: str
    duration_s: float | None = None
    link: str | None = None


def ui_url() -> str | None:
    """The Prefect UI's base URL when one is configured (PREFECT_UI_URL, or derived from PREFECT_API_URL)."""
    from prefect.settings import PREFECT_API_URL, PREFECT_UI_URL

    if not os.environ.get("PREFECT_API_URL") and not PREFECT_API_URL.value():
        return None
    url = PREFECT_UI_URL.value()
    return url.rstrip("/") if url else None


def flow_runs_for(events: Sequence[EvolutionEvent]) -> dict[str, RunInfo]:
    """Flow runs of these events by id; empty when Prefect cannot be reached (history still prints)."""
    ids = []
    for e in events:
        rid = e.meta.flow_run_id
        try:
            ids.append(UUID(str(rid)))
        except (TypeError, ValueError):
            continue
    if not ids:
        return {}
    try:
        from prefect import get_client
        from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

        with get_client(sync_client=True) as client:
            runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=ids)))
    except Exception:  # noqa: BLE001 - history from the store is still worth showing
        return {}
    base = ui_url()
    out: dict[str, RunInfo] = {}
    for r in runs:
        duration = r.total_run_time.total_seconds() if r.total_run_time else None
        out[str(r.id)] = RunInfo(id=str(r.id), name=r.name, state=r.state_name or "?", duration_s=duration,
                                 link=f"{base}/runs/flow-run/{r.id}" if base else None)
    return out
