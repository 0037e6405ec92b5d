"""Forward-only migrations: blank database, oldest schema with data, re-open, a newer version's database."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from conftest import init_repo
from sqlalchemy import event as sa_event
from sqlalchemy import inspect, text
from sqlalchemy.engine import Engine

from gep.core.config import Settings
from gep.core.models import EvolutionEvent, Outcome, PersonalityState
from gep.store import Store, make_engine
from gep.store.migrations import MIGRATIONS, applied, migrate, unknown_migrations

ALL = [name for name, _ in MIGRATIONS]


def url_for(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'gep.db'}"


def test_blank_database_gets_every_migration(tmp_path: Path) -> None:
    engine = make_engine(url_for(tmp_path))
    assert migrate(engine) == ALL
    with engine.connect() as conn:
        assert applied(conn) == sorted(ALL)
        tables = set(inspect(conn).get_table_names())
        indexes = {ix["name"] for ix in inspect(conn).get_indexes("events")}
    assert {"events", "genes", "capsules", "failed_capsules", "validation_reports", "runs", "state",
            "counters", "workspaces", "memory_summaries", "schema_migrations"} <= tables
    assert {"ix_events_ws_id", "ix_events_ws_seq", "ix_events_ws_status_seq", "ix_events_flow_run"} == indexes
    engine.dispose()


def test_oldest_schema_with_data_is_upgraded_without_loss(tmp_path: Path) -> None:
    url = url_for(tmp_path)
    engine = make_engine(url)
    assert migrate(engine, upto="001_initial") == ["001_initial"]
    old_event = {"type": "EvolutionEvent", "id": "evt_old", "parent": None, "intent": "repair",
                 "outcome": {"status": "success", "score": 0.85}, "custom_field": {"kept": True}}
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO events (id, created_at, intent, status, data) VALUES "
                          "('evt_old', '2024-01-01T00:00:00.000Z', 'repair', 'success', :d)"),
                     {"d": json.dumps(old_event)})
        conn.execute(text("INSERT INTO genes (id, source, updated_at, data) VALUES "
                          "('gene_old', 'workspace', 'x', :d)"), {"d": json.dumps({"type": "Gene", "id": "gene_old"})})
        conn.execute(text("INSERT INTO runs (event_id, status, data) VALUES ('evt_old', 'closed', :d)"),
                     {"d": json.dumps({"event_id": "evt_old", "workspace": "/w", "head_sha": "a", "status": "closed"})})
    engine.dispose()

    # opened by a workspace: the rows written under the oldest schema are adopted by it
    with Store.for_workspace(init_repo(tmp_path / "ws"), Settings(database_url=url)) as store:
        with store.engine.connect() as conn:
            assert applied(conn) == sorted(ALL)
        # the data written under the oldest schema is all there, and the new counter counted it
        assert store.count_events() == 1
        assert store.stored_json("events", "evt_old") == old_event
        assert store.get_event("evt_old").model_extra == {"custom_field": {"kept": True}}
        assert store.get_gene("gene_old") is not None
        assert store.get_run("evt_old").status == "closed"
        store.add_event(EvolutionEvent(id="evt_new", outcome=Outcome(status="failed")))
        assert [e.id for e in store.recent_events()] == ["evt_old", "evt_new"]
        assert store.count_events() == 2


def _old_rows(engine: Engine) -> None:
    """Rows as the last single-workspace version (schema 004) wrote them, in every table."""
    with engine.begin() as conn:
        for i in range(5):
            conn.execute(text("INSERT INTO events (id, created_at, intent, status, gene_id, data) VALUES "
                              "(:id, '2024-01-01T00:00:00.000Z', 'repair', 'success', 'g', :d)"),
                         {"id": f"evt_{i}", "d": json.dumps({"type": "EvolutionEvent", "id": f"evt_{i}",
                                                             "parent": f"evt_{i - 1}" if i else None})})
        conn.execute(text("UPDATE counters SET value = 5 WHERE name = 'events'"))
        conn.execute(text("INSERT INTO capsules (id, gene_id, data) VALUES ('cap_1', 'g', :d)"),
                     {"d": json.dumps({"type": "Capsule", "id": "cap_1", "gene": "g"})})
        conn.execute(text("INSERT INTO failed_capsules (id, gene_id, data) VALUES ('fail_1', 'g', :d)"),
                     {"d": json.dumps({"type": "Capsule", "id": "fail_1", "gene": "g"})})
        conn.execute(text("INSERT INTO validation_reports (id, data) VALUES ('vr_1', :d)"),
                     {"d": json.dumps({"type": "ValidationReport", "id": "vr_1", "commands": [], "overall_ok": True})})
        conn.execute(text("INSERT INTO runs (event_id, status, data) VALUES ('evt_4', 'awaiting_changes', :d)"),
                     {"d": json.dumps({"event_id": "evt_4", "workspace": "/w", "head_sha": "a",
                                       "status": "awaiting_changes"})})
        conn.execute(text("INSERT INTO state (key, data) VALUES ('personality.current', :d)"),
                     {"d": PersonalityState(rigor=0.9).model_dump_json()})
        conn.execute(text("INSERT INTO genes (id, source, updated_at, data) VALUES ('g', 'workspace', 'x', :d)"),
                     {"d": json.dumps({"type": "Gene", "id": "g"})})


def test_single_workspace_database_is_adopted_by_the_first_workspace_that_opens_it(tmp_path: Path) -> None:
    url = url_for(tmp_path)
    engine = make_engine(url)
    migrate(engine, upto="004_drop_duplicate_id_indexes")
    _old_rows(engine)
    engine.dispose()
    settings = Settings(database_url=url)
    first, second = init_repo(tmp_path / "first"), init_repo(tmp_path / "second")
    with Store.for_workspace(first, settings) as a:
        # everything the single-workspace store held is the first workspace's now, in the same order
        assert [e.id for e in a.recent_events()] == [f"evt_{i}" for i in range(5)]
        assert a.count_events() == 5 and a.last_event_id() == "evt_4"
        assert [c.id for c in a.list_capsules()] == ["cap_1"] and len(a.list_failed_capsules()) == 1
        assert a.get_validation_report("vr_1") is not None
        assert [r.event_id for r in a.open_runs()] == ["evt_4"]
        assert a.get_state("personality.current", PersonalityState).rigor == 0.9
        assert [g.id for g in a.list_genes()] == ["g"]
        a.add_event(EvolutionEvent(id="evt_5", parent=a.last_event_id()))
        assert a.count_events() == 6
    with Store.for_workspace(second, settings) as b:  # a later workspace starts empty ...
        assert b.recent_events() == [] and b.count_events() == 0 and b.open_runs() == []
        assert b.list_capsules() == [] and b.get_state("personality.current", PersonalityState) is None
        # ... and the stored gene is the first workspace's too: another selects it with share_genes (issue 45)
        assert b.get_gene("g") is None
    with Store.for_workspace(second, Settings(database_url=url, share_genes=True)) as shared:
        assert shared.get_gene("g") is not None
    with Store.for_workspace(first, settings) as a:  # re-opening adopts nothing twice
        assert a.count_events() == 6 and a.get_event("evt_5").parent == "evt_4"
    with Store.open(url) as unscoped:
        assert unscoped.recent_events() == []  # nothing was left behind unowned


def test_reopening_is_idempotent(tmp_path: Path) -> None:
    url = url_for(tmp_path)
    with Store.open(url) as s:
        s.add_event(EvolutionEvent(id="e1"))
    engine = make_engine(url)
    assert migrate(engine) == []  # nothing left to apply
    with engine.connect() as conn:
        before = conn.execute(text("SELECT name, applied_at FROM schema_migrations ORDER BY name")).fetchall()
    engine.dispose()
    with Store.open(url) as s:
        assert s.count_events() == 1
        with s.engine.connect() as conn:
            after = conn.execute(text("SELECT name, applied_at FROM schema_migrations ORDER BY name")).fetchall()
    assert before == after


def test_reopening_a_current_store_takes_no_write_lock(tmp_path: Path) -> None:
    """Every cycle opens its store: a store that has every migration is read once, not locked once per step
    (on SQLite each locked step is a BEGIN IMMEDIATE that waits for the other cycles' writers)."""
    url = url_for(tmp_path)
    Store.open(url).close()
    engine = make_engine(url)
    statements: list[str] = []
    sa_event.listen(engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
    try:
        assert migrate(engine) == []
    finally:
        engine.dispose()
    assert not [s for s in statements if "IMMEDIATE" in s or "INSERT" in s or "CREATE" in s], statements
    assert len([s for s in statements if s.startswith("SELECT name FROM schema_migrations")]) == 1


def test_database_from_a_newer_version_opens_untouched_with_a_warning(tmp_path: Path,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    url = url_for(tmp_path)
    with Store.open(url) as s:
        s.add_event(EvolutionEvent(id="e1"))
        with s.engine.begin() as conn:  # what a newer gep would have done
            conn.execute(text("CREATE TABLE future_things (id TEXT PRIMARY KEY, data TEXT NOT NULL)"))
            conn.execute(text("INSERT INTO future_things VALUES ('l1', '{}')"))
            conn.execute(text("INSERT INTO schema_migrations (name, applied_at) VALUES ('900_future_things', 'x')"))
    with caplog.at_level(logging.WARNING, logger="gep.store.migrations"):
        store = Store.open(url)
    try:
        assert store.unknown_migrations == ["900_future_things"]
        assert "newer gep" in caplog.text and "900_future_things" in caplog.text
        assert store.get_event("e1") is not None
        store.add_event(EvolutionEvent(id="e2"))  # still usable
        with store.engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM future_things")).scalar() == 1
            assert unknown_migrations(conn) == ["900_future_things"]
            assert "900_future_things" in applied(conn)
    finally:
        store.close()


def test_each_step_is_paired_with_its_name() -> None:
    """gep/store/schema.py keeps the names (the quick read path checks a database against them without
    SQLAlchemy); migrations.py pairs them with the steps in order."""
    assert [step.__name__ for _, step in MIGRATIONS] == [f"_m{name}" for name in ALL]
