"""Opening a store, its scope (one workspace, or the unscoped default), sessions and counters."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Self

from sqlalchemy import text
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlmodel import Session, col, select

from gep.core.config import Settings
from gep.core.errors import StoreError
from gep.core.models import iso, utc_now
from gep.core.workspace_id import WorkspaceIdentity, give_own_identity, workspace_identity
from gep.store import schema
from gep.store.bindings import IdBindings, is_current, judge, read_bindings, write_bindings
from gep.store.engine import WRITE_FLAG, db_error, default_url, make_engine, safe_url, scrub, store_errors
from gep.store.tables import SCOPED_TABLES, CounterRow, WorkspaceRow
from gep.store.upsert import upsert

UNSCOPED = ""  # the workspace id of rows written by an unscoped store, and of rows older than the column
_REGISTER_LOCK = 0x6E70_7773  # PostgreSQL advisory lock held while a workspace registers ("gep ws")


class StoreBase:
    """A store acts on one workspace's rows (``workspace_id``); genes are shared by every workspace."""

    def __init__(self, engine: Engine, url: str, workspace_id: str = UNSCOPED):
        self.engine = engine
        self.url = url
        self.workspace_id = workspace_id
        self.workspace_name: str | None = None
        self.share_capsules = False
        self.share_genes = False
        self.unknown_migrations: list[str] = []
        self.run_warnings: list[str] = []  # run records that could not be read and were moved aside

    # ---------------------------------------------------------------- opening

    @classmethod
    def open(cls, url: str) -> Self:
        """Open (creating if needed) and migrate the store at ``url``, unscoped (admin, or a single-workspace
        tool): it acts on the rows of no workspace in particular. StoreError with one line on failure."""
        from gep.store.foreign_objects import refuse_foreign_objects
        from gep.store.migrations import migrate, unknown_migrations

        try:
            parsed = make_url(url)
            if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
                path = Path(parsed.database)
                path.parent.mkdir(parents=True, exist_ok=True)
                if path.exists() and not os.access(path, os.R_OK | os.W_OK):
                    raise StoreError(f"cannot open store {path}: permission denied")
            engine = make_engine(url)
            if parsed.get_backend_name() == "sqlite":
                with engine.connect() as conn:  # a view or trigger gep never made: refused before any read
                    refuse_foreign_objects(conn.connection.dbapi_connection, parsed.database or "")  # type: ignore[arg-type]
            migrate(engine)
            store = cls(engine, url)
            with engine.connect() as conn:
                store.unknown_migrations = unknown_migrations(conn)
        except StoreError:
            raise
        except (ArgumentError, ValueError) as exc:
            raise StoreError(f"bad database URL {safe_url(url)}: {scrub(str(exc).splitlines()[0], url)}") from None
        except ImportError as exc:
            raise StoreError(f"cannot open store {safe_url(url)}: missing database driver ({exc.name})") from None
        except (SQLAlchemyError, sqlite3.Error, OSError) as exc:
            raise db_error(url, exc, "cannot open store") from None
        return store

    @classmethod
    def for_workspace(cls, workspace: Path | str, settings: Settings | None = None,
                      identity: WorkspaceIdentity | None = None) -> Self:
        """The store of ``workspace`` (its ``.gep/gep.db``, or ``settings.database_url`` shared by a fleet),
        scoped to the workspace's id: every method reads and writes that workspace's rows only. ``identity``:
        the workspace's, when the caller already worked it out."""
        identity = identity or workspace_identity(workspace)
        url = settings.database_url if settings and settings.database_url else default_url(workspace)
        store = cls.open(url)
        try:
            store.enter(identity)
        except BaseException:
            store.close()
            raise
        store.share_capsules = bool(settings and settings.share_capsules)
        store.share_genes = bool(settings and settings.share_genes)
        return store

    def scoped(self, workspace_id: str, name: str | None = None) -> Self:
        """Another view of the same database, scoped to ``workspace_id`` (admin tools, tests)."""
        view = type(self)(self.engine, self.url, workspace_id)
        view.workspace_name = name
        view.unknown_migrations = self.unknown_migrations
        return view

    @store_errors
    def enter(self, identity: WorkspaceIdentity) -> None:
        """Scope this store to ``identity``: register the workspace (path and name kept current) and, when
        it is the first workspace in this database, adopt the rows that predate workspace scoping. An id
        another host holds in another file is a copy (gep/store/bindings.py): it gets its own id first."""
        self.workspace_id, self.workspace_name = identity.id, identity.name
        with self.session() as s:
            row = s.get(WorkspaceRow, identity.id)
            if row is not None and (row.path, row.name) == (identity.path, identity.name) \
                    and is_current(read_bindings(s, identity.id), identity):
                return  # registered as it is: nothing to write
        now = iso(utc_now())
        with self.writing() as s:
            if s.get_bind().dialect.name == "postgresql":
                s.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _REGISTER_LOCK})
            bindings = read_bindings(s, identity.id)
            original = judge(bindings, identity)
            if original is not None:  # another host's workspace, copied here: its rows stay its own
                identity = give_own_identity(identity, original)
                self.workspace_id, bindings = identity.id, IdBindings()
                judge(bindings, identity)
            first = s.exec(select(WorkspaceRow.id).limit(1)).first() is None
            upsert(s, WorkspaceRow, {"id": identity.id},
                   {"path": identity.path, "name": identity.name, "updated_at": now}, on_insert={"created_at": now})
            if identity.host and identity.inode:
                write_bindings(s, identity.id, bindings)
            if first:
                for table in SCOPED_TABLES:
                    s.execute(text(f"UPDATE {table.__tablename__} SET workspace_id = :w "
                                   "WHERE workspace_id = :legacy"), {"w": identity.id, "legacy": UNSCOPED})
                # genes stored before any workspace was (a store migrated empty of workspaces) are its own
                s.execute(text(f"INSERT INTO {schema.GENE_OWNERS} (workspace_id, gene_id) SELECT :w, id FROM "
                               f"{schema.GENES} WHERE id NOT IN (SELECT gene_id FROM {schema.GENE_OWNERS} "
                               "WHERE workspace_id = :w)"), {"w": identity.id})

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- sessions

    def session(self) -> Session:
        return Session(self.engine, expire_on_commit=False)

    @contextmanager
    def writing(self) -> Iterator[Session]:
        """A session whose transaction holds the write lock from its first statement (SQLite)."""
        with self.engine.connect() as conn:
            conn.info[WRITE_FLAG] = True
            try:
                with Session(bind=conn, expire_on_commit=False) as s:
                    yield s
                    s.commit()
            finally:
                conn.info.pop(WRITE_FLAG, None)

    @contextmanager
    def snapshot(self) -> Iterator[Session]:
        """A read session that sees one state of the database throughout (PostgreSQL: REPEATABLE READ;
        a SQLite read transaction already does)."""
        with self.engine.connect() as conn:
            if conn.dialect.name == "postgresql":
                conn.execution_options(isolation_level="REPEATABLE READ")
            with Session(bind=conn, expire_on_commit=False) as s:
                yield s

    # ---------------------------------------------------------------- counters (per workspace)

    def bump(self, s: Session, name: str, n: int) -> None:
        """Add ``n`` to this workspace's counter ``name`` (atomic: concurrent bumps all count)."""
        if n:
            upsert(s, CounterRow, {"workspace_id": self.workspace_id, "name": name},
                   {"value": col(CounterRow.value) + n}, on_insert={"value": n})

    def counter(self, s: Session, name: str) -> int:
        row = s.get(CounterRow, (self.workspace_id, name))
        return int(row.value) if row else 0

    def set_counter(self, s: Session, name: str, value: int) -> None:
        upsert(s, CounterRow, {"workspace_id": self.workspace_id, "name": name}, {"value": value})

    def lock_counter(self, s: Session, name: str) -> int:
        """This workspace's counter ``name``, its row locked until ``s`` ends (created at 0 if missing), so
        that read-then-write steps on it (folding, pruning) run one at a time per workspace."""
        key = {"workspace_id": self.workspace_id, "name": name}
        upsert(s, CounterRow, key, {}, on_insert={"value": 0})
        value = s.exec(select(CounterRow.value).where(CounterRow.workspace_id == self.workspace_id,
                                                      CounterRow.name == name).with_for_update()).one()
        return int(value)
