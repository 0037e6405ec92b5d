"""Forward-only, named schema migrations, recorded in ``schema_migrations`` and run on every open.

Each migration is plain DDL that works on SQLite and PostgreSQL. Never edit a released migration:
append a new one. Tests run them from a blank database and from every older schema.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

from gep.models import iso, utc_now


def _autoinc(conn: Connection) -> str:
    return "BIGSERIAL PRIMARY KEY" if conn.dialect.name == "postgresql" else "INTEGER PRIMARY KEY AUTOINCREMENT"


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


MIGRATIONS: list[tuple[str, Callable[[Connection], None]]] = [
    ("001_initial", _m001_initial),
    ("002_indexes", _m002_indexes),
]


def applied(conn: Connection) -> list[str]:
    rows = conn.execute(text("SELECT name FROM schema_migrations ORDER BY name")).fetchall()
    return [r[0] for r in rows]


def migrate(engine: Engine, upto: str | None = None) -> list[str]:
    """Apply the pending migrations in order (each in its own transaction); return the names applied."""
    done: list[str] = []
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"))
    with engine.connect() as conn:
        have = set(applied(conn))
    for name, step in MIGRATIONS:
        if name in have:
            continue
        with engine.begin() as conn:
            step(conn)
            conn.execute(text("INSERT INTO schema_migrations (name, applied_at) VALUES (:n, :t)"),
                         {"n": name, "t": iso(utc_now())})
        done.append(name)
        if upto == name:
            break
    return done
