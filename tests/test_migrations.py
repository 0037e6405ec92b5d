"""Forward-only migrations: blank database, oldest schema with data, re-open, a newer version's database."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from sqlalchemy import inspect, text

from gep.migrations import MIGRATIONS, applied, migrate, unknown_migrations
from gep.models import EvolutionEvent, Outcome
from gep.store import Store, make_engine

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
            "counters", "schema_migrations"} <= tables
    assert {"ix_events_status_seq", "ix_events_flow_run"} <= indexes
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

    with Store.open(url) as store:
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


def test_database_from_a_newer_version_opens_untouched_with_a_warning(tmp_path: Path,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    url = url_for(tmp_path)
    with Store.open(url) as s:
        s.add_event(EvolutionEvent(id="e1"))
        with s.engine.begin() as conn:  # what a newer gep would have done
            conn.execute(text("CREATE TABLE lessons (id TEXT PRIMARY KEY, data TEXT NOT NULL)"))
            conn.execute(text("INSERT INTO lessons VALUES ('l1', '{}')"))
            conn.execute(text("INSERT INTO schema_migrations (name, applied_at) VALUES ('900_lessons', 'x')"))
    with caplog.at_level(logging.WARNING, logger="gep.migrations"):
        store = Store.open(url)
    try:
        assert store.unknown_migrations == ["900_lessons"]
        assert "newer gep" in caplog.text and "900_lessons" in caplog.text
        assert store.get_event("e1") is not None
        store.add_event(EvolutionEvent(id="e2"))  # still usable
        with store.engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM lessons")).scalar() == 1
            assert unknown_migrations(conn) == ["900_lessons"]
            assert "900_lessons" in applied(conn)
    finally:
        store.close()
