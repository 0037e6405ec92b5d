"""``gep capture``: the behavioural signals of one prompt, live, from a Claude Code ``UserPromptSubmit`` hook.

Claude Code runs the hook on every prompt with one JSON object on stdin: ``session_id``, ``transcript_path``,
``cwd``, ``permission_mode``, ``hook_event_name`` ("UserPromptSubmit") and ``prompt`` (unknown fields are
ignored). For this event whatever a hook prints on stdout is added to the prompt's context and exit status 2
blocks the prompt, so ``gep capture`` prints nothing, always exits 0 and returns at once: it checks the JSON,
hands it to a detached worker (``python -m gep.sessions.capture --worker``) and leaves. Until the worker runs, this
module uses the standard library only (pydantic, the config model and the rules cost more than the whole
hook may take).

The worker reads the transcript's tail, pairs the prompt with the agent turn before it (the transcript may or
may not hold the prompt yet; the exchange key is the same either way, so a cycle re-reading the transcript
later does not capture it again), detects its signals with the session's earlier messages, and records them
(:mod:`gep.signals.behavior_log`). Errors go to ``<workspace>/.gep/behavior/capture.log``.

:func:`gep.signals.behavior_log.capture_sessions` does the same for every exchange a cycle reads.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gep.core.records import InputWarning
    from gep.signals.behavior_log import RecordReport
    from gep.signals.sources import SessionExchanges

MAX_PAYLOAD = 4_000_000
TRANSCRIPT_TAIL = 512_000
HISTORY = 8  # earlier exchanges a live capture looks at (style patterns need 5)
_SLASH_COMMAND = re.compile(r"^/[\w:.-]+(?:\s|$)")


@dataclass(frozen=True)
class HookInput:
    """The fields of a ``UserPromptSubmit`` hook's JSON that capture uses."""

    session_id: str
    transcript_path: str
    cwd: str
    prompt: str


def parse_hook(payload: str) -> HookInput | None:
    """The hook's JSON (an edge: checked field by field), or None when it is not a prompt to capture
    (not JSON, another event, an empty prompt, a slash command)."""
    try:
        data = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("hook_event_name", "UserPromptSubmit") != "UserPromptSubmit":
        return None
    fields = {k: data.get(k) or "" for k in ("session_id", "transcript_path", "cwd", "prompt")}
    if not all(isinstance(v, str) for v in fields.values()):
        return None
    prompt = fields["prompt"]
    if not prompt.strip() or _SLASH_COMMAND.match(prompt.lstrip()):
        return None
    return HookInput(**fields)


def _workspace(args: Sequence[str], hook: HookInput | None) -> Path | None:
    """``--workspace DIR`` / ``-w DIR`` / ``--workspace=DIR``, else ``$CLAUDE_PROJECT_DIR``, else the hook's cwd."""
    value = ""
    for i, arg in enumerate(args):
        if arg in ("--workspace", "-w") and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith("--workspace="):
            value = arg.split("=", 1)[1]
    value = value or os.environ.get("CLAUDE_PROJECT_DIR", "") or (hook.cwd if hook else "")
    path = Path(value).expanduser() if value else None
    return path.resolve() if path is not None and path.is_dir() else None


def main(argv: Sequence[str] | None = None) -> int:
    """``gep capture [--workspace DIR]``: never fails. For a prompt it prints nothing and does not wait for the
    capture itself; for a new session (``SessionStart``) it prints the workspace's learned context."""
    args = list(sys.argv[1:] if argv is None else argv)
    workspace: Path | None = None
    answer = ""
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # nothing may reach the prompt
            if "--worker" in args:
                return _worker(args)
            payload = sys.stdin.buffer.read(MAX_PAYLOAD)
            start = parse_session_start(payload.decode("utf-8", "replace"))
            if start is not None:
                workspace = _workspace(args, start)
                answer = _session_start(workspace, start) if workspace is not None else ""
            else:
                hook = parse_hook(payload.decode("utf-8", "replace"))
                workspace = _workspace(args, hook)
                if hook is not None and workspace is not None:
                    _spawn(workspace, payload)
    except BaseException as exc:  # noqa: BLE001 - a hook that fails blocks or clutters the user's prompt
        if workspace is not None:
            _log(workspace, f"capture: {type(exc).__name__}: {exc}")
        return 0
    if answer:
        sys.stdout.write(answer + "\n")
    return 0


def parse_session_start(payload: str) -> HookInput | None:
    """A ``SessionStart`` hook's JSON (its session and cwd), or None for any other payload."""
    try:
        data = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("hook_event_name") != "SessionStart":
        return None
    session, cwd = data.get("session_id") or "", data.get("cwd") or ""
    if not isinstance(session, str) or not isinstance(cwd, str):
        return None
    return HookInput(session_id=session, transcript_path="", cwd=cwd, prompt="")


def _session_start(workspace: Path, hook: HookInput) -> str:
    """What the workspace has learned, for the new session: the last answer when nothing it was built from
    changed (gep/learning/context_cache.py, no pydantic), else built again (gep/sessions/session_start.py; pydantic models
    built on first use, as the CLI does)."""
    from gep.learning.context_cache import answer_from_cache

    now = datetime.now(UTC)
    cached = answer_from_cache(workspace, hook.session_id, now)
    if cached is not None:
        return cached
    from pydantic import BaseModel

    BaseModel.model_config["defer_build"] = True
    from gep.sessions.session_start import session_start

    return session_start(workspace, hook.session_id, now)


def _spawn(workspace: Path, payload: bytes) -> None:
    """The worker, in its own session (the hook's process group may be killed), with no pipe back to Claude Code."""
    proc = subprocess.Popen([sys.executable, "-m", "gep.sessions.capture", "--worker", "--workspace", str(workspace)],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, close_fds=True)
    assert proc.stdin is not None
    proc.stdin.write(payload)
    proc.stdin.close()


def _log(workspace: Path, message: str) -> None:
    from gep.signals.behavior_log import log

    log(workspace, message, datetime.now(UTC))


def _worker(args: Sequence[str]) -> int:
    with contextlib.suppress(OSError):
        os.nice(10)  # on a busy machine the hook's own process, which the person waits for, goes first
    payload = sys.stdin.buffer.read(MAX_PAYLOAD).decode("utf-8", "replace")
    workspace = _workspace(args, None)
    if workspace is None:
        return 0
    try:
        run_hook(workspace, payload, now=datetime.now(UTC))
    except Exception as exc:  # noqa: BLE001 - logged; the user's session goes on
        _log(workspace, f"capture: {type(exc).__name__}: {exc}")
    try:  # the next session's SessionStart answers from the cache (gep/learning/context_cache.py)
        from gep.sessions.session_start import refresh

        refresh(workspace, datetime.now(UTC))
    except Exception as exc:  # noqa: BLE001 - logged; the hook builds it then
        _log(workspace, f"context: {type(exc).__name__}: {exc}")
    return 0


def hook_session(hook: HookInput, now: datetime,
                 warnings: list[InputWarning] | None = None) -> SessionExchanges | None:
    """The session as the transcript tells it, with the hook's prompt as its last exchange (None for the
    engine's own agent sessions). A ``transcript_path`` that is no regular file (a FIFO, a device) is not
    read (noted in ``warnings``): the prompt alone is the exchange."""
    from gep.core.safe_files import Unreadable, note
    from gep.signals.sources import (
        SessionExchanges,
        TranscriptExchange,
        is_engine_session,
        read_tail,
        transcript_exchanges,
    )

    session = SessionExchanges(source="claude_code", session_id=hook.session_id)
    path = Path(hook.transcript_path).expanduser() if hook.transcript_path else None
    if path is not None:
        try:
            if is_engine_session(path):
                return None
            session = transcript_exchanges(read_tail(path, TRANSCRIPT_TAIL).text,
                                           session_id=hook.session_id or path.stem)
        except Unreadable as exc:
            note(warnings, exc.warning())
        except OSError:
            pass  # no transcript (yet)
    last = session.exchanges[-1] if session.exchanges else None
    if last is not None and not session.pending_agent and " ".join(last.user.split()) == " ".join(hook.prompt.split()):
        return session  # the transcript already holds the prompt
    current = TranscriptExchange(source=session.source, session_id=session.session_id or hook.session_id,
                                 agent=session.pending_agent, agent_tools=session.pending_tools,
                                 user=hook.prompt, ts=now)
    return session.model_copy(update={"exchanges": [*session.exchanges[-HISTORY:], current]})


def run_hook(workspace: Path, payload: str, *, now: datetime, timeout_s: float = 10.0) -> RecordReport | None:
    """Capture the exchange a hook's JSON describes (what the worker does). None when there is nothing to
    capture; :class:`gep.signals.behavior_log.Busy` when the signals lock stays taken."""
    from gep.signals.behavior import detect_session
    from gep.signals.behavior_log import record

    hook = parse_hook(payload)
    skipped: list[InputWarning] = []
    session = hook_session(hook, now, skipped) if hook is not None else None
    report = record(workspace, detect_session(session, now=now, only_last=True),
                    timeout_s=timeout_s) if session is not None else None
    if report is not None:
        skipped += report.warnings
        report.warnings = skipped
    for warning in skipped:  # the hook prints nothing: its log is where a skipped file shows
        _log(workspace, f"capture: {warning}")
    return report


if __name__ == "__main__":
    sys.exit(main())
