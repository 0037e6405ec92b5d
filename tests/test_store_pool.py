"""The store's gene-pool and behaviour tables (migrations 007, 008): retired genes and the distillation log
per workspace, behavioural signals per workspace and idempotent, all moving with `gep store copy`."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from conftest import init_repo
from store_backends import BACKENDS, backend_url
from test_store_fleet import ws_store

from gep.core.config import Settings
from gep.genes.distiller import DistillRun
from gep.genes.eligibility import restore_gene, retire_gene
from gep.signals.behavior import StoredSignal
from gep.store import Store
from gep.store.copy import copy_workspace_store

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with backend_url(request.param, tmp_path) as u:
        yield u


def signal(i: int, kind: str = "correction", at: datetime = NOW) -> StoredSignal:
    return StoredSignal(ts=(at + timedelta(minutes=i)).strftime("%Y-%m-%dT%H:%M:%SZ"), type=kind,
                        summary=f"User said the agent misunderstood ({i})", intensity=3, source="claude_code",
                        key=f"k{i}")


def test_retired_genes_belong_to_one_workspace_and_keep_their_history(url: str, tmp_path: Path) -> None:
    with ws_store(tmp_path, "a", url) as a, ws_store(tmp_path, "b", url) as b:
        retire_gene(a, "gene_x", reason="too slow  here", now=NOW, known_ids={"gene_x"})
        assert a.get_gene_status("gene_x").retired and a.get_gene_status("gene_x").reason == "too slow here"
        assert b.get_gene_status("gene_x") is None and b.list_gene_statuses() == []
        restore_gene(a, "gene_x", now=NOW + timedelta(hours=1))
        [status] = a.list_gene_statuses()
        assert not status.retired and [h.action for h in status.history] == ["retire", "restore"]


def test_the_distillation_log_counts_attempts_not_skips(url: str, tmp_path: Path) -> None:
    with ws_store(tmp_path, "a", url) as a, ws_store(tmp_path, "b", url) as b:
        assert a.last_distill_attempt() is None and a.list_distill_runs(5) == []
        a.add_distill_run(DistillRun(at=NOW, status="rejected", reasons=["near-duplicate"], data_hash="h1"))
        a.add_distill_run(DistillRun(at=NOW + timedelta(hours=1), status="skipped", reasons=["interval"]))
        last = a.last_distill_attempt()
        assert last is not None and last.status == "rejected" and last.data_hash == "h1"
        assert [r.status for r in a.list_distill_runs(5)] == ["rejected", "skipped"]
        assert [r.status for r in a.list_distill_runs(1)] == ["skipped"]
        assert b.last_distill_attempt() is None  # another workspace distils on its own schedule


def test_behaviour_signals_are_added_once_and_listed_by_time_and_type(url: str, tmp_path: Path) -> None:
    with ws_store(tmp_path, "a", url) as a, ws_store(tmp_path, "b", url) as b:
        sigs = [signal(i) for i in range(3)] + [signal(9, "approval")]
        assert a.add_behavior_signals(sigs) == 4
        assert a.add_behavior_signals(sigs[1:]) == 0  # read again by the next cycle: nothing new
        assert [s.key for s in a.list_behavior_signals()] == ["k0", "k1", "k2", "k9"]
        assert [s.key for s in a.list_behavior_signals(since=NOW + timedelta(minutes=2))] == ["k2", "k9"]
        assert [s.type for s in a.list_behavior_signals(type_="approval")] == ["approval"]
        assert b.list_behavior_signals() == []


def test_store_copy_moves_the_new_tables_too(tmp_path: Path) -> None:
    ws = init_repo(tmp_path / "ws")
    with Store.for_workspace(ws) as local:
        retire_gene(local, "gene_x", reason="never works here", now=NOW, known_ids={"gene_x"})
        local.add_distill_run(DistillRun(at=NOW, status="kept", gene_id="gene_distilled_retry-fetch"))
        local.add_behavior_signals([signal(1), signal(2)])
    target = f"sqlite:///{tmp_path / 'shared.db'}"
    report = copy_workspace_store(ws, target)
    assert {k: report.kinds[k].copied for k in ("gene_status", "distill_runs", "behavior_signals")} == \
        {"gene_status": 1, "distill_runs": 1, "behavior_signals": 2}
    with Store.for_workspace(ws, Settings(database_url=target)) as shared:
        assert shared.get_gene_status("gene_x").retired
        assert shared.last_distill_attempt().gene_id == "gene_distilled_retry-fetch"
        assert len(shared.list_behavior_signals()) == 2
    assert all(k.copied == 0 for k in copy_workspace_store(ws, target).kinds.values())
