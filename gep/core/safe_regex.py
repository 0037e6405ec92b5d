"""Regular expressions that come from outside the engine, run without backtracking.

A pattern written by a model (the ``search`` tool), a gene's ``signals_match`` entry (imported, or proposed
by distillation) or anything else untrusted never reaches Python's ``re``: a backtracking engine can spend
hours on ``(a+)+$`` against one line of 40 "a"s while the cycle holds its lock and its Prefect slot.
They run under RE2 (the ``google-re2`` package): linear in the text, with a memory cap on the compiled
program. What RE2 cannot run in linear time (backreferences, lookarounds) is refused with its reason, as is
a pattern over ``MAX_PATTERN_CHARS``.

Without the package (an environment installed before it was a dependency) the pattern is parsed by Python
and accepted only inside a subset that cannot backtrack badly: no backreference, no lookaround, no
repetition of something that itself repeats or branches; then run by ``re``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MAX_PATTERN_CHARS = 2000
_RE2_MAX_MEM = 8 << 20  # bytes for one compiled program: a pattern like x{1000}{1000} is refused, not built

try:  # pragma: no branch - which one runs depends on the environment
    import re2 as _re2  # type: ignore[import-untyped,import-not-found,unused-ignore]
except ImportError:  # pragma: no cover - exercised only without google-re2
    _re2 = None


class UnsafePattern(ValueError):
    """A pattern refused before it runs; ``str(exc)`` is the one-line reason."""


@dataclass(frozen=True)
class SafePattern:
    """A compiled untrusted pattern: ``search(text)`` is True when it matches somewhere in ``text``."""

    raw: str
    _search: Callable[[str], Any]

    def search(self, text: str) -> bool:
        return self._search(text) is not None


def _re2_compile(body: str, *, ignore_case: bool, dotall: bool, multiline: bool) -> SafePattern:
    assert _re2 is not None
    flags = "".join(f for f, on in (("i", ignore_case), ("s", dotall), ("m", multiline)) if on)
    options = _re2.Options()
    options.log_errors = False  # RE2 would print each refused pattern to stderr
    options.max_mem = _RE2_MAX_MEM
    try:
        rx = _re2.compile((f"(?{flags})" if flags else "") + body, options)
    except _re2.error as exc:  # its text is bytes
        msg = exc.args[0] if exc.args else exc
        reason = msg.decode("utf-8", "replace") if isinstance(msg, bytes) else str(msg)
        raise UnsafePattern(_explain(reason)) from None
    return SafePattern(body, rx.search)


def _explain(reason: str) -> str:
    if "perl operator" in reason and "(?" in reason:
        return f"lookarounds are not supported (they need backtracking): {reason}"
    if "escape sequence" in reason and re.search(r"\\[1-9]", reason):
        return f"backreferences are not supported (they need backtracking): {reason}"
    if "too large" in reason or "bad repetition" in reason:
        return f"the pattern is too large to run in bounded memory: {reason}"
    return f"not a supported regular expression: {reason}"


def _check_subset(tree: Any, repeated: bool = False) -> None:  # pragma: no cover - without google-re2
    """Refuse what makes ``re`` backtrack without bound, walking Python's own parse tree."""
    from re import _constants  # type: ignore[attr-defined]

    for op, arg in tree:
        if op in (_constants.GROUPREF, _constants.GROUPREF_EXISTS):
            raise UnsafePattern("backreferences are not supported (they need backtracking)")
        if op in (_constants.ASSERT, _constants.ASSERT_NOT):
            raise UnsafePattern("lookarounds are not supported (they need backtracking)")
        if op in (_constants.MAX_REPEAT, _constants.MIN_REPEAT, _constants.POSSESSIVE_REPEAT):
            if repeated:
                raise UnsafePattern("a repetition inside a repetition may backtrack without bound")
            _check_subset(arg[2], True)
        elif op is _constants.BRANCH:
            if repeated and len(arg[1]) > 1:
                raise UnsafePattern("alternatives inside a repetition may backtrack without bound")
            for branch in arg[1]:
                _check_subset(branch, repeated)
        elif op is _constants.SUBPATTERN:
            _check_subset(arg[-1], repeated)
        elif op in (_constants.ATOMIC_GROUP,):
            _check_subset(arg, repeated)


def _re_compile(body: str, *, ignore_case: bool, dotall: bool,
                multiline: bool) -> SafePattern:  # pragma: no cover - without google-re2
    from re import _parser  # type: ignore[attr-defined]

    flags = (re.IGNORECASE if ignore_case else 0) | (re.DOTALL if dotall else 0) | (re.MULTILINE if multiline else 0)
    try:
        _check_subset(_parser.parse(body, flags))
        rx = re.compile(body, flags)
    except (re.error, RecursionError, OverflowError) as exc:
        raise UnsafePattern(f"not a supported regular expression: {exc}") from None
    return SafePattern(body, rx.search)


def compile_untrusted(body: str, *, ignore_case: bool = False, dotall: bool = False,
                      multiline: bool = False) -> SafePattern:
    """``body`` compiled to run in time linear in the text, or :class:`UnsafePattern` with the reason."""
    if not isinstance(body, str):
        raise UnsafePattern("the pattern must be a string")
    if len(body) > MAX_PATTERN_CHARS:
        raise UnsafePattern(f"the pattern is longer than {MAX_PATTERN_CHARS} characters")
    if "\x00" in body:
        raise UnsafePattern("the pattern contains a NUL character")
    compile_ = _re2_compile if _re2 is not None else _re_compile
    return compile_(body, ignore_case=ignore_case, dotall=dotall, multiline=multiline)


def refusal(body: str, **flags: bool) -> str | None:
    """Why ``body`` would be refused, or None when it compiles."""
    try:
        compile_untrusted(body, **flags)
    except UnsafePattern as exc:
        return str(exc)
    return None
