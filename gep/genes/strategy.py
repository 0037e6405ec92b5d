"""Strategy presets: how a workspace's evolution leans between repair, optimize and innovate.

Chosen by ``--strategy`` (explicit) > env ``GEP_STRATEGY`` > automatic: the first cycles stabilise
(``early-stabilize``), saturation signals (``force_steady_state``, ``evolution_saturation``) switch to
``steady-state``, anything else is ``balanced``. ``auto`` (or nothing) asks for the automatic choice.

Unlike the reference, where the ratios are printed but never used, the ratios decide the mutation's intent
when signals do not force one (gep.genes.mutation), and ``schedule_every`` makes scheduled runs under steady state
do work only every 5th tick (every 10th when ``force_steady_state`` is signalled).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict

from gep.core import constants
from gep.core.errors import ConfigError

AUTO = "auto"
ENV_VAR = "GEP_STRATEGY"
SATURATION_SIGNALS = ("force_steady_state", "evolution_saturation")


class StrategyPreset(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    label: str
    repair: float
    optimize: float
    innovate: float
    repair_loop_threshold: float
    description: str
    schedule_every: int = 1  # a scheduled tick does work every N ticks
    automatic: bool = False  # chosen by the automatic rules rather than asked for


def _preset(name: str, label: str, repair: float, optimize: float, innovate: float, loop: float,
            description: str, schedule_every: int = 1) -> StrategyPreset:
    return StrategyPreset(name=name, label=label, repair=repair, optimize=optimize, innovate=innovate,
                          repair_loop_threshold=loop, description=description, schedule_every=schedule_every)


# ratios and repair-loop thresholds are the reference's
PRESETS: dict[str, StrategyPreset] = {
    p.name: p
    for p in (
        _preset("balanced", "Balanced", 0.20, 0.30, 0.50, 0.50, "Everyday mix of fixing, improving and trying."),
        _preset("innovate", "Innovation Focus", 0.05, 0.15, 0.80, 0.30,
                "The workspace is stable: favour new capabilities."),
        _preset("harden", "Hardening", 0.40, 0.40, 0.20, 0.70, "After big changes: favour robustness."),
        _preset("repair-only", "Repair Only", 0.80, 0.20, 0.00, 1.00, "Emergency: fix what is broken, nothing new."),
        _preset("early-stabilize", "Early Stabilization", 0.60, 0.25, 0.15, 0.80,
                "The first cycles of a workspace: fix first, innovate later."),
        _preset("steady-state", "Steady State", 0.60, 0.30, 0.10, 0.90,
                "Evolution has saturated: small maintenance, scheduled runs mostly idle.",
                schedule_every=constants.STEADY_STATE_SCHEDULE_EVERY),
    )
}


def _normalise(name: str) -> str:
    return name.strip().lower().replace("_", "-")


def get_preset(name: str) -> StrategyPreset:
    key = _normalise(name)
    if key not in PRESETS:
        raise ConfigError(f"unknown strategy '{name}': choose one of {', '.join(PRESETS)} or {AUTO}")
    return PRESETS[key]


def automatic_strategy(*, cycle_count: int, signals: Sequence[str]) -> StrategyPreset:
    """Saturation → steady-state; the first cycles → early-stabilize; otherwise balanced."""
    if any(s in SATURATION_SIGNALS for s in signals):
        name = "steady-state"
    elif 0 <= cycle_count < constants.EARLY_STABILIZE_CYCLES:
        name = "early-stabilize"
    else:
        name = "balanced"
    return PRESETS[name].model_copy(update={"automatic": True})


def resolve_strategy(*, requested: str | None, env: Mapping[str, str], cycle_count: int,
                     signals: Sequence[str]) -> StrategyPreset:
    """The preset for this cycle. ``cycle_count``: cycles completed before this one."""
    for source in (requested, env.get(ENV_VAR)):
        if source is not None and source.strip():
            if _normalise(source) == AUTO:
                break
            return get_preset(source)
    return automatic_strategy(cycle_count=cycle_count, signals=signals)


class SchedulerState(BaseModel):
    """Kept in the store: how many scheduled ticks ran under steady state, and the last skip."""

    steady_ticks: int = 0
    skipped: int = 0
    last_skip_reason: str | None = None
    last_skip_at: str | None = None


def should_skip_scheduled_tick(*, preset: StrategyPreset, signals: Sequence[str], tick: int) -> str | None:
    """Why a scheduled tick should do nothing (recorded as the skip reason), or None to run the cycle.

    Under a preset with ``schedule_every > 1`` only every N-th tick runs; error signals always run.
    """
    every = preset.schedule_every
    if every > 1 and "force_steady_state" in signals:
        every = max(every, constants.STEADY_STATE_FORCED_SCHEDULE_EVERY)
    if every <= 1:
        return None
    if any(s == "log_error" or s.startswith(("errsig:", "errsig_norm:")) for s in signals):
        return None
    if tick % every == 0:
        return None
    return f"{preset.name}: scheduled runs do work every {every} ticks (tick {tick}, next at {tick + every - tick % every})"
