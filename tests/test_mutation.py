"""build_mutation: intent rules, strategy ratios, risk and the two safety downgrades."""

from __future__ import annotations

import random
from collections import Counter
from datetime import UTC, datetime

import pytest

from gep.core.models import Gene, Intent, PersonalityState, RiskLevel
from gep.genes.mutation import (
    SAFETY_DOWNGRADE_HIGH_RISK,
    SAFETY_INNOVATE_HIGH_RISK,
    build_mutation,
    epoch_ms,
    is_high_risk_mutation_allowed,
    is_high_risk_personality,
)
from gep.genes.strategy import PRESETS

NOW = datetime(2026, 1, 2, 3, 4, 5, 678_000, tzinfo=UTC)
GENE = Gene(id="gene_repair_from_errors", signals_match=["error"])
SAFE = PersonalityState(rigor=0.7, risk_tolerance=0.4)
RISKY = PersonalityState(rigor=0.3, risk_tolerance=0.4)


def build(signals, *, personality=SAFE, strategy="balanced", seed=0, drift=False, **kw):
    return build_mutation(signals=signals, gene=GENE, personality=personality, strategy=PRESETS[strategy],
                          rng=random.Random(seed), now=NOW, drift=drift, **kw)


@pytest.mark.parametrize("signals, drift, expected", [
    (["log_error"], False, Intent.repair),
    (["errsig:TypeError: boom"], False, Intent.repair),
    (["errsig_norm:abcd1234"], False, Intent.repair),
    (["log_error"], True, Intent.repair),                          # errors outrank drift
    (["log_error", "issue_already_resolved"], False, Intent.innovate),  # resolved: not an error any more
    (["user_feature_request"], False, Intent.innovate),
    (["capability_gap"], False, Intent.innovate),
    (["perf_bottleneck:slow query"], False, Intent.innovate),      # "<name>:detail" counts
    (["stable_success_plateau"], False, Intent.innovate),
    (["memory_missing"], True, Intent.innovate),                   # drift
    (["log_error", "force_innovation_after_repair_loop"], False, Intent.innovate),  # loop breaker
])
def test_category_rules(signals, drift, expected):
    assert build(signals, drift=drift).category is expected


@pytest.mark.parametrize("strategy, expected", [
    ("balanced", {"repair": 0.2, "optimize": 0.3, "innovate": 0.5}),
    ("innovate", {"repair": 0.05, "optimize": 0.15, "innovate": 0.8}),
    ("repair-only", {"repair": 0.8, "optimize": 0.2, "innovate": 0.0}),
    ("steady-state", {"repair": 0.6, "optimize": 0.3, "innovate": 0.1}),
])
def test_strategy_ratios_decide_when_signals_do_not(strategy, expected):
    n = 3000
    # a neutral personality so that no safety downgrade changes the drawn intent
    counts = Counter(build(["memory_missing"], strategy=strategy, seed=s).category.value for s in range(n))
    for intent, share in expected.items():
        assert counts[intent] / n == pytest.approx(share, abs=0.03)
    if expected["innovate"] == 0:
        assert counts["innovate"] == 0


def test_same_seed_same_mutation():
    one = build(["memory_missing"], seed=42)
    assert build(["memory_missing"], seed=42) == one


def test_mutation_fields():
    m = build(["log_error", "log_error", " ", "errsig:x"])
    assert m.id == f"mut_{epoch_ms(NOW)}" == "mut_1767323045678"
    assert m.trigger_signals == ["log_error", "errsig:x"]
    assert m.target == "gene:gene_repair_from_errors"
    assert m.risk_level is RiskLevel.low
    assert "errors" in m.expected_effect
    no_gene = build_mutation(signals=[], gene=None, personality=None, strategy=PRESETS["balanced"],
                             rng=random.Random(0), now=NOW)
    assert no_gene.target == "behavior:protocol"


def test_innovate_is_medium_risk_and_high_only_when_allowed():
    assert build(["capability_gap"]).risk_level is RiskLevel.medium
    high = build(["capability_gap"], allow_high_risk=True)
    assert high.risk_level is RiskLevel.high and not any(s.startswith("safety:") for s in high.trigger_signals)


def test_safety_innovate_under_high_risk_personality_becomes_optimize():
    m = build(["capability_gap"], personality=RISKY)
    assert m.category is Intent.optimize
    assert m.risk_level is RiskLevel.low
    assert SAFETY_INNOVATE_HIGH_RISK in m.trigger_signals
    assert m.expected_effect.startswith("safety downgrade")


def test_safety_high_risk_not_allowed_becomes_medium():
    cautious_but_not_rigorous = PersonalityState(rigor=0.55, risk_tolerance=0.4)  # not high-risk, not allowed
    m = build(["capability_gap"], personality=cautious_but_not_rigorous, allow_high_risk=True)
    assert m.category is Intent.innovate
    assert m.risk_level is RiskLevel.medium
    assert m.trigger_signals[-1] == SAFETY_DOWNGRADE_HIGH_RISK


@pytest.mark.parametrize("rigor, tol, high_risk, allowed", [
    (0.7, 0.4, False, True),
    (0.49, 0.4, True, False),
    (0.5, 0.6, False, False),
    (0.7, 0.61, True, False),
    (0.6, 0.5, False, True),
    (0.59, 0.5, False, False),
    (0.9, 0.51, False, False),
])
def test_risk_predicates(rigor, tol, high_risk, allowed):
    p = PersonalityState(rigor=rigor, risk_tolerance=tol)
    assert is_high_risk_personality(p) is high_risk
    assert is_high_risk_mutation_allowed(p) is allowed


def test_no_personality_is_not_high_risk_and_not_allowed_high():
    assert is_high_risk_personality(None) is False
    assert is_high_risk_mutation_allowed(None) is False
