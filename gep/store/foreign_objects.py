"""A store file holding what gep never creates (a view, a trigger) is refused, never read.

gep's SQLite store has tables and indexes only. A view named like one of its tables (a recursive one:
``WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT ...``) made `gep history`, `show`,
`genes` and `feedback` run forever; a trigger would run someone else's SQL on every write.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from gep.core.errors import StoreError


def foreign_objects(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """(type, name) of each view or trigger in the database ``conn`` reads."""
    rows = conn.execute("SELECT type, name FROM sqlite_master WHERE type IN ('view', 'trigger') ORDER BY name")
    return [(str(kind), str(name)) for kind, name in rows.fetchall()]


def refuse_foreign_objects(conn: sqlite3.Connection, db: Path | str) -> None:
    """Raise a one-line :class:`StoreError` when the database holds a view or a trigger."""
    found = foreign_objects(conn)
    if found:
        shown = ", ".join(f"{kind} '{name}'" for kind, name in found[:3]) + (" ..." if len(found) > 3 else "")
        raise StoreError(f"store {db} holds {shown}, which gep never creates: not reading it (move the file "
                         "aside, or drop them with sqlite3)")
