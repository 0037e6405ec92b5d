"""What ``gep mcp``'s tools and resources answer, read from one workspace (the models: gep/sessions/mcp_models.py),
each redacted and marked as data by :func:`gep.sessions.mcp_models.mark`.

Reads go through the quick store (gep/store/quick_read.py, no SQLAlchemy), and a workspace no cycle ran in
answers empty without a store being made. What ``gep_recall`` gave is recorded as an injection (``via``
"recall", gep/learning/injections.py), judged by the next cycle as a session's context is.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from gep import server
from gep.api import feedback_store, read_store
from gep.assets.gene_folders import load_genes_dir, seed_genes_dir, workspace_genes
from gep.core.config import load_settings
from gep.core.event_ids import resolve, short_id
from gep.core.models import EvolutionEvent, utc_now
from gep.learning.agent_context import problem_identities
from gep.learning.feedback import FeedbackIndex
from gep.learning.human_verdicts import give_feedback
from gep.learning.injections import record_injection
from gep.learning.lessons import heads
from gep.learning.recall import recall
from gep.learning.resolved import signal_identity
from gep.sessions.mcp_models import (
    CycleOutcome,
    FeedbackAnswer,
    Genes,
    History,
    HistoryEntry,
    Lessons,
    LiveProblems,
    Problem,
    RecallAnswer,
    Status,
    mark,
)
from gep.store.schema import default_db

if TYPE_CHECKING:
    from gep.store.quick_read import ReadStore

RECALL_EVENTS = 200  # cycles recall looks through, newest first (as a session's context: CONTEXT_EVENTS)
ERROR_CHARS = 300


@contextmanager
def reading(workspace: Path) -> Iterator[ReadStore | None]:
    """The workspace's store, read-only; None when no cycle ever ran there (nothing is created)."""
    settings = load_settings(workspace)
    if not settings.database_url and not default_db(workspace).is_file():
        yield None
        return
    with read_store(workspace) as store:
        yield store


# ------------------------------------------------------------------ live problems


def _error_text(signal: str) -> str:
    return signal.split(":", 1)[1].strip() if ":" in signal else signal


def live_problems(workspace: Path) -> LiveProblems:
    with reading(workspace) as store:
        events = store.list_events(limit=RECALL_EVENTS) if store is not None else []
    latest = next((e for e in events if e.status != "running"), None)
    if latest is None:
        return mark(LiveProblems())
    problems = []
    for key in problem_identities(latest.signals):
        raw = next((s for s in latest.signals if signal_identity(s) == key), key)
        worked = [e for e in events if e.genes_used and key in problem_identities(e.signals)]
        problems.append(Problem(key=key, error=_error_text(raw)[:ERROR_CHARS], tried=len(worked),
                                failed=sum(e.status == "failed" for e in worked)))
    return mark(LiveProblems(seen_by=short_id(latest.id), problems=problems))


# ------------------------------------------------------------------ recall


def recall_for(workspace: Path, *, problem: str | None, file: str | None, session: str,
               now: datetime | None = None) -> RecallAnswer:
    """What was tried on ``problem`` / ``file``; what was given is recorded as a recall injection."""
    with reading(workspace) as store:
        if store is None:
            return mark(RecallAnswer(problem=problem, file=file))
        events = store.list_events(limit=RECALL_EVENTS)
        got = recall(events=events, failed=store.list_failed_capsules(), feedback=store.list_feedback(),
                     lessons=store.list_lessons(), problem=problem, file=file)
    record_injection(workspace, session=session, items=got.items, now=now or utc_now(), via="recall")
    return mark(RecallAnswer(**got.answer.model_dump()))


# ------------------------------------------------------------------ history and status


def _entry(e: EvolutionEvent) -> HistoryEntry:
    r = e.meta.mutator_result
    return HistoryEntry(id=short_id(e.id), at=e.meta.at, outcome=str(e.outcome.status), intent=str(e.intent),
                        gene=",".join(e.genes_used) or "-", fix=e.meta.fix_verdict,
                        files=list(e.meta.changed_files or [])[:8], summary=(r.summary if r else "")[:ERROR_CHARS])


def history(workspace: Path, limit: int) -> History:
    with reading(workspace) as store:
        events = store.list_events(limit=limit) if store is not None else []
    return mark(History(cycles=[_entry(e) for e in events]))


def status(workspace: Path) -> Status:
    """What `gep status --json` says (one reader for both: gep/cycle/status.py), from the quick store."""
    from gep.cycle.status import workspace_status  # deferred: git's code, for this tool alone

    with reading(workspace) as store:
        st = workspace_status(workspace, store, server.server_state(), model=Status)
    return mark(st)


# ------------------------------------------------------------------ feedback


def feedback(workspace: Path, event: str, verdict: str, note: str | None) -> FeedbackAnswer:
    """As `gep feedback EVENT helpful|not_helpful --note ...` (gep/cli/feedback_cmd.py)."""
    now = utc_now()
    with feedback_store(workspace) as store:
        target = resolve(event, store.event_ids())
        signal = give_feedback(store, target, verdict, now=now, note=note)
        use = FeedbackIndex(store.list_feedback()).usefulness(signal.gene_id, signal.situation, now)
    return mark(FeedbackAnswer(event=short_id(target), gene=signal.gene_id, verdict=verdict,
                               usefulness=round(use.score, 4), scope=str(use.scope), signals=use.signals))


# ------------------------------------------------------------------ a cycle's outcome, resources


def outcome_of(event: dict[str, Any] | None) -> CycleOutcome:
    """What gep_cycle returns of the event the cycle recorded (None: a skipped tick)."""
    if event is None:
        return mark(CycleOutcome(outcome="skipped"))
    e = EvolutionEvent.model_validate(event)
    m = e.meta
    return mark(CycleOutcome(
        event=short_id(e.id), outcome=str(e.outcome.status), intent=str(e.intent), gene=",".join(e.genes_used) or None,
        reasons=[*(m.failure_reasons or []), *([m.skip_reason] if m.skip_reason else [])],
        warnings=list(m.warnings or []), files=list(m.changed_files or []), commit=m.commit, delivery=m.delivery,
        branch=m.branch, merge_command=m.merge_command, rescued_patch=m.rescued_patch,
        prompt_file=m.mutator_result.prompt_file if m.mutator_result and e.status == "awaiting_changes" else None))


def as_json(model: BaseModel) -> str:
    return json.dumps(model.model_dump(mode="json"), ensure_ascii=False, indent=1)


def lessons_text(workspace: Path) -> str:
    """gep://lessons: the current lessons (superseded ones left out)."""
    with reading(workspace) as store:
        lessons = heads(store.list_lessons()) if store is not None else []
    rows = [{"id": x.id, "topic": x.topic, "category": x.category.value, "stance": x.stance.value,
             "strength": x.strength, "content": x.content, "at": x.created_at.isoformat()} for x in lessons]
    return as_json(mark(Lessons(lessons=rows)))


def genes_text(workspace: Path) -> str:
    """gep://genes: the genes a cycle here selects from (the seed genes before any cycle)."""
    with reading(workspace) as store:
        genes = workspace_genes(workspace, store, []) if store is not None else load_genes_dir(seed_genes_dir())
    rows = [{"id": g.id, "category": g.category, "signals_match": g.signals_match, "summary": g.summary or "",
             "strategy": g.strategy[:6]} for g in genes]
    return as_json(mark(Genes(genes=rows)))


def problems_text(workspace: Path) -> str:
    """gep://problems: as gep_live_problems."""
    return as_json(live_problems(workspace))
