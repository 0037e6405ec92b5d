"""Behavioural signals of one workspace (seed 000) in the store. The workspace's daily JSONL files
(gep/signals/behavior_log.py) are its own copy, written by hooks and cycles; each cycle adds what it read from them
here, once: a signal's row id is a hash of its content, so reading the same line again adds nothing."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime

from sqlmodel import col, select

from gep.core.behavior_signal import StoredSignal
from gep.store.base import StoreBase
from gep.store.engine import store_errors
from gep.store.tables import BehaviorSignalRow
from gep.store.upsert import insert_new


def signal_row_id(sig: StoredSignal) -> str:
    raw = "\x1f".join((sig.key or "", sig.source or "", sig.type, sig.ts, sig.summary))
    return "bsig_" + hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def _ts(sig: StoredSignal) -> str:
    """A sortable UTC timestamp column (the stored ``ts`` is kept as written)."""
    return sig.at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")


class BehaviorMixin(StoreBase):
    @store_errors
    def add_behavior_signals(self, signals: Sequence[StoredSignal]) -> int:
        """Add the signals not stored yet; how many were new."""
        rows = [{"workspace_id": self.workspace_id, "id": signal_row_id(s), "ts": _ts(s), "type": s.type,
                 "data": s.model_dump_json(exclude_none=True)} for s in signals]
        if not rows:
            return 0
        with self.writing() as s:
            return insert_new(s, BehaviorSignalRow, rows, key=("workspace_id", "id"), returning="id")

    @store_errors
    def list_behavior_signals(self, *, since: datetime | None = None, type_: str | None = None,
                              limit: int = 1000) -> list[StoredSignal]:
        """The newest ``limit`` signals (from ``since`` on, of one type), oldest first."""
        with self.session() as s:
            q = select(BehaviorSignalRow.data).where(BehaviorSignalRow.workspace_id == self.workspace_id)
            if since is not None:
                q = q.where(col(BehaviorSignalRow.ts) >= since.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S"))
            if type_ is not None:
                q = q.where(BehaviorSignalRow.type == type_)
            rows = s.exec(q.order_by(col(BehaviorSignalRow.ts).desc(), col(BehaviorSignalRow.seq).desc())
                          .limit(limit)).all()
            return [StoredSignal.model_validate_json(d) for d in reversed(rows)]
