"""The store's core checks against PostgreSQL (GEP_TEST_POSTGRES_URL; .ci/postgres.sh starts a server).

Each test works in its own schema, dropped afterwards. Skipped cleanly when no server is configured.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from sqlalchemy import create_engine, text
from test_store import check_events, check_genes_capsules, check_runs_state

from gep.assets import export_assets, import_assets
from gep.migrations import MIGRATIONS, applied, migrate
from gep.models import EvolutionEvent
from gep.store import Store, make_engine

PG_URL = os.environ.get("GEP_TEST_POSTGRES_URL")
pytestmark = [pytest.mark.postgres,
              pytest.mark.skipif(not PG_URL, reason="GEP_TEST_POSTGRES_URL not set (see .ci/postgres.sh)")]
REFERENCE = Path(__file__).parent / "fixtures" / "reference_assets"


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A URL whose connections work in a fresh, empty schema."""
    assert PG_URL
    schema = "t_" + uuid.uuid4().hex[:12]
    admin = create_engine(PG_URL)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    sep = "&" if "?" in PG_URL else "?"
    yield f"{PG_URL}{sep}options={quote(f'-csearch_path={schema}')}"
    with admin.begin() as conn:
        conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
    admin.dispose()


@pytest.fixture
def store(pg_url: str) -> Iterator[Store]:
    with Store.open(pg_url) as s:
        yield s


def test_events(store: Store) -> None:
    assert store.engine.dialect.name == "postgresql"
    check_events(store)


def test_genes_capsules_reports(store: Store) -> None:
    check_genes_capsules(store)


def test_runs_and_state(store: Store) -> None:
    check_runs_state(store)


def test_reference_assets_round_trip(store: Store, tmp_path: Path) -> None:
    import_assets(store, REFERENCE)
    export_assets(store, tmp_path)
    for name in ("capsules.json", "failed_capsules.json", "events.jsonl"):
        assert (tmp_path / name).read_bytes() == (REFERENCE / name).read_bytes(), name
    assert import_assets(store, tmp_path).events.added == 0


def test_migrations_from_blank_oldest_and_again(pg_url: str) -> None:
    engine = make_engine(pg_url)
    assert migrate(engine, upto="001_initial") == ["001_initial"]
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO events (id, created_at, intent, status, data) VALUES "
                          "('evt_old', 'x', 'repair', 'success', :d)"),
                     {"d": json.dumps({"type": "EvolutionEvent", "id": "evt_old", "outcome": {"status": "success"}})})
    engine.dispose()
    with Store.open(pg_url) as s:
        assert s.count_events() == 1 and s.get_event("evt_old") is not None
        s.add_event(EvolutionEvent(id="evt_new"))
        with s.engine.connect() as conn:
            assert applied(conn) == sorted(name for name, _ in MIGRATIONS)
    with Store.open(pg_url) as s:  # re-open: nothing re-applied, nothing lost
        assert s.count_events() == 2 and s.unknown_migrations == []


def test_database_from_a_newer_version_opens_untouched(pg_url: str) -> None:
    with Store.open(pg_url) as s:
        s.add_event(EvolutionEvent(id="e1"))
        with s.engine.begin() as conn:
            conn.execute(text("INSERT INTO schema_migrations (name, applied_at) VALUES ('900_future', 'x')"))
    with Store.open(pg_url) as s:
        assert s.unknown_migrations == ["900_future"] and s.get_event("e1") is not None
