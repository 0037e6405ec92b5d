"""Which tries a cycle's prompt recounts: a verified fix of a problem no signal of the cycle shows is left out.

A recent outcome line names the function a change touched and its diff (issue 41 point 4). For a verified fix
of a problem that is gone, and that no error line of this cycle resembles, the line gives the agent nothing to
act on and names code that now works: an agent whose signals name no problem (a generic ``perf_bottleneck``,
an innovate cycle) reads it as the place to work and rewrites the fixed function, undoing the fix or wasting
the attempt (bench/evolution.py, dev seeds 1-3: every attempt the full engine spent on an already fixed
function came from such a line; docs/learning.md). A fix stays recounted while its problem is live again or
pending a verdict, and when an error line of the cycle is the same problem or a similar one (the same exception
family or the same file, gep/learning/similar_problems.py): what worked on this or a similar problem is what the
agent should read. Failed, rolled back and unheld tries are always recounted.

Pure: events and signals in.
"""

from __future__ import annotations

from collections.abc import Sequence

from gep.core.models import EvolutionEvent
from gep.learning.problem_key import learning_key, outcome_signals
from gep.learning.similar_problems import changed_stems, error_lines, similar_reason


def settled(event: EvolutionEvent, signals: Sequence[str]) -> bool:
    """``event`` is a verified fix and no error line of ``signals`` is its problem or a similar one."""
    if event.meta.fix_verdict != "verified":
        return False
    now = error_lines(signals)
    files = changed_stems(event)
    for fixed in error_lines(outcome_signals(event) or []):
        if any(learning_key(n) == learning_key(fixed) or similar_reason(n, fixed, files) for n in now):
            return False
    return True


def recounted(events: Sequence[EvolutionEvent], signals: Sequence[str]) -> list[EvolutionEvent]:
    """``events`` without the verified fixes of settled problems (in the order given)."""
    return [e for e in events if not settled(e, signals)]
