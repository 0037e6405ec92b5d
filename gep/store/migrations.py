"""Forward-only, named schema migrations, recorded in ``schema_migrations`` and run on every open.

Each migration is plain DDL that works on SQLite and PostgreSQL. Never edit a released migration:
append a new one. Tests (tests/test_migrations.py) run them from a blank database, from the oldest schema
with data in it, twice in a row, and on a database a newer version migrated further;
tests/test_store_schema.py checks that the tables they make are the ones gep/store/tables.py declares.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection, Engine

from gep.core.models import iso, utc_now
from gep.store.engine import WRITE_FLAG
from gep.store.schema import MIGRATION_NAMES, SCHEMA_MIGRATIONS


def _autoinc(conn: Connection) -> str:
    return "BIGSERIAL PRIMARY KEY" if conn.dialect.name == "postgresql" else "INTEGER PRIMARY KEY AUTOINCREMENT"


def _seq(conn: Connection) -> str:
    return "BIGSERIAL PRIMARY KEY" if conn.dialect.name == "postgresql" \
        else "INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT"


def _m001_initial(conn: Connection) -> None:
    pk = _autoinc(conn)
    for ddl in (
        f"""CREATE TABLE events (seq {pk}, id TEXT NOT NULL UNIQUE, created_at TEXT NOT NULL,
            intent TEXT NOT NULL, status TEXT NOT NULL, gene_id TEXT, flow_run_id TEXT, data TEXT NOT NULL)""",
        "CREATE TABLE genes (id TEXT PRIMARY KEY, source TEXT NOT NULL, updated_at TEXT NOT NULL, data TEXT NOT NULL)",
        f"CREATE TABLE capsules (seq {pk}, id TEXT NOT NULL UNIQUE, gene_id TEXT, data TEXT NOT NULL)",
        f"CREATE TABLE failed_capsules (seq {pk}, id TEXT NOT NULL UNIQUE, gene_id TEXT, data TEXT NOT NULL)",
        f"CREATE TABLE validation_reports (seq {pk}, id TEXT NOT NULL UNIQUE, data TEXT NOT NULL)",
        "CREATE TABLE runs (event_id TEXT PRIMARY KEY, status TEXT NOT NULL, data TEXT NOT NULL)",
        "CREATE TABLE state (key TEXT PRIMARY KEY, data TEXT NOT NULL)",
    ):
        conn.execute(text(ddl))


def _m002_indexes(conn: Connection) -> None:
    for ddl in (
        "CREATE UNIQUE INDEX IF NOT EXISTS ix_events_id ON events (id)",
        "CREATE INDEX IF NOT EXISTS ix_events_status_seq ON events (status, seq)",
        "CREATE INDEX IF NOT EXISTS ix_events_flow_run ON events (flow_run_id)",
        "CREATE UNIQUE INDEX IF NOT EXISTS ix_capsules_id ON capsules (id)",
        "CREATE UNIQUE INDEX IF NOT EXISTS ix_failed_capsules_id ON failed_capsules (id)",
        "CREATE UNIQUE INDEX IF NOT EXISTS ix_validation_reports_id ON validation_reports (id)",
        "CREATE INDEX IF NOT EXISTS ix_runs_status ON runs (status)",
    ):
        conn.execute(text(ddl))


def _m003_counters(conn: Connection) -> None:
    # The event count a cycle asks for, kept in a row instead of counting the table on every cycle.
    conn.execute(text("CREATE TABLE counters (name TEXT PRIMARY KEY, value BIGINT NOT NULL)"))
    conn.execute(text("INSERT INTO counters (name, value) SELECT 'events', COUNT(*) FROM events"))


def _m004_drop_duplicate_id_indexes(conn: Connection) -> None:
    # 001's UNIQUE constraints already index these ids; the copies from 002 only cost space and insert time.
    for name in ("ix_events_id", "ix_capsules_id", "ix_failed_capsules_id", "ix_validation_reports_id"):
        conn.execute(text(f"DROP INDEX IF EXISTS {name}"))


# 005: table -> (its columns as created, the columns copied from the old table). Rows that predate the
# workspace column get workspace_id '' until the first workspace that opens the store adopts them.
_FLEET_TABLES: dict[str, tuple[str, str]] = {
    "events": ("seq {seq}, workspace_id TEXT NOT NULL, id TEXT NOT NULL, created_at TEXT NOT NULL, "
               "intent TEXT NOT NULL, status TEXT NOT NULL, gene_id TEXT, flow_run_id TEXT, data TEXT NOT NULL",
               "seq, id, created_at, intent, status, gene_id, flow_run_id, data"),
    "capsules": ("seq {seq}, workspace_id TEXT NOT NULL, id TEXT NOT NULL, gene_id TEXT, data TEXT NOT NULL",
                 "seq, id, gene_id, data"),
    "failed_capsules": ("seq {seq}, workspace_id TEXT NOT NULL, id TEXT NOT NULL, gene_id TEXT, "
                        "data TEXT NOT NULL", "seq, id, gene_id, data"),
    "validation_reports": ("seq {seq}, workspace_id TEXT NOT NULL, id TEXT NOT NULL, data TEXT NOT NULL",
                           "seq, id, data"),
    "runs": ("workspace_id TEXT NOT NULL, event_id TEXT NOT NULL, status TEXT NOT NULL, data TEXT NOT NULL, "
             "PRIMARY KEY (workspace_id, event_id)", "event_id, status, data"),
    "state": ("workspace_id TEXT NOT NULL, key TEXT NOT NULL, data TEXT NOT NULL, PRIMARY KEY (workspace_id, key)",
              "key, data"),
    "counters": ("workspace_id TEXT NOT NULL, name TEXT NOT NULL, value BIGINT NOT NULL, "
                 "PRIMARY KEY (workspace_id, name)", "name, value"),
    # shared by the fleet; rebuilt only because SQLite let 001's "id TEXT PRIMARY KEY" hold NULL
    "genes": ("id TEXT NOT NULL PRIMARY KEY, source TEXT NOT NULL, updated_at TEXT NOT NULL, data TEXT NOT NULL",
              "id, source, updated_at, data"),
}
_FLEET_INDEXES = (
    "CREATE UNIQUE INDEX ix_events_ws_id ON events (workspace_id, id)",
    "CREATE INDEX ix_events_ws_seq ON events (workspace_id, seq)",
    "CREATE INDEX ix_events_ws_status_seq ON events (workspace_id, status, seq)",
    "CREATE INDEX ix_events_flow_run ON events (flow_run_id)",
    "CREATE UNIQUE INDEX ix_capsules_ws_id ON capsules (workspace_id, id)",
    "CREATE INDEX ix_capsules_ws_seq ON capsules (workspace_id, seq)",
    "CREATE UNIQUE INDEX ix_failed_capsules_ws_id ON failed_capsules (workspace_id, id)",
    "CREATE INDEX ix_failed_capsules_ws_seq ON failed_capsules (workspace_id, seq)",
    "CREATE UNIQUE INDEX ix_validation_reports_ws_id ON validation_reports (workspace_id, id)",
    "CREATE INDEX ix_validation_reports_ws_seq ON validation_reports (workspace_id, seq)",
    "CREATE INDEX ix_runs_ws_status ON runs (workspace_id, status)",
    "CREATE UNIQUE INDEX ix_memory_summaries_ws_key ON memory_summaries (workspace_id, situation, gene_id)",
    "CREATE INDEX ix_memory_summaries_ws_seq ON memory_summaries (workspace_id, seq)",
)


def _rebuild(conn: Connection, table: str, columns: str, copied: str) -> None:
    """Re-create ``table`` with ``columns`` and copy its rows (SQLite cannot drop a column's UNIQUE)."""
    new = f"{table}_v5"
    conn.execute(text(f"CREATE TABLE {new} ({columns.format(seq=_seq(conn))})"))
    if "workspace_id" in columns:
        conn.execute(text(f"INSERT INTO {new} (workspace_id, {copied}) SELECT '', {copied} FROM {table}"))
    else:
        conn.execute(text(f"INSERT INTO {new} ({copied}) SELECT {copied} FROM {table}"))
    conn.execute(text(f"DROP TABLE {table}"))
    conn.execute(text(f"ALTER TABLE {new} RENAME TO {table}"))
    if conn.dialect.name == "postgresql" and copied.startswith("seq"):
        # the copied seq values were given explicitly: the new sequence continues after them
        conn.execute(text(f"SELECT setval(pg_get_serial_sequence('{table}', 'seq'), "
                          f"COALESCE((SELECT MAX(seq) FROM {table}), 0) + 1, false)"))


def _m005_workspaces(conn: Connection) -> None:
    # One database for a fleet: every workspace row carries its workspace (gep/core/workspace_id.py), ids are
    # unique per workspace, and the memory graph's summaries of pruned events get their table.
    for table, (columns, copied) in _FLEET_TABLES.items():
        _rebuild(conn, table, columns, copied)
    conn.execute(text("CREATE TABLE workspaces (id TEXT NOT NULL PRIMARY KEY, path TEXT NOT NULL, "
                      "name TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL)"))
    conn.execute(text(f"CREATE TABLE memory_summaries (seq {_seq(conn)}, workspace_id TEXT NOT NULL, "
                      "situation TEXT NOT NULL, gene_id TEXT NOT NULL, data TEXT NOT NULL)"))
    for ddl in _FLEET_INDEXES:
        conn.execute(text(ddl))


def _m006_learning(conn: Connection) -> None:
    # Learning across cycles (issue 15): feedback signals, lessons and their deletion audit, verified fixes;
    # every row scoped by workspace, read through an index that starts with it.
    seq = _seq(conn)
    for ddl in (
        f"""CREATE TABLE feedback (seq {seq}, workspace_id TEXT NOT NULL, id TEXT NOT NULL, gene_id TEXT NOT NULL,
            event_id TEXT, created_at TEXT NOT NULL, data TEXT NOT NULL)""",
        "CREATE UNIQUE INDEX ix_feedback_ws_id ON feedback (workspace_id, id)",
        "CREATE INDEX ix_feedback_ws_seq ON feedback (workspace_id, seq)",
        "CREATE INDEX ix_feedback_ws_gene ON feedback (workspace_id, gene_id)",
        f"""CREATE TABLE lessons (seq {seq}, workspace_id TEXT NOT NULL, id TEXT NOT NULL, gene_id TEXT NOT NULL,
            event_id TEXT, category TEXT NOT NULL, created_at TEXT NOT NULL, data TEXT NOT NULL)""",
        "CREATE UNIQUE INDEX ix_lessons_ws_id ON lessons (workspace_id, id)",
        "CREATE INDEX ix_lessons_ws_seq ON lessons (workspace_id, seq)",
        "CREATE INDEX ix_lessons_ws_gene_seq ON lessons (workspace_id, gene_id, seq)",
        "CREATE INDEX ix_lessons_ws_event ON lessons (workspace_id, event_id)",
        f"""CREATE TABLE lesson_deletions (seq {seq}, workspace_id TEXT NOT NULL, lesson_id TEXT NOT NULL,
            deleted_at TEXT NOT NULL, data TEXT NOT NULL)""",
        "CREATE UNIQUE INDEX ix_lesson_deletions_ws_lesson_id ON lesson_deletions (workspace_id, lesson_id)",
        "CREATE INDEX ix_lesson_deletions_ws_seq ON lesson_deletions (workspace_id, seq)",
        f"""CREATE TABLE resolutions (seq {seq}, workspace_id TEXT NOT NULL, event_id TEXT NOT NULL,
            status TEXT NOT NULL, data TEXT NOT NULL)""",
        "CREATE UNIQUE INDEX ix_resolutions_ws_event_id ON resolutions (workspace_id, event_id)",
        "CREATE INDEX ix_resolutions_ws_seq ON resolutions (workspace_id, seq)",
    ):
        conn.execute(text(ddl))


def _m007_gene_pool(conn: Connection) -> None:
    # Retired genes (per workspace: one workspace's verdict on a gene is not the fleet's) and the
    # distillation log that keeps distil runs a day apart and on new capsules only.
    conn.execute(text("CREATE TABLE gene_status (workspace_id TEXT NOT NULL, gene_id TEXT NOT NULL, "
                      "retired BOOLEAN NOT NULL, data TEXT NOT NULL, PRIMARY KEY (workspace_id, gene_id))"))
    conn.execute(text(f"CREATE TABLE distill_runs (seq {_seq(conn)}, workspace_id TEXT NOT NULL, id TEXT NOT NULL, "
                      "at TEXT NOT NULL, status TEXT NOT NULL, data TEXT NOT NULL)"))
    conn.execute(text("CREATE UNIQUE INDEX ix_distill_runs_ws_id ON distill_runs (workspace_id, id)"))
    conn.execute(text("CREATE INDEX ix_distill_runs_ws_seq ON distill_runs (workspace_id, seq)"))


def _m008_behavior_signals(conn: Connection) -> None:
    # Behavioural signals (seed 000) in the store beside the workspace's daily JSONL files.
    conn.execute(text(f"CREATE TABLE behavior_signals (seq {_seq(conn)}, workspace_id TEXT NOT NULL, "
                      "id TEXT NOT NULL, ts TEXT NOT NULL, type TEXT NOT NULL, data TEXT NOT NULL)"))
    for ddl in ("CREATE UNIQUE INDEX ix_behavior_signals_ws_id ON behavior_signals (workspace_id, id)",
                "CREATE INDEX ix_behavior_signals_ws_seq ON behavior_signals (workspace_id, seq)",
                "CREATE INDEX ix_behavior_signals_ws_ts ON behavior_signals (workspace_id, ts)"):
        conn.execute(text(ddl))


def _m009_gene_owners(conn: Connection) -> None:
    # Gene sharing is opt-in (issue 45, A07): the workspaces that put a gene in the store (an import, an
    # automatic or distilled gene); another workspace selects it only with share_genes. What each workspace
    # saw before stays its own: every gene already stored is owned by every workspace already registered.
    conn.execute(text("CREATE TABLE gene_owners (workspace_id TEXT NOT NULL, gene_id TEXT NOT NULL, "
                      "PRIMARY KEY (workspace_id, gene_id))"))
    conn.execute(text("INSERT INTO gene_owners (workspace_id, gene_id) SELECT w.id, g.id FROM workspaces w, genes g"))


# each step beside its name in gep/store/schema.py (the quick read path checks a database against those)
MIGRATIONS: list[tuple[str, Callable[[Connection], None]]] = list(zip(MIGRATION_NAMES, (
    _m001_initial,
    _m002_indexes,
    _m003_counters,
    _m004_drop_duplicate_id_indexes,
    _m005_workspaces,
    _m006_learning,
    _m007_gene_pool,
    _m008_behavior_signals,
    _m009_gene_owners,
), strict=True))

_LOCK_KEY = 0x6E70_6D69  # PostgreSQL advisory lock held while migrating ("gep mi")
log = logging.getLogger(__name__)


def applied(conn: Connection) -> list[str]:
    rows = conn.execute(text(f"SELECT name FROM {SCHEMA_MIGRATIONS} ORDER BY name")).fetchall()
    return [r[0] for r in rows]


def unknown_migrations(conn: Connection) -> list[str]:
    """Migrations recorded in the database that this version does not know (a newer gep wrote it)."""
    known = {name for name, _ in MIGRATIONS}
    return [name for name in applied(conn) if name not in known]


@contextmanager
def _locked(engine: Engine) -> Iterator[Connection]:
    """One transaction that excludes other migrating processes (SQLite: BEGIN IMMEDIATE; PostgreSQL: a lock)."""
    with engine.connect() as conn:
        conn.info[WRITE_FLAG] = True  # the SQLite "begin" hook then issues BEGIN IMMEDIATE
        try:
            with conn.begin():
                if conn.dialect.name == "postgresql":
                    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _LOCK_KEY})
                yield conn
        finally:
            conn.info.pop(WRITE_FLAG, None)


def _recorded(engine: Engine) -> set[str] | None:
    """The migrations recorded in the database (None: it has no migrations table yet). Steps are only ever
    added, so a database that records every step this version knows has nothing left to apply."""
    with engine.connect() as conn:
        if not inspect(conn).has_table(SCHEMA_MIGRATIONS):
            return None
        return set(applied(conn))


def _warn_newer(newer: list[str]) -> None:
    if newer:
        log.warning("this database was migrated by a newer gep (unknown migrations: %s); "
                    "opening it unchanged, upgrade gep to use its new features", ", ".join(newer))


def migrate(engine: Engine, upto: str | None = None) -> list[str]:
    """Apply the pending migrations in order, each in its own transaction; return the names applied.

    Safe when several processes open the same new database at once: each step re-checks, under the write
    lock, whether another process applied it meanwhile. Migrations recorded by a newer version are left
    alone (nothing is dropped or re-run); the store opens and a warning is logged.
    """
    done: list[str] = []
    recorded = _recorded(engine) if upto is None else None
    if recorded is not None and all(name in recorded for name, _ in MIGRATIONS):
        _warn_newer(sorted(recorded - {name for name, _ in MIGRATIONS}))  # every open of a current store:
        return done  # one read, none of the nine locked transactions (on SQLite: nine write locks)
    with _locked(engine) as conn:
        conn.execute(text(f"CREATE TABLE IF NOT EXISTS {SCHEMA_MIGRATIONS} "
                          "(name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"))
    for name, step in MIGRATIONS:
        with _locked(engine) as conn:
            if name not in set(applied(conn)):
                step(conn)
                conn.execute(text(f"INSERT INTO {SCHEMA_MIGRATIONS} (name, applied_at) VALUES (:n, :t)"),
                             {"n": name, "t": iso(utc_now())})
                done.append(name)
        if upto == name:
            break
    with engine.connect() as conn:
        _warn_newer(unknown_migrations(conn))
    return done
