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

import random
from datetime import datetime
from pathlib import Path

from gep.api import read_store
from gep.core.config import Settings, load_settings
from gep.core.holdout import held_out
from gep.core.learning_switch import learning_switch
from gep.cycle.session_context import build_and_cache
from gep.learning.agent_context import AgentContext
from gep.learning.context_cache import append_holdout, hook_answer, repository_top
from gep.learning.injections import record_injection
from gep.store.schema import default_db


def workspace_context(workspace: Path, now: datetime) -> AgentContext:
    """What a new session in ``workspace`` (a repository's top) should know now (and kept in the cache).
    Nothing for a workspace no cycle has run in (no store is made for a session)."""
    settings = load_settings(workspace)
    if not learning_switch(settings).on("context") or not _has_store(workspace, settings):
        return AgentContext(text="")
    with read_store(workspace) as store:
        return build_and_cache(workspace, store, settings, now)


def _has_store(workspace: Path, settings: Settings) -> bool:
    return bool(settings.database_url) or default_db(workspace).is_file()


def session_start(workspace: Path, session_id: str, now: datetime, rng: random.Random | None = None) -> str:
    """The hook's answer for a new session started in ``workspace`` or below it, its injection recorded. A
    session drawn into the holdout (``settings.holdout``, drawn with ``rng``) receives nothing, and is marked."""
    top = repository_top(workspace.resolve())
    if top is None:
        return ""
    settings = load_settings(top)
    if learning_switch(settings).on("context") and _has_store(top, settings) and \
            held_out(settings.holdout, rng or random.SystemRandom()):  # nothing learned yet: nothing to hold out
        append_holdout(top, session=session_id, now=now)
        return ""
    context = workspace_context(top, now)
    record_injection(top, session=session_id, items=context.items, now=now)
    return hook_answer(context.text)


def refresh(workspace: Path, now: datetime) -> None:
    """Build the context again for the cache (after a prompt's capture, in the background worker)."""
    top = repository_top(workspace.resolve())
    if top is not None:
        workspace_context(top, now)
