"""The SQLModel tables (gep/store/tables.py) are exactly what the migrations create, on SQLite and PostgreSQL:
same tables, columns, types, nullability, primary keys, indexes (names, columns, uniqueness)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.engine import Engine
from sqlmodel import SQLModel
from store_backends import BACKENDS, backend_url

import gep.store.tables  # noqa: F401 - registers the tables in SQLModel.metadata (gep.store loads lazily)
from gep.store import make_engine
from gep.store.migrations import migrate


def describe(engine: Engine) -> dict[str, Any]:
    """The schema as the database reports it (schema_migrations, the migrations' own table, left out)."""
    out: dict[str, Any] = {}
    with engine.connect() as conn:
        insp = inspect(conn)
        for table in sorted(set(insp.get_table_names()) - {"schema_migrations", "sqlite_sequence"}):
            out[table] = {
                "columns": [(c["name"], type(c["type"]).__name__, c["nullable"]) for c in insp.get_columns(table)],
                "primary_key": insp.get_pk_constraint(table)["constrained_columns"],
                "indexes": sorted((ix["name"], tuple(ix["column_names"]), bool(ix["unique"]))
                                  for ix in insp.get_indexes(table)),
                "unique": sorted(tuple(u["column_names"]) for u in insp.get_unique_constraints(table)),
            }
            if conn.dialect.name == "sqlite":  # ids never reused after a prune deleted the newest rows
                sql = conn.execute(text("SELECT sql FROM sqlite_master WHERE name = :t"), {"t": table}).scalar()
                out[table]["autoincrement"] = "AUTOINCREMENT" in str(sql).upper()
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_tables_are_what_the_migrations_create(backend: str, tmp_path: Path) -> None:
    with backend_url(backend, tmp_path, "migrated") as migrated, backend_url(backend, tmp_path, "declared") as declared:
        by_migrations, by_models = make_engine(migrated), make_engine(declared)
        try:
            migrate(by_migrations)
            SQLModel.metadata.create_all(by_models)
            want, got = describe(by_migrations), describe(by_models)
        finally:
            by_migrations.dispose()
            by_models.dispose()
    assert set(want) == set(got)
    for table in want:
        assert want[table] == got[table], table
    assert len(want) >= 10 and all(d["columns"] for d in want.values())  # not comparing two empty schemas
