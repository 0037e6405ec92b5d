"""JSON as the standard writes it: no NaN or Infinity in, none out.

Python's ``json`` reads and writes ``NaN`` and ``Infinity``, which no other JSON parser accepts: an
imported event holding one made every ``--json`` print invalid JSON. Imports refuse them
(:func:`loads_strict`); what the commands print turns any left in the store into ``null``
(:func:`dumps_finite`).
"""

from __future__ import annotations

import json
import math
from typing import Any


class NotStrictJson(ValueError):
    """``NaN``, ``Infinity`` or ``-Infinity`` where JSON allows only numbers."""


def _refuse(name: str) -> Any:
    raise NotStrictJson(f"{name} is not a JSON number")


def loads_strict(text: str) -> Any:
    """``json.loads`` refusing ``NaN`` and ``Infinity`` (:class:`NotStrictJson`)."""
    return json.loads(text, parse_constant=_refuse)


def finite(obj: Any) -> Any:
    """``obj`` (JSON data) with every non-finite float replaced by None, iteratively (no recursion limit)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if not isinstance(obj, dict | list):
        return obj
    root: list[Any] = [obj]
    stack: list[tuple[Any, Any]] = [(root, 0)]
    while stack:
        parent, key = stack.pop()
        value = parent[key]
        if isinstance(value, float) and not math.isfinite(value):
            parent[key] = None
        elif isinstance(value, dict):
            copy = dict(value)
            parent[key] = copy
            stack.extend((copy, k) for k in copy)
        elif isinstance(value, list):
            copy_list = list(value)
            parent[key] = copy_list
            stack.extend((copy_list, i) for i in range(len(copy_list)))
    return root[0]


def dumps_finite(obj: Any, indent: int | None = None) -> str:
    """Standard JSON (non-finite numbers as null): one line, or indented by ``indent``."""
    return json.dumps(finite(obj), ensure_ascii=False, allow_nan=False, indent=indent)
