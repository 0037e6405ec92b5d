"""Strategy presets: resolution order, automatic choice, errors, scheduled-tick skipping."""

from __future__ import annotations

import pytest

from gep.core.errors import ConfigError
from gep.genes.strategy import PRESETS, resolve_strategy, should_skip_scheduled_tick


def resolve(requested=None, env=None, cycle_count=20, signals=()):
    return resolve_strategy(requested=requested, env=env or {}, cycle_count=cycle_count, signals=list(signals))


def test_presets():
    assert list(PRESETS) == ["balanced", "innovate", "harden", "repair-only", "early-stabilize", "steady-state"]
    for p in PRESETS.values():
        assert p.repair + p.optimize + p.innovate == pytest.approx(1.0)
    assert (PRESETS["balanced"].repair, PRESETS["balanced"].optimize, PRESETS["balanced"].innovate) == (0.2, 0.3, 0.5)
    assert PRESETS["steady-state"].schedule_every == 5
    assert all(p.schedule_every == 1 for n, p in PRESETS.items() if n != "steady-state")


@pytest.mark.parametrize("requested, env, cycle_count, signals, expected", [
    ("innovate", {"GEP_STRATEGY": "harden"}, 0, ["force_steady_state"], "innovate"),  # explicit wins
    (None, {"GEP_STRATEGY": "harden"}, 0, ["force_steady_state"], "harden"),        # then env
    ("", {"GEP_STRATEGY": "Repair_Only"}, 20, [], "repair-only"),                    # normalised
    ("auto", {"GEP_STRATEGY": "harden"}, 20, [], "balanced"),                        # auto: automatic
    (None, {"GEP_STRATEGY": "auto"}, 2, [], "early-stabilize"),
    (None, {}, 0, [], "early-stabilize"),                                            # first cycles
    (None, {}, 4, [], "early-stabilize"),
    (None, {}, 5, [], "balanced"),
    (None, {}, 2, ["evolution_saturation"], "steady-state"),                         # saturation
    (None, {}, 50, ["force_steady_state"], "steady-state"),
    ("balanced", {}, 0, [], "balanced"),                                             # asked for: kept
])
def test_resolution(requested, env, cycle_count, signals, expected):
    p = resolve(requested, env, cycle_count, signals)
    assert p.name == expected
    asked = requested if requested else env.get("GEP_STRATEGY")
    assert p.automatic is (asked in (None, "auto"))


@pytest.mark.parametrize("bad", ["agressive", "balance", "steady state"])
def test_unknown_strategy_is_a_config_error_naming_the_valid_ones(bad):
    with pytest.raises(ConfigError) as err:
        resolve(bad)
    msg = str(err.value)
    assert bad in msg and "\n" not in msg
    assert all(name in msg for name in PRESETS)
    with pytest.raises(ConfigError):
        resolve(None, {"GEP_STRATEGY": bad})


def test_scheduled_ticks_under_steady_state():
    steady = PRESETS["steady-state"]
    runs = [t for t in range(1, 21) if should_skip_scheduled_tick(preset=steady, signals=[], tick=t) is None]
    assert runs == [5, 10, 15, 20]
    reason = should_skip_scheduled_tick(preset=steady, signals=[], tick=3)
    assert reason and "steady-state" in reason and "every 5" in reason
    forced = [t for t in range(1, 21)
              if should_skip_scheduled_tick(preset=steady, signals=["force_steady_state"], tick=t) is None]
    assert forced == [10, 20]
    assert should_skip_scheduled_tick(preset=steady, signals=["log_error"], tick=3) is None  # errors always run


@pytest.mark.parametrize("name", ["balanced", "innovate", "harden", "repair-only", "early-stabilize"])
def test_other_presets_never_skip(name):
    assert all(should_skip_scheduled_tick(preset=PRESETS[name], signals=[], tick=t) is None for t in range(12))
