"""The measured effect of learning in one workspace, from its holdout: what `gep report` shows.

With ``holdout > 0`` that share of cycles ran without what was learned, drawn at random and marked
``meta.holdout`` (gep/core/holdout.py). The two groups are compared on verified fixes per cycle (a fix the next
cycles saw hold: ``meta.fix_verdict == "verified"``) and attempts per verified fix (cycles that tried a change:
committed or failed), with an anytime-valid interval of the difference of the rates (gep/eval/stats.py). Cycles
recorded before the holdout was on carry no mark and are left out.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from gep.core.models import EvolutionEvent
from gep.eval.stats import ALPHA, difference_sequence

# fewer cycles than this in either group: "not enough cycles yet" (the interval is valid before, but too wide
# to say anything: with 20 cycles a group's rate is known to within about +-0.5, with 10 +-0.9)
MIN_GROUP_CYCLES = 20
RAN = frozenset({"success", "failed", "empty", "abandoned", "interrupted"})
TRIED = frozenset({"success", "failed"})


class Group(BaseModel):
    cycles: int = 0  # cycles that ran
    attempts: int = 0  # ... that tried a change (committed or failed)
    verified: int = 0  # ... whose fix the next cycles saw hold

    @property
    def fixes_per_cycle(self) -> float | None:
        return self.verified / self.cycles if self.cycles else None

    @property
    def attempts_per_fix(self) -> float | None:
        return self.attempts / self.verified if self.verified else None

    def as_json(self) -> dict[str, float | int | None]:  # JSON edge: the report's data
        return {"cycles": self.cycles, "attempts": self.attempts, "verified_fixes": self.verified,
                "verified_fixes_per_cycle": self.fixes_per_cycle, "attempts_per_verified_fix": self.attempts_per_fix}


class LearningEffect(BaseModel):
    learned: Group  # cycles that ran with what was learned
    holdout: Group  # cycles drawn into the holdout (learning off)
    confidence: float = 1 - ALPHA
    difference: tuple[float, float] | None = None  # learned - holdout verified fixes per cycle; None: not enough
    enough: bool = False

    @property
    def verdict(self) -> str:
        if not self.enough or self.difference is None:
            return "not enough cycles yet"
        lo, hi = self.difference
        if lo > 0:
            return "learning helps here"
        if hi < 0:
            return "learning hurts here"
        return "no difference shown yet"

    def lines(self) -> list[str]:
        """The effect in a few lines of at most 80 columns."""
        out = [f"learning effect (holdout): {self.verdict}"]
        for name, g in (("with learning", self.learned), ("holdout", self.holdout)):
            rate = "-" if g.fixes_per_cycle is None else f"{g.fixes_per_cycle:.2f}"
            per = "-" if g.attempts_per_fix is None else f"{g.attempts_per_fix:.1f}"
            out.append(f"  {name:<13}{g.cycles:>5} cycles{g.verified:>5} verified{rate:>6} fixes/cycle"
                       f"{per:>6} attempts/fix")
        if self.difference is not None and self.enough:
            lo, hi = self.difference
            out.append(f"  difference in fixes/cycle: {lo:+.2f} to {hi:+.2f} "
                       f"({self.confidence:.0%}, valid at any time)")
        else:
            out.append(f"  needs {MIN_GROUP_CYCLES} cycles in each group (holdout = 0.1: about "
                       f"{MIN_GROUP_CYCLES * 10} cycles)")
        return out

    def as_json(self) -> dict[str, object]:  # JSON edge: the report's data
        return {"verdict": self.verdict, "enough": self.enough, "learned": self.learned.as_json(),
                "holdout": self.holdout.as_json(), "confidence": self.confidence,
                "difference": list(self.difference) if self.difference is not None and self.enough else None,
                "min_group_cycles": MIN_GROUP_CYCLES}


def _count(group: Group, event: EvolutionEvent) -> None:
    group.cycles += 1
    group.attempts += event.outcome.status in TRIED
    group.verified += event.meta.fix_verdict == "verified"


def learning_effect(events: Sequence[EvolutionEvent]) -> LearningEffect:
    """The two groups of the marked cycles that ran, and the interval once each has enough cycles."""
    learned, holdout = Group(), Group()
    for e in events:
        mark = e.meta.holdout
        if isinstance(mark, bool) and str(e.outcome.status) in RAN:
            _count(holdout if mark else learned, e)
    enough = min(learned.cycles, holdout.cycles) >= MIN_GROUP_CYCLES
    diff = difference_sequence(learned.verified, learned.cycles, holdout.verified, holdout.cycles)
    return LearningEffect(learned=learned, holdout=holdout, difference=diff if enough else None, enough=enough)
