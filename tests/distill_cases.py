"""Capsules, events and a workspace for the distillation tests (shared by test_distill*.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from gep.assets.gene_files import load_genes_dir, seed_genes_dir
from gep.core.models import Capsule, EvolutionEvent, Gene, Outcome, iso

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
KEY = "sk-ant-api03-test-" + "k" * 24
ZERO_DIV = "errsig:ZeroDivisionError: division by zero in stats.mean"
REPAIR_TRIGGER = ["log_error", ZERO_DIV, "recurring_error", "ban_gene:gene_tool_usage"]
PERF_TRIGGER = ["perf_bottleneck", "errsig:TimeoutError: report build took 31s"]


def capsule(i: int, gene: str, trigger: list[str], summary: str, score: float = 0.85, status: str = "success",
            **extra: Any) -> Capsule:
    return Capsule(id=f"cap_{i:03d}", gene=gene, trigger=list(trigger), summary=summary,
                   outcome=Outcome(status=status, score=score), **extra)


def repair_capsules(n: int, start: int = 0) -> list[Capsule]:
    """``n`` successful repairs of the same recurring error; summaries drift from the first to the last."""
    out = []
    for k in range(n):
        i = start + k
        summary = ("Guard stats.mean against an empty list before dividing" if k < n - 1
                   else "Rewrite the report cache so stale entries expire")
        out.append(capsule(i, "gene_repair_from_errors", REPAIR_TRIGGER, summary))
    return out


def mixed_capsules() -> list[Capsule]:
    """12 successful repairs, 3 successful perf fixes, and capsules that must not count."""
    return [
        *repair_capsules(12),
        *(capsule(20 + k, "gene_perf_bottleneck", PERF_TRIGGER, "Cache the parsed report template") for k in range(3)),
        capsule(30, "gene_repair_from_errors", REPAIR_TRIGGER, "Half fix", score=0.5),  # below 0.7
        capsule(31, "gene_repair_from_errors", REPAIR_TRIGGER, "Broke it", status="failed", score=0.2),
        capsule(32, "gene_repair_from_errors", REPAIR_TRIGGER, "Fix that came back",
                verification={"status": "did_not_hold"}),
    ]


def events(n: int = 8) -> list[EvolutionEvent]:
    """Events whose signals include an uncovered feature request (in 3 events) and engine-only signals."""
    out = []
    for i in range(n):
        signals = ["log_error", ZERO_DIV, "stable_success_plateau"]
        if i < 3:
            signals.append("user_feature_request:export the report as csv")
        if i == 5:
            signals.append("capability_gap")  # seen once: not a gap
        out.append(EvolutionEvent(id=f"evt_{i:03d}", signals=signals, genes_used=["gene_repair_from_errors"],
                                  outcome=Outcome(status="success", score=0.85),
                                  meta={"at": iso(NOW - timedelta(hours=n - i))}))
    return out


def seed_genes() -> list[Gene]:
    return load_genes_dir(seed_genes_dir())


def python_workspace(root: Path) -> Path:
    """A Python workspace: a module and its tests (the seed genes' validation can run here)."""
    (root / "tests").mkdir(parents=True)
    (root / "stats.py").write_text("def mean(xs):\n    return sum(xs) / len(xs) if xs else 0.0\n")
    (root / "tests" / "test_stats.py").write_text("from stats import mean\n\n\ndef test_mean():\n"
                                                  "    assert mean([1, 3]) == 2\n")
    return root
