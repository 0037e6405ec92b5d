"""A live problem is never starved by the loop rules (issue 28).

The seed's loop rules (a repair loop, an empty-cycle loop, suppression of frequent signals) remove the error
signals from a cycle, which is right when the same old lines keep driving repair, and wrong when the error
keeps happening: in the issue's run problems were open in every cycle, yet half the cycles ran as
``empty_cycle_loop_detected`` with the errors removed. Deviation from the reference (documented in
docs/learning.md): the signals are extracted exactly as the seed says, then an ``errsig:`` the loop rules
removed is put back, with ``log_error``, when a log line of that error (by its learning key) was written
after the last cycle that tried it (or it was never tried); the loop markers that ask for something else
than repair (``empty_cycle_loop_detected``, ``repair_loop_detected``, ``force_innovation_after_repair_loop``,
``stable_success_plateau``) are dropped then.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime

from gep.core.models import EvolutionEvent
from gep.learning.memory_graph import event_time
from gep.learning.problem_key import learning_key
from gep.signals.sources import FileTail

LOOP_MARKERS = ("empty_cycle_loop_detected", "repair_loop_detected", "force_innovation_after_repair_loop",
                "stable_success_plateau", "evolution_stagnation_detected")
_LEAD_TIME = re.compile(r"^\s*\[?\d{4}-\d{2}-\d{2}[T ][\d:.,]+\s?(?:Z|UTC|[+-]\d{2}:?\d{2})?\]?\s*")


def _key(text: str) -> str:
    return learning_key(_LEAD_TIME.sub("", text, count=1)) or ""


def _same(key: str, other: str) -> bool:
    """One error: the keys agree over the shorter one (an ``errsig:`` is clipped at 260 characters)."""
    k = min(len(key), len(other))
    return k >= min(len(key), 60) and key[:k] == other[:k]


def _last_attempt(key: str, events: Sequence[EvolutionEvent]) -> datetime | None:
    times = [t for e in events if e.genes_used and (t := event_time(e)) is not None
             and any(s.startswith("errsig:") and _same(key, _key(s[len("errsig:"):])) for s in e.signals)]
    return max(times, default=None)


def _has_new_line(key: str, tails: Sequence[FileTail], since: datetime | None) -> bool:
    for tail in tails:
        if tail.kind == "transcript":
            continue
        for line in tail.lines:
            if line.at is not None and (since is None or line.at > since) and _same(key, _key(line.text)):
                return True
    return False


def restore_live(final: Sequence[str], corpus: Sequence[str], tails: Sequence[FileTail],
                 events: Sequence[EvolutionEvent]) -> list[str]:
    """``final`` (the seed's signals) with the live errors the loop rules removed put back."""
    removed = [s for s in corpus if s.startswith("errsig:") and s not in final]
    live = [s for s in removed if _has_new_line(k := _key(s[len("errsig:"):]), tails, _last_attempt(k, events))]
    if not live:
        return list(final)
    kept = [s for s in final if s not in LOOP_MARKERS]
    return list(dict.fromkeys(["log_error", *live, *kept]))
