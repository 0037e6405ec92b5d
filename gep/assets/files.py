"""Reading and writing asset files, shared by gep/assets/gene_files.py (the reference's files) and
gep/assets/learned.py (what a workspace learned): JSON and JSONL read with the place of an error named,
objects validated, atomic writes, and what an import did (ImportReport).
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, Field, ValidationError

from gep.core import constants
from gep.core.errors import AssetError
from gep.core.json_safe import NotStrictJson, loads_strict
from gep.core.safe_files import Unreadable, check_regular, open_regular, read_text_capped

M = TypeVar("M", bound=BaseModel)


def _field_error(where: str, exc: ValidationError) -> AssetError:
    err = exc.errors()[0]
    field = ".".join(str(p) for p in err["loc"]) or "(object)"
    return AssetError(f"{where}: field '{field}': {err['msg']}")


def _validate(cls: type[M], obj: Any, where: str) -> M:
    if not isinstance(obj, dict):
        raise AssetError(f"{where}: expected a JSON object, got {_json_type(obj)}")
    try:
        return cls.model_validate(obj)
    except ValidationError as exc:
        raise _field_error(where, exc) from None


def _json_type(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number")


def _cannot_read(path: Path, exc: OSError) -> AssetError:
    if isinstance(exc, Unreadable):
        return AssetError(f"{path}: not read: {exc.reason}")
    return AssetError(f"{path}: cannot read ({exc.strerror or exc})")


def _read_json(path: Path, cap: int = constants.ASSET_FILE_MAX_BYTES, within: Path | None = None) -> Any:
    """The JSON in ``path``; :class:`gep.core.safe_files.Unreadable` when it is not a regular file (inside
    ``within``) of at most ``cap`` bytes, for the caller to skip it or refuse it."""
    try:
        raw = read_text_capped(path, cap, within=within)
    except UnicodeDecodeError:
        raise AssetError(f"{path}: not UTF-8 text") from None
    except Unreadable:
        raise
    except OSError as exc:
        raise _cannot_read(path, exc) from None
    try:
        return loads_strict(raw)
    except json.JSONDecodeError as exc:
        raise AssetError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except (NotStrictJson, RecursionError) as exc:
        raise AssetError(f"{path}: not valid JSON ({exc or 'nested too deep'})") from None


def _read_jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    with ExitStack() as stack:
        try:
            binary = stack.enter_context(open_regular(path))
            size = os.fstat(binary.fileno()).st_size
        except OSError as exc:
            raise _cannot_read(path, exc) from None
        if size > constants.ASSET_FILE_MAX_BYTES:
            raise _cannot_read(path, Unreadable(path, f"larger than {constants.ASSET_FILE_MAX_BYTES:,} bytes"))
        fh = stack.enter_context(io.TextIOWrapper(binary, encoding="utf-8"))
        try:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    obj = loads_strict(line)
                except json.JSONDecodeError as exc:
                    raise AssetError(f"{path}:{lineno}: not valid JSON ({exc.msg} at column {exc.colno})") from None
                except (NotStrictJson, RecursionError) as exc:
                    raise AssetError(f"{path}:{lineno}: not valid JSON ({exc or 'nested too deep'})") from None
                yield lineno, obj
        except UnicodeDecodeError:
            raise AssetError(f"{path}: not UTF-8 text") from None



class KindCounts(BaseModel):
    """Per kind of object: new ids, replaced objects, and objects already stored as they are.

    For events and validation reports ``unchanged`` counts every id already stored (they are never replaced).
    """

    added: int = 0
    updated: int = 0
    unchanged: int = 0


class RejectedAsset(BaseModel):
    file: str
    id: str
    reason: str


class ImportReport(BaseModel):
    source: str
    genes: KindCounts = Field(default_factory=KindCounts)
    capsules: KindCounts = Field(default_factory=KindCounts)
    failed_capsules: KindCounts = Field(default_factory=KindCounts)
    events: KindCounts = Field(default_factory=KindCounts)
    validation_reports: KindCounts = Field(default_factory=KindCounts)
    # what the workspace learned (gep/assets/learned.py): lessons.updated counts conflicts marked resolved,
    # lesson_deletions.updated lessons this store held that the file says were deleted
    lessons: KindCounts = Field(default_factory=KindCounts)
    lesson_deletions: KindCounts = Field(default_factory=KindCounts)
    feedback: KindCounts = Field(default_factory=KindCounts)
    files: list[str] = Field(default_factory=list)
    rejected: list[RejectedAsset] = Field(default_factory=list)
    mismatched: list[RejectedAsset] = Field(default_factory=list)
    retired: list[str] = Field(default_factory=list)  # genes the files mark retired, retired here now

    def summary(self) -> str:
        parts = []
        for kind in ("genes", "capsules", "failed_capsules", "events", "validation_reports", "lessons",
                     "lesson_deletions", "feedback"):
            c: KindCounts = getattr(self, kind)
            if c.added or c.updated or c.unchanged:
                parts.append(f"{kind.replace('_', ' ')}: {c.added} new, {c.updated} updated, {c.unchanged} unchanged")
        text = f"imported from {self.source}: " + ("; ".join(parts) if parts else "nothing to import")
        mismatch = [r for r in self.rejected if r.reason.startswith("asset_id")]
        if mismatch:
            text += f"; {len(mismatch)} rejected (asset_id mismatch: " + ", ".join(
                f"{r.file}:{r.id}" for r in mismatch[:5]) + (", ..." if len(mismatch) > 5 else "") + ")"
        seeds = [r for r in self.rejected if not r.reason.startswith("asset_id")]
        if seeds:
            text += f"; {len(seeds)} rejected (" + "; ".join(f"{r.file}:{r.id}: {r.reason}" for r in seeds[:5]) + (
                "; ..." if len(seeds) > 5 else "") + ")"
        if self.mismatched:
            text += f"; {len(self.mismatched)} imported with a mismatched asset_id"
        if self.retired:
            text += f"; retired as marked: {', '.join(self.retired)}"
        return text



def _where(path: Path, index: int, obj: Any, line: bool = False) -> str:
    """``file (id)`` for an array item, ``file:line (id)`` for a JSONL line; the index when there is no id."""
    ident = obj.get("id") if isinstance(obj, dict) else None
    pos = f"{path}:{index}" if line else str(path)
    if isinstance(ident, str):
        return f"{pos} ({ident})"
    return pos if line else f"{pos} (item {index})"



def _present(path: Path) -> bool:
    """Whether an asset file is there; something else by that name (a folder, a FIFO, a device) is an
    error, never silently skipped."""
    if not path.exists():
        return False
    try:
        check_regular(path)
    except Unreadable as exc:
        raise AssetError(f"{path}: not a file ({exc.reason})") from None
    except OSError as exc:
        raise _cannot_read(path, exc) from None
    return True



def _write_atomic(path: Path, chunks: Iterator[str]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    try:
        with tmp.open("w", encoding="utf-8", newline="\n") as fh:
            for chunk in chunks:
                fh.write(chunk)
        tmp.replace(path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise AssetError(f"{path}: cannot write ({exc.strerror or exc})") from None
