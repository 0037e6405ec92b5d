"""Signal extraction (seed 002): the rules that read logs, transcripts and memory as signal strings.

``extract_signals`` returns what the reference's ``extractSignals`` returns for the same inputs
(docs/signals.md names the version and how the two are compared), element for element, except for
the host-specific ``protocol_drift`` and ``path_outside_workspace``, which are left out.

The reference is JavaScript. What of its string model decides the output, and where it is kept:

* Strings are UTF-16 code units: ``{0,100}`` and ``slice(0, 260)`` count units. The corpus is
  searched with astral characters split into surrogate pairs (``_units``) and its signals are
  joined back (``_chars``); a pair cut by a slice stays a lone surrogate, as in JavaScript.
* ``\\b`` and ``\\w`` are ASCII-only, and ``i`` folds no other character to an ASCII letter;
  ``\\s`` and ``trim`` mean JavaScript's whitespace; ``.`` also stops at ``\\r``, U+2028 and
  U+2029 (``_js_regex``).
* ``toLowerCase`` is ``str.lower``: both turn "İ" into two characters and the Kelvin sign into "k".
* A plain object lists integer-like keys first, and counting into an inherited name such as
  ``constructor`` makes a string, never a number (``_Counter``); numbers print as ``String()`` does.

History rules read the last 10 events (the last 8 for frequencies, empties and failures); see
``analyze_recent_history``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pydantic import BaseModel

from gep.core import constants
from gep.core.hashing import js_number
from gep.core.records import HistoryRecord

# ---------------------------------------------------------------- JavaScript strings and objects

# JavaScript's \s (WhiteSpace and LineTerminator), which is also what String.prototype.trim strips.
_JS_SPACE = (
    "\t\n\x0b\x0c\r \xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000\ufeff"
)
_LINE_TERMINATORS = "\n\r\u2028\u2029"  # where JavaScript's "." stops
_SPACE_RUN = re.compile("[" + re.escape(_JS_SPACE) + "]+")
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _js_regex(source: str, flags: int = 0, space: str = _JS_SPACE) -> re.Pattern[str]:
    """A JavaScript regular expression (no ``u`` flag) as a Python pattern with the same matches.

    ``\\b`` and ``\\w`` are ASCII-only in JavaScript, and its ``i`` folds no other character to an
    ASCII letter (the patterns' letters are ASCII): ``re.ASCII``. ``\\s`` becomes the ``space``
    characters and ``.`` anything but a line terminator, which Python spells differently.
    """
    out: list[str] = []
    in_class, i = False, 0
    while i < len(source):
        piece = source[i : i + 2] if source[i] == "\\" else source[i]
        i += len(piece)
        if piece == r"\s":
            piece = re.escape(space) if in_class else "[" + re.escape(space) + "]"
        elif piece in ("[", "]"):
            in_class = piece == "["
        elif piece == "." and not in_class:
            piece = "[^" + re.escape(_LINE_TERMINATORS) + "]"
        out.append(piece)
    return re.compile("".join(out), flags | re.ASCII)


def _units(text: str) -> str:
    """``text`` as JavaScript holds it: one character per UTF-16 code unit."""
    if text.isascii() or not _ASTRAL.search(text):
        return text

    def pair(m: re.Match[str]) -> str:
        cp = ord(m.group()) - 0x10000
        return chr(0xD800 + (cp >> 10)) + chr(0xDC00 + (cp & 0x3FF))

    return _ASTRAL.sub(pair, text)


def _chars(text: str) -> str:
    """Surrogate pairs back to characters; a lone surrogate (a pair cut by a slice) stays."""
    if not _SURROGATE.search(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def _collapse(text: str) -> str:
    """``text.replace(/\\s+/g, ' ')``."""
    return _SPACE_RUN.sub(" ", text)


def _trim(text: str) -> str:
    return text.strip(_JS_SPACE)


def _snippet(text: str) -> str:
    """``text.replace(/\\s+/g, ' ').trim().slice(0, 200)``: how every request snippet is cut."""
    return _trim(_collapse(text))[: constants.SNIPPET_MAX_CHARS]


def _is_array_index(key: str) -> bool:
    return key == "0" or (key.isascii() and key.isdigit() and key[0] != "0" and int(key) < 2**32 - 1)


def _js_key_order(keys: Iterable[str]) -> list[str]:
    """Insertion-ordered keys as a JavaScript object lists them: array indices first, ascending."""
    keys = list(keys)
    indices = sorted((k for k in keys if _is_array_index(k)), key=int)
    return indices + [k for k in keys if not _is_array_index(k)]


def _js_truthy(value: Any) -> bool:
    if value is None or value is False or value == "":
        return False
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value != 0 and not (isinstance(value, float) and math.isnan(value))
    return True


def _js_string(value: Any) -> str:
    """``String(value)`` for a JSON value."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        try:  # a JSON number is a double in JavaScript: 2**69 reads 590295810358705700000
            number = float(value)
        except OverflowError:
            number = math.inf if value > 0 else -math.inf
        if math.isnan(number):
            return "NaN"
        if math.isinf(number):
            return "Infinity" if number > 0 else "-Infinity"
        return js_number(number)
    if isinstance(value, (list, tuple)):
        return ",".join("" if v is None else _js_string(v) for v in value)
    return "[object Object]"


def _is_zero(value: Any) -> bool:
    """``value === 0``."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0


# Names an empty JavaScript object inherits: ``(obj[k] || 0) + 1`` on them makes a string.
_INHERITED = frozenset(
    "constructor hasOwnProperty isPrototypeOf propertyIsEnumerable toString valueOf toLocaleString "
    "__defineGetter__ __defineSetter__ __lookupGetter__ __lookupSetter__".split()
)


class _Counter:
    """A JavaScript plain object used as ``obj[k] = (obj[k] || 0) + 1``."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def add(self, key: str) -> None:
        if key != "__proto__":  # assigning a number to __proto__ is ignored
            self.counts[key] = self.counts.get(key, 0) + 1

    def numeric_items(self) -> list[tuple[str, int]]:
        """Entries whose value is a number (inherited names hold strings), in JavaScript key order."""
        return [(k, self.counts[k]) for k in _js_key_order(self.counts) if k not in _INHERITED]

    def ordered(self) -> dict[str, int]:
        return {k: self.counts[k] for k in _js_key_order(self.counts)}


# ---------------------------------------------------------------- history


def top_gene(history: HistoryRecord) -> str | None:
    """The most used gene of the last 8 events (first in key order on ties)."""
    best, best_count = None, 0
    for gene in _js_key_order(history.gene_freq):
        if gene not in _INHERITED and history.gene_freq[gene] > best_count:
            best, best_count = gene, history.gene_freq[gene]
    return best


def _signal_key(signal: str) -> str:
    """Frequency key: what follows the prefix of a snippet-carrying signal is ignored."""
    for prefix in ("errsig:", "recurring_errsig", "user_feature_request:", "user_improvement_suggestion:"):
        if signal.startswith(prefix):
            return prefix.rstrip(":")
    return signal


def _event_dict(event: Any) -> Mapping[str, Any]:
    """An event as the JSON object the reference reads (anything else reads as no fields)."""
    if isinstance(event, BaseModel):
        return event.model_dump(mode="json")
    return event if isinstance(event, Mapping) else {}


def _field(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, Mapping) else None


def is_empty_cycle(event: Any) -> bool:
    """``meta.empty_cycle`` truthy, or a blast radius of exactly 0 files and 0 lines."""
    ev = _event_dict(event)
    if _js_truthy(_field(ev.get("meta"), "empty_cycle")):
        return True
    br = ev.get("blast_radius")
    return _js_truthy(br) and _is_zero(_field(br, "files")) and _is_zero(_field(br, "lines"))


def _is_failed(event: Mapping[str, Any]) -> bool:
    return bool(_field(event.get("outcome"), "status") == "failed")


def _is_repair(event: Mapping[str, Any]) -> bool:
    return event.get("intent") == "repair"


def _tail_run(events: list[Mapping[str, Any]], pred: Callable[[Mapping[str, Any]], bool]) -> int:
    """How many events at the end of ``events`` satisfy ``pred``."""
    n = 0
    for ev in reversed(events):
        if not pred(ev):
            break
        n += 1
    return n


def analyze_recent_history(events: Iterable[Any] | None) -> HistoryRecord:
    """Loop indicators over the last ``HISTORY_WINDOW`` events (oldest first): what the event records."""
    recent = [_event_dict(e) for e in list(events or [])[-constants.HISTORY_WINDOW :]]
    if not recent:
        return HistoryRecord()
    tail = recent[-constants.HISTORY_TAIL :]
    signal_freq, gene_freq = _Counter(), _Counter()
    for ev in tail:
        sigs, genes = ev.get("signals"), ev.get("genes_used")
        for s in sigs if isinstance(sigs, list) else []:
            signal_freq.add(_signal_key(_js_string(s)))
        for g in genes if isinstance(genes, list) else []:
            gene_freq.add(_js_string(g))
    failures = sum(1 for ev in tail if _is_failed(ev))
    return HistoryRecord(
        suppressed_signals=[k for k, n in signal_freq.numeric_items() if n >= constants.SUPPRESS_MIN_COUNT],
        recent_intents=[_js_string(ev["intent"]) if _js_truthy(ev.get("intent")) else "unknown" for ev in recent],
        consecutive_repair_count=_tail_run(recent, _is_repair),
        empty_cycle_count=sum(1 for ev in tail if is_empty_cycle(ev)),
        consecutive_empty_cycles=_tail_run(recent, is_empty_cycle),
        consecutive_failure_count=_tail_run(recent, _is_failed),
        recent_failure_count=failures,
        recent_failure_ratio=failures / len(tail),
        signal_freq=signal_freq.ordered(),
        gene_freq=gene_freq.ordered(),
    )


# ---------------------------------------------------------------- the reference's patterns
#
# Written as the reference writes them; ``_js_regex`` gives them their JavaScript meaning.
# Patterns tested on ``lower`` (the corpus lower-cased) only say yes or no; the others run on the
# corpus in UTF-16 units, so their counted repeats and the cuts of what they match count units.
# The reference's ``i`` flag is left off the patterns run only on ``lower``: it holds no capital
# ASCII letter, and JavaScript folds no other character to one (and Python's ``re`` runs 3-7
# times slower with the flag).

# what the rules say when nothing fired ("nothing to do"): a signal found later replaces it
PLATEAU = "stable_success_plateau"
_I = re.IGNORECASE
_CJK_ERROR = r"错误\s*[：:]|异常\s*[：:]|报错\s*[：:]|失败\s*[：:]"
_ERROR_HIT = _js_regex(
    r'\[error\]|error:|exception:|iserror":true|"status":\s*"error"|"status":\s*"failed"|' + _CJK_ERROR
)
# The reference tests each line (split at "\n"); over the whole corpus, \s must not cross one.
_ERROR_LINE = _js_regex(
    r"\b(typeerror|referenceerror|syntaxerror)\b\s*:|error\s*:|exception\s*:|\[error|" + _CJK_ERROR,
    _I,
    space=_JS_SPACE.replace("\n", ""),
)
_ERROR_RECORD = _js_regex(r'(?:LLM error|"error"|"status":\s*"error")[^}]{0,200}', _I)
_UNSUPPORTED = _js_regex(r"unsupported mime|unsupported.*type|invalid.*mime")
_PERF = _js_regex(
    r"\b(slow|timeout|timed?\s*out|latency|bottleneck|took too long|performance issue|high cpu|high memory"
    r"|oom|out of memory)\b"
)
_CAPABILITY_GAP = _js_regex(
    r"\b(not supported|cannot|doesn'?t support|no way to|missing feature|unsupported|not available"
    r"|not implemented|no support for)\b"
)
_FEATURE_EN = _js_regex(
    r"\b(add|implement|create|build|make|develop|write|design)\b[^.?!\n]{3,120}"
    r"\b(feature|function|module|capability|tool|support|endpoint|command|option|mode)\b",
    _I,
)
_FEATURE_WANT_ZH = _js_regex(r"我想\s*[，,\.。、\s]*([\s\S]{0,400})")
_TOOL = _js_regex(r"\[TOOL:\s*([\w-]+)\]")
_BENIGN_EXEC = _js_regex(r"exec: (node\s+[\w\/\.-]+\.js\s+ensure)")
_COSMETIC = frozenset({"user_missing", "memory_missing", "session_logs_missing"})


class _Window:
    """``/.{0,W}(core).{0,W}/``: a keyword with up to ``W`` units of its line on either side."""

    def __init__(self, core: str, width: int, flags: int = 0) -> None:
        self.core = _js_regex(core, flags)
        self.full = _js_regex(f".{{0,{width}}}({core}).{{0,{width}}}", flags)
        self.width = width

    def find(self, text: str) -> str | None:
        """``text.match(full)[0]``, tried only where it can start.

        A match holds a core match, so the leftmost one starts no more than ``W`` before the first
        core match and after the last line terminator ahead of it; from there one match is sure.
        """
        core = self.core.search(text)
        if core is None:
            return None
        k = core.start()
        lo = max(0, k - self.width)
        start = max([lo] + [text.rfind(t, lo, k) + 1 for t in _LINE_TERMINATORS])
        full = self.full.match(text, start)
        return None if full is None else full.group()


_WANT_EN = _Window(r"\b(i want|i need|we need|please add|can you add|could you add|let'?s add)\b", 80, _I)
_FEATURE_ZH = _Window(r"加个|实现一下|做个|想要\s*一个|需要\s*一个|帮我加|帮我开发|加一下|新增一个|加个功能|做个功能", 100)
_FEATURE_TW = _Window(r"加個|實現一下|做個|想要一個|請加|新增一個|加個功能|做個功能|幫我加", 100)
_FEATURE_JA = _Window(r"追加|実装|作って|機能を|追加して|が欲しい|を追加|してほしい", 100)
_IMPROVE_EN = _Window(
    r"\b(should be|could be better|improve|enhance|upgrade|refactor|clean up|simplify|streamline)\b", 80, _I
)
_IMPROVE_CJK = [  # with the snippet used when the keyword is found but its window is not
    (_Window(r"改进一下|优化一下|简化|重构|整理一下|弄得更好", 100), "改进建议"),
    (_Window(r"改進一下|優化一下|簡化|重構|整理一下|弄得更好", 100), "改進建議"),
    (_Window(r"改善|最適化|簡素化|リファクタ|良くして|改良", 100), "改善要望"),
]

# ---------------------------------------------------------------- rules on the corpus


def _error_signature(corpus: str) -> str | None:
    """The first line (split at "\\n") that reads as an error, trimmed, whitespace runs made one
    space, cut at 260 units."""
    m = _ERROR_LINE.search(corpus)
    if m is None:
        return None
    end = corpus.find("\n", m.end())
    line = corpus[corpus.rfind("\n", 0, m.start()) + 1 : len(corpus) if end < 0 else end]
    return _collapse(_trim(line))[: constants.ERRSIG_MAX_CHARS]


def _recurring_error(corpus: str) -> tuple[str, int] | None:
    """The most frequent error record seen at least 3 times (first seen on ties), with its count.

    Records are keyed by their first 100 units with whitespace runs made one space; keys start with
    a letter or a quote, so they keep insertion order as object keys.
    """
    counts: dict[str, int] = {}
    for record in _ERROR_RECORD.findall(corpus):
        key = _collapse(record)[:100]
        counts[key] = counts.get(key, 0) + 1
    top = max(counts.items(), key=lambda item: item[1], default=None)
    return top if top is not None and top[1] >= constants.RECURRING_ERROR_MIN else None


def _feature_request(corpus: str, lower: str) -> str | None:
    """The ``user_feature_request:`` snippet; the first language whose keywords occur decides.

    None when none does. Every keyword test that fires leaves a snippet that is not empty, so the
    reference's last check (any pattern at all, the English one with a 60-unit reach) adds nothing.
    """
    m = _FEATURE_EN.search(corpus)
    if m is not None:
        return _snippet(m.group())
    if _WANT_EN.core.search(lower):
        found = _WANT_EN.find(corpus)
        return "feature request" if found is None else _snippet(found)
    if _FEATURE_ZH.core.search(corpus) or "我想" in corpus:
        found = _FEATURE_ZH.find(corpus)
        snippet = "" if found is None else _snippet(found)
        if not snippet and "我想" in corpus:
            want = _FEATURE_WANT_ZH.search(corpus)
            snippet = "" if want is None else _snippet(want.group(1))
        return snippet or "功能需求"
    for window, default in ((_FEATURE_TW, "功能需求"), (_FEATURE_JA, "機能要望")):
        if window.core.search(corpus):
            found = window.find(corpus)
            return default if found is None else _snippet(found)
    return None


def _improvement(corpus: str, lower: str) -> str | None:
    """The ``user_improvement_suggestion:`` snippet (English, then Chinese, Traditional, Japanese)."""
    found = _IMPROVE_EN.find(corpus)
    if found is not None:
        return _snippet(found)
    for window, default in _IMPROVE_CJK:
        if window.core.search(corpus):
            found = window.find(corpus)
            return default if found is None else _snippet(found)
    return "" if _IMPROVE_EN.core.search(lower) else None


def _tool_signals(corpus: str) -> list[str]:
    """Tools called 10+ times, and ``exec`` 5+ times once benign watchdog commands are taken off."""
    usage = _Counter()
    for name in _TOOL.findall(corpus):
        usage.add(name)
    counts = dict(usage.numeric_items())
    if counts.get("exec"):
        counts["exec"] = max(0, counts["exec"] - len(_BENIGN_EXEC.findall(corpus)))
    signals = []
    for tool, n in counts.items():
        if n >= constants.HIGH_TOOL_USAGE_MIN:
            signals.append("high_tool_usage:" + tool)
        if tool == "exec" and n >= constants.REPEATED_EXEC_MIN:
            signals.append("repeated_tool_usage:exec")
    return signals


def _defensive_signals(corpus: str, lower: str) -> list[str]:
    """Errors and missing resources."""
    signals = ["log_error"] if _ERROR_HIT.search(lower) else []
    errsig = _error_signature(corpus)
    if errsig is not None:
        signals.append("errsig:" + errsig)
    for needle, signal in (
        ("memory.md missing", "memory_missing"),
        ("user.md missing", "user_missing"),
        ("key missing", "integration_key_missing"),
    ):
        if needle in lower:
            signals.append(signal)
    if "no session logs found" in lower or "no jsonl files" in lower:
        signals.append("session_logs_missing")
    recurring = _recurring_error(corpus)
    if recurring is not None:
        key, n = recurring
        signals += ["recurring_error", f"recurring_errsig({n}x):{key[:150]}"]
    if _UNSUPPORTED.search(lower):
        signals.append("unsupported_input_type")
    return signals


def _corpus_signals(corpus: str, lower: str) -> list[str]:
    """Defensive, then opportunity signals; cosmetic ones give way when anything else fired."""
    signals = _defensive_signals(corpus, lower)
    feature = _feature_request(corpus, lower)
    if feature is not None:
        signals.append("user_feature_request:" + feature)
    if "log_error" not in signals:  # improvements are looked for only when no error was
        improvement = _improvement(corpus, lower)
        if improvement is not None:
            signals.append("user_improvement_suggestion:" + improvement)
    if _PERF.search(lower):
        signals.append("perf_bottleneck")
    if _CAPABILITY_GAP.search(lower) and not _COSMETIC & set(signals):
        signals.append("capability_gap")
    signals += _tool_signals(corpus)
    actionable = [s for s in signals if s not in _COSMETIC]
    return [_chars(s) for s in (actionable or signals)]


# ---------------------------------------------------------------- rules on the history


def _is_repair_only(signal: str) -> bool:
    return signal == "log_error" or signal.startswith("errsig:") or signal.startswith("recurring_errsig")


def _add_missing(signals: list[str], *names: str) -> None:
    signals.extend(name for name in names if name not in signals)


def _history_signals(signals: list[str], history: HistoryRecord) -> list[str]:
    """The corpus signals after the loop rules: suppression, repair and empty loops, streaks."""
    if history.suppressed_signals:
        kept = [s for s in signals if _signal_key(s) not in history.suppressed_signals]
        signals = kept or (["evolution_stagnation_detected", "stable_success_plateau"] if signals else [])
    if history.consecutive_repair_count >= constants.REPAIR_LOOP_MIN:
        signals = [s for s in signals if not _is_repair_only(s)] or ["repair_loop_detected", "stable_success_plateau"]
        signals.append("force_innovation_after_repair_loop")
    if history.empty_cycle_count >= constants.EMPTY_CYCLE_LOOP_MIN:
        signals = [s for s in signals if not _is_repair_only(s)]
        _add_missing(signals, "empty_cycle_loop_detected", "stable_success_plateau")
    if history.consecutive_empty_cycles >= constants.STEADY_STATE_MIN:
        _add_missing(signals, "force_steady_state", "evolution_saturation")
    elif history.consecutive_empty_cycles >= constants.SATURATION_MIN:
        _add_missing(signals, "evolution_saturation")
    failures = history.consecutive_failure_count
    if failures >= constants.FAILURE_STREAK_MIN:
        signals.append(f"consecutive_failure_streak_{failures}")
        if failures >= constants.FAILURE_LOOP_MIN:
            signals.append("failure_loop_detected")
            top = top_gene(history)
            if top:
                signals.append("ban_gene:" + top)
    if history.recent_failure_ratio >= constants.HIGH_FAILURE_RATIO:
        signals += ["high_failure_ratio", "force_innovation_after_repair_loop"]
    return signals or [PLATEAU]


def extract_signals(
    *,
    recent_session_transcript: str | None = "",
    today_log: str | None = "",
    memory_snippet: str | None = "",
    user_snippet: str | None = "",
    recent_events: Iterable[Any] | None = (),
) -> list[str]:
    """Signals of one cycle: the corpus rules, then the history rules, duplicates dropped."""
    raw = "\n".join(s or "" for s in (recent_session_transcript, today_log, memory_snippet, user_snippet))
    signals = _corpus_signals(_units(raw), raw.lower())
    signals = _history_signals(signals, analyze_recent_history(recent_events))
    return list(dict.fromkeys(signals))
