"""Lessons recalled by problem, whatever gene is picked now (issue 28).

Lessons are written on a topic, ``<gene>@<situation>``, and the seed recalls them for the selected gene. But
the next cycle on one error often picks another gene (the failure-ratio rules, a ban, drift), and then its
prompt carried nothing of what was tried on that error: the next agent was free to repeat the mistake. What
was tried on a problem belongs to the problem.

The problem of a situation is its specific signals by their learning key (``errsig_norm:`` of the error's
key, gep/learning/problem_key.py; a recurring error, a feature or improvement request); a situation with none of
them is its whole signal set, compared by the memory graph's similarity rule. A lesson is on the same
problem when it shares a specific signal with now, or (no specific signal either side) when its situation is
similar. Recalled: the strongest and the most recent first, each lesson that contradicts another shown next
to it, within the prompt's lesson budget (characters).

Capsules follow the problem too: one is offered for reuse on its own problem; a problem with none gets the
capsule of a verified fix of a problem of the same kind (the same exception class in another function, issue
41): the twin's fix is the example the next agent can follow. A fix not verified, one that did not hold, one
a person said did not help, or one whose function still logs warnings is never offered that way.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from datetime import datetime

from gep.core import constants
from gep.core.models import Capsule
from gep.learning.feedback import situation_key_signals
from gep.learning.lessons import Lesson, Recalled, heads, marker
from gep.learning.memory_graph import jaccard
from gep.learning.problem_key import SPECIFIC as SPECIFIC  # named here too
from gep.learning.problem_key import learning_key, specific_identities
from gep.learning.resolved import FIX_VERDICT_KEY
from gep.learning.similar_problems import error_lines, family


def problem_of(situation: Sequence[str]) -> set[str]:
    """The specific signals that name the problem (empty for a situation of generic signals only)."""
    return specific_identities(situation)


def same_problem(lesson: Lesson, situation: Sequence[str], problem: set[str]) -> bool:
    mine = problem_of(lesson.situation)
    if problem or mine:
        return bool(problem & mine)
    return jaccard(lesson.situation, situation) >= constants.SIGNAL_KEY_JACCARD_MIN


def _side_by_side(order: list[Lesson], pool: Sequence[Lesson]) -> list[Lesson]:
    """Each lesson followed by the lessons it contradicts (when they are on the problem too)."""
    by_id = {x.id: x for x in pool}
    out: list[Lesson] = []
    for x in order:
        for y in [x, *(by_id[c] for c in x.conflicts_with if c in by_id)]:
            if y not in out:
                out.append(y)
    return out


def recall_problem(lessons: Sequence[Lesson], *, signals: Sequence[str], now: datetime,
                   limit: int = constants.LESSON_RECALL_LIMIT) -> list[Recalled]:
    """Lessons of any gene on this problem: alternately the most recent and the strongest not yet taken."""
    situation = situation_key_signals(signals)
    problem = problem_of(situation)
    pool = [x for x in heads(lessons) if same_problem(x, situation, problem)]
    recent = sorted(pool, key=lambda x: (x.created_at, x.id), reverse=True)
    strong = sorted(pool, key=lambda x: (-x.strength, -x.created_at.timestamp(), x.id))
    order: list[Lesson] = []
    for pair in zip(strong, recent, strict=True):
        order += [x for x in pair if x not in order]
    chosen = _side_by_side(order, pool)[:max(0, limit)]
    return [Recalled(lesson=x, why="strong" if x in strong[:1] else "recent", text=f"{marker(x, now)}: {x.content}")
            for x in chosen]


def merge_recalled(first: Sequence[Recalled], then: Sequence[Recalled], limit: int) -> list[Recalled]:
    """The problem's lessons, then the gene's own on its topic, each lesson once."""
    out: list[Recalled] = []
    for r in [*first, *then]:
        if all(o.lesson.id != r.lesson.id for o in out):
            out.append(r)
    return out[:max(0, limit)]


def for_this_problem(capsules: Sequence[Capsule], signals: Sequence[str],
                     rejected: Collection[str] = frozenset(), log: str = "") -> list[Capsule]:
    """Capsules offered for reuse on this problem: those of the same problem (or, when it names none, a similar
    situation); a capsule from another error is not an example of how to fix this one. None of them: the one
    verified fix of a problem of the same kind (:func:`of_the_same_kind`; ``log``: the log lines read this
    cycle). ``rejected``: capsules of cycles a person said did not help, never offered."""
    capsules = [c for c in capsules if c.id not in rejected]
    situation = situation_key_signals(signals)
    problem = problem_of(situation)
    out = []
    for c in capsules:
        trigger = situation_key_signals(c.trigger)
        mine = problem_of(trigger)
        if (problem & mine) if (problem or mine) else jaccard(trigger, situation) >= constants.SIGNAL_KEY_JACCARD_MIN:
            out.append(c)
    return out or of_the_same_kind(capsules, signals, log)


def _words(line: str) -> set[str]:
    return set((learning_key(line) or "").split())


_COMPLAINS = re.compile(r"\b(?:WARN(?:ING)?|ERROR|CRITICAL|FATAL|[A-Z]\w*(?:Error|Exception))\b")
_DEF = re.compile(r"\b(?:def|function|func|fn)\s+([A-Za-z_]\w*)\s*\(")


def still_complains(capsule: Capsule, log: str) -> bool:
    """Whether a function the capsule's change touched (a ``def`` its diff shows) is named by a warning or an
    error in ``log``: a change that swallowed an error makes its line go, and the function then logs that it
    failed in other words ("<function> returned no result"). Such a fix is no example to follow."""
    names = set(_DEF.findall(capsule.diff or ""))
    if not names or not log:
        return False
    words = re.compile(r"\b(?:" + "|".join(sorted(map(re.escape, names))) + r")\b")
    return any(_COMPLAINS.search(line) and words.search(line) for line in log.splitlines())


def of_the_same_kind(capsules: Sequence[Capsule], signals: Sequence[str], log: str = "") -> list[Capsule]:
    """The capsule of a verified fix of another problem of the same kind as this cycle's first error that has
    one (the same exception class: a ``KeyError`` fixed in one function is an example for a ``KeyError`` in
    another), as a list of one: among several, the one whose error line reads most like this one, then the
    newest. A fix not yet judged, one that did not hold (its approach did not make the problem go), or one
    whose function still complains in ``log`` (:func:`still_complains`) is never offered."""
    verified = [c for c in capsules if (c.model_extra or {}).get(FIX_VERDICT_KEY) == "verified"
                and not still_complains(c, log)]
    for now in error_lines(signals):
        kind, key = family(now), learning_key(now)
        if kind is None:
            continue
        best: tuple[float, int] | None = None
        chosen: Capsule | None = None
        for i, c in enumerate(verified):
            for line in error_lines(c.trigger):
                if family(line) != kind or learning_key(line) == key:
                    continue
                a, b = _words(now), _words(line)
                rank = (len(a & b) / len(a | b) if a | b else 0.0, i)
                if best is None or rank > best:
                    best, chosen = rank, c
        if chosen is not None:
            return [chosen]
    return []
