"""The holdout's draw: whether one cycle or one agent session runs without what was learned.

Stdlib only: the SessionStart hook's fast path (gep/learning/context_cache.py) draws without pydantic. The share
is ``Settings.holdout`` (gep.toml ``holdout = 0.1``, ``GEP_HOLDOUT``); the rng is the caller's (a cycle's
``ctx.rng("holdout")``, the hook's), so a draw replays from its seed.
"""

from __future__ import annotations

import random


def held_out(share: float, rng: random.Random) -> bool:
    """True for about ``share`` of the draws; never for a share of 0 (no number is drawn then)."""
    return share > 0 and rng.random() < share
