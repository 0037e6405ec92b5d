"""Time one cycle's history read with 100 and with 1,000,000 stored events, and print the ratio.

A cycle reads: the last 10 events, the last event id (parent), the event count, genes, capsules, failed
capsules, open runs and the personality state. With indexes these cost the same however long the history
is; the target ratio is under 1.2.

    .venv/bin/python bench/store.py                 # SQLite in a temp dir, 100 vs 1,000,000 events
    .venv/bin/python bench/store.py --large 200000  # quicker
    .venv/bin/python bench/store.py --url postgresql+psycopg2://...  # large side in an EMPTY database

Bulk insert goes through Store.add_events in large batches (about a minute for a million events).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gep.models import (  # noqa: E402
    BlastRadius,
    Capsule,
    CycleRun,
    EvolutionEvent,
    FailedCapsule,
    Gene,
    Outcome,
    PersonalityState,
)
from gep.store import Store  # noqa: E402

TARGET = 1.2


def events(start: int, stop: int) -> Iterator[EvolutionEvent]:
    for i in range(start, stop):
        yield EvolutionEvent(
            id=f"evt_{i:09d}", parent=f"evt_{i - 1:09d}" if i else None, intent="repair",
            signals=["log_error", "errsig:TypeError: Cannot read properties of undefined", "recurring_error"],
            genes_used=["gene_repair_from_errors"], blast_radius=BlastRadius(files=2, lines=17),
            outcome=Outcome(status="failed" if i % 4 == 0 else "success", score=0.85),
            meta={"at": "2024-06-10T06:13:20.000Z", "signal_key": "errsig|log_error|recurring_error"},
        )


def fill(store: Store, upto: int) -> None:
    have = store.count_events()
    if upto <= have:
        return
    t0 = time.perf_counter()
    step = 50_000
    for start in range(have, upto, step):
        store.add_events(events(start, min(upto, start + step)))
        if upto - have > step:
            print(f"  inserted {min(upto, start + step):,} events ({time.perf_counter() - t0:.0f}s)", flush=True)


def cycle_read(store: Store) -> None:
    store.recent_events(10)
    store.last_event_id()
    store.count_events()
    store.list_genes()
    store.list_capsules()
    store.list_failed_capsules()
    store.open_runs()
    store.get_state("personality.current", PersonalityState)


def time_reads(stores: list[Store], rounds: int) -> list[float]:
    """Median time of one cycle read per store, measured in alternating rounds so that load from other
    processes on the machine affects every size alike."""
    for store in stores:  # warm caches the same way for every size
        for _ in range(10):
            cycle_read(store)
    samples: list[list[float]] = [[] for _ in stores]
    for _ in range(rounds):
        for i, store in enumerate(stores):
            t0 = time.perf_counter()
            cycle_read(store)
            samples[i].append(time.perf_counter() - t0)
    return [statistics.median(s) for s in samples]


def seed_other_tables(store: Store) -> None:
    for i in range(20):
        store.upsert_gene(Gene(id=f"gene_{i:02d}", signals_match=["error"], strategy=["fix"]))
    for i in range(50):
        store.upsert_capsule(Capsule(id=f"capsule_{i}", gene="gene_00", trigger=["log_error"], summary="ok"))
        store.add_failed_capsule(FailedCapsule(id=f"failed_{i}", gene="gene_00", diff_snapshot="+x"))
    for i in range(200):
        store.save_run(CycleRun(event_id=f"run_{i}", workspace="/w", head_sha="abc", status="closed"))
    store.save_run(CycleRun(event_id="run_open", workspace="/w", head_sha="abc", status="awaiting_changes"))
    store.set_state("personality.current", PersonalityState())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", type=int, default=100)
    ap.add_argument("--large", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=300, help="timed cycle reads per size (median is reported)")
    ap.add_argument("--url", help="database URL (default: SQLite in a temp dir)")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="gep-bench-") as tmp:
        small_url = f"sqlite:///{Path(tmp) / 'small.db'}"
        large_url = args.url or f"sqlite:///{Path(tmp) / 'large.db'}"
        with Store.open(small_url) as small_store, Store.open(large_url) as large_store:
            if large_store.count_events():
                print("the database must start empty", file=sys.stderr)
                return 2
            for store, n in ((small_store, args.small), (large_store, args.large)):
                seed_other_tables(store)
                t0 = time.perf_counter()
                fill(store, n)
                print(f"stored {n:,} events in {time.perf_counter() - t0:.0f}s", flush=True)
            small, large = time_reads([small_store, large_store], args.repeat)
        print(f"cycle read with {args.small:>9,} events: {small * 1e3:.3f} ms")
        print(f"cycle read with {args.large:>9,} events: {large * 1e3:.3f} ms  ({large_url.split(':')[0]})")
        if not args.url:
            size = sum(p.stat().st_size for p in Path(tmp).glob("large.db*"))
            print(f"database size with {args.large:,} events: {size / 1e6:.0f} MB")
    ratio = large / small
    print(f"ratio: {ratio:.2f} (target < {TARGET})")
    return 0 if ratio < TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
