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

from gep.errors import StoreError
from gep.hashing import compute_asset_id, verify_asset_id
from gep.models import SCHEMA_VERSION

M = TypeVar("M", bound=BaseModel)

_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _prune_unset_none(model: BaseModel, data: dict[str, Any]) -> dict[str, Any]:  # JSON edge: the stored object
    """Drop optional fields that are None only because nobody set them (explicit nulls stay)."""
    for name, field in type(model).model_fields.items():
        key = field.alias or name
        value = getattr(model, name, None)
        if value is None:
            if name not in model.model_fields_set:
                data.pop(key, None)
        elif isinstance(value, BaseModel) and isinstance(data.get(key), dict):
            _prune_unset_none(value, data[key])
        elif isinstance(value, list) and isinstance(data.get(key), list):
            for item, dumped in zip(value, data[key], strict=False):
                if isinstance(item, BaseModel) and isinstance(dumped, dict):
                    _prune_unset_none(item, dumped)
    return data


# JSON edge: the stored object is arbitrary JSON (unknown fields of other tools' assets are kept)
def asset_json(model: BaseModel) -> dict[str, Any]:  # JSON edge: see above
    """The JSON object the engine stores for ``model``: set fields and explicit nulls, unset Nones left out."""
    return _prune_unset_none(model, model.model_dump(mode="json", by_alias=True))


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
