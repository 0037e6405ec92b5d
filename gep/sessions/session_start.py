"""The context a new agent session receives, read from a workspace: ``gep context`` and the ``SessionStart``
answer of ``gep capture``.

Claude Code runs a ``SessionStart`` hook with one JSON object on stdin (``session_id``, ``transcript_path``,
``cwd``, ``hook_event_name``: "SessionStart", ``source``: startup/resume/clear/compact). Whatever the hook
prints as ``{"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": TEXT}}`` is added to
the session's context. The text is :func:`gep.learning.agent_context.build_context` over the workspace's store (read
through the quick path, gep/store/quick_read.py), its behavioural signals and what sessions kept ignoring
(gep/learning/injections.py); each injection is recorded so the next cycle can judge it.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from gep.api import read_store
from gep.core.config import load_settings
from gep.core.learning_switch import learning_switch
from gep.learning.agent_context import PREFERENCE_DAYS, AgentContext, build_context
from gep.learning.context_cache import fingerprint, hook_answer, repository_top, watched, write
from gep.learning.injections import ignored_refs, record_injection
from gep.signals.behavior_log import read_signals, signals_dir
from gep.store.schema import default_db

CONTEXT_EVENTS = 200  # lessons whose cycle is older than this are not recalled for a session


def _watched(workspace: Path) -> list[str]:
    """The files a context is built from (gep/learning/context_cache.py): the store, gep.toml, the signals."""
    db = default_db(workspace)
    folder = signals_dir(workspace)
    try:
        files = sorted(p for p in folder.iterdir() if p.suffix == ".jsonl")
    except OSError:
        files = []
    return [str(db), f"{db}-wal", str(workspace / "gep.toml"), *watched(folder, files)]


def workspace_context(workspace: Path, now: datetime) -> AgentContext:
    """What a new session in ``workspace`` (a repository's top) should know now (and kept in the cache).
    Nothing for a workspace no cycle has run in (no store is made for a session)."""
    settings = load_settings(workspace)
    use = learning_switch(settings)
    if not use.on("context") or (not settings.database_url and not default_db(workspace).is_file()):
        return AgentContext(text="")
    paths = [] if settings.database_url else _watched(workspace)
    stamp = fingerprint(paths)
    with read_store(workspace) as store:
        events = list(reversed(store.recent_events(CONTEXT_EVENTS)))  # newest first
        lessons = store.list_lessons()
        feedback = store.list_feedback()
    signals = read_signals(workspace, since=now - timedelta(days=PREFERENCE_DAYS)).signals
    got = build_context(events=events, lessons=lessons, feedback=feedback, signals=signals, now=now,
                        budget_chars=settings.context_chars, skip=ignored_refs(workspace, now), avoid=use.on("avoid"))
    if paths:
        write(workspace, paths=paths, stamp=stamp, day=now.date().isoformat(), text=got.text,
              items=[i.model_dump(mode="json") for i in got.items])
    return got


def session_start(workspace: Path, session_id: str, now: datetime) -> str:
    """The hook's answer for a new session started in ``workspace`` or below it, its injection recorded."""
    top = repository_top(workspace.resolve())
    if top is None:
        return ""
    context = workspace_context(top, now)
    record_injection(top, session=session_id, items=context.items, now=now)
    return hook_answer(context.text)


def refresh(workspace: Path, now: datetime) -> None:
    """Build the context again for the cache (after a prompt's capture, in the background worker)."""
    top = repository_top(workspace.resolve())
    if top is not None:
        workspace_context(top, now)
