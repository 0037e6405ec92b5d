"""The stored JSON objects as they are, for export and import checks (this workspace's; genes: all)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import SQLModel, col, select

from gep.store.base import StoreBase
from gep.store.engine import db_error, store_errors
from gep.store.tables import CapsuleRow, EventRow, FailedCapsuleRow, GeneRow, ValidationReportRow

# kind -> (table, the column its objects are listed in order of)
KINDS: dict[str, tuple[type[SQLModel], Any]] = {
    "genes": (GeneRow, GeneRow.id), "capsules": (CapsuleRow, CapsuleRow.seq),
    "failed_capsules": (FailedCapsuleRow, FailedCapsuleRow.seq), "events": (EventRow, EventRow.seq),
    "validation_reports": (ValidationReportRow, ValidationReportRow.seq),
}


class ExportMixin(StoreBase):
    def _kind(self, kind: str) -> tuple[Any, Any]:
        if kind not in KINDS:
            raise ValueError(f"unknown asset kind {kind!r}")
        return KINDS[kind]

    def _mine(self, table: Any) -> list[Any]:
        """The filter that keeps a query to this workspace's rows (genes belong to every workspace)."""
        return [] if table is GeneRow else [table.workspace_id == self.workspace_id]

    # JSON edge: stored objects are arbitrary JSON (unknown fields of other tools' assets are kept)
    def iter_asset_json(self, kind: str) -> Iterator[dict[str, Any]]:  # JSON edge: see above
        """Stored JSON objects of one kind in insertion order (genes: by id), read in pages.

        ``kind``: "genes", "capsules", "failed_capsules", "events" or "validation_reports".
        """
        table, order = self._kind(kind)
        last: Any = None
        try:
            while True:
                with self.session() as s:
                    q = select(order, table.data).where(*self._mine(table))
                    if last is not None:
                        q = q.where(order > last)
                    rows = s.exec(q.order_by(order).limit(1000)).all()
                for key, data in rows:
                    yield json.loads(data)
                    last = key
                if len(rows) < 1000:
                    return
        except (SQLAlchemyError, sqlite3.Error) as exc:
            raise db_error(self.url, exc) from None

    @store_errors
    def stored_json(self, kind: str, asset_id_or_id: str) -> dict[str, Any] | None:  # JSON edge: a stored object
        """One stored JSON object by id (``kind`` as in :meth:`iter_asset_json`)."""
        table, _ = self._kind(kind)
        with self.session() as s:
            data = s.exec(select(table.data).where(col(table.id) == asset_id_or_id, *self._mine(table))).first()
            return json.loads(data) if data is not None else None
