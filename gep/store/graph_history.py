"""The memory graph's history of a workspace: summaries of folded events, and the events recorded since.

Folding turns settled events into per-gene, per-situation summaries (gep.core.learned.SituationSummary)
and moves a watermark (the counter ``memory_folded_seq``) past them. The memory graph gives the same advice
from the summaries as from those events, so pruning may delete folded events without changing selection.
What an event teaches is not the store's to decide: the caller gives the fold (:class:`MemoryFold`, the
memory graph's summary arithmetic: gep.learning.memory_graph.MEMORY_FOLD). The newest ``FOLD_KEEP`` events are never folded (they change while a cycle runs, and the loop rules read
them whole), nor anything from the oldest open run on.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from datetime import datetime
from typing import Protocol

from sqlmodel import Session, col, func, select

from gep.core import constants
from gep.core.learned import MemoryHistory, SituationSummary
from gep.core.models import EvolutionEvent, utc_now
from gep.store.base import StoreBase
from gep.store.codec import load
from gep.store.engine import store_errors
from gep.store.runs import OPEN_RUN_STATUSES
from gep.store.tables import EventRow, MemorySummaryRow, RunRow
from gep.store.upsert import upsert

FOLDED = "memory_folded_seq"  # counter: events of the workspace up to this seq are in the summaries
FOLD_KEEP = constants.MEMORY_GRAPH_EVENTS  # the newest events stay unfolded
_FOLD_BATCH = 5_000


def situation_hash(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


class MemoryFold(Protocol):
    """How events fold into situation summaries, and two summaries of one situation and gene merge."""

    def summarize(self, events: Iterable[EvolutionEvent], ref: datetime | None) -> list[SituationSummary]: ...

    def merge(self, a: SituationSummary, b: SituationSummary) -> SituationSummary: ...


class MemoryMixin(StoreBase):
    @store_errors
    def memory_history(self, fold: MemoryFold | None = None) -> MemoryHistory:
        """Everything the memory graph learns from in this workspace: the summaries, then every event after
        them, oldest first (with ``fold``: between FOLD_KEEP and twice that many, older ones folded first)."""
        if fold is not None and self._fold_lag() > FOLD_KEEP:
            self.fold_memory(fold)
        with self.snapshot() as s:
            folded = self.counter(s, FOLDED)
            summaries = s.exec(select(MemorySummaryRow.data).where(MemorySummaryRow.workspace_id == self.workspace_id)
                               .order_by(col(MemorySummaryRow.seq))).all()
            events = s.exec(select(EventRow.data).where(EventRow.workspace_id == self.workspace_id,
                                                        col(EventRow.seq) > folded)
                            .order_by(col(EventRow.seq))).all()
        return MemoryHistory(summaries=[SituationSummary.model_validate_json(d) for d in summaries],
                             events=[load(EvolutionEvent, d) for d in events])

    @store_errors
    def fold_memory(self, fold: MemoryFold) -> int:
        """Fold every event that may be folded into the summaries; returns how many were folded."""
        total = 0
        while n := self._fold_batch(fold):
            total += n
        return total

    def _fold_lag(self) -> int:
        """How many foldable events wait beyond the newest FOLD_KEEP (counted up to FOLD_KEEP + 1)."""
        with self.session() as s:
            folded, upto = self.counter(s, FOLDED), self.fold_limit(s)
            if upto <= folded:
                return 0
            q = (select(EventRow.seq).where(EventRow.workspace_id == self.workspace_id, col(EventRow.seq) > folded,
                                            col(EventRow.seq) <= upto).limit(FOLD_KEEP + 1))
            return len(s.exec(q).all())

    def fold_limit(self, s: Session) -> int:
        """The newest seq that may be folded: before the newest FOLD_KEEP events and before every open run."""
        mine = EventRow.workspace_id == self.workspace_id
        boundary = s.exec(select(EventRow.seq).where(mine).order_by(col(EventRow.seq).desc())
                          .offset(FOLD_KEEP).limit(1)).first()
        if boundary is None:
            return 0
        open_ids = select(RunRow.event_id).where(RunRow.workspace_id == self.workspace_id,
                                                 col(RunRow.status).in_(OPEN_RUN_STATUSES))
        first_open = s.exec(select(func.min(EventRow.seq)).where(mine, col(EventRow.id).in_(open_ids))).first()
        return boundary if first_open is None else min(boundary, first_open - 1)

    def _fold_batch(self, fold: MemoryFold) -> int:
        with self.writing() as s:
            folded = self.lock_counter(s, FOLDED)  # one folder per workspace at a time
            upto = self.fold_limit(s)
            rows = s.exec(select(EventRow.seq, EventRow.data)
                          .where(EventRow.workspace_id == self.workspace_id, col(EventRow.seq) > folded,
                                 col(EventRow.seq) <= upto)
                          .order_by(col(EventRow.seq)).limit(_FOLD_BATCH)).all()
            if not rows:
                return 0
            # as of now: an event stamped later (a clock ahead) counts as if it happened now
            self._add_summaries(s, fold.summarize((load(EvolutionEvent, data) for _, data in rows), utc_now()), fold)
            self.set_counter(s, FOLDED, rows[-1][0] or 0)
            return len(rows)

    def _add_summaries(self, s: Session, summaries: list[SituationSummary], fold: MemoryFold) -> None:
        """Merge ``summaries`` into the stored ones of the same situation and gene (new ones are added)."""
        keys = {situation_hash(x.key) for x in summaries}
        stored = {(situation, gene): SituationSummary.model_validate_json(data) for situation, gene, data in s.exec(
            select(MemorySummaryRow.situation, MemorySummaryRow.gene_id, MemorySummaryRow.data)
            .where(MemorySummaryRow.workspace_id == self.workspace_id, col(MemorySummaryRow.situation).in_(keys)))}
        for summary in summaries:
            key = (situation_hash(summary.key), summary.gene_id)
            merged = fold.merge(stored[key], summary) if key in stored else summary
            upsert(s, MemorySummaryRow, {"workspace_id": self.workspace_id, "situation": key[0],
                                         "gene_id": summary.gene_id}, {"data": merged.model_dump_json()})
