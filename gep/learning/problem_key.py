"""The learning key of an error: stable across occurrences of one error, distinct between errors.

The seed's ``errsig:`` signal keeps the log line as it was (parity with the reference), and the reference's
``normalize_error_signature`` only replaces paths, ``0x`` hex and whole numbers: an ISO timestamp survives it
(``2026-11-28t00:<n>:<n>.024z``), as do UUIDs, request ids, durations (``12.5ms``) and syslog's month, so each
occurrence of one error became a new situation for lessons, capsules, bans and feedback. This key first
strips what changes from one occurrence to the next (timestamps in the formats logs use, pids, ids, ports,
durations, a JSON line's bookkeeping fields), keeps what tells errors apart (the message, the exception type,
a path's file name), then applies the reference's normalisation on top.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from gep.core.models import EvolutionEvent

_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*"
_TIME = r"\d{1,2}:\d{2}(?::\d{2})?(?:[.,]\d+)?"
_VOLATILE = [
    # ISO 8601 / RFC 3339 and Python logging's asctime: 2026-11-28T00:12:13.024Z, 2026-11-28 02:30:01,123
    (re.compile(r"\d{4}-\d{2}-\d{2}(?:[t ]" + _TIME + r")?(?:\s?(?:z|utc|[+-]\d{2}:?\d{2})\b)?", re.I), "<time>"),
    # syslog and ctime: Nov 28 02:30:01, Sat Nov 28 02:30:01 2026, 28/Nov/2026:02:30:01 +0000
    (re.compile(r"\b(?:(?:mon|tue|wed|thu|fri|sat|sun)[a-z]*,?\s+)?" + _MONTH + r"\s+\d{1,2},?\s+" + _TIME
                + r"(?:\s+\d{4})?", re.I), "<time>"),
    (re.compile(r"\b\d{1,2}/" + _MONTH + r"/\d{4}:" + _TIME + r"(?:\s[+-]\d{4})?", re.I), "<time>"),
    (re.compile(r"\b" + _TIME + r"\b"), "<time>"),  # a bare clock time
    (re.compile(r"\b\d{10}(?:\.\d+)?\b"), "<time>"),  # epoch seconds
    # ids: UUIDs, long hex (commit shas, request ids), hex with a letter and a digit of 6+ characters
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I), "<id>"),
    (re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{6,}\b", re.I), "<id>"),
    (re.compile(r"\b(?:req|request|trace|span|session|job|task|run|evt|txn)[-_]?(?:id)?[-_=:]\s*[\w-]+", re.I),
     "<id>"),
    # pids: app[1234], pid=1234, (pid 1234); ports and line numbers become <n> as every number does
    (re.compile(r"\[\d+\]"), ""),
    (re.compile(r"\bpid[=: ]\s*\d+", re.I), "pid"),
    # durations and sizes: 12.5ms, 3s, 1.2 seconds, 512MB
    (re.compile(r"\b\d+(?:\.\d+)?\s?(?:ns|us|µs|ms|s|sec|secs|seconds?|minutes?|m|h|hours?|kb|mb|gb|b|bytes)\b",
                re.I), "<qty>"),
    (re.compile(r"\b\d+\.\d+\b"), "<n>"),  # decimals the reference leaves as <n>.<n>
]
_PATH = re.compile(r"(?:[a-z]:\\|/)(?:[^ \n\r\t\"':,)]+[/\\])*([^ \n\r\t\"':,)/\\]+)", re.I)
# a JSON line's fields that say what went wrong; everything else is bookkeeping (time, pid, host, ids)
_JSON_WHAT = ("level", "levelname", "severity", "logger", "name", "error", "err", "exception", "exc_info",
              "error_type", "type", "msg", "message", "event", "detail", "reason", "func", "function", "file",
              "module")
_JSON_LINE = re.compile(r"\{.*\}", re.S)


def _from_json(text: str) -> str:
    """A JSON log record reduced to what went wrong (its message, error and level), in a fixed order."""
    m = _JSON_LINE.search(text)
    if m is None:
        return text
    try:
        record = json.loads(m.group(0))
    except ValueError:
        return text
    if not isinstance(record, dict):
        return text
    low = {str(k).lower(): v for k, v in record.items()}
    kept = [f"{k}={low[k]}" for k in _JSON_WHAT if k in low and isinstance(low[k], str | int | float | dict | list)]
    return (text[:m.start()] + " " + " ".join(str(x) for x in kept) + " " + text[m.end():]).strip()


def _file_names(text: str) -> str:
    """A path becomes ``<path>/name``: where the checkout lives changes, which file failed tells errors apart."""
    return _PATH.sub(lambda m: f"<path>/{m.group(1)}", text)


# the reference's normalisation (the memory graph's ``errsig`` signals keep it alone)
_WIN_PATH = re.compile(r"[a-z]:\\[^ \n\r\t]+", re.IGNORECASE)
_UNIX_PATH = re.compile(r"/[^ \n\r\t]+")
_HEX = re.compile(r"\b0x[0-9a-f]+\b", re.IGNORECASE | re.ASCII)
_NUM = re.compile(r"\b\d+\b", re.ASCII)
_WS = re.compile(r"\s+")


def normalize_error_signature(text: str) -> str | None:
    """Paths, hex and numbers replaced so that the same error reads the same across runs."""
    s = str(text or "").strip()
    if not s:
        return None
    s = s.lower()
    s = _WIN_PATH.sub("<path>", s)
    s = _UNIX_PATH.sub("<path>", s)
    s = _HEX.sub("<hex>", s)
    s = _NUM.sub("<n>", s)
    s = _WS.sub(" ", s)
    return s[:220]


def error_key(text: str) -> str | None:
    """The normalised text of an error line that learning keys on (None for a blank line)."""
    s = _from_json(str(text or "").strip())
    for pattern, repl in _VOLATILE:
        s = pattern.sub(repl, s)
    s = _file_names(s)
    norm = normalize_error_signature(s.replace("<path>/", "\x00"))
    return norm.replace("\x00", "<path>/") if norm else None


def learning_key(text: str) -> str | None:
    """What learning keys an error on (the seed's ``errsig:`` signal keeps the reference's normalisation)."""
    return error_key(text)


# ------------------------------------------------------------------ the kind of an error

# the exception class a line raises (the last one named: the one raised after any wrapper), and what varies from
# one function to the next in its message: quoted values, dotted and snake_case names, numbers
_CLASS = re.compile(r"\b([A-Z][A-Za-z0-9_]*(?:Error|Exception|Timeout|Exit|Interrupt|Warning))\b")
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"|`[^`]*`")
_NAMES = re.compile(r"\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+\b|\b\w*_\w*\b")
_NUMBERS = re.compile(r"\b\d[\w.]*")
_KIND_COUNT = re.compile(r"^recurring_errsig(?:\(\d+x\))?:")


def error_kind(line: str) -> str | None:
    """The kind of an error line: the exception class it raises and its message's shape (quoted values, names
    of functions and modules, numbers taken out), so ``KeyError: 'region' in app.users.load`` and ``KeyError:
    'currency' in app.billing.total`` are one kind, another problem than ``KeyError: <q> in <name>``'s twin
    ``ValueError``. None for a line naming no exception class (a warning, a message in words only)."""
    text = _from_json(str(line or "").strip())
    for pattern, repl in _VOLATILE:  # times, ids, durations
        text = pattern.sub(repl, text)
    names = list(_CLASS.finditer(text))
    if not names:
        return None
    msg = _NUMBERS.sub("<n>", _NAMES.sub("<name>", _QUOTED.sub("<q>", text[names[-1].end():])))
    return f"{names[-1].group(1)}{_WS.sub(' ', msg).strip().lower()[:120]}"


def error_kinds(signals: Iterable[str]) -> list[str]:
    """The kinds (:func:`error_kind`) of the error lines among signals (``errsig:`` and ``recurring_errsig``), in
    order, each once."""
    kinds = (error_kind(_KIND_COUNT.sub("", s.removeprefix("errsig:"))) for s in signals
             if s.startswith(("errsig:", "recurring_errsig")))
    return list(dict.fromkeys(k for k in kinds if k))


# ------------------------------------------------------------------ the problem of a situation, of an outcome

# signals that name one problem (an error, a person's request); the others (log_error, perf_bottleneck, ...) are
# generic: many problems share them
SPECIFIC = ("errsig_norm:", "recurring_errsig", "user_feature_request:", "user_improvement_suggestion:")
_COUNT = re.compile(r"^recurring_errsig\(\d+x\):")


def problem_identity(signal: str) -> str:
    """A specific signal as one problem whatever its count (``recurring_errsig(3x):`` and ``(4x):``) or time."""
    if _COUNT.match(signal):
        return "recurring_errsig:" + (learning_key(_COUNT.sub("", signal)) or "")
    return signal


def specific_identities(normalized: Iterable[str]) -> set[str]:
    """The problems that signals (errsig already normalised to ``errsig_norm:``) name; empty for generic ones."""
    return {problem_identity(s) for s in normalized if s.startswith(SPECIFIC)}


def outcome_signals(event: EvolutionEvent) -> list[str] | None:
    """The signals an attempt's outcome counts on: for a committed fix, the problems it was judged on (the
    verdict's), else, not judged yet, the errors it was credited with (gep/learning/fix_credit.py); otherwise
    (a change that failed its checks, an event recorded before fixes were credited) its trigger signals. None: a
    committed change, not judged yet, that touched none of its trigger errors (it is not a fix of any)."""
    credit = event.meta.fix_credit
    if credit is None:
        return list(event.signals)
    if credit.judged:
        return list(credit.judged)
    if event.meta.fix_verdict is None:
        return list(credit.addressed) if credit.addressed else None
    return list(event.signals)
