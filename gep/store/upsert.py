"""The one way the store writes a row: insert it unless its key exists, else update it.

``INSERT ... ON CONFLICT DO NOTHING`` then, when nothing was inserted, ``UPDATE``: the same statements on
SQLite and PostgreSQL, and safe when several processes write the same key at once (PostgreSQL makes the
second insert wait for the first to commit, then the update sees that row; SQLite writers hold the lock).
The caller learns whether the row is new, which is how counters stay exact.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import update
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Session, SQLModel


def _insert(s: Session, table: type[SQLModel]) -> postgresql.Insert | sqlite.Insert:
    if s.get_bind().dialect.name == "postgresql":
        return postgresql.insert(table)
    return sqlite.insert(table)


def upsert(s: Session, table: type[SQLModel], key: Mapping[str, Any], values: Mapping[str, Any], *,
           on_insert: Mapping[str, Any] | None = None) -> bool:
    """Write the row ``key`` (a unique key's columns and values): insert ``key | values | on_insert``, or
    update ``values`` of the existing row (they may be SQL expressions, e.g. ``value + 1``, when
    ``on_insert`` gives the inserted value). Returns True when the row was inserted."""
    row = {**key, **values, **(on_insert or {})}
    stmt = _insert(s, table).values(row).on_conflict_do_nothing(index_elements=list(key))
    if s.execute(stmt).rowcount == 1:  # type: ignore[attr-defined]
        return True
    if values:
        where = [getattr(table, col) == v for col, v in key.items()]
        s.execute(update(table).where(*where).values(dict(values)))
    return False


def insert_new(s: Session, table: type[SQLModel], rows: Sequence[Mapping[str, Any]], key: Sequence[str],
               returning: str) -> int:
    """Insert many rows at once, skipping those whose ``key`` exists (also within ``rows``): how many were new.

    ``returning``: a column of the table, returned by each inserted row (that is how they are counted)."""
    if not rows:
        return 0
    stmt = _insert(s, table).on_conflict_do_nothing(index_elements=list(key)) \
        .returning(getattr(table, returning))
    return len(s.execute(stmt, [dict(r) for r in rows]).all())
