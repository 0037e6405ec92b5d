"""The quick read path of store-only commands (gep/store/quick_read.py): the same output as the full store on the
same database, and the full store whenever the quick path cannot answer exactly (an old or newer schema, a
moved workspace, a database_url, a read that fails)."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import Result
from conftest import init_repo
from learning_helpers import REPAIR, agent_workspace, committed_fix, cycle
from typer.testing import CliRunner

from gep.api import open_store
from gep.cli.root import app
from gep.core.config import Settings, load_settings
from gep.core.models import EvolutionEvent, FailedCapsule, Gene, Outcome, iso, utc_now
from gep.core.workspace_id import workspace_identity
from gep.genes.eligibility import retire_gene
from gep.learning.human_verdicts import give_feedback
from gep.learning.lessons import LessonError
from gep.store import Store, default_url, make_engine, quick_read
from gep.store.migrations import migrate
from gep.store.quick_write import open_writer
from gep.store.schema import MIGRATION_NAMES

pytestmark = pytest.mark.timeout(300)
runner = CliRunner()
STORED_GENE = "gene_stored_quick"
OTHER_WS = "0b7e5f0e-7d1c-4c53-9d0e-000000000042"


@pytest.fixture(scope="module")
def populated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A workspace after real cycles (a committed fix with its lessons and feedback, a second cycle), a
    person's feedback, a retired gene, a fleet gene, failed capsules; and another workspace's rows in the
    same file. Yields (workspace, the fixed event's id)."""
    ws = agent_workspace(tmp_path_factory.mktemp("quick") / "ws")
    path = os.environ["PATH"]
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{path}"  # validation's python has pytest
    try:
        fixed = committed_fix(ws)
        cycle(ws, 2)
    finally:
        os.environ["PATH"] = path
    now = utc_now()
    with open_store(ws) as store:
        give_feedback(store, fixed.id, "not_helpful", now=now, note="broke the weekly report")
        for gene_id in (STORED_GENE, "gene_stored_another"):  # listed by id, whatever the order stored
            store.upsert_gene(Gene(id=gene_id, category="optimize", signals_match=["slow_report"]))
        retire_gene(store, STORED_GENE, reason="superseded", now=now, known_ids={STORED_GENE})
        for i in range(3):
            store.add_failed_capsule(FailedCapsule(id=f"fail_{i}", gene=REPAIR, trigger=["log_error"],
                                                   failure_reason="tests failed",
                                                   created_at=iso(now - timedelta(minutes=i))))
    with Store.open(default_url(ws)) as admin:  # another workspace sharing the file: never listed here
        other = admin.scoped(OTHER_WS)
        other.add_event(EvolutionEvent(id="evt_other", genes_used=[REPAIR], outcome=Outcome(status="success")))
        other.add_failed_capsule(FailedCapsule(id="fail_other", gene=STORED_GENE))
        retire_gene(other, REPAIR, reason="retired elsewhere", now=now, known_ids={REPAIR})
        give_feedback(other, "evt_other", "helpful", now=now, note="praised elsewhere")  # feedback and a lesson
    yield ws, fixed.id


@pytest.fixture
def no_prefect(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No Prefect API configured or running: `gep history` shows "-" for run states, in both paths."""
    for key in [k for k in os.environ if k.startswith("PREFECT_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect-home"))


def quick_and_full(monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[Result, Result]:
    """The command answered by the quick path (which must not fall back), then by the full store."""
    opened: list[quick_read.QuickStore | None] = []
    real = quick_read.open_quick

    def spy(workspace: Path, settings: Settings) -> quick_read.QuickStore | None:
        opened.append(real(workspace, settings))
        return opened[-1]

    def no_fallback(self: quick_read.QuickStore) -> Store:
        raise AssertionError("the quick path fell back to the full store")

    with monkeypatch.context() as m:
        m.setattr(quick_read, "open_quick", spy)
        m.setattr(quick_read.QuickStore, "full", no_fallback)
        quick = runner.invoke(app, list(args))
    if "--workspace" in args or args[0] in ("history", "show"):
        assert opened and all(q is not None for q in opened), (args, "the quick path declined")
    with monkeypatch.context() as m:
        m.setattr(quick_read, "open_quick", lambda *_: None)
        full = runner.invoke(app, list(args))
    return quick, full


def same(quick: Result, full: Result) -> None:
    assert quick.exception is None or isinstance(quick.exception, SystemExit), quick.exception
    assert (quick.exit_code, quick.stdout, quick.stderr) == (full.exit_code, full.stdout, full.stderr)


def commands(ws: Path, event_id: str) -> list[list[str]]:
    w = ["--workspace", str(ws)]
    return [["history", *w], ["history", *w, "--all"], ["history", *w, "--json"], ["history", *w, "--all", "--json"],
            ["history", *w, "--limit", "1"], ["show", event_id, *w], ["show", "evt_other", *w],
            ["genes", "list"], ["genes", "list", *w], ["genes", "list", *w, "--json"],
            ["genes", "show", REPAIR], ["genes", "show", STORED_GENE, *w], ["genes", "show", STORED_GENE],
            ["lessons", "list", *w], ["lessons", "list", *w, "--topic", REPAIR], ["lessons", "list", *w, "--json"],
            ["lessons", "list", *w, "--topic", "gene_nothing_learned"],
            ["feedback", "stats", *w], ["feedback", "stats", *w, "--json"]]


def test_every_store_only_command_answers_the_same_through_the_quick_path(
        populated: tuple[Path, str], monkeypatch: pytest.MonkeyPatch, no_prefect: None) -> None:
    ws, event_id = populated
    for args in commands(ws, event_id):
        quick, full = quick_and_full(monkeypatch, *args)
        same(quick, full)
        refused = args[:2] == ["show", "evt_other"] or args == ["genes", "show", STORED_GENE]
        assert (quick.exit_code != 0) == refused and (refused or quick.stdout.strip()), (args, quick.stderr)
        for text in ("evt_other", "fail_other", "retired elsewhere", "praised elsewhere"):  # another workspace's rows
            assert text not in quick.stdout, (args, text)


def test_the_quick_store_reads_what_the_full_store_reads(populated: tuple[Path, str]) -> None:
    """Method by method, including the reads no command makes with these arguments (status, gene, offset)."""
    ws, event_id = populated
    calls: list[tuple[str, tuple[object, ...]]] = [
        ("list_events", ()), ("list_events", (1, 1)), ("list_events", (20, 0, "success")), ("recent_events", (2,)),
        ("get_event", (event_id,)), ("get_event", ("evt_other",)), ("list_genes", ()),
        ("list_failed_capsules", ()), ("list_failed_capsules", (2,)), ("list_gene_statuses", ()),
        ("list_feedback", ()), ("list_feedback", (REPAIR,)), ("list_lessons", ()), ("list_lessons", (REPAIR,))]
    settings = load_settings(ws)
    quick = quick_read.open_quick(ws.resolve(), settings)
    assert quick is not None
    with quick, Store.for_workspace(ws, settings) as full:
        for name, args in calls:
            assert getattr(quick, name)(*args) == getattr(full, name)(*args), name
        assert quick._full is None  # nothing fell back
        assert [e.id for e in quick.list_events()][-1] == event_id and quick.list_lessons()
        assert quick.list_feedback() and quick.list_gene_statuses() and len(quick.list_failed_capsules()) == 3


# ------------------------------------------------------------------ when the full store answers


def _old_database(ws: Path, upto: str) -> None:
    """The workspace's .gep/gep.db as an older gep left it (migrated up to ``upto``), with events in it;
    from 005 on, with the workspace registered (so that only the schema tells the quick path to decline)."""
    (ws / ".gep").mkdir()
    engine = make_engine(default_url(ws))
    migrate(engine, upto=upto)
    scoped = upto >= "005"
    me = workspace_identity(ws)
    with engine.begin() as conn:
        if scoped:
            conn.exec_driver_sql("INSERT INTO workspaces VALUES (?, ?, ?, 'x', 'x')", (me.id, me.path, me.name))
        for i in range(3):
            data = json.dumps({"type": "EvolutionEvent", "id": f"evt_{i}", "intent": "repair",
                               "outcome": {"status": "success", "score": 0.85}})
            columns, values = ("workspace_id, ", (me.id,)) if scoped else ("", ())
            conn.exec_driver_sql(f"INSERT INTO events ({columns}id, created_at, intent, status, data) VALUES "
                                 f"({'?, ' * len(values)}?, '2024-01-01T00:00:00.000Z', 'repair', 'success', ?)",
                                 (*values, f"evt_{i}", data))
    engine.dispose()


@pytest.mark.parametrize("upto", ["004_drop_duplicate_id_indexes", "007_gene_pool"])
def test_an_older_schema_is_migrated_by_the_full_store_then_read_quickly(
        upto: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_prefect: None) -> None:
    ws = init_repo(tmp_path / "ws")
    _old_database(ws, upto)
    assert quick_read.open_quick(ws, load_settings(ws)) is None  # not this version's schema: never read as it is
    first = runner.invoke(app, ["history", "--workspace", str(ws), "--json"])
    assert first.exit_code == 0, first.stderr
    assert [e["id"] for e in json.loads(first.stdout)] == ["evt_2", "evt_1", "evt_0"]  # adopted, newest first
    with sqlite3.connect(ws / ".gep" / "gep.db") as conn:
        assert {n for (n,) in conn.execute("SELECT name FROM schema_migrations")} == set(MIGRATION_NAMES)
    quick, full = quick_and_full(monkeypatch, "history", "--workspace", str(ws), "--json")  # now it is current
    same(quick, full)
    assert quick.stdout == first.stdout


def test_a_newer_schema_a_moved_workspace_or_a_database_url_is_left_to_the_full_store(tmp_path: Path) -> None:
    ws = init_repo(tmp_path / "ws")
    with Store.for_workspace(ws) as store:
        store.add_event(EvolutionEvent(id="evt_here", outcome=Outcome(status="success")))
    assert quick_read.open_quick(ws, load_settings(ws)) is not None
    assert quick_read.open_quick(ws, Settings(database_url=default_url(ws))) is None  # a URL: even to this very file
    db = ws / ".gep" / "gep.db"
    with sqlite3.connect(db) as conn:  # a newer gep's migration
        conn.execute("INSERT INTO schema_migrations (name, applied_at) VALUES ('999_future', 'x')")
    assert quick_read.open_quick(ws, load_settings(ws)) is None
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM schema_migrations WHERE name = '999_future'")
    moved = ws.rename(tmp_path / "moved")  # registered under its old path: the full store records the move
    assert quick_read.open_quick(moved, load_settings(moved)) is None
    with open_store(moved) as store:
        assert [e.id for e in store.list_events()] == ["evt_here"]
    assert quick_read.open_quick(moved, load_settings(moved)) is not None
    if os.geteuid() != 0:  # root may write any file
        (moved / ".gep" / "gep.db").chmod(0o444)  # the full store refuses a file it cannot write: so does this
        assert quick_read.open_quick(moved, load_settings(moved)) is None


def test_a_read_that_fails_is_answered_by_the_full_store(populated: tuple[Path, str]) -> None:
    ws, _ = populated
    settings = load_settings(ws)
    quick = quick_read.open_quick(ws.resolve(), settings)
    assert quick is not None
    with quick, Store.for_workspace(ws, settings) as full:
        quick.conn.close()  # every quick read now fails (sqlite3.ProgrammingError)
        assert quick.list_lessons() == full.list_lessons() and quick.list_events() == full.list_events()
        assert quick._full is not None


def test_the_quick_path_reads_without_writing(populated: tuple[Path, str]) -> None:
    ws, _ = populated
    quick = quick_read.open_quick(ws.resolve(), load_settings(ws))
    assert quick is not None
    with quick, pytest.raises(sqlite3.OperationalError, match="readonly"):
        quick.conn.execute("DELETE FROM events")


# ------------------------------------------------------------------ gep feedback EVENT helpful (a write)


def _copy(src: Path, dst: Path) -> None:
    """The database as it is (sqlite3's backup: consistent with its write-ahead log)."""
    with closing(sqlite3.connect(src)) as a, closing(sqlite3.connect(dst)) as b:
        a.backup(b)


def _rows(db: Path) -> dict[str, list[str]]:
    """Every row of every table (sqlite_sequence included: the next seq), in a comparable form."""
    with closing(sqlite3.connect(db)) as conn:
        tables = [t for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {t: sorted(repr(r) for r in conn.execute(f"SELECT * FROM {t}")) for t in tables}


def test_a_feedback_write_adds_the_rows_the_full_store_adds(
        populated: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws, event_id = populated
    db, before = ws / ".gep" / "gep.db", tmp_path / "before.db"
    monkeypatch.setenv("USER", "ana")
    monkeypatch.setattr("gep.core.models.utc_now", lambda: datetime(2031, 5, 6, 7, 8, 9, 123456, tzinfo=UTC))
    _copy(db, before)
    results: list[tuple[Result, dict[str, list[str]]]] = []
    args = ["feedback", event_id, "helpful", "--note", "fixed the weekly report", "--workspace", str(ws)]
    for quick in (True, False):
        _copy(before, db)
        with monkeypatch.context() as m:
            if quick:
                m.setattr(quick_read.QuickStore, "full", lambda self: pytest.fail("the quick writer fell back"))
            else:
                m.setattr("gep.store.quick_write.open_writer", lambda *_: None)
            done = runner.invoke(app, args)
            again = runner.invoke(app, args)  # the same signal (same id): nothing more is written
        assert done.exit_code == 0 and again.exit_code == 0, (done.stderr, again.stderr)
        results.append((done, _rows(db)))
    _copy(before, db)  # the module's workspace as the other tests know it
    (quick_done, quick_rows), (full_done, full_rows) = results
    assert quick_done.stdout == full_done.stdout and quick_done.stdout.startswith(f"recorded helpful on {event_id}")
    assert quick_rows == full_rows
    new = {t: len(quick_rows[t]) - len(_rows(before)[t]) for t in quick_rows}
    assert {t: n for t, n in new.items() if n} == {"feedback": 1, "lessons": 1}


def test_the_quick_writer_refuses_a_lesson_id_stored_or_deleted_as_the_store_does(
        populated: tuple[Path, str]) -> None:
    ws, _ = populated
    settings = load_settings(ws)
    writer = open_writer(ws.resolve(), settings)
    assert writer is not None
    with writer, Store.for_workspace(ws, settings) as full:
        lesson = full.list_lessons()[0]
        with pytest.raises(LessonError, match="exists"):
            writer.append_lesson(lesson)
        full.delete_lesson(lesson.id, who="ana", why="wrong", at=utc_now())
        with pytest.raises(LessonError, match="exists"):
            writer.append_lesson(lesson)
        assert lesson.id not in {x.id for x in full.list_lessons()}
        assert writer._full is not None  # the refusal is checked again by the full store (it says the same)
