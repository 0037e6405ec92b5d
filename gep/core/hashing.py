"""Content hashing of GEP assets, byte-compatible with the reference implementation.

An asset id is ``"sha256:" + hex(sha256(utf8(canonical_json(obj without asset_id))))``. The canonical form is
the one the reference builds with JavaScript: object keys sorted at every level the way ``Array.prototype.sort``
sorts strings (by UTF-16 code units), arrays in order, numbers as ``String(number)`` writes them, strings as
``JSON.stringify`` writes them, non-finite numbers as ``null``. Python differs from JavaScript in three places
that matter here, each handled below: key order for astral characters, number formatting, and lone surrogates.

``js_dumps`` writes JSON text the way ``JSON.stringify(value, null, indent)`` does, so exported asset files read
exactly like the reference's own.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping
from typing import Any

ASSET_ID_KEY = "asset_id"
ASSET_ID_PREFIX = "sha256:"

# Characters JSON.stringify escapes: control characters, the quote, the backslash; surrogates are checked
# separately (a valid pair is written raw, a lone one escaped).
_NEEDS_ESCAPE = re.compile(r'[\x00-\x1f"\\\ud800-\udfff]')
_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def js_number(x: int | float) -> str:
    """``String(x)`` in JavaScript for a JSON number (``null`` when not finite, as the reference writes it)."""
    if isinstance(x, bool):
        raise TypeError("a bool is not a number here")
    if isinstance(x, int):
        try:
            x = float(x)  # JSON numbers are doubles in JavaScript: big ints round the same way
        except OverflowError:
            return "null"  # JSON.parse reads it as Infinity
    if not math.isfinite(x):
        return "null"
    if x == 0:
        return "0"  # also -0
    if x < 0:
        return "-" + js_number(-x)
    # repr gives the shortest digits that round-trip (as JavaScript does); only the layout differs.
    mantissa, _, exp = repr(x).partition("e")
    int_part, _, frac = mantissa.partition(".")
    raw = int_part + frac
    digits = raw.lstrip("0")
    n = len(int_part) + (int(exp) if exp else 0) - (len(raw) - len(digits))  # value = 0.DIGITS * 10**n
    digits = digits.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return "0." + "0" * (-n) + digits
    e = n - 1
    sign = "+" if e >= 0 else "-"
    head = digits if k == 1 else digits[0] + "." + digits[1:]
    return f"{head}e{sign}{abs(e)}"


def js_string(s: str) -> str:
    """``JSON.stringify(s)``: quotes, short escapes, ``\\u00xx`` for other controls, lone surrogates escaped."""
    if _NEEDS_ESCAPE.search(s) is None:
        return '"' + s + '"'
    out: list[str] = ['"']
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        o = ord(c)
        if c in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[c])
        elif o < 0x20:
            out.append(f"\\u{o:04x}")
        elif 0xD800 <= o <= 0xDBFF and i + 1 < n and 0xDC00 <= ord(s[i + 1]) <= 0xDFFF:
            # a high+low pair held as two code points is one astral character in UTF-16
            out.append(chr(0x10000 + ((o - 0xD800) << 10) + (ord(s[i + 1]) - 0xDC00)))
            i += 1
        elif 0xD800 <= o <= 0xDFFF:
            out.append(f"\\u{o:04x}")
        else:
            out.append(c)
        i += 1
    out.append('"')
    return "".join(out)


def _utf16_key(key: str) -> bytes:
    # Big-endian UTF-16 bytes compare like sequences of UTF-16 code units, which is how JavaScript sorts.
    return key.encode("utf-16-be", "surrogatepass")


def _sorted_keys(obj: Mapping[Any, Any]) -> list[str]:
    for key in obj:
        if not isinstance(key, str):
            raise TypeError(f"object keys must be strings, got {type(key).__name__}")
    return sorted(obj, key=_utf16_key)


def canonical_json(value: Any) -> str:
    """The reference's canonical JSON of a JSON value (mappings, lists/tuples, str, int, float, bool, None)."""
    parts: list[str] = []
    _canon(value, parts)
    return "".join(parts)


def _canon(value: Any, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(js_string(value))
    elif isinstance(value, int | float):
        out.append(js_number(value))
    elif isinstance(value, Mapping):
        out.append("{")
        for i, key in enumerate(_sorted_keys(value)):
            if i:
                out.append(",")
            out.append(js_string(key))
            out.append(":")
            _canon(value[key], out)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _canon(item, out)
        out.append("]")
    else:
        raise TypeError(f"not a JSON value: {type(value).__name__}")


def compute_asset_id(obj: Mapping[str, Any]) -> str:
    """``"sha256:" + hex`` of the canonical JSON of ``obj`` without its top-level ``asset_id``.

    A top-level ``__proto__`` key is left out too: the reference copies the object key by key into a plain
    JavaScript object, where assigning ``__proto__`` sets the prototype instead of adding a key.
    """
    if not isinstance(obj, Mapping):
        raise TypeError(f"an asset is a JSON object, got {type(obj).__name__}")
    clean = {k: v for k, v in obj.items() if k not in (ASSET_ID_KEY, "__proto__")}
    digest = hashlib.sha256(canonical_json(clean).encode("utf-8")).hexdigest()
    return ASSET_ID_PREFIX + digest


def verify_asset_id(obj: Mapping[str, Any]) -> bool:
    """True when ``obj`` carries a non-empty string ``asset_id`` equal to its content hash."""
    claimed = obj.get(ASSET_ID_KEY) if isinstance(obj, Mapping) else None
    if not isinstance(claimed, str) or not claimed:
        return False
    return claimed == compute_asset_id(obj)


def js_dumps(value: Any, indent: int | None = None) -> str:
    """``JSON.stringify(value, null, indent)``: key order kept, numbers and strings written as JavaScript does."""
    out: list[str] = []
    _dump(value, out, " " * indent if indent else "", "\n")
    return "".join(out)


def _dump(value: Any, out: list[str], step: str, nl: str) -> None:
    if isinstance(value, Mapping):
        if not value:
            out.append("{}")
            return
        inner = nl + step
        out.append("{")
        for i, (key, item) in enumerate(value.items()):
            if not isinstance(key, str):
                raise TypeError(f"object keys must be strings, got {type(key).__name__}")
            out.append(("," if i else "") + (inner if step else ""))
            out.append(js_string(key) + (": " if step else ":"))
            _dump(item, out, step, inner)
        out.append((nl if step else "") + "}")
    elif isinstance(value, list | tuple):
        if not value:
            out.append("[]")
            return
        inner = nl + step
        out.append("[")
        for i, item in enumerate(value):
            out.append(("," if i else "") + (inner if step else ""))
            _dump(item, out, step, inner)
        out.append((nl if step else "") + "]")
    else:
        _canon(value, out)
