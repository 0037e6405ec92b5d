"""`gep store copy`: a workspace's own SQLite store into a shared database, idempotently, then verified.

Rows keep their stored JSON as it is (an export from the target gives the same bytes) and their order;
those the target already holds (same workspace and id) are left as they are, so a second copy adds
nothing. Genes are shared: one the target holds already is kept there, and listed when it differs. The
memory graph's summaries come along when the target holds none of this workspace's events yet. The copy is
then checked: every copied object is in the target with the same asset id, and the counts add up.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError
from sqlmodel import SQLModel, col, func, select

from gep.core.errors import StoreError
from gep.core.workspace_id import workspace_identity
from gep.store.engine import default_url
from gep.store.graph_history import FOLDED
from gep.store.tables import (
    BehaviorSignalRow,
    CapsuleRow,
    CounterRow,
    DistillRunRow,
    EventRow,
    FailedCapsuleRow,
    FeedbackRow,
    GeneOwnerRow,
    GeneRow,
    GeneStatusRow,
    LessonDeletionRow,
    LessonRow,
    MemorySummaryRow,
    ResolutionRow,
    RunRow,
    StateRow,
    ValidationReportRow,
)
from gep.store.upsert import insert_new

if TYPE_CHECKING:
    from gep.store import Store

# kind -> (table, its key within a workspace, the column rows are read in order of)
_KINDS: dict[str, tuple[type[SQLModel], str, str]] = {
    "events": (EventRow, "id", "seq"), "capsules": (CapsuleRow, "id", "seq"),
    "failed_capsules": (FailedCapsuleRow, "id", "seq"), "validation_reports": (ValidationReportRow, "id", "seq"),
    "runs": (RunRow, "event_id", "event_id"), "state": (StateRow, "key", "key"),
    "gene_status": (GeneStatusRow, "gene_id", "gene_id"), "distill_runs": (DistillRunRow, "id", "seq"),
    "behavior_signals": (BehaviorSignalRow, "id", "seq"),
    "feedback": (FeedbackRow, "id", "seq"), "lessons": (LessonRow, "id", "seq"),
    "lesson_deletions": (LessonDeletionRow, "lesson_id", "seq"), "resolutions": (ResolutionRow, "event_id", "seq"),
}
_PAGE = 2_000


class CopyVerificationError(StoreError):
    """The target does not hold what was copied (exit status 1: nothing was wrong with the input)."""

    exit_code = 1


class KindCopy(BaseModel):
    source: int = 0  # rows of the workspace in the source
    copied: int = 0  # new in the target
    target: int = 0  # rows of the workspace in the target afterwards


class CopyReport(BaseModel):
    workspace_id: str
    workspace_name: str
    kinds: dict[str, KindCopy] = Field(default_factory=dict)
    genes_copied: int = 0
    genes_differing: list[str] = Field(default_factory=list)  # kept as the target had them
    summaries: str = ""

    def summary(self) -> str:
        parts = ", ".join(f"{k.copied}/{k.source} {name}" for name, k in self.kinds.items())
        differ = f"; genes kept as the target had them: {', '.join(self.genes_differing)}" \
            if self.genes_differing else ""
        return (f"copied workspace {self.workspace_name} ({self.workspace_id}): {parts}, {self.genes_copied} "
                f"genes; memory summaries {self.summaries}{differ}; verified")


def copy_workspace_store(workspace: Path | str, to_url: str) -> CopyReport:
    """Copy the workspace's ``.gep/gep.db`` into the database at ``to_url`` (see the module doc)."""
    from gep.store import Store

    path = Path(workspace).expanduser()
    if not path.is_dir():
        raise StoreError(f"workspace {path} is not a directory")
    src_url = default_url(path)
    db = Path(make_url(src_url).database or "")
    if not db.is_file():
        raise StoreError(f"workspace {path} has no store to copy ({db} does not exist)")
    if _same_sqlite(src_url, to_url):
        raise StoreError(f"--to is the workspace's own store ({db})")
    identity = workspace_identity(path)
    with Store.open(src_url) as src, Store.open(to_url) as dst:
        src.enter(identity)
        dst.enter(identity)
        return _copy(src, dst)


def _same_sqlite(a: str, b: str) -> bool:
    try:
        ua, ub = make_url(a), make_url(b)
    except (ArgumentError, ValueError):  # a bad --to URL is reported when it is opened
        return False
    return ub.get_backend_name() == "sqlite" and Path(ua.database or "").resolve() == \
        Path(ub.database or "").resolve()


def _copy(src: Store, dst: Store) -> CopyReport:
    report = CopyReport(workspace_id=src.workspace_id, workspace_name=src.workspace_name or "")
    had_events = _count(dst, EventRow) > 0
    for kind, (table, key, order) in _KINDS.items():
        k = report.kinds[kind] = KindCopy(source=_count(src, table))
        for rows in _pages(src, table, order):
            k.copied += _insert(dst, table, key, rows)
        k.target = _count(dst, table)
    _copy_genes(src, dst, report)
    report.summaries = _copy_summaries(src, dst, had_events)
    _copy_counters(src, dst)
    _verify(src, dst, report)
    return report


def _rows(store: Store, table: type[SQLModel], order: str, after: object) -> list[dict[str, object]]:
    with store.session() as s:
        q = select(table).where(table.workspace_id == store.workspace_id)  # type: ignore[attr-defined]
        if after is not None:
            q = q.where(col(getattr(table, order)) > after)
        return [r.model_dump() for r in s.exec(q.order_by(col(getattr(table, order))).limit(_PAGE)).all()]


def _pages(store: Store, table: type[SQLModel], order: str) -> Iterator[list[dict[str, object]]]:
    """The workspace's rows of ``table`` in pages, in order."""
    after: object = None
    while rows := _rows(store, table, order, after):
        yield rows
        after = rows[-1][order]


def _insert(dst: Store, table: type[SQLModel], key: str, rows: list[dict[str, object]]) -> int:
    fresh = [{**{k: v for k, v in r.items() if k != "seq"}, "workspace_id": dst.workspace_id} for r in rows]
    if table is EventRow:
        return dst.insert_event_rows(fresh)  # counts them, too
    with dst.writing() as s:
        return insert_new(s, table, fresh, key=("workspace_id", key), returning=key)


def _count(store: Store, table: type[SQLModel]) -> int:
    with store.session() as s:
        return int(s.exec(select(func.count()).select_from(table)
                          .where(table.workspace_id == store.workspace_id)).one())  # type: ignore[attr-defined]


def _copy_genes(src: Store, dst: Store, report: CopyReport) -> None:
    with src.session() as s:
        genes = [r.model_dump() for r in s.exec(select(GeneRow)).all()]
        owned = s.exec(select(GeneOwnerRow.gene_id).where(GeneOwnerRow.workspace_id == src.workspace_id)).all()
    with dst.writing() as s:
        have = {r.id: r.data for r in s.exec(select(GeneRow).where(col(GeneRow.id).in_([g["id"] for g in genes])))}
        report.genes_copied = insert_new(s, GeneRow, [g for g in genes if g["id"] not in have], key=("id",),
                                         returning="id")
        # the workspace's own genes stay its own there (without share_genes, it selects only those)
        insert_new(s, GeneOwnerRow, [{"workspace_id": dst.workspace_id, "gene_id": g} for g in owned],
                   key=("workspace_id", "gene_id"), returning="gene_id")
    report.genes_differing = sorted(g["id"] for g in genes if g["id"] in have
                                    and _asset_id(have[g["id"]]) != _asset_id(g["data"]))


def _copy_summaries(src: Store, dst: Store, had_events: bool) -> str:
    """Bring the memory graph's summaries and its watermark over, when the target can take them whole."""
    rows = [r for page in _pages(src, MemorySummaryRow, "seq") for r in page]
    with dst.session() as s:
        if s.exec(select(MemorySummaryRow.seq).where(MemorySummaryRow.workspace_id == dst.workspace_id)).first():
            return "already there"
    if not rows:
        return "none to copy"
    if had_events:
        return "not copied (the target already held events of this workspace; it folds its own)"
    with src.session() as s:
        folded = src.counter(s, FOLDED)
        last = s.exec(select(EventRow.id).where(EventRow.workspace_id == src.workspace_id,
                                                col(EventRow.seq) <= folded)
                      .order_by(col(EventRow.seq).desc()).limit(1)).first()
    with dst.writing() as s:
        insert_new(s, MemorySummaryRow, [{**{k: v for k, v in r.items() if k != "seq"},
                                          "workspace_id": dst.workspace_id} for r in rows],
                   key=("workspace_id", "situation", "gene_id"), returning="seq")
        mark = s.exec(select(EventRow.seq).where(EventRow.workspace_id == dst.workspace_id,
                                                 EventRow.id == last)).first() if last else None
        dst.set_counter(s, FOLDED, int(mark or 0))
    return f"copied ({len(rows)})"


def _copy_counters(src: Store, dst: Store) -> None:
    """Counters (the event count numbers the cycles) are at least what the source had."""
    with src.session() as s:
        counters = s.exec(select(CounterRow).where(CounterRow.workspace_id == src.workspace_id,
                                                   CounterRow.name != FOLDED)).all()
    with dst.writing() as s:
        for c in counters:
            if dst.counter(s, c.name) < c.value:
                dst.set_counter(s, c.name, c.value)


def _asset_id(data: str) -> str | None:
    obj = json.loads(data)
    return obj.get("asset_id") if isinstance(obj, dict) else None


def _ids(store: Store, kind: str) -> dict[str, str | None]:
    """Every key of the workspace's rows of ``kind`` with its stored asset id (None: runs and state)."""
    table, key, order = _KINDS[kind]
    asset = kind not in ("runs", "state")
    return {str(r[key]): _asset_id(str(r["data"])) if asset else None
            for page in _pages(store, table, order) for r in page}


def _verify(src: Store, dst: Store, report: CopyReport) -> None:
    for kind in _KINDS:
        have, want = _ids(dst, kind), _ids(src, kind)
        missing = [k for k, aid in want.items() if k not in have or have[k] != aid]
        if missing or len(want) != report.kinds[kind].source:
            raise CopyVerificationError(f"copy not verified: {len(missing)} {kind} missing or different in the "
                                        f"target (first: {missing[0] if missing else '-'})")
    if dst.count_events() < src.count_events():
        raise CopyVerificationError("copy not verified: the target counts fewer events than the source")
