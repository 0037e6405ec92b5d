"""A gene for what no gene covers: actionable signals, the automatic gene, ensure_gene after selection."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gep.assets.gene_files import load_genes_dir, seed_genes_dir
from gep.core.config import Settings, load_settings
from gep.core.hashing import verify_asset_id
from gep.core.models import Gene, Intent
from gep.genes.automatic import (
    SAFE_STRATEGY,
    actionable_signals,
    build_auto_gene,
    ensure_gene,
    infer_category,
    is_actionable,
    literal_pattern,
)
from gep.genes.selector import match_pattern, match_score, select_gene_and_capsule

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
PY = ["python -m compileall -q .", "python -m pytest -q"]


def fnv1a_utf16(text: str) -> str:
    """The reference's stableHash, written out again here so the test does not trust the engine's copy."""
    h = 0x811C9DC5
    for unit in [int.from_bytes(text.encode("utf-16-le")[i:i + 2], "little")
                 for i in range(0, len(text.encode("utf-16-le")), 2)]:
        h = ((h ^ unit) * 0x01000193) % 2**32
    return f"{h:08x}"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "tests").mkdir(parents=True)
    (root / "tests" / "test_x.py").write_text("def test_x():\n    pass\n")
    return root


@pytest.mark.parametrize("signal, actionable", [
    ("log_error", True),
    ("errsig:TypeError: x is undefined", True),
    ("recurring_errsig(3x):ENOENT", True),
    ("user_feature_request:add a --json flag", True),
    ("perf_bottleneck", True),
    ("high_tool_usage:exec", True),
    ("ban_gene:gene_repair_from_errors", False),  # control
    ("force_innovation_after_repair_loop", False),
    ("force_steady_state", False),
    ("consecutive_failure_streak_4", False),
    ("repair_loop_detected", False),  # loops and saturation: about the engine itself
    ("empty_cycle_loop_detected", False),
    ("evolution_saturation", False),
    ("evolution_stagnation_detected", False),
    ("stable_success_plateau", False),
    ("failure_loop_detected", False),
    ("high_failure_ratio", False),
    ("memory_missing", False),  # cosmetic
    ("session_logs_missing", False),
    ("", False),
])
def test_actionable(signal: str, actionable: bool) -> None:
    assert is_actionable(signal) is actionable


def test_actionable_signals_keep_order_without_duplicates() -> None:
    assert actionable_signals(["ban_gene:x", "log_error", "perf_bottleneck", "log_error", "evolution_saturation"]) \
        == ["log_error", "perf_bottleneck"]


@pytest.mark.parametrize("signals, intent, category", [
    (["log_error"], None, Intent.repair),
    (["recurring_errsig(4x):boom"], None, Intent.repair),
    (["user_feature_request:dark mode"], None, Intent.innovate),
    (["capability_gap"], None, Intent.innovate),
    (["perf_bottleneck"], None, Intent.optimize),
    (["log_error"], "innovate", Intent.innovate),  # the intent wins when it is one
    (["log_error"], "bogus", Intent.repair),
])
def test_category(signals: list[str], intent: str | None, category: Intent) -> None:
    assert infer_category(signals, intent) is category


def test_auto_gene_as_the_reference_builds_it() -> None:
    signals = ["ban_gene:gene_x", "high_tool_usage:exec", "repeated_tool_usage:exec", "evolution_saturation"]
    g = build_auto_gene(signals, intent=None, validation=PY)
    # the signal key of the actionable signals (sorted, joined by |), hashed with FNV-1a as the reference does
    key = "high_tool_usage:exec|repeated_tool_usage:exec"
    assert g.id == "gene_auto_" + fnv1a_utf16(key)
    assert g.preconditions == [f"signals_key == {key}"]
    assert g.signals_match == ["high_tool_usage:exec", "repeated_tool_usage:exec"]
    assert g.category == "optimize" and g.strategy == SAFE_STRATEGY
    assert g.validation == PY  # this workspace's, not the reference's node script
    assert g.constraints.max_files == 12 and {".git", ".gep"} <= set(g.constraints.forbidden_paths)
    assert g.provenance is not None and (g.provenance.origin, g.provenance.signal_key) == ("auto", key)
    assert verify_asset_id(g.to_asset())
    # same situation, same gene, whatever the order and the control signals around it
    again = build_auto_gene(["repeated_tool_usage:exec", "high_tool_usage:exec", "force_steady_state"],
                            intent=None, validation=PY)
    assert again.to_asset() == g.to_asset()


def test_auto_gene_patterns_match_exactly_their_signals() -> None:
    odd = ["errsig:cannot read a|b of undefined", "/usr/lib/x.py/i crashed"]
    g = build_auto_gene(["log_error", *odd], intent=None, validation=PY)
    assert "log_error" in g.signals_match
    for s in odd:
        pattern = literal_pattern(s)
        assert pattern.startswith("/") and match_pattern(pattern, s)
    # "a|b" as alternatives would match any signal holding an "a"
    assert not match_pattern(literal_pattern(odd[0]), "warning: stale cache")
    assert match_score(g, ["log_error", *odd]) == 3
    assert len(build_auto_gene([f"errsig:e{i}" for i in range(20)], intent=None, validation=PY).signals_match) == 8


def test_an_uncovered_signal_set_gets_an_automatic_gene_that_selection_then_picks(ws: Path) -> None:
    seeds = load_genes_dir(seed_genes_dir())
    signals = ["integration_key_missing", "high_failure_ratio"]  # no seed gene covers the missing key
    settings = Settings()

    def select(genes: list[Gene]):
        return select_gene_and_capsule(genes=genes, capsules=[], failed_capsules=[], signals=signals,
                                       recent_events=[], settings=settings, rng=random.Random(7), now=NOW)

    assert select(seeds).gene is None
    decision = ensure_gene(signals=signals, intent=None, genes=seeds, excluded=set(), workspace=ws,
                           settings=settings, env={})
    assert decision.created and decision.gene is not None
    assert decision.gene.signals_match == ["integration_key_missing"]
    assert decision.reason == f"no selectable gene matches the signals; created {decision.gene.id}"
    assert select([*seeds, decision.gene]).gene.id == decision.gene.id
    # next time the stored gene is reused, not built again
    again = ensure_gene(signals=signals, intent=None, genes=[*seeds, decision.gene], excluded=set(), workspace=ws,
                        settings=settings, env={})
    assert (again.created, again.gene) == (False, decision.gene)


def test_no_automatic_gene_without_actionable_signals_or_when_it_is_banned(ws: Path) -> None:
    settings = Settings()
    none = ensure_gene(signals=["evolution_saturation", "ban_gene:g", "stable_success_plateau"], intent=None,
                       genes=[], excluded=set(), workspace=ws, settings=settings, env={})
    assert none.gene is None and none.reason.startswith("no actionable signals")
    auto = build_auto_gene(["perf_bottleneck"], intent=None, validation=PY)
    banned = ensure_gene(signals=["perf_bottleneck"], intent=None, genes=[auto], excluded={auto.id}, workspace=ws,
                         settings=settings, env={})
    assert banned.gene is None and auto.id in banned.reason


def test_validation_from_gep_toml_and_only_what_runs_here(ws: Path) -> None:
    (ws / "gep.toml").write_text('[gep]\ndefault_validation = ["python -m pytest -q tests/test_x.py", '
                                 '"python -m pytest tests/gone.py", "node check.js"]\n')
    settings = load_settings(ws, env={})
    d = ensure_gene(signals=["perf_bottleneck"], intent=None, genes=[], excluded=set(), workspace=ws,
                    settings=settings, env={"PATH": ""})
    assert d.gene is not None and d.gene.validation == ["python -m pytest -q tests/test_x.py"]
    nothing = settings.model_copy(update={"default_validation": ["node check.js"]})
    d = ensure_gene(signals=["perf_bottleneck"], intent=None, genes=[], excluded=set(), workspace=ws,
                    settings=nothing, env={"PATH": ""})
    assert d.gene is None and d.reason == "no default validation command can run in this workspace"
