"""The JSON object an asset is kept and exported as: set fields and explicit nulls, unset Nones left out.

One rule for the store's ``data`` column (gep/store/codec.py) and asset files (``GepModel.to_asset``).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


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
