"""Many processes writing one store at once lose nothing, on SQLite and PostgreSQL (READ COMMITTED).

Each writer runs cycles the way the engine does: under the workspace's cycle lock (two writers share a
workspace), the cycle number is the event count + 1 and the parent is the last event; meanwhile every
writer also does unlocked work: bulk inserts and re-writes of one event id in a shared workspace, upserts
of one shared gene, and folding the memory graph of the contended workspace.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ROOT
from store_backends import BACKENDS, backend_url

from gep.core.config import Settings
from gep.learning.memory_graph import MEMORY_FOLD, MemoryHistory
from gep.store import Store

_WRITER = textwrap.dedent("""
    import fcntl, sys
    from pathlib import Path
    import gep.store.graph_history
    from gep.core.config import Settings
    from gep.learning.memory_graph import MEMORY_FOLD
    from gep.core.models import CycleRun, EvolutionEvent, Gene, Outcome, PersonalityState
    from gep.store import Store

    gep.store.graph_history.FOLD_KEEP = 5  # fold while the others write
    url, tag, home, bulk_home, n = sys.argv[1], sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4]), int(sys.argv[5])
    settings = Settings(database_url=url)
    with Store.for_workspace(home, settings) as store, Store.for_workspace(bulk_home, settings) as bulk:
        for i in range(n):
            with open(home / "cycle.lock", "w") as lock:  # the cycle lock of the workspace
                fcntl.flock(lock, fcntl.LOCK_EX)
                eid = f"{tag}_{i}"
                run = CycleRun(event_id=eid, workspace=str(home), head_sha="abc")
                store.save_run(run)
                event = EvolutionEvent(id=eid, parent=store.last_event_id(), genes_used=["gene_shared"],
                                       signals=["log_error", tag], meta={"cycle": store.count_events() + 1})
                store.add_event(event)
                event.outcome = Outcome(status="success" if i % 3 else "failed", score=0.5)
                store.add_event(event)
                store.close_run(eid)
                store.set_state("personality.current", PersonalityState(rigor=i / n))
            bulk.add_events(EvolutionEvent(id=f"{tag}_bulk_{i}_{k}") for k in range(3))
            bulk.add_event(EvolutionEvent(id="rewritten_by_all", meta={"by": tag}))
            store.upsert_gene(Gene(id="gene_shared", summary=tag))
            if i % 7 == 0:
                store.fold_memory(MEMORY_FOLD)
""")


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with backend_url(request.param, tmp_path) as u:
        yield u


def test_parallel_writers_keep_counters_cycle_numbers_and_parents_consistent(url: str, tmp_path: Path) -> None:
    n = 25
    homes = {name: tmp_path / name for name in ("shared", "solo_1", "solo_2", "bulk")}
    for home in homes.values():
        home.mkdir()
    writers = [("w0", "shared"), ("w1", "shared"), ("w2", "solo_1"), ("w3", "solo_2")]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, url, tag, str(homes[ws]), str(homes["bulk"]), str(n)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for tag, ws in writers]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    settings = Settings(database_url=url)
    for name, writers_here in (("shared", 2), ("solo_1", 1), ("solo_2", 1)):
        with Store.for_workspace(homes[name], settings) as store:
            events = store.list_events(limit=10_000)[::-1]
            assert store.count_events() == len(events) == n * writers_here
            # cycle numbers 1..N with no gap or repeat, and each event's parent is the one before it
            assert [e.meta.cycle for e in events] == list(range(1, len(events) + 1))
            assert [e.parent for e in events] == [None] + [e.id for e in events[:-1]]
            assert all(e.outcome.status in ("success", "failed") for e in events)
            assert store.open_runs() == []
            history = store.memory_history(MEMORY_FOLD)
            # folded and unfolded events together are every event, each counted once
            assert _outcomes(history) == len(events)
    # the writers' gene is theirs: the bulk workspace sees it only with share_genes (issue 45, A07)
    with Store.for_workspace(homes["bulk"], settings.model_copy(update={"share_genes": True})) as bulk:
        assert bulk.count_events() == 4 * n * 3 + 1 == len(bulk.list_events(limit=10_000))
        assert bulk.get_event("rewritten_by_all").meta.model_extra["by"] in {"w0", "w1", "w2", "w3"}
        assert bulk.get_gene("gene_shared").summary in {"w0", "w1", "w2", "w3"}
        assert len(bulk.list_genes()) == 1


def _outcomes(history: MemoryHistory) -> int:
    return sum(s.total for s in history.summaries) + sum(
        1 for e in history.events if e.outcome.status in ("success", "failed", "empty"))
