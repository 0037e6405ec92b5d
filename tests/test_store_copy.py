"""`gep store copy`: a workspace's SQLite store into a shared database, whole, idempotent, verified."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import init_repo
from sqlmodel import delete
from store_backends import BACKENDS, backend_url
from test_store_prune import GENES, cli, gep, one_line_exit_2, simulate

from gep.assets.gene_files import export_assets
from gep.core.config import Settings
from gep.core.models import Gene, PersonalityState
from gep.learning.memory_graph import MEMORY_FOLD
from gep.store import Store
from gep.store.copy import CopyVerificationError, _verify, copy_workspace_store
from gep.store.tables import CapsuleRow


@pytest.fixture(params=BACKENDS)
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with backend_url(request.param, tmp_path, "shared") as u:
        yield u


def test_copy_moves_a_workspace_whole_and_twice_changes_nothing(target: str, tmp_path: Path) -> None:
    ws = init_repo(tmp_path / "ws")
    with Store.for_workspace(ws) as local:
        simulate(local, 700, seed=5)
        local.prune(fold=MEMORY_FOLD, keep_events=550)  # summaries and a watermark to move too
        local.set_state("personality.current", PersonalityState(rigor=0.33))
        for g in GENES:
            local.upsert_gene(g)
        local.upsert_gene(Gene(id="gene_local_only", strategy=["mine"]))
        expected_history = local.memory_history(MEMORY_FOLD)
        count = local.count_events()
    other = init_repo(tmp_path / "other")
    with Store.for_workspace(other, Settings(database_url=target)) as shared:  # a fleet already there
        simulate(shared, 30, seed=9)
        shared.upsert_gene(Gene(id="gene_repair", strategy=["the fleet's version"]))

    report = copy_workspace_store(ws, target)
    assert report.kinds["events"].copied == report.kinds["events"].source == 550
    assert report.kinds["capsules"].copied > 0 and report.kinds["runs"].copied > 0
    assert report.genes_differing == ["gene_repair"] and report.genes_copied == 3
    assert report.summaries.startswith("copied")
    again = copy_workspace_store(ws, target)
    assert all(k.copied == 0 for k in again.kinds.values()) and again.genes_copied == 0
    assert again.summaries == "already there"

    with Store.for_workspace(ws) as local, Store.for_workspace(ws, Settings(database_url=target)) as shared:
        assert shared.count_events() == count
        assert [e.id for e in shared.recent_events(600)] == [e.id for e in local.recent_events(600)]
        assert shared.get_state("personality.current", PersonalityState).rigor == 0.33
        history = shared.memory_history(MEMORY_FOLD)
        assert history.summaries == expected_history.summaries
        assert [e.id for e in history.events] == [e.id for e in expected_history.events]
        export_assets(local, tmp_path / "from_local")
        export_assets(shared, tmp_path / "from_shared")
        for name in ("capsules.json", "failed_capsules.json", "events.jsonl"):
            assert (tmp_path / "from_local" / name).read_bytes() == (tmp_path / "from_shared" / name).read_bytes()
        assert shared.get_gene("gene_repair").strategy == ["the fleet's version"]  # kept, and listed
    with Store.for_workspace(other, Settings(database_url=target)) as shared:
        assert shared.count_events() == 30  # the other workspace is untouched


def test_a_copy_that_does_not_match_is_reported(tmp_path: Path) -> None:
    ws = init_repo(tmp_path / "ws")
    with Store.for_workspace(ws) as local:
        simulate(local, 40, seed=2)
    target = f"sqlite:///{tmp_path / 'shared.db'}"
    report = copy_workspace_store(ws, target)
    with Store.for_workspace(ws) as src, Store.for_workspace(ws, Settings(database_url=target)) as dst:
        with dst.writing() as s:
            s.exec(delete(CapsuleRow).where(CapsuleRow.workspace_id == dst.workspace_id))  # type: ignore[call-overload]
        with pytest.raises(CopyVerificationError, match="capsules missing"):
            _verify(src, dst, report)


def test_gep_store_copy(tmp_path: Path) -> None:
    ws = init_repo(tmp_path / "ws")
    with Store.for_workspace(ws) as local:
        simulate(local, 20, seed=1)
    target = f"sqlite:///{tmp_path / 'shared.db'}"
    done = gep("store", "copy", "--workspace", str(ws), "--to", target)
    assert done.returncode == 0 and "20/20 events" in done.stdout and "verified" in done.stdout, done.stderr
    bare = init_repo(tmp_path / "bare")
    for args, says in ((["--workspace", str(bare), "--to", target], "no store to copy"),
                       (["--workspace", str(ws), "--to", f"sqlite:///{ws / '.gep' / 'gep.db'}"], "own store"),
                       (["--workspace", str(ws), "--to", "nosuch://x"], "bad database URL"),
                       (["--workspace", str(ws)], "--to")):
        one_line_exit_2(cli("store", "copy", *args), says)
