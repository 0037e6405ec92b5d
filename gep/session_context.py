"""The context a new agent session receives, read from a workspace: ``gep context`` and the ``SessionStart``
answer of ``gep capture``.

Claude Code runs a ``SessionStart`` hook with one JSON object on stdin (``session_id``, ``transcript_path``,
``cwd``, ``hook_event_name``: "SessionStart", ``source``: startup/resume/clear/compact). Whatever the hook
prints as ``{"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": TEXT}}`` is added to
the session's context. The text is :func:`gep.agent_context.build_context` over the workspace's store (read
through the quick path, gep/store/quick.py), its behavioural signals and what sessions kept ignoring
(gep/injections.py); each injection is recorded so the next cycle can judge it.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

from gep.agent_context import PREFERENCE_DAYS, AgentContext, build_context
from gep.api import read_store
from gep.behavior_files import read_signals
from gep.config import load_settings
from gep.injections import ignored_refs, record_injection
from gep.store.schema import default_db

CONTEXT_EVENTS = 200  # lessons whose cycle is older than this are not recalled for a session


def repository_top(path: Path) -> Path | None:
    """The top of the git repository ``path`` is in (a session may start in a sub-folder), or None."""
    for folder in (path, *path.parents):
        if (folder / ".git").exists():
            return folder
    return None


def workspace_context(workspace: Path, now: datetime) -> AgentContext:
    """What a new session in ``workspace`` (a repository's top) should know now. Nothing for a workspace
    no cycle has run in (no store is made for a session)."""
    settings = load_settings(workspace)
    if not settings.database_url and not default_db(workspace).is_file():
        return AgentContext(text="")
    with read_store(workspace) as store:
        events = list(reversed(store.recent_events(CONTEXT_EVENTS)))  # newest first
        lessons = store.list_lessons()
        feedback = store.list_feedback()
    signals = read_signals(workspace, since=now - timedelta(days=PREFERENCE_DAYS)).signals
    return build_context(events=events, lessons=lessons, feedback=feedback, signals=signals, now=now,
                         budget_chars=settings.context_chars, skip=ignored_refs(workspace, now))


def hook_answer(context: AgentContext) -> str:
    """The JSON a ``SessionStart`` hook prints (empty when there is nothing to add)."""
    if not context.text:
        return ""
    return json.dumps({"hookSpecificOutput": {"hookEventName": "SessionStart",
                                              "additionalContext": context.text}}, ensure_ascii=False)


def session_start(workspace: Path, session_id: str, now: datetime) -> str:
    """The hook's answer for a new session started in ``workspace`` or below it, its injection recorded."""
    top = repository_top(workspace.resolve())
    if top is None:
        return ""
    workspace = top
    context = workspace_context(workspace, now)
    record_injection(workspace, session=session_id, items=context.items, now=now)
    return hook_answer(context)
