"""The read path of store-only commands (`gep history`, `show`, `genes`, `lessons list`, `feedback stats`):
the workspace's own SQLite file read with the sqlite3 module, opened read-only, so that a command answers
without importing SQLAlchemy and SQLModel (~0.4 s of a 0.5 s budget).

It answers only what it answers exactly as :class:`gep.store.Store` does: the same rows (one workspace's, as
``Store.for_workspace`` scopes them; genes are the fleet's), in the same order, decoded by the same code
(gep/store/codec.py, the models' own validators). :func:`open_quick` declines (None: open the full store)
for a ``database_url``, a database not at this version's migrations (the full store migrates old ones), a
workspace the database has not registered under its current path, or any error; a read that fails
afterwards is answered by the full store, opened then. Writes go through the full store, but for the
append of `gep feedback EVENT helpful|not_helpful` (quick_write.py).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Self, TypeVar

from pydantic import BaseModel

from gep.core.config import Settings
from gep.core.errors import StoreError
from gep.core.learned import FeedbackSignal, GeneStatus, Lesson
from gep.core.models import CycleRun, EvolutionEvent, FailedCapsule, Gene
from gep.core.workspace_id import workspace_identity
from gep.store import schema
from gep.store.codec import load, load_by_time
from gep.store.foreign_objects import refuse_foreign_objects

if TYPE_CHECKING:  # imported when needed: the full store loads SQLAlchemy and SQLModel (~0.4 s)
    from gep.store.full import Store

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

_EVENTS = f"SELECT data FROM {schema.EVENTS} WHERE workspace_id = ?"
_NEWEST_FIRST = " ORDER BY seq DESC LIMIT ? OFFSET ?"


class ReadStore(Protocol):
    """What store-only commands read: :class:`QuickStore` and the full ``Store`` both answer it."""

    def get_event(self, event_id: str) -> EvolutionEvent | None: ...
    def list_events(self, limit: int = 20, offset: int = 0, status: str | None = None) -> list[EvolutionEvent]: ...
    def recent_events(self, limit: int = 10) -> list[EvolutionEvent]: ...
    def event_ids(self) -> list[str]: ...
    def list_genes(self) -> list[Gene]: ...
    def list_failed_capsules(self, limit: int = 200) -> list[FailedCapsule]: ...
    def list_gene_statuses(self) -> list[GeneStatus]: ...
    def list_feedback(self, gene_id: str | None = None) -> list[FeedbackSignal]: ...
    def list_lessons(self, gene_id: str | None = None) -> list[Lesson]: ...
    def open_runs(self) -> list[CycleRun]: ...
    def get_state(self, key: str, cls: type[M]) -> M | None: ...
    def close(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(self, *exc: object) -> None: ...


def open_quick(workspace: Path, settings: Settings) -> QuickStore | None:
    """The quick reader of ``workspace`` (resolved), or None when only the full store answers exactly."""
    opened = connect(workspace, settings, "ro")
    return QuickStore(opened[0], workspace, settings, opened[1]) if opened else None


def connect(workspace: Path, settings: Settings, mode: str) -> tuple[sqlite3.Connection, str] | None:
    """A connection to the workspace's own SQLite file (``mode``: ro or rw) and the workspace's id, when the
    file is at this version's migrations and holds the workspace registered under its current path."""
    if settings.database_url:
        return None
    db = schema.default_db(workspace)
    try:
        if not db.is_file() or not os.access(db, os.R_OK | os.W_OK):  # Store.open refuses a read-only file
            return None
        identity = workspace_identity(workspace)
        conn = sqlite3.connect(f"{db.as_uri()}?mode={mode}", uri=True, timeout=10, isolation_level=None)
    except Exception:  # noqa: BLE001 - the full store opens it, or says in one line what is wrong
        return None
    try:
        refuse_foreign_objects(conn, db)
    except StoreError:
        conn.close()
        raise
    except sqlite3.Error:
        pass  # not a database gep can read: the full store says so
    try:
        migrated = {name for (name,) in conn.execute(f"SELECT name FROM {schema.SCHEMA_MIGRATIONS}")}
        registered = conn.execute(f"SELECT path, name FROM {schema.WORKSPACES} WHERE id = ?", (identity.id,)).fetchone()
        # another version's schema, or a workspace the full store would register (or move) first
        if migrated == set(schema.MIGRATION_NAMES) and registered == (identity.path, identity.name):
            return conn, identity.id
    except Exception:  # noqa: BLE001 - an old database without these tables, a locked or corrupt file
        pass
    conn.close()
    return None


class QuickStore:
    """One workspace's rows, read-only. Each read that fails is made again by the full store."""

    def __init__(self, conn: sqlite3.Connection, workspace: Path, settings: Settings, workspace_id: str):
        self.conn = conn
        self.workspace = workspace
        self.settings = settings
        self.workspace_id = workspace_id
        self._full: Store | None = None

    def get_event(self, event_id: str) -> EvolutionEvent | None:
        def read() -> EvolutionEvent | None:
            row = self.conn.execute(f"{_EVENTS} AND id = ?", (self.workspace_id, event_id)).fetchone()
            return load(EvolutionEvent, row[0]) if row is not None else None

        return self._answer(read, "get_event", event_id)

    def list_events(self, limit: int = 20, offset: int = 0, status: str | None = None) -> list[EvolutionEvent]:
        """Events newest first."""
        where, args = (" AND status = ?", [status]) if status else ("", [])
        sql = _EVENTS + where + _NEWEST_FIRST
        return self._answer(lambda: [load(EvolutionEvent, d) for d in self._data(sql, *args, limit, offset)],
                            "list_events", limit, offset, status)

    def recent_events(self, limit: int = 10) -> list[EvolutionEvent]:
        """The last ``limit`` events, oldest first."""
        return list(reversed(self.list_events(limit=limit)))

    def event_ids(self) -> list[str]:
        """Every event id of the workspace (to resolve a short one as typed)."""
        sql = f"SELECT id FROM {schema.EVENTS} WHERE workspace_id = ?"
        return self._answer(lambda: [i for (i,) in self.conn.execute(sql, (self.workspace_id,)).fetchall()],
                            "event_ids")

    def list_genes(self) -> list[Gene]:
        """The workspace's own stored genes; every workspace's with ``share_genes`` (gep/store/objects.py)."""
        args: tuple[str, ...] = ()
        if self.settings.share_genes:
            sql = f"SELECT data FROM {schema.GENES} ORDER BY id"
        else:
            sql, args = (f"SELECT data FROM {schema.GENES} WHERE id IN (SELECT gene_id FROM {schema.GENE_OWNERS} "
                         "WHERE workspace_id = ?) ORDER BY id", (self.workspace_id,))
        return self._answer(lambda: [load(Gene, d) for (d,) in self.conn.execute(sql, args).fetchall()],
                            "list_genes")

    def list_failed_capsules(self, limit: int = 200) -> list[FailedCapsule]:
        """The newest ``limit``, oldest first."""
        sql = f"SELECT data FROM {schema.FAILED_CAPSULES} WHERE workspace_id = ?{_NEWEST_FIRST}"
        return self._answer(lambda: [load(FailedCapsule, d) for d in reversed(self._data(sql, limit, 0))],
                            "list_failed_capsules", limit)

    def list_gene_statuses(self) -> list[GeneStatus]:
        sql = f"SELECT data FROM {schema.GENE_STATUS} WHERE workspace_id = ? ORDER BY gene_id"
        return self._answer(lambda: [GeneStatus.model_validate_json(d) for d in self._data(sql)],
                            "list_gene_statuses")

    def list_feedback(self, gene_id: str | None = None) -> list[FeedbackSignal]:
        """Signals, oldest first."""
        return self._answer(lambda: load_by_time(FeedbackSignal, self._by_gene(schema.FEEDBACK, gene_id)),
                            "list_feedback", gene_id)

    def list_lessons(self, gene_id: str | None = None) -> list[Lesson]:
        """Lessons, oldest first (all of the workspace's, or one gene's)."""
        return self._answer(lambda: load_by_time(Lesson, self._by_gene(schema.LESSONS, gene_id)), "list_lessons", gene_id)

    def open_runs(self) -> list[CycleRun]:
        """Runs not closed (gep/store/runs.py); a record that cannot be read sends the question to the full
        store, which moves it aside with a warning."""
        marks = ", ".join("?" for _ in schema.OPEN_RUN_STATUSES)
        sql = f"SELECT data FROM {schema.RUNS} WHERE workspace_id = ? AND status IN ({marks})"
        return self._answer(lambda: [CycleRun.model_validate_json(d) for d in self._data(sql, *schema.OPEN_RUN_STATUSES)],
                            "open_runs")

    def get_state(self, key: str, cls: type[M]) -> M | None:
        """The workspace's state record ``key`` (e.g. the cycles waiting for a review), as ``cls``."""
        sql = f"SELECT data FROM {schema.STATE} WHERE workspace_id = ? AND key = ?"

        def read() -> M | None:
            rows = self._data(sql, key)
            return cls.model_validate_json(rows[0]) if rows else None

        return self._answer(read, "get_state", key, cls)

    # ---------------------------------------------------------------- helpers

    def _data(self, sql: str, *args: Any) -> list[str]:
        """The ``data`` column of this workspace's rows (``sql``'s first parameter is the workspace id)."""
        return [d for (d,) in self.conn.execute(sql, (self.workspace_id, *args)).fetchall()]

    def _by_gene(self, table: str, gene_id: str | None) -> list[str]:
        """Rows in insertion order, all of the workspace's or one gene's."""
        where, args = (" AND gene_id = ?", [gene_id]) if gene_id is not None else ("", [])
        return self._data(f"SELECT data FROM {table} WHERE workspace_id = ?{where} ORDER BY seq", *args)

    def _answer(self, quick: Callable[[], T], method: str, *args: object) -> T:
        try:
            return quick()
        except Exception:  # noqa: BLE001 - unexpected here: the full store answers, or says what is wrong
            result: T = getattr(self.full(), method)(*args)
            return result

    def full(self) -> Store:
        """The full store of the same workspace (opened once, on first need)."""
        if self._full is None:
            from gep.store.full import Store

            self._full = Store.for_workspace(self.workspace, self.settings)
        return self._full

    def close(self) -> None:
        self.conn.close()
        if self._full is not None:
            self._full.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

