"""Which tries a cycle's prompt recounts: none about a settled problem (fixed, verified, not shown again).

A recent outcome line names the function a change touched and its diff (issue 41 point 4). When a later fix of
that problem was verified and no error line of this cycle is that problem or a similar one, every line about
it (the verified fix, and the failed, empty or unheld tries before it) gives the agent nothing to act on and
names code that now works: an agent whose signals name no problem (a generic ``perf_bottleneck``, an innovate
cycle) reads it as the place to work and rewrites the fixed function, undoing the fix or wasting the attempt
(bench/evolution.py, dev seeds 1-3: each of the 12 attempts the full engine spent on an already fixed function
came from such a line; docs/learning.md). A problem stays recounted while it is live again, pending a verdict,
or like an error line of the cycle (the same exception family or the same file,
gep/learning/similar_problems.py): what worked on this or a similar problem is what the agent should read.
Tries that name no error line are always recounted.

Pure: events and signals in.
"""

from __future__ import annotations

from collections.abc import Sequence

from gep.core.models import EvolutionEvent
from gep.learning.problem_key import learning_key, outcome_signals
from gep.learning.similar_problems import changed_stems, error_lines, similar_reason


def _problems(event: EvolutionEvent) -> list[str]:
    return error_lines(outcome_signals(event) or event.signals)


def settled_problems(events: Sequence[EvolutionEvent], signals: Sequence[str]) -> set[str]:
    """The learning keys of the problems a verified fix among ``events`` settled and that no error line of
    ``signals`` is, or resembles."""
    now = error_lines(signals)
    out: set[str] = set()
    for e in events:
        if e.meta.fix_verdict != "verified":
            continue
        files = changed_stems(e)
        for fixed in _problems(e):
            key = learning_key(fixed)
            if key and not any(learning_key(n) == key or similar_reason(n, fixed, files) for n in now):
                out.add(key)
    return out


def settled(event: EvolutionEvent, done: set[str]) -> bool:
    """Every problem ``event`` was about is among ``done`` (``settled_problems``)."""
    keys = [learning_key(line) for line in _problems(event)]
    return bool(keys) and all(k in done for k in keys)


def recounted(events: Sequence[EvolutionEvent], signals: Sequence[str]) -> list[EvolutionEvent]:
    """``events`` without the tries on settled problems (in the order given)."""
    done = settled_problems(events, signals)
    return [e for e in events if not settled(e, done)]
