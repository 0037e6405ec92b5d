"""`gep land ID` and `gep undo ID` over the store: which cycle an id names, whether its commit can be landed or
undone, the git work under the workspace lock (gep/git/by_hand.py), and what each means for learning: a
landed commit is a fix to judge from then on (its event says landed); an undo is the person's revert,
``not_helpful`` feedback on the cycle's gene and a lesson (as gep's revert scan records one).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from gep.core.config import load_settings
from gep.core.errors import GepError
from gep.core.event_ids import resolve, short_id
from gep.core.models import EvolutionEvent, utc_now
from gep.core.records import FileMark
from gep.cycle.record_learning import record_revert
from gep.git.by_hand import ByHand, land_kept, undo_commit
from gep.git.lock import workspace_lock
from gep.git.repo import open_repo
from gep.learning.feedback import RevertFound
from gep.learning.resolved import resolution_for_commit
from gep.signals.sources import file_marks
from gep.store import Store


class Done(BaseModel):
    event_id: str
    id: str
    result: ByHand
    feedback: bool = False  # undo: the not_helpful signal was recorded (False: it was already)


def _event(store: Store, typed: str) -> EvolutionEvent:
    event = store.get_event(resolve(typed, store.event_ids()))
    if event is None:
        raise GepError(f"no event {typed!r} in this workspace; `gep history` lists them")
    return event


def land_cycle(workspace: Path, store: Store, typed: str) -> Done:
    """Land the commit cycle ``typed`` kept on its own branch, when safe (see gep/git/by_hand.py)."""
    event = _event(store, typed)
    sid = short_id(event.id)
    if event.meta.delivery != "kept" or not event.meta.branch:
        where = f"landed on {event.meta.branch}" if event.meta.commit else "made no commit"
        raise GepError(f"cycle {sid} kept no commit on a branch of its own (it {where}): nothing to land")
    repo = open_repo(workspace)
    settings = load_settings(repo.path)
    with workspace_lock(repo, settings.lock_timeout_s):
        result = land_kept(repo, event.id, event.meta.branch)
        _now_landed(store, event, result, file_marks(repo.path, settings, utc_now()))
    return Done(event_id=event.id, id=sid, result=result)


def _now_landed(store: Store, event: EvolutionEvent, result: ByHand, marks: list[FileMark]) -> None:
    """The cycle's commit is in the person's branch now: its event says so (so `gep undo` takes it), and it
    is a fix to judge from here on (what it addressed, where the logs stand), as a landed cycle's is."""
    kept_on = event.meta.branch
    event.meta.delivery, event.meta.branch, event.meta.merge_command = "landed", result.branch, None
    event.meta.delivery_note = f"kept on {kept_on}, then landed with `gep land` ({result.how})"
    store.add_event(event)
    if str(event.outcome.status) != "success" or not event.meta.commit:
        return
    res = resolution_for_commit(event_id=event.id, gene_id=event.gene_id,
                                signals=event.signals, commit_sha=event.meta.commit, committed_at=utc_now(),
                                files=marks)
    if res is not None:
        store.save_resolution(res)


def undo_cycle(workspace: Path, store: Store, typed: str, note: str = "") -> Done:
    """Put back the change cycle ``typed`` landed, with a revert commit; recorded as the person's revert."""
    event = _event(store, typed)
    sid = short_id(event.id)
    commit = event.meta.commit
    if not commit or str(event.outcome.status) != "success":
        raise GepError(f"cycle {sid} committed nothing ({event.outcome.status}): nothing to undo")
    if event.meta.delivery == "kept":
        raise GepError(f"cycle {sid}'s commit was kept on {event.meta.branch}, never landed: delete that branch "
                       "instead (git branch -D ...)")
    repo = open_repo(workspace)
    with workspace_lock(repo, load_settings(repo.path).lock_timeout_s):
        result = undo_commit(repo, event.id, commit)
    g = repo.git()
    found = RevertFound(revert_sha=result.commit, reverted_sha=commit, event_id=event.id, how="message",
                        author=g.out("log", "-1", "--format=%an", result.commit), committed_at=utc_now(),
                        subject=note or f"undone with gep undo {sid}")
    recorded = record_revert(store, found, utc_now())
    return Done(event_id=event.id, id=sid, result=result, feedback=recorded is not None)
