"""Persistence for GEP objects (sqlmodel).

Default: SQLite at ``<workspace>/.gep/gep.db`` in WAL mode; ``GEP_DATABASE_URL`` selects another
database (PostgreSQL works). Each object is kept whole as JSON in ``data`` next to the few columns that
queries filter or sort on, so that fields this version does not know survive a round-trip.

What ``data`` holds:
- objects the engine writes (``upsert_gene``, ``add_event``, ...): every field with a value, explicit nulls
  kept, never-set optional fields left out; ``schema_version`` and a correct ``asset_id`` are stamped on the
  object (as the reference's asset store does before it writes);
- objects read from asset files (``as_read=<the file's JSON object>``): that object as it was, asset_id
  untouched, so that an export gives back the same JSON objects.

Every query a cycle makes reads through an index (recent events by primary key, runs by status, the event
count from a counter row), so its cost does not grow with the number of stored events (bench/store.py).

Schema changes are small named forward-only migrations (gep/migrations.py) run on every open.
"""

from __future__ import annotations

import functools
import json
import os
import re
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from pydantic import BaseModel, ValidationError
from sqlalchemy import event as sa_event
from sqlalchemy import insert, text
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlmodel import Field, Session, SQLModel, create_engine, select

from gep.config import Settings, gep_dir
from gep.errors import StoreError
from gep.git.recovery import salvage
from gep.hashing import compute_asset_id, verify_asset_id
from gep.models import (
    SCHEMA_VERSION,
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
P = ParamSpec("P")
R = TypeVar("R")

OPEN_RUN_STATUSES = ("running", "awaiting_changes")
UNREADABLE_RUN = "unreadable"  # a run record moved aside: kept for a person to look at, never read again
_BATCH = 2_000
_SURROGATE = re.compile(r"[\ud800-\udfff]")


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


class CounterRow(SQLModel, table=True):
    __tablename__ = "counters"
    name: str = Field(primary_key=True)
    value: int = 0


# ------------------------------------------------------------------ JSON of stored objects


def _prune_unset_none(model: BaseModel, data: dict[str, Any]) -> dict[str, Any]:
    """Drop optional fields that are None only because nobody set them (explicit nulls stay)."""
    for name, field in type(model).model_fields.items():
        key = field.alias or name
        value = getattr(model, name, None)
        if value is None:
            if name not in model.model_fields_set:
                data.pop(key, None)
        elif isinstance(value, BaseModel) and isinstance(data.get(key), dict):
            _prune_unset_none(value, data[key])
        elif isinstance(value, list) and isinstance(data.get(key), list):
            for item, dumped in zip(value, data[key], strict=False):
                if isinstance(item, BaseModel) and isinstance(dumped, dict):
                    _prune_unset_none(item, dumped)
    return data


def asset_json(model: BaseModel) -> dict[str, Any]:
    """The JSON object the engine stores for ``model``: set fields and explicit nulls, unset Nones left out."""
    return _prune_unset_none(model, model.model_dump(mode="json", by_alias=True))


def as_read_json(model: BaseModel, as_read: Mapping[str, Any]) -> dict[str, Any]:
    """What to store for an object read from an asset file: the file's own object when the model holds
    exactly its content (so key order and number spelling survive too), else the fields the file had."""
    dumped = model.model_dump(mode="json", exclude_unset=True, by_alias=True)
    return dict(as_read) if dumped == as_read else dumped


def _data(model: BaseModel, as_read: Mapping[str, Any] | None) -> dict[str, Any]:
    return stamp(model) if as_read is None else as_read_json(model, as_read)


def stamp(model: BaseModel) -> dict[str, Any]:
    """Set ``schema_version`` (if missing) and a correct ``asset_id`` on ``model``; return its stored JSON."""
    if "schema_version" in type(model).model_fields and getattr(model, "schema_version", None) is None:
        model.schema_version = SCHEMA_VERSION  # type: ignore[attr-defined]
    data = asset_json(model)
    if "asset_id" in type(model).model_fields and not verify_asset_id(data):
        data["asset_id"] = compute_asset_id(data)
        model.asset_id = data["asset_id"]  # type: ignore[attr-defined]
    return data


def _text(data: Mapping[str, Any]) -> str:
    out = json.dumps(data, ensure_ascii=False)
    # a lone surrogate (valid in JSON, kept by json.loads) cannot be encoded as UTF-8 by the driver
    return json.dumps(data) if _SURROGATE.search(out) else out


def _load(cls: type[M], data: str) -> M:
    try:
        return cls.model_validate(json.loads(data))
    except (ValueError, ValidationError) as exc:
        raise StoreError(f"stored {cls.__name__} is unreadable: {_first_line(exc)}") from None


# ------------------------------------------------------------------ engine


def _sqlite_connect(dbapi_conn: Any, _record: Any) -> None:
    # We issue BEGIN ourselves (see _sqlite_begin), so the driver must not.
    dbapi_conn.isolation_level = None
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA busy_timeout=10000")
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


def _sqlite_begin(conn: Connection) -> None:
    # Writers take the write lock up front: a deferred transaction that reads and then writes can fail at
    # once with SQLITE_BUSY when another process committed in between (busy_timeout does not retry that).
    conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.info.get("gep_write") else "BEGIN")


def default_url(workspace: Path | str) -> str:
    return f"sqlite:///{(gep_dir(workspace) / 'gep.db').resolve()}"


def make_engine(url: str) -> Engine:
    if make_url(url).get_backend_name() == "sqlite":
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 10})
        sa_event.listen(engine, "connect", _sqlite_connect)
        sa_event.listen(engine, "begin", _sqlite_begin)
    else:
        engine = create_engine(url, pool_pre_ping=True)
    return engine


def _store_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn database failures inside a Store method into a one-line StoreError."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except StoreError:
            raise
        except (SQLAlchemyError, sqlite3.Error, OSError) as exc:
            store = args[0] if args and isinstance(args[0], Store) else None
            where = _safe_url(store.url) if store else "store"
            raise StoreError(f"store {where}: {_scrub(_first_line(exc), store.url if store else '')}") from None

    return wrapper


class Store:
    """All reads and writes of GEP objects. Open with :meth:`open` or :meth:`for_workspace`."""

    def __init__(self, engine: Engine, url: str):
        self.engine = engine
        self.url = url
        self.unknown_migrations: list[str] = []
        self.warnings: list[str] = []  # run records that could not be read and were moved aside

    # ---------------------------------------------------------------- opening

    @classmethod
    def open(cls, url: str) -> Store:
        """Open (creating if needed) and migrate the store at ``url``; StoreError with one line on failure."""
        from gep.migrations import migrate, unknown_migrations

        try:
            parsed = make_url(url)
            if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
                path = Path(parsed.database)
                path.parent.mkdir(parents=True, exist_ok=True)
                if path.exists() and not os.access(path, os.R_OK | os.W_OK):
                    raise StoreError(f"cannot open store {path}: permission denied")
            engine = make_engine(url)
            migrate(engine)
            store = cls(engine, url)
            with engine.connect() as conn:
                store.unknown_migrations = unknown_migrations(conn)
        except StoreError:
            raise
        except (ArgumentError, ValueError) as exc:
            raise StoreError(f"bad database URL {_safe_url(url)}: {_scrub(_first_line(exc), url)}") from None
        except ImportError as exc:
            raise StoreError(f"cannot open store {_safe_url(url)}: missing database driver ({exc.name})") from None
        except (SQLAlchemyError, sqlite3.Error, OSError) as exc:
            raise StoreError(f"cannot open store {_safe_url(url)}: {_scrub(_first_line(exc), url)}") from None
        return store

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

    @contextmanager
    def _writing(self) -> Iterator[Session]:
        """A session whose transaction holds the write lock from its first statement (SQLite)."""
        with self.engine.connect() as conn:
            conn.info["gep_write"] = True
            try:
                with Session(bind=conn, expire_on_commit=False) as s:
                    yield s
                    s.commit()
            finally:
                conn.info.pop("gep_write", None)

    # ---------------------------------------------------------------- events

    def _bump_events(self, s: Session, n: int) -> None:
        if n:
            s.execute(text("UPDATE counters SET value = value + :n WHERE name = 'events'"), {"n": n})

    @_store_errors
    def add_event(self, event: EvolutionEvent, flow_run_id: str | None = None, *,
                  as_read: Mapping[str, Any] | None = None) -> None:
        """Insert or replace an event by id (a cycle writes its event when it starts and when it ends)."""
        data = _data(event, as_read)
        flow_run_id = flow_run_id or event.meta.flow_run_id
        with self._writing() as s:
            row = s.exec(select(EventRow).where(EventRow.id == event.id)).first()
            if row is None:
                row = EventRow(id=event.id, created_at=event.meta.at or iso(utc_now()),
                               intent=str(event.intent), status=event.outcome.status, data="")
                self._bump_events(s, 1)
            row.intent = str(event.intent)
            row.status = event.outcome.status
            row.gene_id = event.genes_used[0] if event.genes_used else None
            row.flow_run_id = flow_run_id
            row.data = _text(data)
            s.add(row)

    @_store_errors
    def get_event(self, event_id: str) -> EvolutionEvent | None:
        with self._session() as s:
            row = s.exec(select(EventRow).where(EventRow.id == event_id)).first()
            return _load(EvolutionEvent, row.data) if row else None

    def recent_events(self, limit: int = 10) -> list[EvolutionEvent]:
        """The last ``limit`` events, oldest first (the order history rules read them in)."""
        return list(reversed(self.list_events(limit=limit)))

    @_store_errors
    def list_events(self, limit: int = 20, offset: int = 0, status: str | None = None) -> list[EvolutionEvent]:
        """Events newest first."""
        with self._session() as s:
            q = select(EventRow)
            if status:
                q = q.where(EventRow.status == status)
            rows = s.exec(q.order_by(EventRow.seq.desc()).offset(offset).limit(limit)).all()  # type: ignore[union-attr]
            return [_load(EvolutionEvent, r.data) for r in rows]

    @_store_errors
    def last_event_id(self) -> str | None:
        with self._session() as s:
            return s.exec(select(EventRow.id).order_by(EventRow.seq.desc()).limit(1)).first()  # type: ignore[union-attr]

    @_store_errors
    def count_events(self) -> int:
        """Number of stored events (a counter row kept in step with inserts: no table scan)."""
        with self._session() as s:
            row = s.get(CounterRow, "events")
            return int(row.value) if row else 0

    # ---------------------------------------------------------------- genes

    @_store_errors
    def upsert_gene(self, gene: Gene, source: str = "workspace", *, as_read: Mapping[str, Any] | None = None) -> None:
        data = _data(gene, as_read)
        with self._writing() as s:
            row = s.get(GeneRow, gene.id) or GeneRow(id=gene.id, updated_at="", data="")
            row.source = source
            row.updated_at = iso(utc_now())
            row.data = _text(data)
            s.add(row)

    @_store_errors
    def list_genes(self) -> list[Gene]:
        with self._session() as s:
            return [_load(Gene, r.data) for r in s.exec(select(GeneRow).order_by(GeneRow.id)).all()]

    @_store_errors
    def get_gene(self, gene_id: str) -> Gene | None:
        with self._session() as s:
            row = s.get(GeneRow, gene_id)
            return _load(Gene, row.data) if row else None

    # ---------------------------------------------------------------- capsules

    @_store_errors
    def upsert_capsule(self, capsule: Capsule, *, as_read: Mapping[str, Any] | None = None) -> None:
        data = _data(capsule, as_read)
        with self._writing() as s:
            row = s.exec(select(CapsuleRow).where(CapsuleRow.id == capsule.id)).first()
            row = row or CapsuleRow(id=capsule.id, data="")
            row.gene_id = capsule.gene
            row.data = _text(data)
            s.add(row)

    @_store_errors
    def list_capsules(self, limit: int = 200) -> list[Capsule]:
        """Most recent capsules, oldest first."""
        with self._session() as s:
            rows = s.exec(select(CapsuleRow).order_by(CapsuleRow.seq.desc()).limit(limit)).all()  # type: ignore[union-attr]
            return [_load(Capsule, r.data) for r in reversed(rows)]

    @_store_errors
    def get_capsule(self, capsule_id: str) -> Capsule | None:
        with self._session() as s:
            row = s.exec(select(CapsuleRow).where(CapsuleRow.id == capsule_id)).first()
            return _load(Capsule, row.data) if row else None

    @_store_errors
    def add_failed_capsule(self, capsule: FailedCapsule, *, as_read: Mapping[str, Any] | None = None) -> None:
        data = _data(capsule, as_read)
        with self._writing() as s:
            row = s.exec(select(FailedCapsuleRow).where(FailedCapsuleRow.id == capsule.id)).first()
            row = row or FailedCapsuleRow(id=capsule.id, data="")
            row.gene_id = capsule.gene
            row.data = _text(data)
            s.add(row)

    @_store_errors
    def list_failed_capsules(self, limit: int = 200) -> list[FailedCapsule]:
        with self._session() as s:
            rows = s.exec(select(FailedCapsuleRow).order_by(FailedCapsuleRow.seq.desc()).limit(limit)).all()  # type: ignore[union-attr]
            return [_load(FailedCapsule, r.data) for r in reversed(rows)]

    # ---------------------------------------------------------------- validation reports

    @_store_errors
    def add_validation_report(self, report: ValidationReport, *, as_read: Mapping[str, Any] | None = None) -> None:
        data = _data(report, as_read)
        with self._writing() as s:
            row = s.exec(select(ValidationReportRow).where(ValidationReportRow.id == report.id)).first()
            row = row or ValidationReportRow(id=report.id, data="")
            row.data = _text(data)
            s.add(row)

    @_store_errors
    def get_validation_report(self, report_id: str) -> ValidationReport | None:
        with self._session() as s:
            row = s.exec(select(ValidationReportRow).where(ValidationReportRow.id == report_id)).first()
            return _load(ValidationReport, row.data) if row else None

    @_store_errors
    def list_validation_reports(self, limit: int = 1000) -> list[ValidationReport]:
        with self._session() as s:
            rows = s.exec(select(ValidationReportRow).order_by(ValidationReportRow.seq.desc()).limit(limit)).all()  # type: ignore[union-attr]
            return [_load(ValidationReport, r.data) for r in reversed(rows)]

    # ---------------------------------------------------------------- cycle runs (crash safety)

    @_store_errors
    def save_run(self, run: CycleRun) -> None:
        with self._writing() as s:
            row = s.get(RunRow, run.event_id) or RunRow(event_id=run.event_id, status=run.status, data="")
            row.status = run.status
            row.data = run.model_dump_json()
            s.add(row)

    @_store_errors
    def open_runs(self) -> list[CycleRun]:
        """Runs not closed: running (maybe crashed) or awaiting changes. A record that cannot be read is
        moved aside (status ``unreadable``, its data kept) with a warning (:meth:`take_warnings`): it never
        blocks the workspace."""
        with self._session() as s:
            # IN over the open statuses reads the status index; "!= 'closed'" would scan every closed run
            rows = s.exec(select(RunRow).where(RunRow.status.in_(OPEN_RUN_STATUSES))).all()  # type: ignore[attr-defined]
            raw = [(r.event_id, r.data) for r in rows]
        runs, warnings = salvage(raw, lambda data: CycleRun.model_validate_json(data),  # type: ignore[arg-type]
                                 self._move_run_aside)
        self.warnings += [f"the run record of cycle {w.removeprefix('record ')}" for w in warnings]
        return runs

    def _move_run_aside(self, event_id: str, _reason: str) -> None:
        with self._writing() as s:
            row = s.get(RunRow, event_id)
            if row is not None:
                row.status = UNREADABLE_RUN
                s.add(row)

    def take_warnings(self) -> list[str]:
        out, self.warnings = self.warnings, []
        return out

    @_store_errors
    def get_run(self, event_id: str) -> CycleRun | None:
        with self._session() as s:
            row = s.get(RunRow, event_id)
            return CycleRun.model_validate_json(row.data) if row else None

    @_store_errors
    def close_run(self, event_id: str) -> None:
        with self._writing() as s:
            row = s.get(RunRow, event_id)
            if row is not None:
                row.status = "closed"
                try:
                    run = CycleRun.model_validate_json(row.data)
                    run.status = "closed"
                    row.data = run.model_dump_json()
                except ValueError:  # an unreadable record is closed as it is
                    pass
                s.add(row)

    # ---------------------------------------------------------------- small typed state (personality, ...)

    @_store_errors
    def get_state(self, key: str, cls: type[M]) -> M | None:
        with self._session() as s:
            row = s.get(StateRow, key)
            return cls.model_validate_json(row.data) if row else None

    @_store_errors
    def set_state(self, key: str, value: BaseModel) -> None:
        with self._writing() as s:
            row = s.get(StateRow, key) or StateRow(key=key, data="")
            row.data = value.model_dump_json()
            s.add(row)

    # ---------------------------------------------------------------- bulk

    @_store_errors
    def add_events(self, events: Iterable[EvolutionEvent]) -> int:
        """Insert many events in batched transactions (benchmarks, bulk writes); existing ids are skipped.

        Returns how many were inserted.
        """
        return self._add_many((ev, None) for ev in events)

    @_store_errors
    def import_events(self, pairs: Iterable[tuple[EvolutionEvent, Mapping[str, Any]]]) -> int:
        """Like :meth:`add_events` for events read from a file: each with the JSON object it was read from."""
        return self._add_many(pairs)

    def _add_many(self, pairs: Iterable[tuple[EvolutionEvent, Mapping[str, Any] | None]]) -> int:
        added = 0
        batch: list[dict[str, Any]] = []
        for ev, as_read in pairs:
            batch.append({"id": ev.id, "created_at": ev.meta.at or iso(utc_now()), "intent": str(ev.intent),
                          "status": ev.outcome.status, "gene_id": ev.genes_used[0] if ev.genes_used else None,
                          "flow_run_id": ev.meta.flow_run_id, "data": _text(_data(ev, as_read))})
            if len(batch) >= _BATCH:
                added += self._insert_new_events(batch)
                batch = []
        if batch:
            added += self._insert_new_events(batch)
        return added

    def _insert_new_events(self, rows: list[dict[str, Any]]) -> int:
        with self._writing() as s:
            ids = [r["id"] for r in rows]
            have = set(s.exec(select(EventRow.id).where(EventRow.id.in_(ids))).all())  # type: ignore[attr-defined]
            fresh: list[dict[str, Any]] = []
            for r in rows:
                if r["id"] not in have:
                    have.add(r["id"])
                    fresh.append(r)
            if fresh:
                s.execute(insert(EventRow), fresh)
                self._bump_events(s, len(fresh))
            return len(fresh)

    # ---------------------------------------------------------------- stored JSON, for export

    def _iter_data(self, row_cls: Any, order_col: Any, batch: int = 1000) -> Iterator[dict[str, Any]]:
        last: Any = None
        while True:
            with self._session() as s:
                q = select(order_col, row_cls.data)
                if last is not None:
                    q = q.where(order_col > last)
                rows = s.exec(q.order_by(order_col).limit(batch)).all()
            for key, data in rows:
                yield json.loads(data)
                last = key
            if len(rows) < batch:
                return

    def iter_asset_json(self, kind: str) -> Iterator[dict[str, Any]]:
        """Stored JSON objects of one kind in insertion order (genes: by id), read in pages.

        ``kind``: "genes", "capsules", "failed_capsules", "events" or "validation_reports".
        """
        tables = {"genes": (GeneRow, GeneRow.id), "capsules": (CapsuleRow, CapsuleRow.seq),
                  "failed_capsules": (FailedCapsuleRow, FailedCapsuleRow.seq), "events": (EventRow, EventRow.seq),
                  "validation_reports": (ValidationReportRow, ValidationReportRow.seq)}
        if kind not in tables:
            raise ValueError(f"unknown asset kind {kind!r}")
        row_cls, col = tables[kind]
        try:
            yield from self._iter_data(row_cls, col)
        except (SQLAlchemyError, sqlite3.Error) as exc:
            raise StoreError(f"store {_safe_url(self.url)}: {_scrub(_first_line(exc), self.url)}") from None

    @_store_errors
    def stored_json(self, kind: str, asset_id_or_id: str) -> dict[str, Any] | None:
        """One stored JSON object by id (``kind`` as in :meth:`iter_asset_json`)."""
        tables = {"genes": GeneRow, "capsules": CapsuleRow, "failed_capsules": FailedCapsuleRow,
                  "events": EventRow, "validation_reports": ValidationReportRow}
        row_cls = tables[kind]
        with self._session() as s:
            row = s.exec(select(row_cls.data).where(row_cls.id == asset_id_or_id)).first()
            return json.loads(row) if row else None


def _first_line(exc: BaseException) -> str:
    msg = str(exc).strip()
    return msg.splitlines()[0] if msg else type(exc).__name__


def _scrub(message: str, url: str) -> str:
    """Remove the URL's password from a driver message (some drivers echo the DSN)."""
    try:
        password = make_url(url).password
    except Exception:  # noqa: BLE001 - a malformed URL has no password to hide
        password = None
    if password:
        message = message.replace(str(password), "***")
    return message


def _safe_url(url: str) -> str:
    """The URL without its password, for error messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - a malformed URL is itself the error to report
        return "<malformed database URL>"
