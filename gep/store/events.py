"""Events of one workspace: a cycle writes its event when it starts and again when it ends."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypedDict

from sqlmodel import col, select

from gep.core.models import EvolutionEvent, iso, utc_now
from gep.store.base import StoreBase
from gep.store.codec import load, stored_text
from gep.store.engine import store_errors
from gep.store.tables import EventRow
from gep.store.upsert import insert_new, upsert

EVENTS = "events"  # the counter of events recorded in a workspace (pruned ones included)
_BATCH = 2_000


class _Columns(TypedDict):
    """The event row's columns beside its JSON ``data``, kept for queries."""

    intent: str
    status: str
    gene_id: str | None
    flow_run_id: str | None


def _columns(event: EvolutionEvent, flow_run_id: str | None) -> _Columns:
    return {"intent": str(event.intent), "status": event.outcome.status,
            "gene_id": event.gene_id,
            "flow_run_id": flow_run_id or event.meta.flow_run_id}


def _created_at(event: EvolutionEvent) -> str:
    return event.meta.at or iso(utc_now())


class EventsMixin(StoreBase):
    @store_errors
    def add_event(self, event: EvolutionEvent, flow_run_id: str | None = None, *,
                  as_read: Mapping[str, Any] | None = None) -> None:
        """Insert or replace an event by id (a cycle writes its event when it starts and when it ends)."""
        values = {**_columns(event, flow_run_id), "data": stored_text(event, as_read)}
        with self.writing() as s:
            if upsert(s, EventRow, {"workspace_id": self.workspace_id, "id": event.id}, values,
                      on_insert={"created_at": _created_at(event)}):
                self.bump(s, EVENTS, 1)

    @store_errors
    def get_event(self, event_id: str) -> EvolutionEvent | None:
        with self.session() as s:
            data = s.exec(select(EventRow.data).where(EventRow.workspace_id == self.workspace_id,
                                                      EventRow.id == event_id)).first()
            return load(EvolutionEvent, data) if data is not None else None

    def recent_events(self, limit: int = 10) -> list[EvolutionEvent]:
        """The last ``limit`` events, oldest first (the order history rules read them in)."""
        return list(reversed(self.list_events(limit=limit)))

    @store_errors
    def list_events(self, limit: int = 20, offset: int = 0, status: str | None = None) -> list[EvolutionEvent]:
        """Events newest first."""
        with self.session() as s:
            q = select(EventRow.data).where(EventRow.workspace_id == self.workspace_id)
            if status:
                q = q.where(EventRow.status == status)
            rows = s.exec(q.order_by(col(EventRow.seq).desc()).offset(offset).limit(limit)).all()
            return [load(EvolutionEvent, data) for data in rows]

    @store_errors
    def event_ids(self) -> list[str]:
        """Every event id of the workspace (to resolve a short one as typed)."""
        with self.session() as s:
            return list(s.exec(select(EventRow.id).where(EventRow.workspace_id == self.workspace_id)).all())

    @store_errors
    def last_event_id(self) -> str | None:
        with self.session() as s:
            return s.exec(select(EventRow.id).where(EventRow.workspace_id == self.workspace_id)
                          .order_by(col(EventRow.seq).desc()).limit(1)).first()

    @store_errors
    def count_events(self) -> int:
        """Events recorded in this workspace, pruned ones included (the cycle number counts on from it):
        a counter row kept in step with inserts, no table scan."""
        with self.session() as s:
            return self.counter(s, EVENTS)

    # ---------------------------------------------------------------- bulk

    @store_errors
    def add_events(self, events: Iterable[EvolutionEvent]) -> int:
        """Insert many events in batched transactions (benchmarks, bulk writes); existing ids are skipped.

        Returns how many were inserted.
        """
        return self._add_many((ev, None) for ev in events)

    @store_errors
    def import_events(self, pairs: Iterable[tuple[EvolutionEvent, Mapping[str, Any]]]) -> int:
        """Like :meth:`add_events` for events read from a file: each with the JSON object it was read from."""
        return self._add_many(pairs)

    def _add_many(self, pairs: Iterable[tuple[EvolutionEvent, Mapping[str, Any] | None]]) -> int:
        added = 0
        batch: list[dict[str, object]] = []
        for ev, as_read in pairs:
            batch.append({"workspace_id": self.workspace_id, "id": ev.id, "created_at": _created_at(ev),
                          **_columns(ev, None), "data": stored_text(ev, as_read)})
            if len(batch) >= _BATCH:
                added += self.insert_event_rows(batch)
                batch = []
        return added + self.insert_event_rows(batch)

    def insert_event_rows(self, rows: Sequence[Mapping[str, object]]) -> int:
        """Insert event rows (column values) of this workspace, in order, skipping known ids; count them."""
        if not rows:
            return 0
        with self.writing() as s:
            added = insert_new(s, EventRow, rows, key=("workspace_id", "id"), returning="seq")
            self.bump(s, EVENTS, added)
            return added
