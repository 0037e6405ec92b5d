"""Build the Mutation a cycle will attempt.

Pure: signals, the selected gene, the personality and the strategy in, plus an injected ``rng`` and ``now``.

Category (intent), in order:
  1. ``force_innovation…`` signals → innovate (they exist to break a repair loop, so they outrank errors)
  2. error signals (``log_error``, ``errsig:…``, ``errsig_norm:…``; not when the issue is already resolved)
     → repair
  3. behavioural signals that ask for repair (:data:`BEHAVIOR_INTENTS`: repeated user corrections,
     frustration) → repair of the agent's instructions
  4. drift requested → innovate
  5. opportunity signals (feature request, capability gap, plateau, …) → innovate
  6. behavioural signals that ask for tuning (stated preferences, communication style) → optimize
  7. otherwise the strategy's repair/optimize/innovate ratios decide, with one draw from ``rng``
     (the reference only looks at ``innovate >= 0.5``; its ratios are otherwise unused).
Risk: innovate is medium, the rest low; ``allow_high_risk`` lifts innovate to high. Two safety downgrades
(reference rules), each leaving a ``safety:`` marker in ``trigger_signals``: innovate under a high-risk
personality becomes a low-risk optimize; a high risk the personality does not allow becomes medium.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta

from gep.core import constants
from gep.core.models import Gene, Intent, Mutation, PersonalityState, RiskLevel
from gep.genes.strategy import StrategyPreset
from gep.signals.behavior import USER_CORRECTION_REPEATED, USER_FRUSTRATION, USER_PREFERENCE, USER_STYLE

OPPORTUNITY_SIGNALS = (
    "user_feature_request",
    "user_improvement_suggestion",
    "perf_bottleneck",
    "capability_gap",
    "stable_success_plateau",
    "external_opportunity",
    "issue_already_resolved",
    "openclaw_self_healed",
    "empty_cycle_loop_detected",
)
RESOLVED_SIGNALS = ("issue_already_resolved", "openclaw_self_healed")
FORCE_INNOVATION_PREFIX = "force_innovation"
SAFETY_INNOVATE_HIGH_RISK = "safety:avoid_innovate_with_high_risk_personality"
SAFETY_DOWNGRADE_HIGH_RISK = "safety:downgrade_high_risk"

# What people say to their agent pushes the intent (gep.signals.behavior): a name matches the signal itself or
# "<name>:<summary>"; the first entry found wins. Corrections that repeat and frustration mean the agent's
# instructions need repair; preferences and style mean they can be tuned.
BEHAVIOR_INTENTS: tuple[tuple[str, Intent], ...] = (
    (USER_CORRECTION_REPEATED, Intent.repair),
    (USER_FRUSTRATION, Intent.repair),
    (USER_PREFERENCE, Intent.optimize),
    (USER_STYLE, Intent.optimize),
)

EXPECTED_EFFECT = {
    Intent.repair: "reduce runtime errors, increase stability, and lower failure rate",
    Intent.optimize: "improve success rate and reduce repeated operational cost",
    Intent.innovate: "explore new strategy combinations to escape local optimum",
}


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def epoch_ms(now: datetime) -> int:
    """Milliseconds since the epoch, exactly (``Date.now()`` for an injected clock; naive means UTC)."""
    aware = now if now.tzinfo else now.replace(tzinfo=UTC)
    return (aware - _EPOCH) // timedelta(milliseconds=1)


def _uniq(items: Iterable[str]) -> list[str]:
    out: list[str] = []
    for x in items:
        s = str(x or "").strip()
        if s and s not in out:
            out.append(s)
    return out


def has_error_signal(signals: Sequence[str]) -> bool:
    if any(s in RESOLVED_SIGNALS for s in signals):
        return False
    return any(s == "log_error" or s.startswith(("errsig:", "errsig_norm:")) for s in signals)


def has_opportunity_signal(signals: Sequence[str]) -> bool:
    return any(s == name or s.startswith(name + ":") for s in signals for name in OPPORTUNITY_SIGNALS)


def behavior_intent(signals: Sequence[str]) -> Intent | None:
    """The intent behavioural signals push toward (:data:`BEHAVIOR_INTENTS`), or None."""
    for name, intent in BEHAVIOR_INTENTS:
        if any(s == name or s.startswith(name + ":") for s in signals):
            return intent
    return None


def intent_from_strategy(strategy: StrategyPreset, rng: random.Random) -> Intent:
    """One draw against the preset's repair/optimize/innovate ratios (normalised to sum to 1)."""
    total = strategy.repair + strategy.optimize + strategy.innovate
    if total <= 0:
        return Intent.optimize
    r = rng.random() * total
    if r < strategy.repair:
        return Intent.repair
    if r < strategy.repair + strategy.optimize:
        return Intent.optimize
    return Intent.innovate


def mutation_category(*, signals: Sequence[str], strategy: StrategyPreset, rng: random.Random,
                      drift: bool = False) -> tuple[Intent, str]:
    """The intent and why it was chosen."""
    signals = [str(s) for s in signals]
    if any(s.startswith(FORCE_INNOVATION_PREFIX) for s in signals):
        return Intent.innovate, "force_innovation signal"
    if has_error_signal(signals):
        return Intent.repair, "error signals"
    pushed = behavior_intent(signals)
    if pushed is Intent.repair:
        return Intent.repair, "user corrections or frustration"
    if drift:
        return Intent.innovate, "drift"
    if has_opportunity_signal(signals):
        return Intent.innovate, "opportunity signals"
    if pushed is Intent.optimize:
        return Intent.optimize, "user preferences or style"
    return intent_from_strategy(strategy, rng), f"strategy {strategy.name} ratios"


def is_high_risk_personality(p: PersonalityState | None) -> bool:
    """Low rigor or high risk tolerance (reference rule); no personality is not high risk."""
    if p is None:
        return False
    return p.rigor < constants.HIGH_RISK_RIGOR_BELOW or p.risk_tolerance > constants.HIGH_RISK_TOLERANCE_ABOVE


def is_high_risk_mutation_allowed(p: PersonalityState | None) -> bool:
    """High risk only with rigor >= 0.6 and risk tolerance <= 0.5 (no personality: not allowed)."""
    if p is None:
        return False
    return p.rigor >= constants.HIGH_RISK_ALLOWED_RIGOR_MIN and p.risk_tolerance <= constants.HIGH_RISK_ALLOWED_TOLERANCE_MAX


def build_mutation(
    *,
    signals: Sequence[str],
    gene: Gene | None,
    personality: PersonalityState | None,
    strategy: StrategyPreset,
    rng: random.Random,
    now: datetime,
    drift: bool = False,
    allow_high_risk: bool = False,
    target: str | None = None,
    expected_effect: str | None = None,
) -> Mutation:
    category, _why = mutation_category(signals=signals, strategy=strategy, rng=rng, drift=drift)
    triggers = _uniq(signals)
    risk = RiskLevel.medium if category is Intent.innovate else RiskLevel.low
    if allow_high_risk and category is Intent.innovate:
        risk = RiskLevel.high
    effect = expected_effect or EXPECTED_EFFECT[category]

    if category is Intent.innovate and is_high_risk_personality(personality):
        category = Intent.optimize
        effect = "safety downgrade: optimize under high-risk personality (avoid innovate+high-risk combo)"
        risk = RiskLevel.low
        triggers = _uniq([*triggers, SAFETY_INNOVATE_HIGH_RISK])
    if risk is RiskLevel.high and not is_high_risk_mutation_allowed(personality):
        risk = RiskLevel.medium
        triggers = _uniq([*triggers, SAFETY_DOWNGRADE_HIGH_RISK])

    return Mutation(
        id=f"mut_{epoch_ms(now)}",
        category=category,
        trigger_signals=triggers,
        target=target or (f"gene:{gene.id}" if gene else "behavior:protocol"),
        expected_effect=effect,
        risk_level=risk,
    )
