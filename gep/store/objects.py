"""Capsules, failed capsules and validation reports of one workspace (kept by id, listed newest last);
genes, kept once for the fleet by id and listed to the workspaces that put them there (with ``share_genes``, to
every workspace). With ``share_capsules``, capsule listings also offer other workspaces' capsules."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, PrivateAttr
from sqlmodel import Session, col, select

from gep.core.models import Capsule, FailedCapsule, Gene, ValidationReport, iso, utc_now
from gep.core.records import CapsuleOriginRecord
from gep.store.base import UNSCOPED, StoreBase
from gep.store.codec import load, stored_text
from gep.store.engine import store_errors
from gep.store.tables import (
    CapsuleRow,
    FailedCapsuleRow,
    GeneOwnerRow,
    GeneRow,
    ValidationReportRow,
    WorkspaceRow,
)
from gep.store.upsert import insert_new, upsert

M = TypeVar("M", bound=BaseModel)
# the tables of objects kept per workspace by id, in insertion order
ObjectRow = CapsuleRow | FailedCapsuleRow | ValidationReportRow


class StoredCapsule(Capsule):
    """A capsule as the store lists it, with its origin: not a field, so never stored or exported."""

    _origin: CapsuleOriginRecord | None = PrivateAttr(default=None)  # what the event records of a reused one

    @property
    def origin(self) -> CapsuleOriginRecord | None:
        return self._origin


class ObjectsMixin(StoreBase):
    # ---------------------------------------------------------------- one helper per operation

    def _put(self, row_cls: type[ObjectRow], obj_id: str, values: Mapping[str, Any]) -> None:
        with self.writing() as s:
            upsert(s, row_cls, {"workspace_id": self.workspace_id, "id": obj_id}, values)

    def _get(self, row_cls: type[ObjectRow], cls: type[M], obj_id: str) -> M | None:
        with self.session() as s:
            data = s.exec(select(row_cls.data).where(row_cls.workspace_id == self.workspace_id,
                                                     row_cls.id == obj_id)).first()
            return load(cls, data) if data is not None else None

    def _list(self, row_cls: type[ObjectRow], cls: type[M], limit: int) -> list[M]:
        """The newest ``limit`` objects, oldest first."""
        with self.session() as s:
            rows = s.exec(select(row_cls.data).where(row_cls.workspace_id == self.workspace_id)
                          .order_by(col(row_cls.seq).desc()).limit(limit)).all()
            return [load(cls, data) for data in reversed(rows)]

    # ---------------------------------------------------------------- genes (fleet-wide)

    @store_errors
    def upsert_gene(self, gene: Gene, source: str = "workspace", *, as_read: Mapping[str, Any] | None = None) -> None:
        """Store ``gene`` (by id, fleet-wide) and note that this workspace has it (its own from now on)."""
        values = {"source": source, "updated_at": iso(utc_now()), "data": stored_text(gene, as_read)}
        with self.writing() as s:
            upsert(s, GeneRow, {"id": gene.id}, values)
            insert_new(s, GeneOwnerRow, [{"workspace_id": self.workspace_id, "gene_id": gene.id}],
                       key=("workspace_id", "gene_id"), returning="gene_id")

    def _genes_seen(self) -> Any:
        """The stored genes this workspace selects from: its own (it imported or made them), or with
        ``share_genes`` (and for an unscoped store) every workspace's."""
        q = select(GeneRow.data)
        if self.share_genes or self.workspace_id == UNSCOPED:
            return q
        own = select(GeneOwnerRow.gene_id).where(GeneOwnerRow.workspace_id == self.workspace_id)
        return q.where(col(GeneRow.id).in_(own))

    @store_errors
    def list_genes(self) -> list[Gene]:
        with self.session() as s:
            return [load(Gene, data) for data in s.exec(self._genes_seen().order_by(GeneRow.id)).all()]

    @store_errors
    def get_gene(self, gene_id: str) -> Gene | None:
        with self.session() as s:
            data = s.exec(self._genes_seen().where(GeneRow.id == gene_id)).first()
            return load(Gene, data) if data is not None else None

    # ---------------------------------------------------------------- capsules

    @store_errors
    def upsert_capsule(self, capsule: Capsule, *, as_read: Mapping[str, Any] | None = None) -> None:
        self._put(CapsuleRow, capsule.id, {"gene_id": capsule.gene, "data": stored_text(capsule, as_read)})

    @store_errors
    def list_capsules(self, limit: int = 200) -> list[StoredCapsule]:
        """This workspace's most recent capsules, oldest first; with ``share_capsules``, followed by the most
        recent capsules of other workspaces whose ids this one does not hold (each says where it came from).
        Own capsules come first so that they win ties (gep.genes.selector.select_capsule prefers list order)."""
        own = [self._origin(c, self.workspace_id, self.workspace_name)
               for c in self._list(CapsuleRow, StoredCapsule, limit)]
        return own + self._shared_capsules({c.id for c in own}, limit) if self.share_capsules else own

    def _shared_capsules(self, skip: set[str], limit: int) -> list[StoredCapsule]:
        with self.session() as s:
            q = (select(CapsuleRow.workspace_id, CapsuleRow.id, CapsuleRow.data)
                 .where(CapsuleRow.workspace_id != self.workspace_id)
                 .order_by(col(CapsuleRow.seq).desc()).limit(limit))
            rows: list[tuple[str, str]] = []
            for wid, cid, data in s.exec(q).all():
                if cid not in skip:  # the same capsule imported by several workspaces is offered once
                    skip.add(cid)
                    rows.append((wid, data))
            names = self._workspace_names(s, {w for w, _ in rows})
        return [self._origin(load(StoredCapsule, d), w, names.get(w)) for w, d in reversed(rows)]

    @staticmethod
    def _workspace_names(s: Session, ids: set[str]) -> dict[str, str]:
        rows = s.exec(select(WorkspaceRow.id, WorkspaceRow.name).where(col(WorkspaceRow.id).in_(ids))).all()
        return dict(rows)

    def _origin(self, capsule: StoredCapsule, workspace_id: str, name: str | None) -> StoredCapsule:
        capsule._origin = CapsuleOriginRecord(workspace_id=workspace_id, workspace_name=name,
                                              own=workspace_id == self.workspace_id)
        return capsule

    @store_errors
    def get_capsule(self, capsule_id: str) -> StoredCapsule | None:
        capsule = self._get(CapsuleRow, StoredCapsule, capsule_id)
        return self._origin(capsule, self.workspace_id, self.workspace_name) if capsule else None

    @store_errors
    def add_failed_capsule(self, capsule: FailedCapsule, *, as_read: Mapping[str, Any] | None = None) -> None:
        self._put(FailedCapsuleRow, capsule.id, {"gene_id": capsule.gene, "data": stored_text(capsule, as_read)})

    @store_errors
    def list_failed_capsules(self, limit: int = 200) -> list[FailedCapsule]:
        return self._list(FailedCapsuleRow, FailedCapsule, limit)

    # ---------------------------------------------------------------- validation reports

    @store_errors
    def add_validation_report(self, report: ValidationReport, *, as_read: Mapping[str, Any] | None = None) -> None:
        self._put(ValidationReportRow, report.id, {"data": stored_text(report, as_read)})

    @store_errors
    def get_validation_report(self, report_id: str) -> ValidationReport | None:
        return self._get(ValidationReportRow, ValidationReport, report_id)

    @store_errors
    def list_validation_reports(self, limit: int = 1000) -> list[ValidationReport]:
        return self._list(ValidationReportRow, ValidationReport, limit)
