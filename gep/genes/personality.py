"""Personality: five traits in [0, 1] that shape how a cycle behaves, evolved from outcomes.

Pure: the current state and the per-key statistics come from the store (keys ``personality.current`` and
``personality.stats``), the cycle writes them back. Semantics are the reference's:
  - a personality key rounds every trait to 0.1;
  - natural selection nudges the current state toward the best-scoring known key (>= 3 outcomes;
    score = 0.75 * Laplace p + 0.25 * average score * min(1, n/8)), at most 2 traits by at most 0.1;
  - triggered mutations on a failure streak (3 of the last 4 outcomes failed, or the last 3 events with a
    mutation all failed) or under drift, chosen by the signals, at most 2 traits by at most 0.2;
  - at most 4 trait changes per cycle; every trait clamped to [0, 1].
The RNG breaks ties between equally good known keys (the reference takes the first it meets).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from datetime import datetime

from pydantic import BaseModel, Field

from gep.core import constants
from gep.core.models import EvolutionEvent, PersonalityState, iso
from gep.core.records import PersonalityMutation, PersonalityRecord
from gep.genes.mutation import has_opportunity_signal

TRAITS = ("rigor", "creativity", "verbosity", "risk_tolerance", "obedience")


class PersonalityStatEntry(BaseModel):
    success: int = 0
    fail: int = 0
    avg_score: float = 0.5
    n: int = 0  # scored outcomes behind avg_score
    updated_at: str | None = None

    @property
    def total(self) -> int:
        return self.success + self.fail


class PersonalityStats(BaseModel):
    """Outcome statistics per personality key (stored under ``personality.stats``)."""

    entries: dict[str, PersonalityStatEntry] = Field(default_factory=dict)
    updated_at: str | None = None


class PersonalitySelection(BaseModel):
    """The cycle's personality and how it was chosen (the record the event keeps as ``meta.personality``)."""

    record: PersonalityRecord
    state: PersonalityState


def clamp01(x: float) -> float:
    if not math.isfinite(x):
        return 0.0
    return max(0.0, min(1.0, x))


def normalize(state: PersonalityState) -> PersonalityState:
    return PersonalityState(**{t: clamp01(float(getattr(state, t))) for t in TRAITS})


def _round_step(x: float, step: float = constants.PERSONALITY_KEY_STEP) -> str:
    # JavaScript's Math.round (half up), then toFixed(1), as the reference builds the key
    return f"{math.floor(x / step + 0.5) * step:.1f}"


def personality_key(state: PersonalityState) -> str:
    s = normalize(state)
    return "|".join(f"{t}={_round_step(getattr(s, t))}" for t in TRAITS)


def parse_key(key: str) -> PersonalityState:
    """The state a key describes (traits it does not name keep their defaults)."""
    values: dict[str, float] = {}
    for part in key.split("|"):
        name, _, raw = part.strip().partition("=")
        if name.strip() in TRAITS:
            try:
                values[name.strip()] = clamp01(float(raw))
            except ValueError:
                continue
    return normalize(PersonalityState(**values))


def personality_score(entry: PersonalityStatEntry) -> float:
    p = (entry.success + 1) / (entry.total + 2)
    sample_weight = min(1.0, entry.total / 8)
    return p * 0.75 + clamp01(entry.avg_score) * 0.25 * sample_weight


def best_known(stats: PersonalityStats, rng: random.Random) -> tuple[str, float] | None:
    scored = [(k, personality_score(e)) for k, e in sorted(stats.entries.items())
              if e.total >= constants.PERSONALITY_BEST_MIN_SAMPLES]
    if not scored:
        return None
    top = max(s for _, s in scored)
    ties = [k for k, s in scored if math.isclose(s, top, abs_tol=1e-12)]
    return (ties[0] if len(ties) == 1 else rng.choice(ties)), top


def _apply(state: PersonalityState, proposals: Sequence[PersonalityMutation], clip: float,
           limit: int) -> tuple[PersonalityState, list[PersonalityMutation]]:
    values = {t: getattr(state, t) for t in TRAITS}
    applied: list[PersonalityMutation] = []
    for m in proposals:
        if len(applied) >= limit:
            break
        if m.param not in TRAITS or not math.isfinite(m.delta):
            continue
        d = max(-clip, min(clip, m.delta))
        values[m.param] = clamp01(values[m.param] + d)
        applied.append(PersonalityMutation(param=m.param, delta=round(d, 6), reason=m.reason[:140]))
    return PersonalityState(**values), applied


def _has_error(signals: Sequence[str]) -> bool:
    return "log_error" in signals or any(s.startswith(("errsig:", "errsig_norm:")) for s in signals)


def propose_mutations(state: PersonalityState, reason: str, *, drift: bool,
                      signals: Sequence[str]) -> list[PersonalityMutation]:
    def m(param: str, delta: float, why: str) -> PersonalityMutation:
        return PersonalityMutation(param=param, delta=delta, reason=why)

    if drift:
        out = [m("creativity", 0.1, reason or "drift enabled"), m("risk_tolerance", -0.05, "drift safety clamp")]
    elif "protocol_drift" in signals:
        out = [m("obedience", 0.1, reason or "protocol drift"), m("rigor", 0.05, "tighten protocol compliance")]
    elif _has_error(signals):
        out = [m("rigor", 0.1, reason or "repair instability"),
               m("risk_tolerance", -0.1, "reduce risky changes under errors")]
    elif has_opportunity_signal(signals):
        out = [m("creativity", 0.1, reason or "opportunity signal detected"),
               m("risk_tolerance", 0.05, "allow exploration for innovation")]
    else:
        out = [m("creativity", 0.05, reason or "plateau creativity nudge"), m("verbosity", -0.05, "reduce noise")]
    if state.obedience >= 0.95:
        out = [m("creativity", 0.05, "obedience saturated") if x.param == "obedience" else x for x in out]
    return out


def trigger_reason(recent_events: Sequence[EvolutionEvent], *, drift: bool) -> str | None:
    """Why personality mutations should fire this cycle, or None."""
    if drift:
        return "drift enabled"
    tail = list(recent_events)[-6:]
    outcomes = [e.outcome.status for e in tail if e.outcome.status]
    if len(outcomes) >= 4 and outcomes[-4:].count("failed") >= 3:
        return "long failure streak"
    with_mutation = [e for e in tail if e.mutation_id]
    if len(with_mutation) >= 3 and all(e.outcome.status == "failed" for e in with_mutation[-3:]):
        return "mutation consecutive failures"
    return None


def select_personality(
    *,
    current: PersonalityState,
    stats: PersonalityStats,
    recent_events: Sequence[EvolutionEvent],
    rng: random.Random,
    now: datetime,
    signals: Sequence[str] = (),
    drift: bool = False,
) -> PersonalitySelection:
    """The personality for this cycle: natural selection, then triggered mutations (``now`` is unused by the
    rules and accepted so every pure stage takes the same clock)."""
    del now
    state = normalize(current)
    applied: list[PersonalityMutation] = []

    best = best_known(stats, rng)
    if best is not None:
        target = parse_key(best[0])
        diffs = sorted(((t, getattr(target, t) - getattr(state, t)) for t in TRAITS),
                       key=lambda d: -abs(d[1]))  # stable: trait order breaks ties, as the reference
        props = [PersonalityMutation(param=t, delta=d, reason="natural_selection")
                 for t, d in diffs if abs(d) >= constants.PERSONALITY_NATURAL_MIN_DIFF][:2]
        state, done = _apply(state, props, constants.PERSONALITY_NATURAL_STEP, 2)
        applied += done

    why = trigger_reason(recent_events, drift=drift)
    if why is not None:
        room = constants.PERSONALITY_MAX_MUTATIONS - len(applied)
        props = propose_mutations(state, why, drift=drift, signals=[str(s) for s in signals])
        state, done = _apply(state, props, constants.PERSONALITY_MUTATION_CLIP, min(2, room))
        applied += done

    key = personality_key(state)
    record = PersonalityRecord(key=key, known=key in stats.entries, mutations=applied,
                               best_known_key=best[0] if best else None,
                               best_known_score=round(best[1], 6) if best else None, triggered=why)
    return PersonalitySelection(record=record, state=state)


def update_stats(stats: PersonalityStats, key: str, outcome_status: str, score: float | None,
                 now: datetime) -> PersonalityStats:
    """A new PersonalityStats with one outcome added to ``key`` (the input is not modified)."""
    entries = {k: v.model_copy() for k, v in stats.entries.items()}
    e = entries.get(key, PersonalityStatEntry())
    status = str(outcome_status).lower()
    if status == "success":
        e.success += 1
    elif status == "failed":
        e.fail += 1
    if score is not None and math.isfinite(score):
        sc = clamp01(score)
        e.n += 1
        e.avg_score = e.avg_score + (sc - e.avg_score) / e.n
    e.updated_at = iso(now)
    entries[key] = e
    return PersonalityStats(entries=entries, updated_at=iso(now))
