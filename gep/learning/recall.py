"""What an agent asks mid-task (``gep_recall`` of ``gep mcp``): what was tried on a problem or a file and how it
ended, what worked on similar problems, and what people said about it.

Pure: events, failed capsules, lessons and feedback in, a bounded, redacted answer out. A problem is asked for
by the key ``gep_live_problems`` gives (a problem identity, gep/learning/resolved.py ``signal_identity``) or by
the error as the logs say it (normalised as problems are, then compared); a file by its path in the
repository (or its name). Each attempt carries its change in a few lines: the diff a failed change left in its
failed capsule (gep/cycle/solidify.py), else the files it touched.

The answer lists the items it carried with their problems, so that what the agent was given is recorded and
judged like a session's context (gep/learning/injections.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePosixPath

from pydantic import BaseModel, Field

from gep.core.event_ids import short_id
from gep.core.models import EvolutionEvent, FailedCapsule
from gep.core.sanitize import redact
from gep.learning.agent_context import ContextItem, problem_identities
from gep.learning.feedback import FeedbackSignal, Observation
from gep.learning.lessons import Lesson, heads
from gep.learning.recall_models import Attempt, Note, Recall
from gep.learning.resolved import line_shows, normalized_line, signal_identity
from gep.learning.similar_problems import similar_fixes

MAX_ATTEMPTS = 5
MAX_NOTES = 3
CHANGE_LINES = 12
LINE_CHARS = 200
MIN_QUERY = 4  # a shorter problem text matches too much to mean one problem


class Recalled(BaseModel):
    """The answer, and the items it carried (a lesson id, or ``event:<id>``, with its problems) to record."""

    answer: Recall
    items: list[ContextItem] = Field(default_factory=list)


def _clip(text: str, n: int = LINE_CHARS) -> str:
    flat = " ".join(redact(str(text)).split())
    return flat if len(flat) <= n else flat[: n - 3].rstrip() + "..."


def on_problem(event: EvolutionEvent, problem: str) -> bool:
    """Whether ``event`` worked on ``problem`` (a key as gep_live_problems gives it, or an error line)."""
    identities = problem_identities(event.signals)
    asked = signal_identity(problem) if ":" in problem else None
    if problem in identities or (asked is not None and asked in identities):
        return True
    line = normalized_line(problem)
    if len(line) < MIN_QUERY:
        return False
    return any(line_shows(i, line) or line in i for i in identities)


def _same_file(asked: str, path: str) -> bool:
    a, p = PurePosixPath(asked.strip().lstrip("./")), PurePosixPath(path)
    return a == p or (len(a.parts) == 1 and a.name == p.name) or str(p).endswith("/" + str(a))


def _diff_files(diff: str) -> list[str]:
    return [line[len("+++ b/"):] for line in diff.splitlines() if line.startswith("+++ b/")]


def on_file(event: EvolutionEvent, failed: FailedCapsule | None, file: str) -> bool:
    files = [*(event.meta.changed_files or []), *(_diff_files(failed.diff_snapshot) if failed else [])]
    return any(_same_file(file, f) for f in files)


def change_lines(diff: str, limit: int = CHANGE_LINES) -> list[str]:
    """A diff's file headers and changed lines (context and hunk headers dropped), in order: as many removed
    as added lines at most, so that a file rewritten whole still shows what it became."""
    lines = [ln for ln in diff.splitlines() if ln.strip() not in ("+", "-")]
    heads = [i for i, ln in enumerate(lines) if ln.startswith("+++ ")]
    added = [i for i, ln in enumerate(lines) if ln[:1] == "+" and not ln.startswith("+++ ")]
    removed = [i for i, ln in enumerate(lines) if ln[:1] == "-" and not ln.startswith("--- ")]
    room = max(limit - len(heads[:3]), 2)
    take_added = added[: max(room - min(len(removed), room // 2), room // 2)]
    chosen = sorted([*heads[:3], *take_added, *removed[: room - len(take_added)]])
    return [_cut(lines[i]) for i in chosen]


def _cut(line: str, n: int = LINE_CHARS) -> str:
    """A diff line redacted and cut, its indentation kept (unlike :func:`_clip`)."""
    line = redact(line.rstrip())
    return line if len(line) <= n else line[: n - 3] + "..."


def attempt(event: EvolutionEvent, failed: FailedCapsule | None) -> Attempt:
    m = event.meta
    result = m.mutator_result
    approach = result.summary if result is not None and result.status != "awaiting_changes" else ""
    checks = list(m.failure_reasons or []) or ([failed.failure_reason] if failed and failed.failure_reason else [])
    return Attempt(event=short_id(event.id), at=m.at, gene=",".join(event.genes_used) or "-",
                   outcome=str(event.outcome.status), fix_verdict=m.fix_verdict,
                   problems=[_clip(p) for p in problem_identities(event.signals)], approach=_clip(approach),
                   files=list(m.changed_files or [])[:8], checks=[_clip(c) for c in checks[:4]],
                   change=change_lines(failed.diff_snapshot) if failed else [])


def _notes(feedback: Sequence[FeedbackSignal], events: set[str]) -> list[Note]:
    said = [f for f in feedback if f.origin == Observation.person and (f.note or "").strip() and f.event_id in events]
    said.sort(key=lambda f: (f.created_at, f.id), reverse=True)
    return [Note(event=short_id(f.event_id or ""), verdict=f.kind.value, note=_clip(f.note or ""))
            for f in said[:MAX_NOTES]]


def _similar_signals(problem: str | None, events: Sequence[EvolutionEvent]) -> list[str]:
    """The problem as a signal to compare errors with: a key is normalised (lower case), so the error line of a
    cycle that saw it is used when there is one (an exception's class name tells error families apart)."""
    if not problem:
        return []
    raw = next((s for e in events for s in e.signals if signal_identity(s) == problem), None)
    if raw is not None:
        return [raw]
    return [problem] if problem.startswith(("errsig:", "recurring_errsig")) else [f"errsig:{problem}"]


def _refs(lessons: Sequence[Lesson]) -> dict[str, str]:
    """Per event, the lesson its cycle wrote (recorded under the lesson's id, as a session's context is)."""
    return {x.event_id: x.id for x in heads(lessons) if x.event_id}


def recall(*, events: Sequence[EvolutionEvent], failed: Sequence[FailedCapsule], feedback: Sequence[FeedbackSignal],
           lessons: Sequence[Lesson] = (), problem: str | None = None, file: str | None = None) -> Recalled:
    """What was tried on ``problem`` and/or ``file`` (``events`` newest first; both given: either matches)."""
    by_capsule = {c.id: c for c in failed}
    found: list[EvolutionEvent] = []
    for event in events:
        if event.status == "running" or not event.genes_used:
            continue
        capsule = by_capsule.get("failed_capsule_" + event.id.removeprefix("evt_"))
        if (problem and on_problem(event, problem)) or (file and on_file(event, capsule, file)):
            found.append(event)
    shown = found[:MAX_ATTEMPTS]
    attempts = [attempt(e, by_capsule.get("failed_capsule_" + e.id.removeprefix("evt_"))) for e in shown]

    def approach(e: EvolutionEvent) -> str:
        r = e.meta.mutator_result
        return r.summary if r is not None else ""

    similar = [_clip(x) for x in similar_fixes(events, _similar_signals(problem, events), approach=approach)]
    refs = _refs(lessons)
    items = [ContextItem(kind="avoid" if a.outcome == "failed" else "lesson", ref=refs.get(e.id, f"event:{e.id}"),
                         text=_clip(f"{a.outcome}: {a.approach or ', '.join(a.files)}"),
                         problems=problem_identities(e.signals)) for a, e in zip(attempts, shown, strict=True)]
    answer = Recall(problem=_clip(problem) if problem else None, file=_clip(file) if file else None,
                    attempts=attempts, worked_on_similar=similar, notes=_notes(feedback, {e.id for e in found}))
    return Recalled(answer=answer, items=items)
