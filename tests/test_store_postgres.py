"""The store's core checks against PostgreSQL (GEP_TEST_POSTGRES_URL; .ci/postgres.sh starts a server).

Each test works in its own schema, dropped afterwards. Skipped cleanly when no server is configured.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import init_repo
from sqlalchemy import text
from store_backends import NO_PG, pg_schema_url
from test_store import check_events, check_genes_capsules, check_runs_state

from gep.assets.gene_files import export_assets, import_assets
from gep.core.config import Settings
from gep.core.models import EvolutionEvent, PersonalityState
from gep.store import Store, make_engine
from gep.store.migrations import MIGRATIONS, applied, migrate

pytestmark = [pytest.mark.postgres, NO_PG]
REFERENCE = Path(__file__).parent / "fixtures" / "reference_assets"


@pytest.fixture
def pg_url() -> Iterator[str]:
    with pg_schema_url() as url:
        yield url


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


def test_rows_from_before_workspaces_are_adopted_by_the_first_workspace(pg_url: str, tmp_path: Path) -> None:
    engine = make_engine(pg_url)
    migrate(engine, upto="004_drop_duplicate_id_indexes")  # the last single-workspace schema
    with engine.begin() as conn:
        for i in range(3):
            conn.execute(text("INSERT INTO events (id, created_at, intent, status, data) VALUES "
                              "(:id, 'x', 'repair', 'success', :d)"),
                         {"id": f"evt_{i}", "d": json.dumps({"type": "EvolutionEvent", "id": f"evt_{i}"})})
        conn.execute(text("UPDATE counters SET value = 3 WHERE name = 'events'"))
        conn.execute(text("INSERT INTO state (key, data) VALUES ('personality.current', '{}')"))
    engine.dispose()
    settings = Settings(database_url=pg_url)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with Store.for_workspace(tmp_path / "a", settings) as a, Store.for_workspace(tmp_path / "b", settings) as b:
        assert [e.id for e in a.recent_events()] == ["evt_0", "evt_1", "evt_2"] and a.count_events() == 3
        assert a.get_state("personality.current", PersonalityState) is not None
        assert b.get_state("personality.current", PersonalityState) is None
        assert b.recent_events() == [] and b.count_events() == 0
        a.add_event(EvolutionEvent(id="evt_3"))  # the sequence continues after the copied rows
        b.add_event(EvolutionEvent(id="evt_0"))  # the same id in another workspace is another event
        assert a.last_event_id() == "evt_3" and a.count_events() == 4 and b.count_events() == 1


def test_database_from_a_newer_version_opens_untouched(pg_url: str) -> None:
    with Store.open(pg_url) as s:
        s.add_event(EvolutionEvent(id="e1"))
        with s.engine.begin() as conn:
            conn.execute(text("INSERT INTO schema_migrations (name, applied_at) VALUES ('900_future', 'x')"))
    with Store.open(pg_url) as s:
        assert s.unknown_migrations == ["900_future"] and s.get_event("e1") is not None


def test_two_copies_of_a_workspace_see_only_their_own_rows(pg_url: str, tmp_path: Path) -> None:
    """Issue 32, finding 9: `cp -r` of a workspace copied its id, and on a shared store the copy and the
    original read and wrote each other's events. The copy now gets its own id; the original keeps its rows."""
    settings = Settings(database_url=pg_url)
    original = init_repo(tmp_path / "agent-a")
    with Store.for_workspace(original, settings) as s:
        s.add_event(EvolutionEvent(id="evt_1"))
        s.set_state("personality.current", PersonalityState())
    copy = tmp_path / "agent-b"
    shutil.copytree(original, copy, symlinks=True)  # a template per agent
    with Store.for_workspace(original, settings) as a, Store.for_workspace(copy, settings) as b:
        assert a.workspace_id != b.workspace_id
        assert [e.id for e in a.recent_events()] == ["evt_1"] and b.recent_events() == [] and b.count_events() == 0
        assert b.get_state("personality.current", PersonalityState) is None
        b.add_event(EvolutionEvent(id="evt_1"))  # the copy's own first cycle
        b.add_event(EvolutionEvent(id="evt_2"))
        a.add_event(EvolutionEvent(id="evt_2"))
        assert a.count_events() == 2 and b.count_events() == 2
        assert a.last_event_id() == "evt_2" and b.last_event_id() == "evt_2"
    with Store.for_workspace(copy, settings) as b_again:
        assert b_again.workspace_id == b.workspace_id  # the copy's id is stable from then on
