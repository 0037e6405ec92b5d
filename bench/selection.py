"""Does selection learn? A 500-cycle simulation fed back through a real store.

A pool of genes has hidden success probabilities per signal situation. Each cycle draws a situation, the
engine selects a gene from what the store holds (events, capsules, failed capsules), the hidden world decides
the outcome, and the cycle is recorded the way a real cycle records it (EvolutionEvent with signals,
genes_used, outcome, blast radius, meta.at, meta.selector; a Capsule on success, a FailedCapsule on failure).
Failure streaks add the control signals the signal extractor emits (``consecutive_failure_streak_N``,
``ban_gene:<id>``), so bans are exercised too.

Printed: cumulative success rate of the engine, of a reference-style selector (signal match + drift only),
and of an oracle that always picks the best matching gene; the engine's ratio to the oracle (target >= 0.9)
and the largest share any gene takes of a 20-selection window (cap 0.6). A "success" that changed nothing
(empty cycle) is not a success: the pool has a gene that mostly produces those (reference issue #562).

Run: ``.venv/bin/python bench/selection.py [--cycles 500] [--seed 7]``
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gep import constants as C  # noqa: E402
from gep.config import Settings  # noqa: E402
from gep.models import (  # noqa: E402
    BlastRadius,
    Capsule,
    EvolutionEvent,
    FailedCapsule,
    Gene,
    Outcome,
    PersonalityState,
    iso,
)
from gep.mutation import build_mutation  # noqa: E402
from gep.selector import match_pattern, select_gene_and_capsule  # noqa: E402
from gep.store import Store  # noqa: E402
from gep.strategy import PRESETS  # noqa: E402

HISTORY = 200  # events the engine reads per cycle (memory graph, dominance, bans)


@dataclass(frozen=True)
class Situation:
    name: str
    weight: float
    signals: tuple[str, ...]
    p: dict[str, float]  # hidden success probability per gene (non-empty success)


GENES = [
    Gene(id="gene_repair_generic", category="repair", signals_match=["error", "log_error", "recurring_error"]),
    Gene(id="gene_distilled_errsig", category="repair", signals_match=["log_error", "errsig"]),
    Gene(id="gene_type_fixer", category="repair", signals_match=["typeerror"]),
    Gene(id="gene_perf", category="optimize", signals_match=["perf_bottleneck", "timeout|timed out"]),
    Gene(id="gene_memory_noop", category="innovate",
         signals_match=["user_feature_request", "capability_gap", "/feature|gap/"]),
    Gene(id="gene_innovate", category="innovate",
         signals_match=["user_feature_request", "capability_gap", "stable_success_plateau"]),
    Gene(id="gene_capability", category="innovate", signals_match=["capability_gap"]),
    Gene(id="gene_tool", category="optimize", signals_match=["high_tool_usage"]),
    Gene(id="gene_optimize", category="optimize", signals_match=["stable_success_plateau", "repeated_tool_usage"]),
]
# gene_memory_noop "succeeds" without changing anything most of the time
NOOP_GENE, NOOP_EMPTY_RATE = "gene_memory_noop", 0.75

SITUATIONS = [
    Situation("type_error", 0.40, ("log_error", "errsig:TypeError: x is undefined at /app/src/a.py:12",
                                   "recurring_error"),
              {"gene_repair_generic": 0.50, "gene_distilled_errsig": 0.60, "gene_type_fixer": 0.90}),
    Situation("timeout", 0.25, ("log_error", "errsig:TimeoutError: upstream timed out after 30s",
                                "perf_bottleneck"),
              {"gene_repair_generic": 0.35, "gene_distilled_errsig": 0.55, "gene_perf": 0.85}),
    Situation("feature", 0.20, ("user_feature_request", "capability_gap"),
              {NOOP_GENE: 0.10, "gene_innovate": 0.55, "gene_capability": 0.85}),
    Situation("tooling", 0.15, ("high_tool_usage", "repeated_tool_usage:exec", "stable_success_plateau"),
              {"gene_innovate": 0.30, "gene_tool": 0.80, "gene_optimize": 0.40}),
]


def history_signals(history: list[tuple[str, str]]) -> list[str]:
    """What the signal extractor adds from history: failure streaks and, from 5 on, a ban of the gene."""
    streak, gene = 0, None
    for status, gid in reversed(history):
        if status != "failed":
            break
        streak += 1
        gene = gene or gid
    out: list[str] = []
    if streak >= C.FAILURE_STREAK_MIN:
        out.append(f"consecutive_failure_streak_{streak}")
    if streak >= C.FAILURE_LOOP_MIN and gene:
        out.append(f"ban_gene:{gene}")
    return out


def world_outcome(sit: Situation, gene_id: str | None, u: float, v: float) -> tuple[str, bool]:
    """(status, empty). Common random numbers u, v keep the selectors' luck comparable."""
    if gene_id is None:
        return "empty", True
    p = sit.p.get(gene_id, 0.05)
    if u < p:
        return "success", False
    if gene_id == NOOP_GENE and v < NOOP_EMPTY_RATE:
        return "success", True  # claimed success, nothing changed
    return "failed", False


def reference_style_pick(signals: list[str], rng: random.Random) -> str | None:
    """Signal match + drift only (the reference without memory, bans or dominance control)."""
    scored = []
    for g in GENES:
        # the reference matches control signals like any other (ban_gene:x matches "error")
        score = sum(1 for pat in g.signals_match if any(_ref_match(pat, s) for s in signals))
        if score and g.id.startswith("gene_distilled_"):
            score *= C.DISTILLED_GENE_FACTOR
        if score:
            scored.append((score, g.id))
    if not scored:
        return None
    scored.sort(key=lambda x: -x[0])
    intensity = 1 / math.sqrt(len(GENES))
    idx = 0
    if len(scored) > 1 and rng.random() < intensity:
        idx = int(rng.random() * min(len(scored), max(2, math.ceil(len(scored) * intensity))))
    return scored[idx][1]


def _ref_match(pattern: str, signal: str) -> bool:
    return match_pattern(pattern, signal, exclude_control=False)


def max_window_share(picks: list[str | None], window: int) -> float:
    best = 0
    for i in range(max(1, len(picks) - window + 1)):
        counts = Counter(p for p in picks[i:i + window] if p)
        best = max(best, max(counts.values(), default=0))
    return best / window


def run(cycles: int, seed: int) -> dict[str, float]:
    world = random.Random(seed)
    draws = [(world.choices(SITUATIONS, [s.weight for s in SITUATIONS])[0], world.random(), world.random())
             for _ in range(cycles)]
    settings = Settings()
    start = datetime(2026, 1, 5, tzinfo=UTC)
    engine_ok = ref_ok = oracle_ok = 0
    engine_picks: list[str | None] = []
    ref_picks: list[str | None] = []
    ref_history: list[tuple[str, str]] = []
    ref_rng = random.Random(seed + 1)
    bans_seen = capped = 0

    with tempfile.TemporaryDirectory() as tmp, Store.open(f"sqlite:///{tmp}/bench.db") as store:
        for t, (sit, u, v) in enumerate(draws):
            now = start + timedelta(hours=t)
            recent = store.recent_events(HISTORY)
            hist = [(e.outcome.status, e.genes_used[0] if e.genes_used else "") for e in recent[-10:]]
            signals = list(sit.signals) + history_signals(hist)
            rng = random.Random(f"{seed}:{t}:select")
            sel = select_gene_and_capsule(genes=GENES, capsules=store.list_capsules(),
                                          failed_capsules=store.list_failed_capsules(), signals=signals,
                                          recent_events=recent, settings=settings, rng=rng, now=now)
            gid = sel.gene.id if sel.gene else None
            bans_seen += bool(sel.decision.bans_applied)
            capped += bool(sel.decision.dominance_capped)
            status, empty = world_outcome(sit, gid, u, v)
            engine_ok += status == "success" and not empty
            engine_picks.append(gid)
            mutation = build_mutation(signals=signals, gene=sel.gene, personality=PersonalityState(),
                                      strategy=PRESETS["balanced"], rng=random.Random(f"{seed}:{t}:mut"), now=now)
            ev = EvolutionEvent(
                id=f"evt_{t:05d}", signals=signals, genes_used=[gid] if gid else [], intent=mutation.category.value,
                mutation_id=mutation.id, outcome=Outcome(status=status, score=0.85 if status == "success" else 0.2),
                blast_radius=BlastRadius() if empty or status != "success" else BlastRadius(files=1, lines=12),
                meta={"at": iso(now), "selector": sel.decision.model_dump(mode="json"), "empty_cycle": empty},
            )
            store.add_event(ev)
            done_at = iso(now + timedelta(minutes=5))
            if gid and status == "success" and not empty and sel.capsule is None:
                store.upsert_capsule(Capsule(id=f"cap_{t:05d}", trigger=list(sit.signals), gene=gid,
                                             summary=f"{gid} on {sit.name}", confidence=0.85))
            elif gid and status == "failed":
                store.add_failed_capsule(FailedCapsule(id=f"fail_{t:05d}", gene=gid, trigger=list(sit.signals),
                                                       failure_reason="validation failed", created_at=done_at))

            # reference-style selector on its own history, same world draws
            ref_signals = list(sit.signals) + history_signals(ref_history[-10:])
            rid = reference_style_pick(ref_signals, ref_rng)
            rstatus, rempty = world_outcome(sit, rid, u, v)
            ref_ok += rstatus == "success" and not rempty
            ref_picks.append(rid)
            ref_history.append((rstatus, rid or ""))

            # oracle: the best matching gene for the situation
            best = max(sit.p, key=lambda g: sit.p[g])
            ostatus, oempty = world_outcome(sit, best, u, v)
            oracle_ok += ostatus == "success" and not oempty

    return {
        "engine": engine_ok / cycles, "reference": ref_ok / cycles, "oracle": oracle_ok / cycles,
        "engine_max_share": max_window_share(engine_picks, settings.dominance_window),
        "reference_max_share": max_window_share(ref_picks, settings.dominance_window),
        "cycles_with_bans": bans_seen, "cycles_capped": capped,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cycles", type=int, default=500)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    t0 = time.perf_counter()
    r = run(args.cycles, args.seed)
    ratio = r["engine"] / r["oracle"] if r["oracle"] else 0.0
    print(f"cycles                         {args.cycles} (seed {args.seed}, {len(GENES)} genes, "
          f"{len(SITUATIONS)} situations)")
    print(f"success rate  engine           {r['engine']:.3f}")
    print(f"success rate  reference-style  {r['reference']:.3f}")
    print(f"success rate  oracle           {r['oracle']:.3f}")
    print(f"engine / oracle                {ratio:.3f}   (target >= 0.90)")
    print(f"reference-style / oracle       {r['reference'] / r['oracle']:.3f}")
    print(f"max gene share, 20-window      engine {r['engine_max_share']:.2f}   reference-style "
          f"{r['reference_max_share']:.2f}   (cap {Settings().dominance_share:.2f})")
    print(f"cycles with a ban applied      {r['cycles_with_bans']}")
    print(f"cycles where dominance yielded {r['cycles_capped']}")
    print(f"runtime                        {time.perf_counter() - t0:.1f}s")
    ok = ratio >= 0.9 and r["engine"] > r["reference"] and r["engine_max_share"] <= Settings().dominance_share
    print("verdict                        " + ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
