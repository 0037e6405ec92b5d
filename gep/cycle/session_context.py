"""The context a new agent session receives, built from a store and kept in the cache
(gep/learning/context_cache.py): by ``gep context`` and the ``SessionStart`` hook on a cache miss
(gep/sessions/session_start.py, through the quick reader), and by a cycle at its end, so the first session
after a cycle reads a fresh cache instead of building the context within the hook's 0.3 s.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from gep.core.config import Settings
from gep.core.learning_switch import learning_switch
from gep.core.models import EvolutionEvent
from gep.learning.agent_context import PREFERENCE_DAYS, AgentContext, build_context
from gep.learning.context_cache import fingerprint, watched, write
from gep.learning.feedback import FeedbackSignal
from gep.learning.injections import ignored_refs
from gep.learning.lessons import Lesson
from gep.signals.behavior_log import read_signals, signals_dir
from gep.store.schema import default_db

# the full store (SQLAlchemy, ~0.45 s of import) only as a type: a cycle passes its own, while `gep context` and
# the SessionStart hook read through the quick store (gep/api.py read_store)
if TYPE_CHECKING:
    from gep.store import Store

CHECKPOINT_WAIT_MS = 100
BUSY_TIMEOUT_MS = 10000  # the store's own (gep/store/schema.py SQLITE_PRAGMAS)
CONTEXT_EVENTS = 200  # lessons whose cycle is older than this are not recalled for a session
log = logging.getLogger(__name__)


class ContextReader(Protocol):
    """What the context reads from a store (the full store and the quick reader both have it)."""

    def recent_events(self, limit: int = 10) -> list[EvolutionEvent]: ...
    def list_lessons(self, gene_id: str | None = None) -> list[Lesson]: ...
    def list_feedback(self, gene_id: str | None = None) -> list[FeedbackSignal]: ...


def watched_paths(workspace: Path) -> list[str]:
    """The files a context is built from (gep/learning/context_cache.py): the store, gep.toml, the signals."""
    db = default_db(workspace)
    folder = signals_dir(workspace)
    try:
        files = sorted(p for p in folder.iterdir() if p.suffix == ".jsonl")
    except OSError:
        files = []
    return [str(db), f"{db}-wal", str(workspace / "gep.toml"), *watched(folder, files)]


def build_and_cache(workspace: Path, store: ContextReader, settings: Settings, now: datetime) -> AgentContext:
    """The context for a new session in ``workspace`` (a repository's top), kept in the cache when the store is
    SQLite (its files are stamped before they are read: a change made meanwhile misses the cache)."""
    use = learning_switch(settings)
    if not use.on("context"):
        return AgentContext(text="")
    paths = [] if settings.database_url else watched_paths(workspace)
    stamp = fingerprint(paths)
    events = list(reversed(store.recent_events(CONTEXT_EVENTS)))  # newest first
    lessons, feedback = store.list_lessons(), store.list_feedback()
    signals = read_signals(workspace, since=now - timedelta(days=PREFERENCE_DAYS), trusted=True).signals
    got = build_context(events=events, lessons=lessons, feedback=feedback, signals=signals, now=now,
                        budget_chars=settings.context_chars, skip=ignored_refs(workspace, now), avoid=use.on("avoid"))
    if paths:
        write(workspace, paths=paths, stamp=stamp, day=now.date().isoformat(), text=got.text,
              items=[i.model_dump(mode="json") for i in got.items])
    return got


def refresh_after_cycle(workspace: Path, store: Store, settings: Settings, now: datetime) -> None:
    """Rebuild the cache at a cycle's end. The WAL is folded into the database first: closing the cycle's store
    would do it after the cache was stamped (a miss); an empty WAL reads as none (gep/learning/context_cache.py).
    Never fails the cycle: a failure is logged and the next session builds the context itself."""
    if settings.database_url:
        return  # never cached (gep/learning/context_cache.py): a session builds its own
    try:
        if store.engine.dialect.name == "sqlite" and not _checkpointed(store):
            log.info("gep: the session context was not refreshed: the store is being read")
            return
        build_and_cache(workspace, store, settings, now)
    except Exception as exc:  # noqa: BLE001 - a cache only saves time; the cycle's outcome is already recorded
        log.warning("gep: the session context was not refreshed: %s", exc)


def _checkpointed(store: Store) -> bool:
    """Fold the WAL into the database and empty it, waiting at most 0.1 s for readers (cheap or skipped)."""
    with store.engine.connect() as conn:
        conn.exec_driver_sql(f"PRAGMA busy_timeout={CHECKPOINT_WAIT_MS}")
        try:
            busy = conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)").scalar()
        finally:
            conn.exec_driver_sql(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    return busy == 0
