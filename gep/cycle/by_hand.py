"""`gep land ID` and `gep undo ID` over the store: which cycle an id names, whether its commit can be landed or
undone, the git work under the workspace lock (gep/git/by_hand.py), and what an undo teaches: the person's
revert is ``not_helpful`` feedback on the cycle's gene and a lesson (as gep's revert scan records one).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from gep.core.config import load_settings
from gep.core.errors import GepError
from gep.core.event_ids import resolve, short_id
from gep.core.models import EvolutionEvent, utc_now
from gep.cycle.record_learning import record_revert
from gep.git.by_hand import ByHand, land_kept, undo_commit
from gep.git.lock import workspace_lock
from gep.git.repo import open_repo
from gep.learning.feedback import RevertFound
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
    with workspace_lock(repo, load_settings(repo.path).lock_timeout_s):
        result = land_kept(repo, event.id, event.meta.branch)
    return Done(event_id=event.id, id=sid, result=result)


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
