"""Reading stored records one by one: one that cannot be read is moved aside and named, the rest are kept."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")


def salvage(rows: Iterable[tuple[str, object]], parse: Callable[[object], T],
            move_aside: Callable[[str, str], None]) -> tuple[list[T], list[str]]:
    """Parse each (key, raw record); one that fails is handed to ``move_aside(key, reason)`` and named in a
    warning. Returns (parsed records, warnings)."""
    good: list[T] = []
    warnings: list[str] = []
    for key, raw in rows:
        try:
            good.append(parse(raw))
        except (ValueError, TypeError) as exc:  # an unreadable record (pydantic's ValidationError is a ValueError)
            reason = " ".join(str(exc).split())[:200] or type(exc).__name__
            move_aside(key, reason)
            warnings.append(f"record {key} could not be read and was moved aside: {reason}")
    return good, warnings
