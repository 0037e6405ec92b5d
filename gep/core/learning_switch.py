"""Which learning mechanisms a cycle uses: the one place that reads ``learning`` / ``learning_off``.

``learning = "off"`` (gep.toml, or ``GEP_LEARNING=off``) is the plain engine: selection by signal match, drift
and the dominance cap (seed 002 rules that learn nothing), with nothing the store learned reaching selection or
the prompt. It is the evaluation's baseline arm (bench/evolution.py) and a kill switch. ``learning_off`` switches
single mechanisms off for ablations (``learning_off = ["lessons"]``, ``GEP_LEARNING_OFF=lessons,feedback``).
What is recorded does not change (events, lessons, feedback, capsules are still written), so switching learning
back on finds the history; only its use is gated. An experimental mechanism (``EXPERIMENTAL``) is off unless
``learning_on`` names it (``learning_on = ["problem_memory"]``, ``GEP_LEARNING_ON=problem_memory``);
``learning_off`` and ``learning = "off"`` still win.

Mechanisms (a new one is added to ``gep.core.config.LearningMechanism`` and gated with :meth:`LearningSwitch.on`):
  memory_graph     the memory graph's expected success per gene in similar situations (selection)
  feedback         feedback scores (seed 003 usefulness) in the gene's rank and the newcomer trial
  bans             bans from recent failures, failed capsules, fixes that did not hold and the memory graph
  verdicts         fix verdicts: a resolved error dropped from the signals, verdicts on earlier fixes recorded
  lessons          the gene's own lessons (tries older than the recent outcomes) and the synthesis request in the
                   prompt (experimental: off unless in learning_on; a person's notes reach the prompt whatever)
  capsules         a stored capsule reused (selection and prompt): this problem's, else a verified fix of
                   the same kind of problem (gep/learning/lessons_by_problem.py) (experimental: off unless in
                   learning_on, or share_capsules = true)
  recent_outcomes  the "recent outcomes" of earlier cycles in the prompt
  drift            the stochastic pick among the top genes (off: always the best)
  dominance_cap    a gene picked too often yields to the next best
  avoid            the avoid-list: a gene that failed twice on a problem left out there, "do not" lines (gep/learning/avoid.py)
  problem_memory   lessons recalled by problem whatever the gene, and what worked on similar problems
                   (experimental: off unless in learning_on)
  context          what agent sessions receive (the SessionStart hook, `gep context`: gep/learning/agent_context.py)
"""

from __future__ import annotations

from typing import get_args

from pydantic import BaseModel, ConfigDict

from gep.core.config import LearningMechanism, Settings

MECHANISMS: tuple[str, ...] = get_args(LearningMechanism)
# seed-002 rules that learn nothing: they stay in the plain engine
PLAIN_ENGINE = ("drift", "dominance_cap")
# off by default, on when named in ``learning_on`` (``GEP_LEARNING_ON``): not shown to help in the evaluation world
# built for them (docs/learning.md, "Issue 41's mechanisms")
EXPERIMENTAL = ("problem_memory", "lessons", "capsules")


class LearningSwitch(BaseModel):
    model_config = ConfigDict(frozen=True)

    off: frozenset[str] = frozenset()

    def on(self, mechanism: str) -> bool:
        assert mechanism in MECHANISMS, mechanism  # a typo must not silently leave a mechanism on
        return mechanism not in self.off


def learning_switch(settings: Settings) -> LearningSwitch:
    """The mechanisms switched off by these settings."""
    # sharing capsules across a fleet asks for their reuse: it names capsules as learning_on does
    asked = {*settings.learning_on, *(["capsules"] if settings.share_capsules else [])}
    off: set[str] = set(settings.learning_off) | {m for m in EXPERIMENTAL if m not in asked}
    if settings.learning == "off":
        off |= {m for m in MECHANISMS if m not in PLAIN_ENGINE}
    return LearningSwitch(off=frozenset(off))
