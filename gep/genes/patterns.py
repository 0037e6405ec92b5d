"""A gene's ``signals_match`` patterns: ``/body/flags`` is a regex that runs without backtracking (a gene is
untrusted input: gep/core/safe_regex.py), anything else a substring. Apart from the selector that matches
them, so that loading a gene file checks its patterns without importing selection (the learning it weighs).
"""

from __future__ import annotations

from gep.core.safe_regex import SafePattern, UnsafePattern, compile_untrusted


def regex_parts(p: str) -> tuple[str, str] | None:
    """(body, flags) of a ``/body/flags`` pattern, or None when ``p`` is not one."""
    if len(p) >= 2 and p.startswith("/") and p.rfind("/") > 0:
        last = p.rfind("/")
        body, flags = p[1:last], p[last + 1:] or "i"
        if set(flags) <= set("gimsuy"):
            return body, flags
    return None


def compile_regex(body: str, flags: str) -> SafePattern:
    """A gene's regex runs without backtracking (gep/core/safe_regex.py): a gene is untrusted input."""
    return compile_untrusted(body, ignore_case="i" in flags, dotall="s" in flags, multiline="m" in flags)


def pattern_refusal(pattern: str) -> str | None:
    """Why a ``/body/flags`` pattern is refused as a regex (it is then matched as a substring), or None."""
    parts = regex_parts(str(pattern))
    if parts is None:
        return None
    try:
        compile_regex(*parts)
    except UnsafePattern as exc:
        return f"{str(pattern)[:80]!r}: {exc}"
    return None
