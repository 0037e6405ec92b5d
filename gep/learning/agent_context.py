"""What the workspace has learned that an agent should know now: the text a Claude Code ``SessionStart`` hook
adds to a new session (``gep capture``) and ``gep context`` prints for other agents.

Pure: events, lessons, feedback and behavioural signals in, a bounded text and the items it carries out. Three
parts, each only what bears on now:

* **live problems**: the problems the latest finished cycle still saw (a problem a verified fix resolved is
  dropped from a cycle's signals, so nothing from a resolved problem is shown): the avoid-list's entries on them
  (gep/learning/avoid.py), then what was tried on them before: approaches that failed first (a short "avoid" line), then
  what worked, strongest and newest first;
* **how the people here want the work done**: preferences, corrections and style signals (seed 000: their
  one-line summaries only, never the words of the exchange), the most repeated first;
* **what a person said** in feedback notes, newest first.

Everything is redacted here as well (the stores redact on the way in; this text leaves the engine). Lessons
that sessions kept ignoring (``gep.learning.injections``) are left out.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel, Field

from gep.core import constants
from gep.core.learned import parse_at
from gep.core.learned_text import LABEL, fenced_block, one_line
from gep.core.models import EvolutionEvent
from gep.core.sanitize import redact
from gep.learning.avoid import build_avoid_list
from gep.learning.feedback import FeedbackSignal, Observation
from gep.learning.lessons import Lesson, Stance, heads
from gep.learning.problem_key import outcome_signals
from gep.learning.resolved import is_specific, signal_identity
from gep.learning.similar_problems import error_lines, similar_fixes
from gep.signals.behavior import BehaviorSignal

DEFAULT_CHARS = constants.CONTEXT_CHARS
PREFERENCE_DAYS = 30
MAX_LESSONS_PER_PROBLEM = 3
MAX_PREFERENCES = 5
MAX_NOTES = 3
LINE_CHARS = 220
HEADER = LABEL  # data, not instructions (gep/core/learned_text.py)
PREFERENCE_TYPES = ("correction", "preference", "style")

ItemKind = Literal["problem", "avoid", "lesson", "fix", "preference", "feedback"]


class ContextItem(BaseModel):
    """One line of the context and what it is about (to judge later whether it was used)."""

    kind: ItemKind
    ref: str  # a lesson id, "signal:<type>:<summary>", or a feedback id
    text: str
    problems: list[str] = Field(default_factory=list)  # problem identities (gep.learning.resolved.signal_identity)


class AgentContext(BaseModel):
    text: str  # empty when there is nothing worth saying
    items: list[ContextItem] = Field(default_factory=list)
    neutralised: int = 0  # phrases addressing the agent found in what was learned, replaced (learned_text.py)


def problem_identities(signals: Iterable[str]) -> list[str]:
    """The problems a list of signals names (errors, requests), as identities stable across occurrences."""
    out = {signal_identity(s) for s in signals if is_specific(s)}
    return sorted(x for x in out if x)


def live_problems(events: Sequence[EvolutionEvent]) -> list[str]:
    """The problems the newest finished cycle saw (``events`` newest first; running ones are skipped)."""
    for event in events:
        if event.status != "running":
            return problem_identities(event.signals)
    return []


def _clip(text: str, n: int = LINE_CHARS) -> str:
    text = " ".join(redact(text).split())
    return text if len(text) <= n else text[: n - 3].rstrip() + "..."


def _lesson_rank(lesson: Lesson) -> tuple[int, float, float, str]:
    return (0 if lesson.stance == Stance.fails else 1, -lesson.strength, -lesson.created_at.timestamp(), lesson.id)


def _lesson_items(lessons: Sequence[Lesson], events: dict[str, EvolutionEvent], live: set[str],
                  skip: set[str]) -> list[ContextItem]:
    """Per live problem, the lessons whose cycle worked on it: failures first ("avoid"), strongest, newest."""
    by_problem: dict[str, list[Lesson]] = {}
    for lesson in heads(lessons):
        event = events.get(lesson.event_id or "")
        if lesson.id in skip or event is None or lesson.stance == Stance.neutral:
            continue
        for problem in set(problem_identities(event.signals)) & live:
            by_problem.setdefault(problem, []).append(lesson)
    items: list[ContextItem] = []
    seen: set[str] = set()
    for problem in sorted(by_problem):
        for lesson in sorted(by_problem[problem], key=_lesson_rank)[:MAX_LESSONS_PER_PROBLEM]:
            if lesson.id in seen:
                continue
            seen.add(lesson.id)
            avoid = lesson.stance == Stance.fails
            event = events[lesson.event_id or ""]
            problems = sorted(set(problem_identities(event.signals)) & live)
            text = (_failure_line(lesson, event, problems) if avoid
                    else "Worked before on a live problem: " + lesson.content)
            items.append(ContextItem(kind="avoid" if avoid else "lesson", ref=lesson.id, text=_clip(text),
                                     problems=problems))
    return items


_VALIDATION = re.compile(r" Validation: (.*?)(?= Model's summary: | Reasons: |$)")
PROBLEM_SHOWN = 60
MAX_LIVE_SHOWN = 2
MAX_FIXES_SHOWN = 2
FIX_DAYS = 7  # a verified fix is told to the sessions of the following week
ERROR_SHOWN = 140
TRIED_SHOWN = 120


def _approach(event: EvolutionEvent) -> str:
    """What a cycle's change was: "changed" and its change in a few lines (meta.change_excerpt), else "tried"
    and the agent's own summary."""
    result = event.meta.mutator_result
    summary = result.summary if result is not None and result.status != "awaiting_changes" else ""
    excerpt = (event.meta.change_excerpt or "").strip()
    return f"changed {excerpt}" if excerpt else f"tried {summary.strip()}" if summary.strip() else ""


def _failure_line(lesson: Lesson, event: EvolutionEvent, problems: Sequence[str]) -> str:
    """A failed attempt as the change it made and how it failed, then the problem by its short key and the gene:
    the line is clipped, so what the next agent needs comes first (issue 28). Never the file alone: "touched
    calc.py" read as "keep away from calc.py", the very file the fix needs (issue 41)."""
    m = event.meta
    tried = _approach(event)
    found = _VALIDATION.search(lesson.content)
    checks = found.group(1).strip() if found else "; ".join(m.failure_reasons or [])
    parts = [_clip(tried, TRIED_SHOWN), f"checks said {checks}" if checks else ""]
    content = "; ".join(p for p in parts if p) or lesson.content
    shown = ", ".join(_clip(p, PROBLEM_SHOWN) for p in problems[:1])
    where = f" [on {shown}]" if shown else ""
    return f"Tried before on a live problem and failed: {content}{where} ({lesson.gene_id})"


def _avoid_items(events: Sequence[EvolutionEvent], live: set[str]) -> list[ContextItem]:
    """The avoid-list's active entries on the problem the newest finished cycle saw (gep/learning/avoid.py)."""
    latest = next((e for e in events if e.status != "running"), None)
    if latest is None:
        return []
    entries = build_avoid_list(list(reversed(events))).on(latest.signals)
    return [ContextItem(kind="avoid", ref=f"avoid:{e.gene_id}:{'|'.join(e.problem)}",
                        text=_clip("On a live problem, " + e.line()), problems=sorted(live)) for e in entries]


_TIME = re.compile(r"^\W*\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d)?\S*\s*")


def _without_time(line: str) -> str:
    """An error line without its leading time stamp (the same error every day: its text is what matters)."""
    return _TIME.sub("", line, count=1) or line


def _problem_items(events: Sequence[EvolutionEvent]) -> list[ContextItem]:
    """The live problems as the logs say them: the error lines of the newest finished cycle's signals."""
    latest = next((e for e in events if e.status != "running"), None)
    if latest is None:
        return []
    items = []
    for line in error_lines(latest.signals)[:MAX_LIVE_SHOWN]:
        problems = problem_identities(["errsig:" + line])
        items.append(ContextItem(kind="problem", ref="problem:" + (problems[0] if problems else line[:60]),
                                 text=_clip("Live problem (the logs say): " + _clip(_without_time(line), ERROR_SHOWN)),
                                 problems=problems))
    return items


def _fix_items(events: Sequence[EvolutionEvent], now: datetime) -> list[ContextItem]:
    """Fixes verified lately (their problem stayed away after the commit), newest first, with the change that
    worked: after a verified fix the next session is told what fixed it, though the problem is no longer live."""
    since = now - timedelta(days=FIX_DAYS)
    items: list[ContextItem] = []
    for e in events:
        at = parse_at(e.meta.at)
        if e.meta.fix_verdict != "verified" or not e.genes_used or (at is not None and at < since):
            continue
        fixed = error_lines(outcome_signals(e) or e.signals)
        what = _approach(e)
        if not what:
            continue
        about = f" [on {_clip(_without_time(fixed[0]), PROBLEM_SHOWN)}]" if fixed else ""
        items.append(ContextItem(kind="fix", ref=f"fix:{e.id}", text=_clip(
            f"Fixed, and the fix held ({e.gene_id}, {e.id}): {what}{about}")))
        if len(items) >= MAX_FIXES_SHOWN:
            break
    return items


def _similar_items(events: Sequence[EvolutionEvent], live: set[str]) -> list[ContextItem]:
    """What worked on problems like the live ones (gep/learning/similar_problems.py), with the change it made."""
    latest = next((e for e in events if e.status != "running"), None)
    if latest is None:
        return []
    lines = similar_fixes(events, latest.signals, _approach, limit=1)
    return [ContextItem(kind="lesson", ref="similar:" + " ".join(line.split())[:80], text=_clip(line[:1].upper()
                        + line[1:]), problems=sorted(live)) for line in lines]


def signal_ref(signal: BehaviorSignal) -> str:
    return f"signal:{signal.type}:{' '.join(signal.summary.lower().split())}"


def _preference_items(signals: Sequence[BehaviorSignal], now: datetime, skip: set[str]) -> list[ContextItem]:
    """The people's recurring preferences and corrections of the last 30 days, the most repeated first."""
    since = now - timedelta(days=PREFERENCE_DAYS)
    recent = [s for s in signals if s.type in PREFERENCE_TYPES and s.at >= since]
    counts = Counter(signal_ref(s) for s in recent)
    newest: dict[str, BehaviorSignal] = {}
    for s in sorted(recent, key=lambda s: s.at):
        newest[signal_ref(s)] = s
    order = sorted(newest, key=lambda r: (-counts[r] * newest[r].intensity, -newest[r].at.timestamp(), r))
    items = []
    for ref in [r for r in order if r not in skip][:MAX_PREFERENCES]:
        s = newest[ref]
        times = f" ({counts[ref]}x)" if counts[ref] > 1 else ""
        items.append(ContextItem(kind="preference", ref=ref, text=_clip(f"{s.type.capitalize()}: {s.summary}{times}")))
    return items


def _feedback_items(feedback: Sequence[FeedbackSignal], events: dict[str, EvolutionEvent],
                    live: set[str]) -> list[ContextItem]:
    """People's notes, newest first; a note on a cycle about problems that are all resolved now is left out."""

    def current(f: FeedbackSignal) -> bool:
        event = events.get(f.event_id or "")
        problems = set(problem_identities(event.signals)) if event is not None else set()
        return not problems or bool(problems & live)

    notes = [f for f in feedback if f.origin == Observation.person and (f.note or "").strip() and current(f)]
    notes.sort(key=lambda f: (f.created_at, f.id), reverse=True)
    return [ContextItem(kind="feedback", ref=f.id, text=_clip(f"A person said ({f.kind.value}): {_clip(f.note or '', 90)}"
                                                              f" (about {_change_named(f, events)})"))
            for f in notes[:MAX_NOTES]]


def _change_named(f: FeedbackSignal, events: dict[str, EvolutionEvent]) -> str:
    """Which change a person's note is about: the gene's change, its cycle, and the change itself when kept."""
    event = events.get(f.event_id or "")
    what = _approach(event) if event is not None else ""
    return f"{f.gene_id}'s change {f.event_id or ''}".rstrip() + (f" ({_clip(what, 120)})" if what else "")


def within_chars(items: Sequence[ContextItem], budget: int) -> tuple[str, list[ContextItem]]:
    """The label and the items' lines, fenced as data (gep/core/learned_text.py), in order while they fit
    ``budget`` characters (the rest is dropped)."""
    lines = [f"- {item.text}" for item in items]
    # the label and the fence lines (a fence long enough for every line: a subset's is no longer)
    used = len(fenced_block(lines)) - len("\n".join(lines)) - 1
    shown, kept = [], []
    for item, line in zip(items, lines, strict=True):
        if used + 1 + len(line) > budget:
            continue
        used += 1 + len(line)
        shown.append(line)
        kept.append(item)
    return (fenced_block(shown) if kept else ""), kept


def as_data(items: Sequence[ContextItem]) -> tuple[list[ContextItem], int]:
    """The items with their text made data (controls out, lines addressing the agent neutralised), and the
    number of phrases neutralised."""
    out, count = [], 0
    for item in items:
        got = one_line(item.text)
        count += got.neutralised
        out.append(item.model_copy(update={"text": _clip(got.text)}))
    return out, count


def build_context(*, events: Sequence[EvolutionEvent], lessons: Sequence[Lesson], feedback: Sequence[FeedbackSignal],
                  signals: Sequence[BehaviorSignal], now: datetime, budget_chars: int = DEFAULT_CHARS,
                  skip: Iterable[str] = (), avoid: bool = True) -> AgentContext:
    """The context for a new agent session. ``events`` newest first; ``skip``: refs that sessions ignored;
    ``avoid``: the avoid-list is on (gep/core/learning_switch.py)."""
    skipped = set(skip)
    live = set(live_problems(events))
    by_id = {e.id: e for e in events}
    about_live = [*(_avoid_items(events, live) if avoid else []), *_lesson_items(lessons, by_id, live, skipped),
                  *(_similar_items(events, live) if live else [])]
    # the live problem is named when something learned bears on it (alone it is what the logs already say)
    items = [*(_problem_items(events) if about_live else []), *about_live, *_fix_items(events, now),
             *_preference_items(signals, now, skipped), *_feedback_items(feedback, by_id, live)]
    cleaned, count = as_data(items)
    text, kept = within_chars(cleaned, budget_chars)
    return AgentContext(text=text, items=kept, neutralised=count)
