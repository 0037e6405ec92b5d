"""Personality: keys, stats, natural selection, triggered mutations, clamping."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from gep.core.models import EvolutionEvent, Outcome, PersonalityState
from gep.genes.personality import (
    TRAITS,
    PersonalityStatEntry,
    PersonalityStats,
    parse_key,
    personality_key,
    select_personality,
    update_stats,
)

NOW = datetime(2026, 2, 1, tzinfo=UTC)
DEFAULT_KEY = "rigor=0.7|creativity=0.3|verbosity=0.3|risk_tolerance=0.4|obedience=0.9"


def events(*statuses: str, mutation: bool = False) -> list[EvolutionEvent]:
    return [EvolutionEvent(id=f"e{i}", outcome=Outcome(status=s), mutation_id=f"mut_{i}" if mutation else None)
            for i, s in enumerate(statuses)]


def choose(current=None, stats=None, recent=(), seed=0, **kw):
    return select_personality(current=current or PersonalityState(), stats=stats or PersonalityStats(),
                              recent_events=list(recent), rng=random.Random(seed), now=NOW, **kw)


@pytest.mark.parametrize("value, rounded", [(0.05, "0.1"), (0.15, "0.1"), (0.25, "0.3"), (0.35, "0.3"),
                                            (0.45, "0.5"), (0.85, "0.9"), (0.94, "0.9"), (1.0, "1.0"),
                                            (1.7, "1.0"), (-0.2, "0.0")])
def test_key_rounds_like_the_reference_and_clamps(value, rounded):
    assert personality_key(PersonalityState(rigor=value)).split("|")[0] == f"rigor={rounded}"


def test_default_key_and_parse_round_trip():
    assert personality_key(PersonalityState()) == DEFAULT_KEY
    assert personality_key(parse_key(DEFAULT_KEY)) == DEFAULT_KEY
    assert parse_key("rigor=0.2|bogus=9|creativity=x").rigor == pytest.approx(0.2)


def test_update_stats_counts_and_averages_without_mutating_input():
    s0 = PersonalityStats()
    s1 = update_stats(s0, "k", "success", 0.9, NOW)
    s2 = update_stats(s1, "k", "failed", 0.3, NOW)
    s3 = update_stats(s2, "k", "empty", None, NOW)
    assert s0.entries == {} and s1.entries["k"].success == 1 and s1.entries["k"].fail == 0
    e = s3.entries["k"]
    assert (e.success, e.fail, e.n) == (1, 1, 2)
    assert e.avg_score == pytest.approx(0.6)
    assert e.updated_at == "2026-02-01T00:00:00.000Z" == s3.updated_at
    assert update_stats(s0, "k", "success", 7.0, NOW).entries["k"].avg_score == 1.0  # score clamped


def test_nothing_known_nothing_triggered_keeps_the_state():
    sel = choose()
    assert sel.state == PersonalityState() and sel.record.key == DEFAULT_KEY
    assert sel.record.known is False and sel.record.mutations == [] and sel.record.triggered is None
    assert choose(stats=PersonalityStats(entries={DEFAULT_KEY: PersonalityStatEntry(success=1)})).record.known


def test_natural_selection_moves_toward_the_best_known_key():
    best = "rigor=0.9|creativity=0.3|verbosity=0.3|risk_tolerance=0.1|obedience=0.9"
    stats = PersonalityStats(entries={
        best: PersonalityStatEntry(success=8, fail=0, avg_score=0.9, n=8),
        DEFAULT_KEY: PersonalityStatEntry(success=1, fail=5, avg_score=0.3, n=6),
        "rigor=0.0|creativity=1.0|verbosity=0.3|risk_tolerance=1.0|obedience=0.0":
            PersonalityStatEntry(success=2, fail=0),  # better p but under 3 samples: not eligible
    })
    sel = choose(stats=stats)
    assert sel.record.best_known_key == best
    assert [(m.param, m.delta, m.reason) for m in sel.record.mutations] == [
        ("risk_tolerance", pytest.approx(-0.1), "natural_selection"),
        ("rigor", pytest.approx(0.1), "natural_selection")]
    assert sel.state.rigor == pytest.approx(0.8) and sel.state.risk_tolerance == pytest.approx(0.3)
    # repeated cycles converge on the best key and then stop moving
    state = PersonalityState()
    for _ in range(5):
        state = choose(current=state, stats=stats).state
    assert personality_key(state) == best
    assert choose(current=state, stats=stats).record.mutations == []


@pytest.mark.parametrize("statuses, mutation, reason", [
    (("success", "failed", "failed", "failed"), False, "long failure streak"),
    (("failed", "success", "failed", "failed"), False, "long failure streak"),
    (("failed", "failed", "failed"), True, "mutation consecutive failures"),  # fewer than 4 outcomes
    (("failed", "failed", "failed"), False, None),
    (("success", "success", "failed", "failed"), False, None),
    (("failed", "failed"), False, None),
])
def test_failure_streak_triggers_mutations(statuses, mutation, reason):
    sel = choose(recent=events(*statuses, mutation=mutation), signals=["log_error"])
    assert sel.record.triggered == reason
    if reason:
        assert [(m.param, m.delta) for m in sel.record.mutations] == [("rigor", pytest.approx(0.1)),
                                                                ("risk_tolerance", pytest.approx(-0.1))]
        assert sel.state.rigor == pytest.approx(0.8)
    else:
        assert sel.record.mutations == []


def test_drift_and_signals_choose_the_mutation():
    drifted = choose(drift=True)
    assert drifted.record.triggered == "drift enabled"
    assert [m.param for m in drifted.record.mutations] == ["creativity", "risk_tolerance"]
    streak = events("failed", "failed", "failed", "failed")
    assert [m.param for m in choose(recent=streak, signals=["capability_gap"]).record.mutations] == \
        ["creativity", "risk_tolerance"]
    assert [m.param for m in choose(recent=streak, signals=["protocol_drift"]).record.mutations] == ["obedience", "rigor"]
    saturated = choose(current=PersonalityState(obedience=0.97), recent=streak, signals=["protocol_drift"])
    assert [m.param for m in saturated.record.mutations] == ["creativity", "rigor"]


def test_values_stay_in_bounds_and_at_most_four_changes():
    rng = random.Random(5)
    streak = events("failed", "failed", "failed", "failed")
    for i in range(300):
        current = PersonalityState(**{t: rng.choice([0.0, 0.02, 0.5, 0.98, 1.0]) for t in TRAITS})
        target = PersonalityState(**{t: rng.choice([0.0, 1.0]) for t in TRAITS})
        stats = PersonalityStats(entries={personality_key(target): PersonalityStatEntry(success=9)})
        sel = choose(current=current, stats=stats, recent=streak, seed=i, drift=bool(i % 2),
                     signals=rng.choice([["log_error"], ["capability_gap"], []]))
        assert len(sel.record.mutations) <= 4
        assert all(0.0 <= getattr(sel.state, t) <= 1.0 for t in TRAITS)


def test_ties_between_best_keys_are_broken_by_the_rng_reproducibly():
    a = "rigor=0.9|creativity=0.3|verbosity=0.3|risk_tolerance=0.4|obedience=0.9"
    b = "rigor=0.5|creativity=0.3|verbosity=0.3|risk_tolerance=0.4|obedience=0.9"
    stats = PersonalityStats(entries={a: PersonalityStatEntry(success=5), b: PersonalityStatEntry(success=5)})
    picks = {choose(stats=stats, seed=s).record.best_known_key for s in range(30)}
    assert picks == {a, b}
    assert choose(stats=stats, seed=3) == choose(stats=stats, seed=3)
