"""The store at scale: pruning keeps selection, and one workspace's reads ignore the rest of the fleet.

1. Prune: one simulated history of --events events (1,000,000) recorded by two workspaces of one database;
   one of them is pruned to --keep (10,000) events. For every situation the selector is asked about, the
   pruned store selects exactly what the unpruned one does (gene, capsule, bans), and the memory graph's
   advice from the pruned store's summaries is the advice from all the raw events of the unpruned one.
2. Fleet: one workspace's cycle reads (loop-rule reads, and the memory graph's history) timed in a database
   where it has 1 neighbour and in one where it has 999 (--workspaces), each with --per-workspace events;
   the ratio target is under 1.2.

    .venv/bin/python bench/store.py                      # SQLite in a temp dir (about 20 minutes)
    .venv/bin/python bench/store.py --events 200000 --workspaces 200 --per-workspace 300   # quicker
    .venv/bin/python bench/store.py --url postgresql+psycopg2://user@host/db   # works in fresh schemas there

Exit status 1 when a selection differs or a ratio misses its target.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import create_engine, text
from sqlmodel import col, select

from gep.core.config import Settings
from gep.core.models import (
    BlastRadius,
    Capsule,
    EvolutionEvent,
    FailedCapsule,
    Gene,
    Outcome,
    PersonalityState,
    iso,
    utc_now,
)
from gep.core.workspace_id import WorkspaceIdentity
from gep.cycle.outcomes import TERMINAL
from gep.genes.selector import select_gene_and_capsule
from gep.learning.memory_graph import (
    MEMORY_FOLD,
    MemoryAdvice,
    SituationSummary,
    memory_advice,
    merge_summaries,
    summarize,
)
from gep.store import Store
from gep.store.codec import load
from gep.store.graph_history import FOLD_KEEP
from gep.store.tables import EventRow

TARGET = 1.2
END = utc_now() - timedelta(hours=1)  # every simulated history ends here
SITUATIONS = [["log_error", "errsig:TypeError: Cannot read properties of undefined", "recurring_error"],
              ["perf_bottleneck", "log_error"], ["capability_gap", "user_feature_request:export as csv"],
              ["log_error", "errsig:ENOENT: no such file /srv/app/config.json"], ["protocol_drift"], []]
GENES = [Gene(id="gene_repair_from_errors", signals_match=["log_error", "errsig", "recurring_error"]),
         Gene(id="gene_perf_bottleneck", signals_match=["perf_bottleneck", "log_error"]),
         Gene(id="gene_capability_gap", signals_match=["capability_gap", "user_feature_request"]),
         Gene(id="gene_optimize_code_quality", signals_match=["protocol_drift", "log_error"])]
# how well each gene does in each situation (the hidden world)
SKILL = {(s, g.id): random.Random(f"{s}:{g.id}").uniform(0.1, 0.9) for s in range(len(SITUATIONS)) for g in GENES}


def history(n: int, end: datetime, seed: int = 7) -> Iterator[tuple[EvolutionEvent, Capsule | FailedCapsule | None]]:
    """n cycles over two years up to ``end``; every 100th success leaves a capsule, failure a failed capsule."""
    rng = random.Random(seed)
    start = end - timedelta(days=730)
    for i in range(n):
        s = rng.randrange(len(SITUATIONS))
        gene = rng.choice(GENES).id
        at = iso(start + timedelta(days=730 * i / n))
        status = "success" if rng.random() < SKILL[(s, gene)] else rng.choice(["failed", "failed", "empty"])
        ev = EvolutionEvent(id=f"evt_{i:09d}", signals=SITUATIONS[s], genes_used=[gene],
                            outcome=Outcome(status="success" if status == "empty" else status, score=0.85),
                            blast_radius=BlastRadius(files=2, lines=17) if status == "success" else BlastRadius(),
                            meta={"at": at, "empty_cycle": status == "empty"})
        extra: Capsule | FailedCapsule | None = None
        if i % 100 == 0 and status == "success":
            extra = Capsule(id=f"capsule_{i:09d}", gene=gene, trigger=SITUATIONS[s], summary="fix")
            ev.capsule_id = extra.id
        elif i % 100 == 0 and status == "failed":
            extra = FailedCapsule(id=f"failed_{i:09d}", gene=gene, trigger=SITUATIONS[s], created_at=at)
        yield ev, extra


def record(store: Store, n: int, end: datetime, label: str) -> None:
    t0, batch = time.perf_counter(), []
    for ev, extra in history(n, end):
        batch.append(ev)
        if isinstance(extra, Capsule):
            store.upsert_capsule(extra)
        elif isinstance(extra, FailedCapsule):
            store.add_failed_capsule(extra)
        if len(batch) >= 50_000:
            store.add_events(batch)
            batch = []
            print(f"  {label}: {store.count_events():,} events ({time.perf_counter() - t0:.0f}s)", flush=True)
    store.add_events(batch)


@contextmanager
def database(url: str | None, tmp: Path, name: str) -> Iterator[str]:
    """A SQLite file in ``tmp``, or a fresh schema of the PostgreSQL database at ``url`` (dropped after)."""
    if url is None:
        yield f"sqlite:///{tmp / name}.db"
        return
    schema = f"gep_bench_{name}_{uuid.uuid4().hex[:6]}"
    admin = create_engine(url)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield f"{url}{'&' if '?' in url else '?'}options={quote(f'-csearch_path={schema}')}"
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def workspace(store: Store, name: str) -> Store:
    view = store.scoped("")
    view.enter(WorkspaceIdentity(id=str(uuid.uuid4()), path=f"/fleet/{name}", name=name))
    return view


# ------------------------------------------------------------------ 1. prune keeps selection


def raw_summaries(store: Store, now: datetime) -> list[SituationSummary]:
    """What the memory graph learns from every raw event of ``store`` (read in pages, summarised as of now)."""
    folded: dict[tuple[str, str], SituationSummary] = {}
    last = 0
    while True:
        with store.session() as s:
            rows = s.exec(select(EventRow.seq, EventRow.data)
                          .where(EventRow.workspace_id == store.workspace_id, col(EventRow.seq) > last)
                          .order_by(col(EventRow.seq)).limit(20_000)).all()
        if not rows:
            return list(folded.values())
        last = rows[-1][0] or 0
        for x in summarize((load(EvolutionEvent, d) for _, d in rows), ref=now):
            key = (x.key, x.gene_id)
            folded[key] = merge_summaries(folded[key], x) if key in folded else x


def selection(store: Store, signals: list[str], now: datetime, seed: int) -> tuple[object, ...]:
    recent = [e for e in store.recent_events(FOLD_KEEP) if e.outcome.status in TERMINAL]
    sel = select_gene_and_capsule(genes=GENES, capsules=store.list_capsules(),
                                  failed_capsules=store.list_failed_capsules(), signals=signals,
                                  recent_events=recent, settings=Settings(), rng=random.Random(seed), now=now)
    return (sel.gene.id if sel.gene else None, sel.capsule.id if sel.capsule else None,
            sorted((b.gene_id, b.source, b.cycles_left) for b in sel.decision.bans_applied))


def same(a: MemoryAdvice, b: MemoryAdvice) -> bool:
    ints = [(g.gene_id, g.attempts, g.successes, g.failures, g.empties, g.prior_attempts) for g in a.genes]
    return (a.preferred_gene_id, a.banned_gene_ids) == (b.preferred_gene_id, b.banned_gene_ids) and ints == \
        [(g.gene_id, g.attempts, g.successes, g.failures, g.empties, g.prior_attempts) for g in b.genes] and all(
        abs(x.expected - y.expected) <= 2e-6 for x, y in zip(a.genes, b.genes, strict=True))


def bench_prune(url: str, n: int, keep: int) -> bool:
    end = END
    with Store.open(url) as db:
        whole, pruned = workspace(db, "unpruned"), workspace(db, "pruned")
        record(whole, n, end, "unpruned")
        record(pruned, n, end, "pruned")
        t0 = time.perf_counter()
        report = pruned.prune(fold=MEMORY_FOLD, keep_events=keep)
        print(f"prune to {keep:,} events: {time.perf_counter() - t0:.0f}s; {report.summary()}", flush=True)
        history_ = pruned.memory_history(MEMORY_FOLD)
        now, ok, checked = utc_now(), True, 0
        raw = raw_summaries(whole, now)
        for signals in [*SITUATIONS, ["log_error"], ["recurring_error", "perf_bottleneck"]]:
            whole_advice = memory_advice(events=[], summaries=raw, signals=signals, genes=GENES, now=now)
            pruned_advice = memory_advice(events=history_.events, summaries=history_.summaries, signals=signals,
                                          genes=GENES, now=now)
            ok &= same(whole_advice, pruned_advice)
            for seed in range(5):
                ok &= selection(whole, signals, now, seed) == selection(pruned, signals, now, seed)
                checked += 1
        print(f"{checked} selections and {checked // 5} memory-graph advices, unpruned ({n:,} events) vs "
              f"pruned ({report.kept_events:,} events + {len(history_.summaries)} summaries): "
              f"{'identical' if ok else 'DIFFERENT'}")
        a, b = time_reads([whole, pruned], 100)
        print(f"loop-rule reads: unpruned {a * 1e3:.2f} ms, pruned {b * 1e3:.2f} ms")
    return ok


# ------------------------------------------------------------------ 2. one workspace among many


def loop_reads(store: Store) -> None:
    store.recent_events(10)
    store.last_event_id()
    store.count_events()
    store.list_genes()
    store.list_capsules()
    store.list_failed_capsules()
    store.open_runs()
    store.get_state("personality.current", PersonalityState)


def memory_read(store: Store) -> None:
    store.memory_history(MEMORY_FOLD)


def time_reads(stores: list[Store], rounds: int, read: Callable[[Store], None] = loop_reads) -> list[float]:
    """Median time of one read per store, in alternating rounds (other load on the machine hits all alike)."""
    for store in stores:
        for _ in range(5):
            read(store)
    samples: list[list[float]] = [[] for _ in stores]
    for _ in range(rounds):
        for i, store in enumerate(stores):
            t0 = time.perf_counter()
            read(store)
            samples[i].append(time.perf_counter() - t0)
    return [statistics.median(s) for s in samples]


def fleet(url: str, others: int, per: int) -> Store:
    """A database with the target workspace and ``others`` more, each with ``per`` events."""
    db = Store.open(url)
    t0 = time.perf_counter()
    for i in range(others):
        workspace(db, f"ws{i:04d}").add_events(ev for ev, _ in history(per, END, seed=i))
    target = workspace(db, "target")
    record(target, per, END, "target")
    target.set_state("personality.current", PersonalityState())
    target.memory_history(MEMORY_FOLD)  # fold now, so that timing reads only read
    print(f"fleet of {others + 1} workspaces x {per:,} events: {time.perf_counter() - t0:.0f}s", flush=True)
    return target


FLEET_READS: tuple[tuple[str, Callable[[Store], None]], ...] = (("loop-rule reads", loop_reads),
                                                                 ("memory-graph history", memory_read))


def bench_fleet(small_url: str, large_url: str, workspaces: int, per: int, rounds: int,
                reads: tuple[tuple[str, Callable[[Store], None]], ...] = FLEET_READS) -> bool:
    small, large = fleet(small_url, 1, per), fleet(large_url, workspaces - 1, per)
    ok = True
    try:
        for label, read in reads:
            a, b = time_reads([small, large], rounds, read)
            ok &= b / a < TARGET
            print(f"{label}: with 1 other workspace {a * 1e3:.2f} ms, with {workspaces - 1} others "
                  f"{b * 1e3:.2f} ms, ratio {b / a:.2f} (target < {TARGET}) {'OK' if b / a < TARGET else 'OVER'}",
                  flush=True)
    finally:
        small.close()
        large.close()
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--keep", type=int, default=10_000)
    ap.add_argument("--workspaces", type=int, default=1_000)
    ap.add_argument("--per-workspace", type=int, default=1_000)
    ap.add_argument("--rounds", type=int, default=200, help="timed reads per database (median is reported)")
    ap.add_argument("--url", default=os.environ.get("GEP_TEST_POSTGRES_URL"),
                    help="PostgreSQL database to work in (default: GEP_TEST_POSTGRES_URL, else SQLite)")
    ap.add_argument("--sqlite", action="store_true", help="SQLite even when GEP_TEST_POSTGRES_URL is set")
    ap.add_argument("--skip-prune", action="store_true")
    ap.add_argument("--skip-fleet", action="store_true")
    args = ap.parse_args()
    args.url = None if args.sqlite else args.url or None
    print(f"database: {'PostgreSQL' if args.url else 'SQLite'}", flush=True)
    ok = True
    with tempfile.TemporaryDirectory(prefix="gep-bench-") as tmp, ExitStack() as stack:
        if not args.skip_prune:
            ok &= bench_prune(stack.enter_context(database(args.url, Path(tmp), "prune")), args.events, args.keep)
        if not args.skip_fleet:
            small = stack.enter_context(database(args.url, Path(tmp), "fleet_small"))
            large = stack.enter_context(database(args.url, Path(tmp), "fleet_large"))
            ok &= bench_fleet(small, large, args.workspaces, args.per_workspace, args.rounds)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
