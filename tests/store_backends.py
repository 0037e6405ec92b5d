"""Database URLs for store tests: a SQLite file, or a fresh schema of the PostgreSQL server named by
GEP_TEST_POSTGRES_URL (.ci/postgres.sh starts one); PostgreSQL cases are skipped without it."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import pytest
from sqlalchemy import create_engine, text

PG_URL = os.environ.get("GEP_TEST_POSTGRES_URL")
NO_PG = pytest.mark.skipif(not PG_URL, reason="GEP_TEST_POSTGRES_URL not set (see .ci/postgres.sh)")
BACKENDS = [pytest.param("sqlite"), pytest.param("postgresql", marks=[pytest.mark.postgres, NO_PG])]


@contextmanager
def pg_schema_url() -> Iterator[str]:
    """A URL whose connections work in a fresh, empty schema (dropped afterwards)."""
    assert PG_URL
    schema = "t_" + uuid.uuid4().hex[:12]
    admin = create_engine(PG_URL)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    sep = "&" if "?" in PG_URL else "?"
    try:
        yield f"{PG_URL}{sep}options={quote(f'-csearch_path={schema}')}"
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@contextmanager
def backend_url(backend: str, tmp_path: Path, name: str = "gep") -> Iterator[str]:
    if backend == "postgresql":
        with pg_schema_url() as url:
            yield url
    else:
        yield f"sqlite:///{tmp_path / name}.db"
