"""The gene pool's bookkeeping in one workspace: which genes are retired here (gep.genes.eligibility's
GeneStatusRepository) and the distillation log (gep.genes.distiller's DistillLog). Genes themselves are fleet-wide
(gep/store/objects.py); whether one is retired, and when this workspace last distilled, is this workspace's."""

from __future__ import annotations

import uuid

from sqlmodel import col, select

from gep.core.learned import DistillRun, GeneStatus
from gep.store.base import StoreBase
from gep.store.engine import store_errors
from gep.store.tables import DistillRunRow, GeneStatusRow
from gep.store.upsert import upsert

ATTEMPTED = ("kept", "rejected")  # a skipped run is logged but is not an attempt (gep.genes.distiller.DistillRun)


class GenePoolMixin(StoreBase):
    # ---------------------------------------------------------------- gene statuses

    @store_errors
    def get_gene_status(self, gene_id: str) -> GeneStatus | None:
        with self.session() as s:
            row = s.get(GeneStatusRow, (self.workspace_id, gene_id))
            return GeneStatus.model_validate_json(row.data) if row else None

    @store_errors
    def list_gene_statuses(self) -> list[GeneStatus]:
        with self.session() as s:
            rows = s.exec(select(GeneStatusRow.data).where(GeneStatusRow.workspace_id == self.workspace_id)
                          .order_by(GeneStatusRow.gene_id)).all()
            return [GeneStatus.model_validate_json(d) for d in rows]

    @store_errors
    def save_gene_status(self, status: GeneStatus) -> None:
        with self.writing() as s:
            upsert(s, GeneStatusRow, {"workspace_id": self.workspace_id, "gene_id": status.gene_id},
                   {"retired": status.retired, "data": status.model_dump_json()})

    # ---------------------------------------------------------------- distillation log

    @store_errors
    def add_distill_run(self, run: DistillRun) -> None:
        with self.writing() as s:
            upsert(s, DistillRunRow, {"workspace_id": self.workspace_id, "id": "dst_" + uuid.uuid4().hex[:20]},
                   {"at": run.at.isoformat(), "status": run.status, "data": run.model_dump_json()})

    @store_errors
    def last_distill_attempt(self) -> DistillRun | None:
        """The newest kept or rejected run (skips do not reset the interval)."""
        with self.session() as s:
            data = s.exec(select(DistillRunRow.data)
                          .where(DistillRunRow.workspace_id == self.workspace_id,
                                 col(DistillRunRow.status).in_(ATTEMPTED))
                          .order_by(col(DistillRunRow.seq).desc()).limit(1)).first()
            return DistillRun.model_validate_json(data) if data is not None else None

    @store_errors
    def list_distill_runs(self, limit: int) -> list[DistillRun]:
        """The newest ``limit`` runs, oldest first."""
        if limit <= 0:
            return []
        with self.session() as s:
            rows = s.exec(select(DistillRunRow.data).where(DistillRunRow.workspace_id == self.workspace_id)
                          .order_by(col(DistillRunRow.seq).desc()).limit(limit)).all()
            return [DistillRun.model_validate_json(d) for d in reversed(rows)]
