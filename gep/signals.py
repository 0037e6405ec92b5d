"""Signal extraction (seed 002): what a cycle reads in logs, transcripts and memory, as signal strings.

``extract_signals`` returns, for the same inputs, the same list as the reference's ``extractSignals``
(EvoMap/evolver ``src/gep/signals.js``), element for element, except for the host-specific
``protocol_drift`` and ``path_outside_workspace`` signals, which are left out (and the reference's
``windows_shell_incompatible``, which only fires on Windows hosts).

The reference is JavaScript; the behaviour carried over includes its string model:

* Strings are sequences of UTF-16 code units: counted quantifiers (``.{0,100}``) and slices
  (``slice(0, 260)``) count code units, so a corpus holding astral characters (emoji) is worked
  on in a surrogate-expanded form and converted back at the end (see ``_to_utf16_units``).
* ``\\b`` and ``\\w`` are ASCII-only and ``/i`` folds only ASCII letters (``re.ASCII``).
* ``\\s`` and ``trim`` use JavaScript's whitespace set (``_WS``), ``.`` excludes ``\\r``,
  ``\\u2028`` and ``\\u2029`` as well as ``\\n`` (``_DOT``).
* Plain-object key order puts integer-like keys first (``_js_key_order``), and inherited
  ``Object.prototype`` names (``constructor``, ``toString`` ...) never count as numbers.

History rules work on the last 10 events (last 8 for frequencies, empties and failures); see
``analyze_recent_history``. An event is empty when ``meta.empty_cycle`` is truthy or its blast
radius is exactly 0 files and 0 lines.
"""

from __future__ import annotations

import math
import os
import re
from codecs import utf_16_le_decode as _utf16_decode
from codecs import utf_16_le_encode as _utf16_encode
from collections.abc import Iterable, Mapping
from itertools import islice
from typing import Any, TypeVar

from pydantic import BaseModel

from gep import constants as C
from gep.hashing import js_number
from gep.records import HistoryRecord

# The optional native scans (gep/_scan.c, built by setup.py where a C compiler is present). The
# pure-Python path gives the same results; GEP_SIGNALS_PURE=1 forces it.
_native: Any = None
if not os.environ.get("GEP_SIGNALS_PURE"):
    try:
        from gep import _scan as _native
    except ImportError:
        _native = None

# ---------------------------------------------------------------- JavaScript string semantics

# JavaScript's \s (WhiteSpace + LineTerminator), also what String.prototype.trim strips.
_WS_CHARS = (
    "\t\n\x0b\x0c\r \xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000\ufeff"
)
_WS = "[" + re.escape(_WS_CHARS) + "]"
_WS_NO_LF = "[" + re.escape(_WS_CHARS.replace("\n", "")) + "]"
_DOT = "[^\n\r\u2028\u2029]"
_LINE_TERMINATORS = "\n\r\u2028\u2029"

_A = re.ASCII
_AI = re.ASCII | re.IGNORECASE

_WS_RUN = re.compile(_WS + "+")
_SPACE_RUN = re.compile("  +")
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")
_ASTRAL_LEADS = (b"\xf0", b"\xf1", b"\xf2", b"\xf3", b"\xf4")
_SURROGATE = re.compile("[\ud800-\udfff]")

# Names an empty JavaScript object inherits: counting into them yields strings, not numbers.
_INHERITED = frozenset(
    "constructor hasOwnProperty isPrototypeOf propertyIsEnumerable toString valueOf toLocaleString "
    "__defineGetter__ __defineSetter__ __lookupGetter__ __lookupSetter__".split()
)
_K = TypeVar("_K", str, bytes)
_PROTO = "__proto__"


def _to_utf16_units(text: str) -> str:
    """Astral characters as surrogate pairs, so indices count UTF-16 code units."""
    if not _ASTRAL.search(text):
        return text

    def split(m: re.Match[str]) -> str:
        cp = ord(m.group(0)) - 0x10000
        return chr(0xD800 + (cp >> 10)) + chr(0xDC00 + (cp & 0x3FF))

    return _ASTRAL.sub(split, text)


def _from_utf16_units(text: str) -> str:
    """Pairs of surrogates back to characters; a pair cut by a slice stays a lone surrogate."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def _js_trim(text: str) -> str:
    return text.strip(_WS_CHARS)


def _collapse(text: str) -> str:
    """``s.replace(/\\s+/g, ' ')``."""
    flat = text.replace("\n", " ")
    if flat.isprintable():
        return _squeeze_spaces(flat)
    return _WS_RUN.sub(" ", text)


def _squeeze_spaces(flat: str) -> str:
    """``flat`` with each run of spaces made one space.

    Every JavaScript whitespace but the plain space is unprintable for Python: in a printable
    text with "\\n" made a space, this is ``s.replace(/\\s+/g, ' ')``.
    """
    return _SPACE_RUN.sub(" ", flat) if "  " in flat else flat


def _is_array_index(key: str) -> bool:
    return key == "0" or (key.isascii() and key.isdigit() and key[0] != "0" and int(key) < 2**32 - 1)


def _js_key_order(keys: Iterable[str]) -> list[str]:
    """Insertion-ordered keys as a JavaScript object lists them: array indices first, ascending."""
    keys = list(keys)
    idx = [k for k in keys if _is_array_index(k)]
    if not idx:
        return keys
    rest = [k for k in keys if not _is_array_index(k)]
    return sorted(idx, key=int) + rest


def _js_truthy(value: Any) -> bool:
    if value is None or value is False or value == "":
        return False
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value != 0 and not (isinstance(value, float) and math.isnan(value))
    return True


def _js_number(value: float) -> str:
    """``String(value)`` for a double: ``NaN`` and the infinities by name, the rest as ``JSON`` writes it."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return js_number(value)


def _js_string(value: Any) -> str:
    """``String(value)`` for JSON-shaped values."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        # A JSON number is a double in JavaScript: big integers round (2**69 reads 590295810358705700000)
        try:
            return _js_number(float(value))
        except OverflowError:
            return "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, (list, tuple)):
        return ",".join("" if v is None else _js_string(v) for v in value)
    return "[object Object]"


def _is_zero(value: Any) -> bool:
    """``value === 0``."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0


class _Counter:
    """A JavaScript plain object used as ``obj[k] = (obj[k] || 0) + 1``."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def add(self, key: str) -> None:
        if key == _PROTO:  # assigning a non-object to __proto__ is ignored
            return
        self.counts[key] = self.counts.get(key, 0) + 1

    def numeric_items(self) -> list[tuple[str, int]]:
        """Entries whose value is a number (inherited names hold strings), in JS key order."""
        return [(k, self.counts[k]) for k in _js_key_order(self.counts) if k not in _INHERITED]

    def ordered(self) -> dict[str, int]:
        return {k: self.counts[k] for k in _js_key_order(self.counts)}


# ---------------------------------------------------------------- history


class HistoryAnalysis(HistoryRecord):
    """What the last events say about loops (the reference's ``analyzeRecentHistory``)."""

    @property
    def top_gene(self) -> str | None:
        """The most used gene of the last 8 events (first in key order on ties)."""
        best, best_count = None, 0
        for gene in _js_key_order(self.gene_freq):
            if gene in _INHERITED:
                continue
            if self.gene_freq[gene] > best_count:
                best, best_count = gene, self.gene_freq[gene]
        return best


def _signal_key(signal: str) -> str:
    """Frequency key: details after the prefix of snippet-carrying signals are ignored."""
    if signal.startswith("errsig:"):
        return "errsig"
    if signal.startswith("recurring_errsig"):
        return "recurring_errsig"
    if signal.startswith("user_feature_request:"):
        return "user_feature_request"
    if signal.startswith("user_improvement_suggestion:"):
        return "user_improvement_suggestion"
    return signal


def _event_dict(event: Any) -> Mapping[str, Any]:
    if isinstance(event, BaseModel):
        return event.model_dump(mode="json")
    if isinstance(event, Mapping):
        return event
    return {}


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
    return _field(event.get("outcome"), "status") == "failed"


def analyze_recent_history(events: Iterable[Any]) -> HistoryAnalysis:
    """Loop indicators over the last ``HISTORY_WINDOW`` events (oldest first)."""
    all_events = list(events) if events is not None else []
    if not all_events:
        return HistoryAnalysis()
    recent = [_event_dict(e) for e in all_events[-C.HISTORY_WINDOW :]]
    tail = recent[-C.HISTORY_TAIL :]

    def tail_run(pred: Any) -> int:
        n = 0
        for ev in reversed(recent):
            if not pred(ev):
                break
            n += 1
        return n

    signal_freq, gene_freq = _Counter(), _Counter()
    for ev in tail:
        sigs = ev.get("signals")
        for s in sigs if isinstance(sigs, list) else []:
            signal_freq.add(_signal_key(_js_string(s)))
        genes = ev.get("genes_used")
        for g in genes if isinstance(genes, list) else []:
            gene_freq.add(_js_string(g))

    failures = sum(1 for ev in tail if _is_failed(ev))
    return HistoryAnalysis(
        suppressed_signals=[k for k, n in signal_freq.numeric_items() if n >= C.SUPPRESS_MIN_COUNT],
        recent_intents=[
            _js_string(ev.get("intent")) if _js_truthy(ev.get("intent")) else "unknown" for ev in recent
        ],
        consecutive_repair_count=tail_run(lambda ev: ev.get("intent") == "repair"),
        empty_cycle_count=sum(1 for ev in tail if is_empty_cycle(ev)),
        consecutive_empty_cycles=tail_run(is_empty_cycle),
        consecutive_failure_count=tail_run(_is_failed),
        recent_failure_count=failures,
        recent_failure_ratio=failures / len(tail) if tail else 0.0,
        signal_freq=signal_freq.ordered(),
        gene_freq=gene_freq.ordered(),
    )


# ---------------------------------------------------------------- corpus patterns
#
# JavaScript's /i (without the u flag) folds ASCII letters only. Every pattern below is written in
# lower case and run, case-sensitively, on ``folded``: the corpus with ASCII letters lower-cased and
# every other character kept at its index. A match there is the /i match, and its text is sliced
# from the corpus. Case-sensitive patterns let Python's regex engine skip ahead on literal prefixes.
# Patterns the reference runs on ``corpus.toLowerCase()`` only answer yes or no; they run on
# ``folded`` too unless the corpus holds one of the two characters whose lower case is ASCII
# ("İ" -> "i̇", Kelvin sign -> "k"), in which case they run on a real ``lower()`` copy.


def _words(words: list[str]) -> str:
    """``\\b(w1|w2|...)`` for lower-case words, written so each branch starts with a literal.

    When every branch of the pattern starts with a literal, the regex engine skips straight to
    candidate characters.
    """
    alts = [f"{w[0]}(?<![a-z0-9_]{re.escape(w[0])}){w[1:]}" for w in words]
    return "(" + "|".join(alts) + ")"

# English letters from the rarest to the most common: where a word-list regex enters a branch.
_RARE_FIRST = "zqjxkvwfbyghcmuplndiaosrte"


def _rarest_letter(word: str) -> int:
    """Index of the first of the rarest letters in ``word``."""
    return min((k for k, ch in enumerate(word) if ch.isalpha()), key=lambda k: _RARE_FIRST.index(word[k]))


def _anchored_words(words: list[tuple[str, str]]) -> str:
    """``\\b(w1 r1|w2 r2|...)``, each branch entered at the rarest letter of ``w``.

    A branch ``(word, rest)`` matches ``\\b word rest``; it starts at the chosen letter and checks
    the part of ``word`` up to it, and the \\b before it, by looking behind. A match starts at
    that letter, not at the word: whether there is one, and where it ends, are the plain pattern's.
    """
    alts = []
    for word, rest in words:
        i = _rarest_letter(word)
        head = re.escape(word[: i + 1])
        alts.append(f"{re.escape(word[i])}(?<={head})(?<![a-z0-9_]{head}){re.escape(word[i + 1 :])}{rest}")
    return "(" + "|".join(alts) + ")"


def _ws(n: str = "*") -> str:
    return _WS + n


_COLON = "[：:]"


def _literals(words: list[str]) -> str:
    """An alternation of literal words in which "\\0" stands for ``\\s*`` and "\\1" for ``\\s*``
    without "\\n" (the native word scans read the same lists)."""
    return "|".join(re.escape(w).replace("\0", _ws()).replace("\1", _WS_NO_LF + "*") for w in words)


_CJK_ERRORS = ["错误", "异常", "报错", "失败"]  # each followed by \s*[：:]
_ERROR_HIT_WORDS = ["[error]", "error:", "exception:", 'iserror":true', '"status":\0"error"', '"status":\0"failed"']
_ERROR_HIT_WORDS += [k + "\0" + colon for k in _CJK_ERRORS for colon in "：:"]
_ERROR_HIT = re.compile(_literals(_ERROR_HIT_WORDS), _A)
# Lines holding an error signature. The reference tests each line; over the whole corpus \s must
# not cross "\n". Its first branch, \b(typeerror|referenceerror|syntaxerror)\b\s*:, is left out:
# every line it matches also matches "error\s*:".
_ERR_LINE_WORDS = ["error\1:", "exception\1:", "[error"] + [k + "\1" + colon for k in _CJK_ERRORS for colon in "：:"]
_ERR_LINE = re.compile(_literals(_ERR_LINE_WORDS), _A)
# Run on the corpus itself (findall hands back the original text). Only the letters are
# case-insensitive, and the leading class lets the regex engine skip to candidate characters.
_ERR_HEAD = r'[lL"](?:(?<=[lL])(?i:lm error)|(?<=")(?i:error"|status":' + _ws() + r'"error"))'
_ERR_TAIL_UNITS = 200
_ERR_PATTERNS = re.compile(_ERR_HEAD + f"[^}}]{{0,{_ERR_TAIL_UNITS}}}", _A)
# Characters Python's str.split() takes for whitespace and JavaScript's \s does not, and back.
_SPLIT_WS_DIFF = "\x1c\x1d\x1e\x1f\x85\ufeff"
_UNSUPPORTED = re.compile("unsupported mime|unsupported" + _DOT + "*type|invalid" + _DOT + "*mime", _A)

_VERB_LIST = "add implement create build make develop write design".split()
_VERBS = _words(_VERB_LIST) + r"\b"
_NOUNS = r"\b(feature|function|module|capability|tool|support|endpoint|command|option|mode)\b"
_FEAT_EN = re.compile(_VERBS + r"[^.?!\n]{3,120}" + _NOUNS, _A)
_FEAT_EN_SHORT = re.compile(_VERBS + r"[^.?!\n]{3,60}" + _NOUNS, _A)
_WANT_LIST = ["i want", "i need", "we need", "please add", "can you add", "could you add", "let's add", "lets add"]
_WANT_CORE = re.compile(_words(_WANT_LIST) + r"\b", _A)
_FEAT_WANT = re.compile(
    _DOT
    + r"{0,80}\b(i want|i need|we need|please add|can you add|could you add|let'?s add)\b"
    + _DOT
    + "{0,80}",
    _A,
)


def _keyed(keys: str, flags: int = 0) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """For a CJK keyword list: a cheap test for any keyword, and the reference's snippet pattern
    (up to 100 code units either side of the keyword)."""
    return re.compile(keys, flags), re.compile(_DOT + "{0,100}(" + keys + ")" + _DOT + "{0,100}", flags)


_ZH_KEYS = (
    "加个|实现一下|做个|想要"
    + _ws()
    + "一个|需要"
    + _ws()
    + "一个|帮我加|帮我开发|加一下|新增一个|加个功能|做个功能"
)
_FEAT_ZH_CORE, _FEAT_ZH = _keyed(_ZH_KEYS, _A)
_FEAT_WANT_ZH = re.compile("我想" + _ws() + r"[，,\.。、" + re.escape(_WS_CHARS) + r"]*([\s\S]{0,400})", _A)
_TW_KEYS = "加個|實現一下|做個|想要一個|請加|新增一個|加個功能|做個功能|幫我加"
_FEAT_TW_CORE, _FEAT_TW = _keyed(_TW_KEYS)
_JA_KEYS = "追加|実装|作って|機能を|追加して|が欲しい|を追加|してほしい"
_FEAT_JA_CORE, _FEAT_JA = _keyed(_JA_KEYS)

_IMP_LIST = "should be|could be better|improve|enhance|upgrade|refactor|clean up|simplify|streamline"
_IMP_CORE = re.compile(_words(_IMP_LIST.split("|")) + r"\b", _A)
_IMP_EN = re.compile(_DOT + r"{0,80}\b(" + _IMP_LIST + r")\b" + _DOT + "{0,80}", _A)
_IMP_ZH_KEYS = "改进一下|优化一下|简化|重构|整理一下|弄得更好"
_IMP_ZH_CORE, _IMP_ZH = _keyed(_IMP_ZH_KEYS)
_IMP_TW_KEYS = "改進一下|優化一下|簡化|重構|整理一下|弄得更好"
_IMP_TW_CORE, _IMP_TW = _keyed(_IMP_TW_KEYS)
_IMP_JA_KEYS = "改善|最適化|簡素化|リファクタ|良くして|改良"
_IMP_JA_CORE, _IMP_JA = _keyed(_IMP_JA_KEYS)

# perf_bottleneck only asks whether any word occurs, so each branch starts at the word's rarest
# letter (``_anchored_words``): the regex engine stops at far fewer candidate characters.
_PERF_LIST = [
    "slow",
    "timeout",
    "latency",
    "bottleneck",
    "took too long",
    "performance issue",
    "high cpu",
    "high memory",
    "oom",
    "out of memory",
]
_PERF = re.compile(
    _anchored_words([(w, "") for w in _PERF_LIST] + [("tim", "ed?" + _ws() + "out")]) + r"\b", _A
)
_CAP_GAP_LIST = [
    "not supported",
    "cannot",
    "doesn't support",
    "doesnt support",
    "no way to",
    "missing feature",
    "unsupported",
    "not available",
    "not implemented",
    "no support for",
]
_CAP_GAP = re.compile(_words(_CAP_GAP_LIST) + r"\b", _A)
_TOOL = re.compile(r"\[TOOL:" + _ws() + r"([\w-]+)\]", _A)
_BENIGN_EXEC = re.compile(r"exec: (node" + _ws("+") + r"[\w/.-]+\.js" + _ws("+") + "ensure)", _A)

_COSMETIC = frozenset(
    {"user_missing", "memory_missing", "session_logs_missing", "windows_shell_incompatible"}
)

# ---------------------------------------------------------------- the corpus as UTF-8 bytes
#
# Most patterns only need a yes/no or a position, and scanning bytes is cheaper than scanning a
# str that holds an emoji (4 bytes per character) and needs no UTF-16 copy. UTF-8 is
# self-synchronising: no byte of a multi-byte character is ASCII, so an ASCII atom, ASCII \b and
# the byte forms below of JavaScript's \s, "." and [：:] match exactly where the str pattern does.
# bytes.lower() folds ASCII letters only; that is JavaScript's toLowerCase for these patterns
# unless the corpus holds "İ" or the Kelvin sign (the only characters whose lower case holds
# ASCII), in which case the str path with a real lower() runs instead (``_Texts.special``).

_B_WS = (
    r"(?:[\t\n\x0b\x0c\r ]|\xc2\xa0|\xe1\x9a\x80|\xe2\x80[\x80-\x8a\xa8\xa9\xaf]|\xe2\x81\x9f"
    r"|\xe3\x80\x80|\xef\xbb\xbf)"
)
_B_WS_NO_LF = _B_WS.replace(r"\t\n", r"\t")
_B_DOT = r"(?:[^\n\r\xe2]|\xe2(?!\x80[\xa8\xa9]))"
_B_COLON = "(?:\uff1a|:)"


def _bytes_pattern(src: str) -> re.Pattern[bytes]:
    """The byte form of a pattern built from ``_WS``, ``_WS_NO_LF``, ``_DOT`` and ``_COLON``."""
    for text_form, byte_form in ((_WS_NO_LF, _B_WS_NO_LF), (_WS, _B_WS), (_DOT, _B_DOT), (_COLON, _B_COLON)):
        src = src.replace(text_form, byte_form)
    return re.compile(src.encode("utf-8"))


# Word lists the native word search looks for in the lower-cased bytes (``_Texts.hit``): each is
# (words, bounded), the words as ``_literals`` writes them; bounded: inside ``\\b(...)\\b``.
_GROUPS: list[tuple[tuple[bytes, ...], bool]] = []


def _group(words: list[str], bounded: bool) -> int:
    _GROUPS.append((tuple(w.encode() for w in words), bounded))
    return len(_GROUPS) - 1


class _Dual:
    """A pattern for lower-cased text: ``s`` for str, ``b`` for the UTF-8 bytes.

    ``group``: when the pattern is an alternation of the literal ``words`` (``bounded``: inside
    ``\\b(...)\\b``), its group for the native word search, which gives the start of its first
    match (the start of the word, where the byte pattern may start later, ``_anchored_words``).
    """

    __slots__ = ("s", "b", "group")

    def __init__(
        self,
        pattern: re.Pattern[str],
        byte_source: str | None = None,
        words: list[str] | None = None,
        bounded: bool = True,
    ) -> None:
        self.s = pattern
        self.b = _bytes_pattern(byte_source or pattern.pattern)
        self.group = None if words is None else _group(words, bounded)


_ERROR_HIT2 = _Dual(_ERROR_HIT, words=_ERROR_HIT_WORDS, bounded=False)
_ERR_LINE2 = _Dual(_ERR_LINE, words=_ERR_LINE_WORDS, bounded=False)
_UNSUPPORTED2 = _Dual(_UNSUPPORTED)
_WANT2 = _Dual(_WANT_CORE, words=_WANT_LIST)
_IMP2 = _Dual(_IMP_CORE, words=_IMP_LIST.split("|"))
_PERF2 = _Dual(_PERF, words=_PERF_LIST + ["time\0out", "timed\0out"])
_CAP_GAP2 = _Dual(_CAP_GAP, words=_CAP_GAP_LIST)
_VERB_GROUP = _group(_VERB_LIST, True)
# A character takes 1 to 3 bytes per UTF-16 unit, so a match of 3..N units in the middle spans
# 3..3N bytes: the byte pattern finds every start the exact pattern can match at (and some more).
_FEAT_EN2 = _Dual(_FEAT_EN, _VERBS + r"[^.?!\n]{3,360}" + _NOUNS)
_FEAT_EN_SHORT2 = _Dual(_FEAT_EN_SHORT, _VERBS + r"[^.?!\n]{3,180}" + _NOUNS)
# The verbs the English feature patterns start with, found by their rarest letters: a match runs
# from that letter to the verb's end, whose text tells the verb's length.
_VERB_ANCHORED_B = _bytes_pattern(_anchored_words([(v, "") for v in _VERB_LIST]) + r"\b")
_VERB_LEN = {v[_rarest_letter(v) :]: len(v) for v in _VERB_LIST}
_VERB_WORDS = _GROUPS[_VERB_GROUP][0]  # the same search, native
_FEAT_EN_REACH = 141  # units a match can span ("implement" + 120 + "capability") plus the next one
_TOOL_B = _bytes_pattern(_TOOL.pattern)
# Benign exec commands are only counted: the byte pattern enters at the rare "x" and checks the
# "e" before it, so each match is the reference's match less its first byte (same count: a match
# holds no "exec: node" but at its start, so none hides another).
_BENIGN_EXEC_B = _bytes_pattern("x(?<=ex)" + _BENIGN_EXEC.pattern.removeprefix("ex"))
# The recurring-error pattern stopped before astral characters (two UTF-16 units each), its head
# as group 1: a match that stops there is carried on past them (``_error_tail``).
_ERR_PATTERNS_BMP = re.compile(
    "(" + _ERR_HEAD + f")[^}}\U00010000-\U0010ffff]{{0,{_ERR_TAIL_UNITS}}}", _A
)


def _char_start(b: bytes, i: int) -> int:
    """``i`` moved forward to the start of a character."""
    n = len(b)
    while i < n and b[i] & 0xC0 == 0x80:
        i += 1
    return i


def _decode(b: bytes) -> str:
    return b.decode("utf-8", "surrogatepass")


def _windowed_on(
    corpus: str, folded: str, core: re.Pattern[str], full: re.Pattern[str], width: int, pos: int = 0
) -> str | None:
    """``corpus.match(/.{0,W}(core).{0,W}/)[0]``, found without trying every start position.

    The leftmost match of the full pattern starts at most ``width`` units before the first match
    of its core, and after the last line terminator preceding that core match.
    """
    m = core.search(folded, pos)
    if m is None:
        return None
    k = m.start()
    start = max(0, k - width)
    last = max(folded.rfind(t, start, k) for t in _LINE_TERMINATORS)
    if last >= 0:
        start = last + 1
    m = full.search(folded, start)
    return None if m is None else corpus[m.start() : m.end()]


class _Texts:
    """The corpus in the forms the patterns run on.

    ``b``/``bl``: the UTF-8 corpus and its ASCII-lower-cased copy, for yes/no tests and to locate
    matches. Patterns whose counted repeats or cuts count UTF-16 units run on short str pieces cut
    around such a location and expanded to UTF-16 units there. The Chinese and Japanese snippet
    patterns, which may span lines, use the whole corpus in UTF-16 units (built on first use).
    ``special``: the corpus holds "İ" or the Kelvin sign; patterns then run on str copies
    (``lower``: the real lower case; ``folded``: ASCII letters folded, same indices as ``corpus16``).
    """

    def __init__(self, raw: str) -> None:
        self.raw = raw
        self.ascii = raw.isascii()  # then the Chinese and Japanese keyword patterns cannot match
        self.b = raw.encode("utf-8", "surrogatepass")
        # In UTF-8 the byte 0xc4 only leads U+0100..U+013F ("İ" is U+0130) and 0xe2 only leads
        # U+2000..U+2FFF (the Kelvin sign is U+212A): a one-byte search (memchr) rules each out far
        # faster than a search of the str.
        b = self.b
        self.special = not self.ascii and (
            (b"\xc4" in b and "\u0130" in raw) or (b"\xe2" in b and "\u212a" in raw)
        )
        self._c16: str | None = None
        self._hits: dict[int, tuple[int, int, int] | None] = {}
        if self.special:
            # Keep İ and the Kelvin sign non-ASCII in the folded text: /i does not fold them.
            self.folded = self.corpus16.replace("\u0130", "\ue000").replace("\u212a", "\ue001").lower()
            self.lower = raw.lower()
        else:
            self.bl = self.b.lower()

    @property
    def corpus16(self) -> str:
        """The corpus in UTF-16 units (astral characters as surrogate pairs)."""
        if self._c16 is None:
            # In UTF-8 only astral characters start with a byte 0xf0..0xf4: a few one-byte searches
            # (memchr) rule them out far faster than a search of the str
            astral = not self.ascii and any(lead in self.b for lead in _ASTRAL_LEADS)
            self._c16 = _to_utf16_units(self.raw) if astral else self.raw
        return self._c16

    def hit(self, group: int) -> tuple[int, int, int] | None:
        """The first match in ``bl`` of a word group: start, end, word (native scans only)."""
        if group not in self._hits:
            words, bounded = _GROUPS[group]
            self._hits[group] = _native.first_word(self.bl, words, 0, bounded)
        return self._hits[group]

    def first_start(self, pattern: _Dual) -> int | None:
        """Where in ``bl`` the first match of ``pattern.b`` starts (its word's start, natively)."""
        if pattern.group is not None and _native is not None:
            hit = self.hit(pattern.group)
            return None if hit is None else hit[0]
        m = pattern.b.search(self.bl)
        return None if m is None else m.start()

    def test_lower(self, pattern: _Dual) -> bool:
        """``pattern.test(corpus.toLowerCase())``."""
        if self.special:
            return pattern.s.search(self.lower) is not None
        return self.first_start(pattern) is not None

    def in_lower(self, needle: str) -> bool:
        """``corpus.toLowerCase().includes(needle)`` for an ASCII needle."""
        if self.special:
            return needle in self.lower
        if _native is not None:  # memmem: a third of the time of bytes' own search
            return _native.contains(self.bl, needle.encode())
        return needle.encode() in self.bl

    def first_en(self, pattern: _Dual) -> str | None:
        """``corpus.match(pattern)[0]`` for the English feature-request patterns.

        A match starts at a verb: the verbs are visited in order, the byte pattern tells whether
        one can start there, and the exact pattern is tried on a piece long enough to hold a whole
        match and the character after it.
        """
        if self.special:
            m = pattern.s.search(self.folded)
            return None if m is None else self.corpus16[m.start() : m.end()]
        b, bl, pos = self.b, self.bl, 0
        while True:
            if _native is not None:
                found = self.hit(_VERB_GROUP) if pos == 0 else _native.first_word(bl, _VERB_WORDS, pos)
                if found is None:
                    return None
                start, pos = found[:2]
            else:
                verb = _VERB_ANCHORED_B.search(bl, pos)
                if verb is None:
                    return None
                pos = verb.end()  # whole words: the next verb starts after this one
                start = pos - _VERB_LEN[verb.group().decode()]  # an ASCII letter: a character start
            if pattern.b.match(bl, start) is None:
                continue
            piece = _to_utf16_units(_decode(b[start : _char_start(b, start + 4 * _FEAT_EN_REACH)]))
            m = pattern.s.match(piece.lower())
            if m is not None:
                return piece[: m.end()]

    def windowed_en(self, core: _Dual, full: re.Pattern[str], width: int) -> str | None:
        """``corpus.match(/.{0,W}\\b(core)\\b.{0,W}/i)[0]`` for an English core (a literal word list).

        Worked on a piece around the first core match: more than ``width`` characters before it
        (so every core the full pattern can use has its preceding character) and room after it
        for a later core within reach plus ``width`` units and one more.
        """
        if self.special:
            return _windowed_on(self.corpus16, self.folded, core.s, full, width)
        k = self.first_start(core)
        if k is None:
            return None
        b = self.b
        lo = _char_start(b, max(0, k - 4 * (width + 2)))
        before = _to_utf16_units(_decode(b[lo:k]))
        after = _to_utf16_units(_decode(b[k : _char_start(b, k + 4 * (2 * width + 20))]))
        piece = before + after
        return _windowed_on(piece, piece.lower(), core.s, full, width, len(before))

    def error_line(self) -> str | None:
        """The first line (split at "\\n", in UTF-16 units) that holds an error signature."""
        if self.special:
            m = _ERR_LINE.search(self.folded)
            if m is None:
                return None
            corpus = self.corpus16
            start = corpus.rfind("\n", 0, m.start()) + 1
            end = corpus.find("\n", m.end())
            return corpus[start : len(corpus) if end < 0 else end]
        k = self.first_start(_ERR_LINE2)
        if k is None:
            return None
        b = self.b
        start = b.rfind(b"\n", 0, k) + 1
        end = b.find(b"\n", k)  # a match holds no "\n": the line ends at the first one after it
        return _to_utf16_units(_decode(b[start : len(b) if end < 0 else end]))

    def cjk_windowed(self, core: re.Pattern[str], full: re.Pattern[str], width: int) -> str | None:
        """``corpus.match(/.{0,W}(core).{0,W}/)[0]`` for a Chinese or Japanese core (no letters)."""
        corpus = self.corpus16
        return _windowed_on(corpus, corpus, core, full, width)

    def cjk_first(self, pattern: re.Pattern[str], group: int = 0) -> str | None:
        corpus = self.corpus16
        m = pattern.search(corpus)
        return None if m is None else corpus[m.start(group) : m.end(group)]


def _snippet(text: str, limit: int = C.SNIPPET_MAX_CHARS) -> str:
    return _js_trim(_collapse(text))[:limit]


def _feature_request(t: _Texts) -> str | None:
    """The ``user_feature_request:`` snippet, or None when no language's pattern fires.

    The reference tests the next language only while the snippet is empty, and any test that
    fired makes the signal; so the first language that fires decides, and the rest never run.
    """
    m = t.first_en(_FEAT_EN2)
    if m:
        snippet = _snippet(m)
        if snippet:
            return snippet
    if t.test_lower(_WANT2):
        s = t.windowed_en(_WANT2, _FEAT_WANT, 80)
        return "feature request" if s is None else _snippet(s)
    if t.ascii:  # the Chinese and Japanese keywords cannot match
        return "" if t.first_en(_FEAT_EN_SHORT2) is not None else None
    if _FEAT_ZH_CORE.search(t.raw) is not None or "我想" in t.raw:
        s = t.cjk_windowed(_FEAT_ZH_CORE, _FEAT_ZH, 100)
        snippet = _snippet(s) if s else ""
        if not snippet and "我想" in t.raw:
            s = t.cjk_first(_FEAT_WANT_ZH, group=1)
            snippet = _snippet(s) if s is not None else ""
        return snippet or "功能需求"
    if _FEAT_TW_CORE.search(t.raw) is not None:
        s = t.cjk_windowed(_FEAT_TW_CORE, _FEAT_TW, 100)
        return "功能需求" if s is None else _snippet(s)
    if _FEAT_JA_CORE.search(t.raw) is not None:
        s = t.cjk_windowed(_FEAT_JA_CORE, _FEAT_JA, 100)
        return "機能要望" if s is None else _snippet(s)
    return "" if t.first_en(_FEAT_EN_SHORT2) is not None else None


def _improvement(t: _Texts) -> str | None:
    """The ``user_improvement_suggestion:`` snippet, or None when no language's pattern fires."""
    snippet = ""
    s = t.windowed_en(_IMP2, _IMP_EN, 80)
    if s:
        snippet = _snippet(s)
    found = False
    for core, full, default in (
        (_IMP_ZH_CORE, _IMP_ZH, "改进建议"),
        (_IMP_TW_CORE, _IMP_TW, "改進建議"),
        (_IMP_JA_CORE, _IMP_JA, "改善要望"),
    ):
        hit = not t.ascii and core.search(t.raw) is not None
        found = found or hit
        if not snippet and hit:
            s = t.cjk_windowed(core, full, 100)
            snippet = default if s is None else _snippet(s)
    if snippet or found or t.test_lower(_IMP2):
        return snippet
    return None


def _error_signature(t: _Texts) -> str | None:
    line = t.error_line()
    if line is None:
        return None
    return _collapse(_js_trim(line))[: C.ERRSIG_MAX_CHARS]


def _collapse_all(texts: list[str]) -> list[str]:
    """``_collapse`` of each text, in a few passes over the joined texts (none holds "}")."""
    joined = "}" + "}".join(texts) + "}"
    flat = joined.replace("\n", " ")
    if flat.isprintable():
        return _squeeze_spaces(flat).split("}")[1:-1]
    if any(c in joined for c in _SPLIT_WS_DIFF):
        return [_collapse(s) for s in texts]
    # The whitespace sets agree here: split() + join collapses every run; the "}" fences keep each
    # text's leading and trailing runs (as one space) and its boundaries.
    return " ".join(joined.split()).split("}")[1:-1]


def _error_tail(seg: str, units: int) -> str:
    """The longest start of ``seg`` (no "}" in it) that fits in ``units`` UTF-16 units.

    An astral character cut in two by the limit leaves its high surrogate, as a JavaScript slice
    would; it still stands for one character of ``seg``.
    """
    try:
        u16 = _utf16_encode(seg)[0]  # the codec functions skip the codec lookup of str.encode
    except UnicodeEncodeError:  # lone surrogates in the corpus: the UTF-16 round trip would pair them
        used, k = 0, 0
        for ch in seg:
            width = 2 if ch > "\uffff" else 1
            if used + width > units:
                break
            used, k = used + width, k + 1
        if used < units and k < len(seg):
            return seg[:k] + _to_utf16_units(seg[k])[0]
        return seg[:k]
    if len(u16) <= 2 * units:
        return seg
    u16 = u16[: 2 * units]
    if 0xD8 <= u16[-1] <= 0xDB:  # ends on a high surrogate (little-endian: its high byte last)
        return _utf16_decode(u16[:-2])[0] + chr(int.from_bytes(u16[-2:], "little"))
    return _utf16_decode(u16)[0]


def _error_matches(raw: str) -> tuple[list[str], dict[int, str]]:
    """``corpus.match(/(?:LLM error|"error"|"status":\\s*"error")[^}]{0,200}/gi)``, in two parts.

    The texts are str (astral characters whole), but the 200 count UTF-16 units: a match that
    stops before an astral character is carried on past it (``_error_tail``), and the scan goes on
    after it. Only matches that extend past its end can hide the next match from the running
    scan, which then restarts there. Returns each match's part before its first astral character
    and, by index, the carried-on rest of the matches that have one (it may hold astral
    characters or end in a lone surrogate).
    """
    if raw.isascii():
        return _ERR_PATTERNS.findall(raw), {}
    out: list[str] = []
    carried: dict[int, str] = {}
    n, pos = len(raw), 0
    while True:
        for m in _ERR_PATTERNS_BMP.finditer(raw, pos):
            start, end = m.span()
            if start < pos:  # inside the previous, carried-on match
                break
            out.append(m.group())
            pos = end
            left = _ERR_TAIL_UNITS - (end - m.end(1))
            if end < n and left > 0 and raw[end] > "\uffff":
                seg = raw[end : end + left]  # every character is at least one unit
                brace = seg.find("}")
                tail = _error_tail(seg if brace < 0 else seg[:brace], left)
                carried[len(out) - 1] = tail
                pos = end + len(tail)
        else:
            return out, carried


def _cut_units(text: str, units: int) -> str:
    """``text`` cut after ``units`` UTF-16 units (a cut astral character leaves its high surrogate)."""
    return text[:units] if _ASTRAL.search(text, 0, units) is None else _error_tail(text, units)


def _tally(items: list[_K]) -> dict[_K, int]:
    """How many times each item occurs, in first-seen order.

    Not ``Counter``: ``Counter(list)`` asks ``isinstance(list, Mapping)``, and the first such check
    in a process walks Mapping's subclasses (~50 us, more than a 10 KB corpus's counting).
    """
    counts: dict[_K, int] = {}
    get = counts.get
    for item in items:
        counts[item] = get(item, 0) + 1
    return counts


def _recurring_error(t: _Texts) -> tuple[str, int] | None:
    if _native is not None:
        return _native.recurring_error(t.raw, C.RECURRING_ERROR_MIN)
    heads, carried = _error_matches(t.raw)
    if len(heads) < C.RECURRING_ERROR_MIN:
        return None
    keys = _collapse_all(heads)
    for i, tail in carried.items():
        # The collapsed head is a start of the collapsed match (a whitespace run across the cut
        # collapses to the head's final space plus nothing), and it holds no astral character:
        # when it has 100 characters, they are the key's 100 units.
        if len(keys[i]) < 100:
            keys[i] = _cut_units(_collapse(heads[i] + tail), 100)
    counts = _tally([key[:100] for key in keys])
    best: tuple[str, int] | None = None
    for key, n in counts.items():  # keys start with a letter or a quote: never integer-like
        if n >= C.RECURRING_ERROR_MIN and (best is None or n > best[1]):
            best = (key, n)
    return best


_FEW = 8


def _tool_signals(b: bytes) -> list[str]:
    if b"[TOOL:" not in b:
        return []
    # Tools used fewer times than both thresholds give no signal (the exec adjustment only lowers
    # a count); inherited names and __proto__ never hold a number.
    least = min(C.HIGH_TOOL_USAGE_MIN, C.REPEATED_EXEC_MIN)
    if _native is not None:
        found = _native.tool_counts(b).items()
    else:
        found = ((k.decode(), n) for k, n in _tally(_TOOL_B.findall(b)).items())
    counts = {name: n for name, n in found if n >= least and name not in _INHERITED and name != _PROTO}
    if "exec" in counts and _native is not None:
        counts["exec"] = max(0, counts["exec"] - _native.benign_exec_count(b))
    elif "exec" in counts:
        # Benign commands are subtracted from exec; once as many as leave it below both thresholds
        # are found, more cannot change the signals. Stopping there only pays for a few (each
        # match costs more through finditer than through findall).
        enough = counts["exec"] - least + 1
        if enough <= _FEW:
            benign = sum(1 for _ in islice(_BENIGN_EXEC_B.finditer(b), enough))
        else:
            benign = len(_BENIGN_EXEC_B.findall(b))
        counts["exec"] = max(0, counts["exec"] - benign)
    out: list[str] = []
    for tool in _js_key_order(counts):
        n = counts[tool]
        if n >= C.HIGH_TOOL_USAGE_MIN:
            out.append("high_tool_usage:" + tool)
        if tool == "exec" and n >= C.REPEATED_EXEC_MIN:
            out.append("repeated_tool_usage:exec")
    return out


def _is_repair_only(signal: str) -> bool:
    return signal == "log_error" or signal.startswith("errsig:") or signal.startswith("recurring_errsig")


def extract_signals(
    *,
    recent_session_transcript: str | None = "",
    today_log: str | None = "",
    memory_snippet: str | None = "",
    user_snippet: str | None = "",
    recent_events: Iterable[Any] | None = (),
) -> list[str]:
    """Signals of one cycle: corpus signals, then the history rules, de-duplicated in order."""
    raw = "\n".join(s or "" for s in (recent_session_transcript, today_log, memory_snippet, user_snippet))
    t = _Texts(raw)
    history = analyze_recent_history(recent_events or ())
    signals: list[str] = []

    # --- defensive
    error_hit = t.test_lower(_ERROR_HIT2)
    if error_hit:
        signals.append("log_error")
    errsig = _error_signature(t)
    if errsig is not None:
        signals.append("errsig:" + errsig)
    if t.in_lower("missing"):
        if t.in_lower("memory.md missing"):
            signals.append("memory_missing")
        if t.in_lower("user.md missing"):
            signals.append("user_missing")
        if t.in_lower("key missing"):
            signals.append("integration_key_missing")
    if t.in_lower("no session logs found") or t.in_lower("no jsonl files"):
        signals.append("session_logs_missing")
    recurring = _recurring_error(t)
    if recurring is not None:
        key, n = recurring
        signals.append("recurring_error")
        signals.append(f"recurring_errsig({n}x):" + key[:150])
    if (t.in_lower("unsupported") or t.in_lower("invalid")) and t.test_lower(_UNSUPPORTED2):
        signals.append("unsupported_input_type")

    # --- opportunity
    feature = _feature_request(t)
    if feature is not None:
        signals.append("user_feature_request:" + feature)
    if not error_hit:
        improvement = _improvement(t)
        if improvement is not None:
            signals.append("user_improvement_suggestion:" + improvement)
    if t.test_lower(_PERF2):
        signals.append("perf_bottleneck")
    if t.test_lower(_CAP_GAP2) and not (
        "memory_missing" in signals or "user_missing" in signals or "session_logs_missing" in signals
    ):
        signals.append("capability_gap")
    signals.extend(_tool_signals(t.b))

    # --- cosmetic signals give way to actionable ones
    actionable = [s for s in signals if s not in _COSMETIC]
    if actionable:
        signals = actionable

    # --- history
    if history.suppressed_signals:
        suppressed = set(history.suppressed_signals)
        before = len(signals)
        signals = [s for s in signals if _signal_key(s) not in suppressed]
        if before > 0 and not signals:
            signals += ["evolution_stagnation_detected", "stable_success_plateau"]
    if history.consecutive_repair_count >= C.REPAIR_LOOP_MIN:
        signals = [s for s in signals if not _is_repair_only(s)]
        if not signals:
            signals += ["repair_loop_detected", "stable_success_plateau"]
        signals.append("force_innovation_after_repair_loop")
    if history.empty_cycle_count >= C.EMPTY_CYCLE_LOOP_MIN:
        signals = [s for s in signals if not _is_repair_only(s)]
        for s in ("empty_cycle_loop_detected", "stable_success_plateau"):
            if s not in signals:
                signals.append(s)
    if history.consecutive_empty_cycles >= C.STEADY_STATE_MIN:
        for s in ("force_steady_state", "evolution_saturation"):
            if s not in signals:
                signals.append(s)
    elif history.consecutive_empty_cycles >= C.SATURATION_MIN and "evolution_saturation" not in signals:
        signals.append("evolution_saturation")
    if history.consecutive_failure_count >= C.FAILURE_STREAK_MIN:
        signals.append(f"consecutive_failure_streak_{history.consecutive_failure_count}")
        if history.consecutive_failure_count >= C.FAILURE_LOOP_MIN:
            signals.append("failure_loop_detected")
            top = history.top_gene
            if top:
                signals.append("ban_gene:" + top)
    if history.recent_failure_ratio >= C.HIGH_FAILURE_RATIO:
        signals += ["high_failure_ratio", "force_innovation_after_repair_loop"]
    if not signals:
        signals.append("stable_success_plateau")

    out = list(dict.fromkeys(signals))
    if t.ascii:
        return out
    return [_from_utf16_units(s) if _SURROGATE.search(s) else s for s in out]
