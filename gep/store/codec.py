"""The JSON a stored object is kept as (the ``data`` column), and reading it back.

What ``data`` holds:
- objects the engine writes (``upsert_gene``, ``add_event``, ...): every field with a value, explicit nulls
  kept, never-set optional fields left out; ``schema_version`` and a correct ``asset_id`` are stamped on the
  object (as the reference's asset store does before it writes);
- objects read from asset files (``as_read=<the file's JSON object>``): that object as it was, asset_id
  untouched, so that an export gives back the same JSON objects.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from operator import attrgetter
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from gep.core.asset_json import asset_json as asset_json  # kept here: the store's callers name it
from gep.core.errors import StoreError
from gep.core.hashing import compute_asset_id, verify_asset_id
from gep.core.models import SCHEMA_VERSION

M = TypeVar("M", bound=BaseModel)

_SURROGATE = re.compile(r"[\ud800-\udfff]")


def as_read_json(model: BaseModel, as_read: Mapping[str, Any]) -> dict[str, Any]:  # JSON edge: the stored object
    """What to store for an object read from an asset file: the file's own object when the model holds
    exactly its content (so key order and number spelling survive too), else the fields the file had."""
    dumped = model.model_dump(mode="json", exclude_unset=True, by_alias=True)
    return dict(as_read) if dumped == as_read else dumped


def stamp(model: BaseModel) -> dict[str, Any]:  # JSON edge: the stored object
    """Set ``schema_version`` (if missing) and a correct ``asset_id`` on ``model``; return its stored JSON."""
    if "schema_version" in type(model).model_fields and getattr(model, "schema_version", None) is None:
        model.schema_version = SCHEMA_VERSION  # type: ignore[attr-defined]
    data = asset_json(model)
    if "asset_id" in type(model).model_fields and not verify_asset_id(data):
        data["asset_id"] = compute_asset_id(data)
        model.asset_id = data["asset_id"]  # type: ignore[attr-defined]
    return data


def stored_text(model: BaseModel, as_read: Mapping[str, Any] | None = None) -> str:
    """The ``data`` column for ``model``: stamped, or as read from an asset file."""
    return to_text(stamp(model) if as_read is None else as_read_json(model, as_read))


def to_text(data: Mapping[str, Any]) -> str:
    out = json.dumps(data, ensure_ascii=False)
    # a lone surrogate (valid in JSON, kept by json.loads) cannot be encoded as UTF-8 by the driver
    return json.dumps(data) if _SURROGATE.search(out) else out


def load(cls: type[M], data: str) -> M:
    try:
        return cls.model_validate(json.loads(data))
    except (ValueError, ValidationError) as exc:
        raise StoreError(f"stored {cls.__name__} is unreadable: {first_line(exc)}") from None


def load_by_time(cls: type[M], data: Iterable[str]) -> list[M]:
    """Feedback signals or lessons (stored JSON read in insertion order), oldest first, ties by id."""
    return sorted((cls.model_validate_json(d) for d in data), key=attrgetter("created_at", "id"))


def first_line(exc: BaseException) -> str:
    msg = str(exc).strip()
    return msg.splitlines()[0] if msg else type(exc).__name__
