"""`gep status` as data: the cycle waiting for someone, commits kept off the branch, the server, the last outcome.

:func:`workspace_status` reads the store (the full one or the quick one) and the repository and returns a
:class:`WorkspaceStatus` (gep/cycle/status_models.py) that the CLI prints (:meth:`WorkspaceStatus.lines`, 80
columns) or dumps as JSON, and that MCP's gep_status returns (gep/sessions/mcp_answers.py): one reader for
both. Every item carries the command that acts on it.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, TypeVar

from pydantic import BaseModel

from gep.core.errors import GepError
from gep.core.event_ids import short_ids
from gep.core.learned import fix_label
from gep.core.models import CycleRun, EvolutionEvent
from gep.cycle.review_wait import ReviewWait, waiting
from gep.cycle.status_models import KeptCommit, LastOutcome, PendingCycle, ServerState, WorkspaceStatus
from gep.git.indexwrite import pid_alive
from gep.git.kept import kept_branch
from gep.git.repo import open_repo

__all__ = ["KeptCommit", "LastOutcome", "PendingCycle", "ServerState", "StatusStore", "WorkspaceStatus",
           "fix_state", "workspace_status"]
M = TypeVar("M", bound=BaseModel)
W = TypeVar("W", bound=WorkspaceStatus)  # MCP's answer is a WorkspaceStatus too, made directly

KEPT_SCAN = 50  # recent cycles looked at for kept commits not merged yet


class StatusStore(Protocol):
    """What the status reads: the full store (`gep status`) and the quick one (MCP's gep_status) answer it."""

    def list_events(self, limit: int = 20, offset: int = 0, status: str | None = None) -> list[EvolutionEvent]: ...
    def event_ids(self) -> list[str]: ...
    def open_runs(self) -> list[CycleRun]: ...
    def get_state(self, key: str, cls: type[M]) -> M | None: ...


def fix_state(event: EvolutionEvent) -> str:
    """A committed fix as later cycles judged it: verified, did not hold, not landed or not yet judged."""
    return fix_label(event.meta.fix_verdict, event.outcome.status, event.meta.delivery, bool(event.meta.commit))


def workspace_status(workspace: Path, store: StatusStore | None, server: ServerState | None = None,
                     kept_scan: int = KEPT_SCAN, model: type[W] = WorkspaceStatus) -> W:  # type: ignore[assignment]
    """What the workspace waits for and holds now (``store`` None: nothing was ever recorded there)."""
    out = model(workspace=workspace, server=server)
    if store is None:
        return out
    events = store.list_events(limit=kept_scan)
    names = short_ids([*store.event_ids()])
    arg = "" if Path.cwd().resolve() == workspace.resolve() else f" -w {shlex.quote(str(workspace))}"
    reviews = {w.event_id: w for w in waiting(store)}
    out.pending = [_pending(r, reviews.get(r.event_id), names, arg) for r in store.open_runs()]
    out.kept = _kept(workspace, events, names, arg)
    done = next((e for e in events if str(e.outcome.status) != "running"), None)  # a running one is pending
    if done is not None:
        out.last = LastOutcome(event_id=done.id, id=names.get(done.id, done.id), outcome=str(done.outcome.status),
                               fix=fix_state(done), intent=str(done.intent), gene=",".join(done.genes_used) or "-",
                               at=done.meta.at)
    return out


def _pending(run: CycleRun, review: ReviewWait | None, names: dict[str, str], arg: str) -> PendingCycle:
    sid = names.get(run.event_id, run.event_id)
    base = PendingCycle(event_id=run.event_id, id=sid, state="running", stage=run.stage, since=run.started_at)
    if review is not None:
        return base.model_copy(update={"state": "awaiting_review", "since": review.since,
                                       "about": f"waits for your review: {_cut(review.subject, 38)}",
                                       "commands": review.commands(arg)})
    if run.status == "awaiting_changes":
        return base.model_copy(update={"state": "awaiting_changes", "about": "awaits your change (prompt mode)",
                                       "commands": [f"gep solidify{arg}", f"gep solidify{arg} --abandon"]})
    if run.pid is not None and not pid_alive(run.pid):
        return base.model_copy(update={"state": "dead", "about": "was cut off (its process is gone)",
                                       "commands": [f"gep recover{arg}"]})
    return base.model_copy(update={"about": f"is running (stage: {run.stage})"})


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n - 1] + "\u2026"


def _kept(workspace: Path, events: Sequence[EvolutionEvent], names: dict[str, str], arg: str) -> list[KeptCommit]:
    kept = [e for e in events if e.meta.delivery == "kept" and e.meta.branch and e.meta.commit]
    if not kept:
        return []
    try:
        repo = open_repo(workspace)
    except GepError:
        return []
    out = []
    for e in kept:
        k = kept_branch(repo, e.id, str(e.meta.branch))
        if k.state == "unmerged":
            sid = names.get(e.id, e.id)
            out.append(KeptCommit(event_id=e.id, id=sid, branch=k.branch, commit=k.commit, dirty=k.dirty,
                                  command=f"gep land {sid}{arg}"))
    return out
