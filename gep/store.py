"""Persistence for GEP objects (sqlmodel).

Default: SQLite at ``<workspace>/.gep/gep.db`` in WAL mode; ``GEP_DATABASE_URL`` selects another
database (PostgreSQL works). Each object is kept whole as JSON in ``data`` next to the few columns that
queries filter or sort on, so that fields this version does not know survive a round-trip.

Schema changes are small named forward-only migrations (gep/migrations.py) run on every open.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel
from sqlalchemy import event as sa_event
from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Field, Session, SQLModel, create_engine, select

from gep.config import Settings, gep_dir
from gep.errors import StoreError
from gep.models import (
    Capsule,
    CycleRun,
    EvolutionEvent,
    FailedCapsule,
    Gene,
    ValidationReport,
    iso,
    utc_now,
)

M = TypeVar("M", bound=BaseModel)


# ------------------------------------------------------------------ tables (mirrors gep/migrations.py)


class EventRow(SQLModel, table=True):
    __tablename__ = "events"
    seq: int | None = Field(default=None, primary_key=True)
    id: str = Field(index=True, unique=True)
    created_at: str
    intent: str
    status: str
    gene_id: str | None = None
    flow_run_id: str | None = None
    data: str


class GeneRow(SQLModel, table=True):
    __tablename__ = "genes"
    id: str = Field(primary_key=True)
    source: str = "workspace"
    updated_at: str
    data: str


class CapsuleRow(SQLModel, table=True):
    __tablename__ = "capsules"
    seq: int | None = Field(default=None, primary_key=True)
    id: str = Field(index=True, unique=True)
    gene_id: str | None = None
    data: str


class FailedCapsuleRow(SQLModel, table=True):
    __tablename__ = "failed_capsules"
    seq: int | None = Field(default=None, primary_key=True)
    id: str = Field(index=True, unique=True)
    gene_id: str | None = None
    data: str


class ValidationReportRow(SQLModel, table=True):
    __tablename__ = "validation_reports"
    seq: int | None = Field(default=None, primary_key=True)
    id: str = Field(index=True, unique=True)
    data: str


class RunRow(SQLModel, table=True):
    __tablename__ = "runs"
    event_id: str = Field(primary_key=True)
    status: str = Field(index=True)
    data: str


class StateRow(SQLModel, table=True):
    __tablename__ = "state"
    key: str = Field(primary_key=True)
    data: str


# ------------------------------------------------------------------ engine


def _dump(model: BaseModel) -> str:
    return json.dumps(model.model_dump(mode="json", exclude_none=True), ensure_ascii=False)


def _load(cls: type[M], data: str) -> M:
    return cls.model_validate(json.loads(data))


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA busy_timeout=10000")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


def default_url(workspace: Path | str) -> str:
    return f"sqlite:///{(gep_dir(workspace) / 'gep.db').resolve()}"


def make_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 10})
        sa_event.listen(engine, "connect", _sqlite_pragmas)
    else:
        engine = create_engine(url, pool_pre_ping=True)
    return engine


class Store:
    """All reads and writes of GEP objects. Open with :meth:`open` or :meth:`for_workspace`."""

    def __init__(self, engine: Engine, url: str):
        self.engine = engine
        self.url = url

    # ---------------------------------------------------------------- opening

    @classmethod
    def open(cls, url: str) -> Store:
        from gep.migrations import migrate

        try:
            if url.startswith("sqlite:///"):
                Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
            engine = make_engine(url)
            migrate(engine)
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot open store {_safe_url(url)}: {_first_line(exc)}") from None
        return cls(engine, url)

    @classmethod
    def for_workspace(cls, workspace: Path | str, settings: Settings | None = None) -> Store:
        url = settings.database_url if settings and settings.database_url else default_url(workspace)
        return cls.open(url)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _session(self) -> Session:
        return Session(self.engine, expire_on_commit=False)

    # ---------------------------------------------------------------- events

    def add_event(self, event: EvolutionEvent, flow_run_id: str | None = None) -> None:
        """Insert or replace an event by id (a cycle writes its event when it starts and when it ends)."""
        flow_run_id = flow_run_id or event.meta.get("flow_run_id")
        with self._session() as s:
            row = s.exec(select(EventRow).where(EventRow.id == event.id)).first()
            if row is None:
                row = EventRow(id=event.id, created_at=event.meta.get("at") or iso(utc_now()),
                               intent=str(event.intent), status=event.outcome.status, data="")
            row.intent = str(event.intent)
            row.status = event.outcome.status
            row.gene_id = event.genes_used[0] if event.genes_used else None
            row.flow_run_id = flow_run_id
            row.data = _dump(event)
            s.add(row)
            s.commit()

    def get_event(self, event_id: str) -> EvolutionEvent | None:
        with self._session() as s:
            row = s.exec(select(EventRow).where(EventRow.id == event_id)).first()
            return _load(EvolutionEvent, row.data) if row else None

    def recent_events(self, limit: int = 10) -> list[EvolutionEvent]:
        """The last ``limit`` events, oldest first (the order history rules read them in)."""
        return list(reversed(self.list_events(limit=limit)))

    def list_events(self, limit: int = 20, offset: int = 0, status: str | None = None) -> list[EvolutionEvent]:
        """Events newest first."""
        with self._session() as s:
            q = select(EventRow)
            if status:
                q = q.where(EventRow.status == status)
            rows = s.exec(q.order_by(EventRow.seq.desc()).offset(offset).limit(limit)).all()
            return [_load(EvolutionEvent, r.data) for r in rows]

    def last_event_id(self) -> str | None:
        with self._session() as s:
            row = s.exec(select(EventRow.id).order_by(EventRow.seq.desc()).limit(1)).first()
            return row

    def count_events(self) -> int:
        with self._session() as s:
            return int(s.exec(select(func.count()).select_from(EventRow)).one())

    # ---------------------------------------------------------------- genes

    def upsert_gene(self, gene: Gene, source: str = "workspace") -> None:
        with self._session() as s:
            row = s.get(GeneRow, gene.id) or GeneRow(id=gene.id, updated_at="", data="")
            row.source = source
            row.updated_at = iso(utc_now())
            row.data = _dump(gene)
            s.add(row)
            s.commit()

    def list_genes(self) -> list[Gene]:
        with self._session() as s:
            return [_load(Gene, r.data) for r in s.exec(select(GeneRow).order_by(GeneRow.id)).all()]

    def get_gene(self, gene_id: str) -> Gene | None:
        with self._session() as s:
            row = s.get(GeneRow, gene_id)
            return _load(Gene, row.data) if row else None

    # ---------------------------------------------------------------- capsules

    def upsert_capsule(self, capsule: Capsule) -> None:
        with self._session() as s:
            row = s.exec(select(CapsuleRow).where(CapsuleRow.id == capsule.id)).first()
            row = row or CapsuleRow(id=capsule.id, data="")
            row.gene_id = capsule.gene
            row.data = _dump(capsule)
            s.add(row)
            s.commit()

    def list_capsules(self, limit: int = 200) -> list[Capsule]:
        """Most recent capsules, oldest first."""
        with self._session() as s:
            rows = s.exec(select(CapsuleRow).order_by(CapsuleRow.seq.desc()).limit(limit)).all()
            return [_load(Capsule, r.data) for r in reversed(rows)]

    def get_capsule(self, capsule_id: str) -> Capsule | None:
        with self._session() as s:
            row = s.exec(select(CapsuleRow).where(CapsuleRow.id == capsule_id)).first()
            return _load(Capsule, row.data) if row else None

    def add_failed_capsule(self, capsule: FailedCapsule) -> None:
        with self._session() as s:
            row = s.exec(select(FailedCapsuleRow).where(FailedCapsuleRow.id == capsule.id)).first()
            row = row or FailedCapsuleRow(id=capsule.id, data="")
            row.gene_id = capsule.gene
            row.data = _dump(capsule)
            s.add(row)
            s.commit()

    def list_failed_capsules(self, limit: int = 200) -> list[FailedCapsule]:
        with self._session() as s:
            rows = s.exec(select(FailedCapsuleRow).order_by(FailedCapsuleRow.seq.desc()).limit(limit)).all()
            return [_load(FailedCapsule, r.data) for r in reversed(rows)]

    # ---------------------------------------------------------------- validation reports

    def add_validation_report(self, report: ValidationReport) -> None:
        with self._session() as s:
            row = s.exec(select(ValidationReportRow).where(ValidationReportRow.id == report.id)).first()
            row = row or ValidationReportRow(id=report.id, data="")
            row.data = _dump(report)
            s.add(row)
            s.commit()

    def get_validation_report(self, report_id: str) -> ValidationReport | None:
        with self._session() as s:
            row = s.exec(select(ValidationReportRow).where(ValidationReportRow.id == report_id)).first()
            return _load(ValidationReport, row.data) if row else None

    def list_validation_reports(self, limit: int = 1000) -> list[ValidationReport]:
        with self._session() as s:
            rows = s.exec(select(ValidationReportRow).order_by(ValidationReportRow.seq.desc()).limit(limit)).all()
            return [_load(ValidationReport, r.data) for r in reversed(rows)]

    # ---------------------------------------------------------------- cycle runs (crash safety)

    def save_run(self, run: CycleRun) -> None:
        with self._session() as s:
            row = s.get(RunRow, run.event_id) or RunRow(event_id=run.event_id, status=run.status, data="")
            row.status = run.status
            row.data = run.model_dump_json()
            s.add(row)
            s.commit()

    def open_runs(self) -> list[CycleRun]:
        """Runs not closed: running (maybe crashed) or awaiting changes."""
        with self._session() as s:
            rows = s.exec(select(RunRow).where(RunRow.status != "closed")).all()
            return [CycleRun.model_validate_json(r.data) for r in rows]

    def get_run(self, event_id: str) -> CycleRun | None:
        with self._session() as s:
            row = s.get(RunRow, event_id)
            return CycleRun.model_validate_json(row.data) if row else None

    def close_run(self, event_id: str) -> None:
        with self._session() as s:
            row = s.get(RunRow, event_id)
            if row is not None:
                run = CycleRun.model_validate_json(row.data)
                run.status = "closed"
                row.status = "closed"
                row.data = run.model_dump_json()
                s.add(row)
                s.commit()

    # ---------------------------------------------------------------- small typed state (personality, ...)

    def get_state(self, key: str, cls: type[M]) -> M | None:
        with self._session() as s:
            row = s.get(StateRow, key)
            return cls.model_validate_json(row.data) if row else None

    def set_state(self, key: str, value: BaseModel) -> None:
        with self._session() as s:
            row = s.get(StateRow, key) or StateRow(key=key, data="")
            row.data = value.model_dump_json()
            s.add(row)
            s.commit()

    # ---------------------------------------------------------------- bulk

    def add_events(self, events: Iterable[EvolutionEvent]) -> int:
        """Insert many events in one transaction (import, benchmarks); existing ids are skipped."""
        n = 0
        with self._session() as s:
            for ev in events:
                if s.exec(select(EventRow.seq).where(EventRow.id == ev.id)).first() is not None:
                    continue
                s.add(EventRow(id=ev.id, created_at=ev.meta.get("at") or iso(utc_now()), intent=str(ev.intent),
                               status=ev.outcome.status, gene_id=ev.genes_used[0] if ev.genes_used else None,
                               flow_run_id=ev.meta.get("flow_run_id"), data=_dump(ev)))
                n += 1
            s.commit()
        return n


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _safe_url(url: str) -> str:
    """The URL without its password, for error messages."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - a malformed URL is itself the error to report
        return "<malformed database URL>"
