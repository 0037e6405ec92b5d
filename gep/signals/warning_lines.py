"""New warning lines as problem signals: the skeptic's baseline setting ``warning_signals`` (issue 41).

The seed-002 rules name the first line of the text read that reads as an error (``errsig:<line>``); a line at
warning level (``WARNING app.users: average_order returned no result``) names no problem unless it holds an
error word. The full engine's fix verdicts send the agent back when a function a fix touched starts logging a
new warning (gep/learning/resolved.py). A skeptic asks whether an engine with no memory at all that simply
chases every new warning line recovers that gain: with ``warning_signals = true`` (``GEP_WARNING_SIGNALS=1``;
off by default) each distinct warning line of the lines the cycle read (only those written since the last
change landed, gep/signals/unread.py) is added after the cycle's signals as ``errsig:<line>``, so it drives
repair like an error line. No record is read or kept: the same warning logged again is chased again.
bench/evolution.py's arm ``off_warnings`` is ``learning = "off"`` with this setting (docs/evaluation.md).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from gep.core import constants
from gep.signals.rules import PLATEAU

_WARNING = re.compile(r"\bwarn(?:ing)?\b", re.I)
_VARIABLE = re.compile(r"\d+(?:[.:,]\d+)*")  # timestamps, durations, counts: the same warning again
MAX_WARNINGS = 8  # distinct warning lines added in one cycle (a log full of them does not flood the signals)


def _key(line: str) -> str:
    return _VARIABLE.sub("#", " ".join(line.split()).lower())


def warning_signals(text: str) -> list[str]:
    """``errsig:<line>`` for each distinct warning line of ``text`` (the latest of each, newest first; lines
    that differ only in their numbers are one)."""
    out: dict[str, str] = {}
    for line in reversed(text.splitlines()):
        if not _WARNING.search(line):
            continue
        key = _key(line)
        if key not in out:
            out[key] = "errsig:" + " ".join(line.split())[: constants.ERRSIG_MAX_CHARS]
        if len(out) >= MAX_WARNINGS:
            break
    return list(out.values())


def with_warning_signals(signals: Sequence[str], text: str) -> list[str]:
    """``signals`` followed by the warning lines of ``text`` they do not name yet."""
    have = {_key(s.removeprefix("errsig:")) for s in signals if s.startswith("errsig:")}
    added = [s for s in warning_signals(text) if _key(s.removeprefix("errsig:")) not in have]
    out = [*signals, *added]
    if added and PLATEAU in out:
        out.remove(PLATEAU)
    return out
