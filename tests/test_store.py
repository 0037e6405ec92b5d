"""The store on real SQLite files: objects, stamping, counts, indexes, errors, two writing processes."""

from __future__ import annotations

import importlib
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import git
from sqlalchemy import text

from gep.core.errors import StoreError
from gep.core.hashing import verify_asset_id
from gep.core.models import (
    SCHEMA_VERSION,
    Capsule,
    CycleRun,
    EvolutionEvent,
    FailedCapsule,
    Gene,
    Outcome,
    PersonalityState,
    ValidationReport,
)
from gep.git import ensure_gep_dir, open_repo
from gep.store import Store

# The same checks run against PostgreSQL in tests/test_store_postgres.py.


@pytest.fixture
def store(tmp_path: Path):
    with Store.open(f"sqlite:///{tmp_path / 'gep.db'}") as s:
        yield s


def ev(i: int | str, status: str = "success", **kw: object) -> EvolutionEvent:
    return EvolutionEvent(id=f"evt_{i}", outcome=Outcome(status=status, score=0.85), signals=["log_error"],
                          genes_used=["gene_repair"], **kw)


def check_events(store: Store) -> None:
    for i in range(12):
        store.add_event(ev(i, status="failed" if i % 3 == 0 else "success"))
    assert store.count_events() == 12
    assert [e.id for e in store.recent_events(10)] == [f"evt_{i}" for i in range(2, 12)]  # oldest first
    assert [e.id for e in store.list_events(limit=3)] == ["evt_11", "evt_10", "evt_9"]  # newest first
    assert [e.id for e in store.list_events(limit=10, status="failed")] == ["evt_9", "evt_6", "evt_3", "evt_0"]
    assert store.last_event_id() == "evt_11"
    # a cycle writes its event twice (start and end): replaced in place, not duplicated
    store.add_event(ev(5, status="failed"))
    assert store.count_events() == 12
    assert store.get_event("evt_5").outcome.status == "failed"
    assert store.get_event("nope") is None
    # explicit nulls survive and the engine stamps schema_version and a correct asset_id
    e = EvolutionEvent(id="evt_null", parent=None, meta={"note": "lone \ud800 and 😀", "n": 1.5})
    store.add_event(e)
    stored = store.stored_json("events", "evt_null")
    assert stored["parent"] is None and stored["type"] == "EvolutionEvent"
    assert stored["schema_version"] == SCHEMA_VERSION and verify_asset_id(stored)
    assert e.asset_id == stored["asset_id"]
    back = store.get_event("evt_null")
    assert back.meta.model_dump() == {"note": "lone \ud800 and 😀", "n": 1.5} and back.asset_id == e.asset_id
    assert "mutation_id" not in stored  # never set: left out, as the reference leaves out undefined
    # bulk insert skips known ids and keeps the count right
    assert store.add_events([ev(100), ev(101), ev(5), ev(101)]) == 2
    assert store.count_events() == 15
    assert store.last_event_id() == "evt_101"


def check_genes_capsules(store: Store) -> None:
    gene = Gene(id="gene_b", signals_match=["error"], strategy=["fix it"], validation=["python -m pytest -q"])
    store.upsert_gene(gene)
    store.upsert_gene(Gene(id="gene_a", category="optimize"))
    assert [g.id for g in store.list_genes()] == ["gene_a", "gene_b"]
    assert verify_asset_id(store.stored_json("genes", "gene_b"))
    gene.strategy.append("and test it")
    store.upsert_gene(gene)  # a changed gene gets a fresh asset_id
    assert store.get_gene("gene_b").strategy == ["fix it", "and test it"]
    assert verify_asset_id(store.stored_json("genes", "gene_b"))
    assert store.get_gene("missing") is None

    for i in range(3):
        store.upsert_capsule(Capsule(id=f"cap_{i}", gene="gene_b", trigger=["log_error"], summary=f"s{i}"))
    store.upsert_capsule(Capsule(id="cap_1", gene="gene_b", summary="updated", success_streak=2))
    assert [c.id for c in store.list_capsules()] == ["cap_0", "cap_1", "cap_2"]
    assert [c.id for c in store.list_capsules(limit=2)] == ["cap_1", "cap_2"]
    assert store.get_capsule("cap_1").success_streak == 2
    store.add_failed_capsule(FailedCapsule(id="failed_1", gene="gene_b", diff_snapshot="+x", failure_reason="r"))
    assert [f.failure_reason for f in store.list_failed_capsules()] == ["r"]

    vr = ValidationReport(id="vr_1", gene_id="gene_b", commands=["python -m pytest -q"], overall_ok=False)
    store.add_validation_report(vr)
    assert store.get_validation_report("vr_1").overall_ok is False
    assert [r.id for r in store.list_validation_reports()] == ["vr_1"]


def check_runs_state(store: Store) -> None:
    store.save_run(CycleRun(event_id="evt_1", workspace="/w", head_sha="abc"))
    store.save_run(CycleRun(event_id="evt_2", workspace="/w", head_sha="abc", status="awaiting_changes"))
    store.save_run(CycleRun(event_id="evt_3", workspace="/w", head_sha="abc"))
    store.close_run("evt_3")
    store.close_run("unknown")  # nothing to close: no error
    assert sorted(r.event_id for r in store.open_runs()) == ["evt_1", "evt_2"]
    assert store.get_run("evt_3").status == "closed"
    assert store.get_state("personality", PersonalityState) is None
    store.set_state("personality", PersonalityState(rigor=0.9))
    store.set_state("personality", PersonalityState(rigor=0.8))
    assert store.get_state("personality", PersonalityState).rigor == 0.8


def test_events(store: Store) -> None:
    check_events(store)


def test_genes_capsules_reports(store: Store) -> None:
    check_genes_capsules(store)


def test_runs_and_state(store: Store) -> None:
    check_runs_state(store)


def test_data_survives_reopening(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'gep.db'}"
    with Store.open(url) as s:
        s.add_event(ev(1))
        s.upsert_gene(Gene(id="g"))
    with Store.open(url) as s:
        assert s.count_events() == 1 and s.get_event("evt_1") and s.get_gene("g")


def test_for_workspace_uses_dot_gep_or_the_configured_url(tmp_path: Path) -> None:
    from gep.core.config import Settings

    with Store.for_workspace(tmp_path) as s:
        s.add_event(ev(1))
    assert (tmp_path / ".gep" / "gep.db").is_file()
    other = tmp_path / "elsewhere.db"
    with Store.for_workspace(tmp_path, Settings(database_url=f"sqlite:///{other}")) as s:
        assert s.count_events() == 0
    assert other.is_file()


# A cycle's reads use the workspace's indexes: tests/test_store_fleet.py.


# ------------------------------------------------------------------ errors: one line, no password


def test_corrupt_database_file_is_one_line_store_error(tmp_path: Path) -> None:
    db = tmp_path / "gep.db"
    db.write_bytes(b"this is not a sqlite database, just some text " * 100)
    with pytest.raises(StoreError) as err:
        Store.open(f"sqlite:///{db}")
    msg = str(err.value)
    assert "\n" not in msg and str(db) in msg and "not a database" in msg
    assert db.read_bytes().startswith(b"this is not a sqlite")  # untouched


def test_bad_urls_are_one_line_store_errors(tmp_path: Path) -> None:
    for url in ("not a url", "nosuchdb://x/y", "postgresql+nodriver://u:pw@localhost/db"):
        with pytest.raises(StoreError) as err:
            Store.open(url)
        assert "\n" not in str(err.value)
        assert "pw@" not in str(err.value)


def test_password_never_appears_in_connection_errors() -> None:
    secret = "s3cr3t-Passw0rd"
    with pytest.raises(StoreError) as err:
        Store.open(f"postgresql+psycopg2://gep:{secret}@127.0.0.1:1/gep?connect_timeout=2")
    msg = str(err.value)
    assert secret not in msg and "\n" not in msg and "127.0.0.1" in msg


def test_unwritable_location_is_a_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StoreError) as err:
        Store.open(f"sqlite:///{blocker / 'sub' / 'gep.db'}")
    assert "\n" not in str(err.value)


def _open_refused(db: Path) -> None:
    with pytest.raises(StoreError, match="permission denied"):
        Store.open(f"sqlite:///{db}")


def _as_nobody(check: Callable[[], None]) -> int:
    """Run ``check`` in a forked child that gave up root (root reads every file, and CI runs as root); its
    exit code: 0 when it passed. Everything it needs is imported before the fork: the child cannot read
    the interpreter's own files under root's home."""
    pid = os.fork()
    if pid == 0:  # the child never returns into pytest
        code = 1
        try:
            os.setgid(65534)
            os.setuid(65534)
            check()
            code = 0
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def test_permission_denied_is_a_store_error(tmp_path: Path) -> None:
    importlib.import_module("gep.store.migrations")  # Store.open imports it first thing
    folder = Path(tempfile.mkdtemp())  # tmp_path is root's alone: another user cannot reach a file in it
    try:
        folder.chmod(0o755)
        db = folder / "gep.db"
        Store.open(f"sqlite:///{db}").close()
        db.chmod(0)
        if os.geteuid() == 0:
            assert _as_nobody(lambda: _open_refused(db)) == 0
        else:
            _open_refused(db)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_database_deleted_under_an_open_store_is_a_store_error(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'gep.db'}")
    with store.engine.begin() as conn:
        conn.execute(text("DROP TABLE events"))
    with pytest.raises(StoreError) as err:
        store.recent_events()
    assert "no such table" in str(err.value) and "\n" not in str(err.value)
    store.close()


# ------------------------------------------------------------------ .gep/ stays out of git


def test_ensure_gep_dir_excludes_it_from_git(repo: Path) -> None:
    folder = ensure_gep_dir(open_repo(repo))
    ensure_gep_dir(open_repo(repo))  # idempotent
    assert folder == repo / ".gep" and folder.is_dir()
    exclude = (repo / ".git" / "info" / "exclude").read_text()
    assert exclude.splitlines().count("/.gep/") == 1
    with Store.for_workspace(repo) as s:
        s.add_event(ev(1))
    assert git(repo, "status", "--porcelain") == ""


def test_ensure_gep_dir_appends_to_an_exclude_file_without_final_newline(repo: Path) -> None:
    exclude = repo / ".git" / "info" / "exclude"
    exclude.write_text("*.tmp")
    ensure_gep_dir(open_repo(repo))
    assert exclude.read_text() == "*.tmp\n/.gep/\n"


# Many processes writing at once (SQLite and PostgreSQL): tests/test_store_concurrency.py.
