"""Pruning: old events go, their lessons stay as summaries, and selection does not change."""

from __future__ import annotations

import random
import subprocess
import sys
from collections.abc import Iterator, Sequence
from datetime import timedelta
from pathlib import Path

import pytest
from conftest import ROOT, init_repo
from sqlmodel import Session
from store_backends import BACKENDS, backend_url
from test_memory_graph import same_advice
from typer.testing import CliRunner, Result

import gep.store.prune as prune_module
from gep.cli.root import app
from gep.core.config import Settings
from gep.core.models import (
    BlastRadius,
    Capsule,
    CycleRun,
    EvolutionEvent,
    FailedCapsule,
    Gene,
    Outcome,
    ValidationReport,
    iso,
    utc_now,
)
from gep.cycle.outcomes import TERMINAL
from gep.genes.selector import NOT_A_CYCLE, select_gene_and_capsule
from gep.learning.memory_graph import MEMORY_FOLD, memory_advice
from gep.store import PRUNE_HOOKS, Store, after_cycle
from gep.store.graph_history import FOLD_KEEP

SITUATIONS = [["log_error", "errsig:TypeError: x is undefined"], ["perf_bottleneck"],
              ["log_error", "recurring_error"], ["capability_gap", "user_feature_request:export"]]
GENES = [Gene(id="gene_repair", signals_match=["log_error", "errsig"]),
         Gene(id="gene_perf", signals_match=["perf_bottleneck", "log_error"]),
         Gene(id="gene_innovate", signals_match=["capability_gap", "user_feature_request", "log_error"])]


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with backend_url(request.param, tmp_path) as u:
        yield u


def workspace(tmp_path: Path, name: str, url: str) -> Store:
    path = tmp_path / name
    path.mkdir(exist_ok=True)
    return Store.for_workspace(path, Settings(database_url=url))


END = utc_now() - timedelta(hours=1)


def simulate(store: Store, n: int, seed: int, days: float = 100.0) -> None:
    """n cycles over ``days`` up to an hour before the tests started, as the engine records them: events
    (some reusing a capsule), capsules of successes, failed capsules of failures, validation reports, runs."""
    rng = random.Random(seed)
    start = END - timedelta(days=days)
    events: list[EvolutionEvent] = []
    capsules: list[str] = []
    for i in range(n):
        at = iso(start + timedelta(days=days * i / n))
        sit, gene = rng.choice(SITUATIONS), rng.choice(GENES).id
        status = rng.choices(["success", "failed", "empty", "skipped"], [5, 3, 1, 1])[0]
        ev = EvolutionEvent(id=f"evt_{i:05d}", signals=sit, genes_used=[gene],
                            outcome=Outcome(status="success" if status == "empty" else status),
                            blast_radius=BlastRadius(files=1, lines=4) if status == "success" else BlastRadius(),
                            meta={"at": at, "empty_cycle": status == "empty"})
        if status == "success":
            reuse = capsules and rng.random() < 0.3
            ev.capsule_id = rng.choice(capsules) if reuse else f"cap_{i:05d}"
            if not reuse:
                store.upsert_capsule(Capsule(id=ev.capsule_id, gene=gene, trigger=sit, summary=str(i)))
                capsules.append(ev.capsule_id)
        elif status == "failed":
            store.add_failed_capsule(FailedCapsule(id=f"fail_{i:05d}", gene=gene, trigger=sit, created_at=at))
        if i % 6 == 0:
            ev.validation_report_id = f"vr_{i:05d}"
            store.add_validation_report(ValidationReport(id=ev.validation_report_id, commands=["pytest"],
                                                         overall_ok=True))
        if i % 5 == 0:
            store.save_run(CycleRun(event_id=ev.id, workspace="w", head_sha="a", status="closed"))
        events.append(ev)
    store.add_events(events)


def selection(store: Store, signals: Sequence[str], seed: int) -> tuple[object, ...]:
    """What a cycle would select from this store (its loop rules read the newest events whole)."""
    recent = [e for e in store.recent_events(C_WINDOW) if e.outcome.status in TERMINAL]
    sel = select_gene_and_capsule(genes=GENES, capsules=store.list_capsules(),
                                  failed_capsules=store.list_failed_capsules(), signals=signals,
                                  recent_events=recent, settings=Settings(), rng=random.Random(seed), now=utc_now())
    return (sel.gene.id if sel.gene else None, sel.capsule.id if sel.capsule else None,
            sorted((b.gene_id, b.source, b.cycles_left) for b in sel.decision.bans_applied))


C_WINDOW = FOLD_KEEP


# end to end (`make test`, not the quick loop): 1,600 cycles recorded through the real store, pruned, then the
# memory graph's advice and the selector's picks compared: the store, pruning, learning and selection together,
# 5.1 s of CPU (the quick loop's largest test; docs/performance.md)
@pytest.mark.e2e
def test_a_pruned_store_selects_as_the_whole_history_does(url: str, tmp_path: Path) -> None:
    n = 800
    with workspace(tmp_path, "whole", url) as whole, workspace(tmp_path, "pruned", url) as pruned:
        simulate(whole, n, seed=3)
        simulate(pruned, n, seed=3)
        report = pruned.prune(fold=MEMORY_FOLD, keep_events=550)
        assert report.folded == n - FOLD_KEEP and report.events == n - 550 and report.kept_events == 550
        assert report.capsules > 0 and report.validation_reports > 0 and report.runs > 0
        assert pruned.count_events() == whole.count_events() == n  # cycle numbers go on
        history = pruned.memory_history(MEMORY_FOLD)
        assert len(history.events) == FOLD_KEEP
        everything = whole.list_events(limit=10 * n)[::-1]  # the unpruned store, read whole
        now = utc_now()
        for signals in [*SITUATIONS, ["perf_bottleneck", "recurring_error"]]:
            # the folded outcomes start each family's record from their summaries' window; behind FOLD_KEEP newer
            # events they weigh FAMILY_DISCOUNT ** (the family's newer outcomes): next to nothing
            same_advice(memory_advice(events=everything, signals=signals, genes=GENES, now=now),
                        memory_advice(events=history.events, summaries=history.summaries, signals=signals,
                                      genes=GENES, now=now), tol=1e-3)
            for seed in range(2):
                assert selection(whole, signals, seed) == selection(pruned, signals, seed)
        # what kept events refer to is still there
        for ev in pruned.list_events(limit=n):
            assert ev.capsule_id is None or pruned.get_capsule(ev.capsule_id) is not None
            assert ev.validation_report_id is None or pruned.get_validation_report(ev.validation_report_id)


def test_prune_by_age_keeps_young_events_and_the_newest_window(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'gep.db'}"
    with workspace(tmp_path, "ws", url) as store:
        simulate(store, 800, seed=1, days=80)  # one event every 2.4 hours
        report = store.prune(fold=MEMORY_FOLD, keep_days=60, now=END)  # 600 events are younger
        kept = store.list_events(limit=1000)
        assert report.events == 200 and len(kept) == report.kept_events == 600
        assert min(e.meta.at for e in kept) >= iso(END - timedelta(days=60))
        report = store.prune(fold=MEMORY_FOLD, keep_days=10, now=END)  # 100 events are younger: the newest window stays
        assert report.events == 100 and report.kept_events == FOLD_KEEP


def test_unfinished_cycles_and_the_newest_events_are_never_folded_or_deleted(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'gep.db'}"
    with workspace(tmp_path, "ws", url) as store:
        store.add_events(EvolutionEvent(id=f"evt_{i:04d}", genes_used=["g"], outcome=Outcome(status="failed"))
                         for i in range(1200))
        store.save_run(CycleRun(event_id="evt_0300", workspace="w", head_sha="a", status="awaiting_changes"))
        report = store.prune(fold=MEMORY_FOLD, keep_events=0)
        assert report.folded == 300 and report.events == 300  # up to the open run, not past it
        assert store.get_event("evt_0300") is not None and store.get_event("evt_0299") is None
        store.close_run("evt_0300")
        report = store.prune(fold=MEMORY_FOLD, keep_events=0)
        assert report.kept_events == FOLD_KEEP and store.get_event("evt_0699") is None
        history = store.memory_history(MEMORY_FOLD)
        assert sum(s.total for s in history.summaries) == 700 and len(history.events) == FOLD_KEEP


def test_failed_capsules_outside_the_ban_window_go_except_the_newest_listed(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'gep.db'}"
    now = utc_now()
    with workspace(tmp_path, "ws", url) as store:
        for i in range(260):  # oldest first, one a day; the first 10 undated
            store.add_failed_capsule(FailedCapsule(id=f"fail_{i:03d}", gene="g", trigger=["log_error"],
                                                   created_at=iso(now - timedelta(days=300 - i)) if i >= 10 else None))
        store.add_events(EvolutionEvent(id=f"evt_{i}", genes_used=["g"], outcome=Outcome(status="failed"),
                                        meta={"at": iso(now - timedelta(hours=30 - i))}) for i in range(30))
        listed_before = [f.id for f in store.list_failed_capsules()]
        report = store.prune(fold=MEMORY_FOLD, keep_events=FOLD_KEEP)
        left = [f.id for f in store.list_failed_capsules(limit=1000)]
        # the window starts 20 hours ago: every dated capsule before the newest 200 is out of it
        assert report.failed_capsules == 50
        assert left == [f"fail_{i:03d}" for i in range(10)] + listed_before
        assert store.prune(fold=MEMORY_FOLD, keep_events=FOLD_KEEP, ban_cycles=0).failed_capsules == 0  # no window: all count


class _KeepEvenHook:
    def __init__(self) -> None:
        self.pruned_ids: list[str] = []

    def keep(self, s: Session, workspace_id: str, event_ids: Sequence[str]) -> set[str]:
        return {e for e in event_ids if int(e.rsplit("_", 1)[1]) % 2 == 0}

    def pruned(self, s: Session, workspace_id: str, event_ids: Sequence[str]) -> None:
        self.pruned_ids.extend(event_ids)


def test_hooks_keep_the_events_they_refer_to(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hook = _KeepEvenHook()
    monkeypatch.setattr(prune_module, "PRUNE_HOOKS", [hook])
    assert all(callable(getattr(h, "keep", None)) for h in PRUNE_HOOKS)  # the registry tables append to
    with workspace(tmp_path, "ws", f"sqlite:///{tmp_path / 'gep.db'}") as store:
        store.add_events(EvolutionEvent(id=f"evt_{i}", genes_used=["g"], outcome=Outcome(status="success"))
                         for i in range(700))
        report = store.prune(fold=MEMORY_FOLD, keep_events=0)
        assert report.events == 100 and sorted(hook.pruned_ids) == sorted(f"evt_{i}" for i in range(1, 200, 2))
        assert store.get_event("evt_0") is not None and store.get_event("evt_1") is None
        assert sum(s.total for s in store.memory_history(MEMORY_FOLD).summaries) == 200  # kept or not: folded once


def test_after_cycle_prunes_as_the_settings_say(tmp_path: Path) -> None:
    with workspace(tmp_path, "ws", f"sqlite:///{tmp_path / 'gep.db'}") as store:
        store.add_events(EvolutionEvent(id=f"evt_{i}", genes_used=["g"], outcome=Outcome(status="success"))
                         for i in range(800))
        assert after_cycle(store, Settings(), MEMORY_FOLD) is None  # no limits set: only folds
        assert len(store.list_events(limit=1000)) == 800 and store.memory_history(MEMORY_FOLD).summaries
        report = after_cycle(store, Settings(prune_keep_events=650), MEMORY_FOLD)
        assert report is not None and report.kept_events == 650


def test_ban_window_statuses_are_what_the_cycle_gives_the_selector() -> None:
    assert set(prune_module.BAN_WINDOW_STATUSES) == TERMINAL - NOT_A_CYCLE


def test_bad_limits_are_refused(tmp_path: Path) -> None:
    with workspace(tmp_path, "ws", f"sqlite:///{tmp_path / 'gep.db'}") as store:
        for kwargs in ({}, {"keep_events": -1}, {"keep_days": -0.5}):
            with pytest.raises(ValueError):
                store.prune(fold=MEMORY_FOLD, **kwargs)  # type: ignore[arg-type]


# ------------------------------------------------------------------ the command


def gep(*args: str) -> subprocess.CompletedProcess[str]:
    """The console script in its own process, which must not import Prefect for a store command."""
    code = ("import sys, runpy; sys.argv = ['gep', *sys.argv[1:]]\n"
            "try:\n    runpy.run_module('gep.cli.root', run_name='__main__')\n"
            "finally:\n    assert 'prefect' not in sys.modules, 'the store commands imported prefect'")
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": "/nonexistent"})


def cli(*args: str) -> Result:
    """The command line in this process (quicker, for what the command itself answers)."""
    return CliRunner().invoke(app, list(args))


def one_line_exit_2(result: Result, says: str) -> None:
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert says in result.stderr and "Traceback" not in result.output, result.stderr
    assert len(lines) == 1 or "Usage:" in result.stderr, result.stderr  # usage errors: gep.cli.root.main's one line


def test_gep_store_prune(tmp_path: Path) -> None:
    ws = init_repo(tmp_path / "ws", {"gep.toml": "[gep]\nprune_keep_events = 550\n"})
    with Store.for_workspace(ws) as store:
        store.add_events(EvolutionEvent(id=f"evt_{i}", genes_used=["g"], outcome=Outcome(status="success"))
                         for i in range(700))
    done = gep("store", "prune", "--workspace", str(ws))  # the setting applies
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("pruned 150 events (550 kept")
    done = gep("store", "prune", "--workspace", str(ws), "--keep-events", "-3")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    result = cli("store", "prune", "--workspace", str(ws), "--keep-events", "500", "--keep-days", "3")
    assert result.exit_code == 0 and result.stdout.startswith("pruned 0 events (550 kept"), result.output
    one_line_exit_2(cli("store", "prune", "--workspace", str(ws), "--keep-days", "soon"), "--keep-days")
    one_line_exit_2(cli("store", "prune", "--workspace", str(tmp_path / "nope")), "not a directory")
