"""Persistence for GEP objects (sqlmodel).

Default: SQLite at ``<workspace>/.gep/gep.db`` in WAL mode; ``GEP_DATABASE_URL`` selects another database
(PostgreSQL works), which a fleet of workspaces may share: every row that belongs to a workspace carries
its id (gep/core/workspace_id.py) and :meth:`Store.for_workspace` returns a store scoped to it. Genes are shared.
Each object is kept whole as JSON next to the few columns that queries filter or sort on, so that fields
this version does not know survive a round-trip (gep/store/codec.py).

Every query a cycle makes reads through an index that starts with the workspace id (recent events by
sequence, runs by status, the event count from a counter row), so its cost grows neither with the number
of stored events nor with the number of other workspaces (bench/store.py). Old events can be pruned: the
memory graph keeps what they taught as summaries (gep/store/graph_history.py, gep/store/prune.py).

Schema changes are small named forward-only migrations (gep/store/migrations.py) run on every open; every
write goes through one upsert helper (gep/store/upsert.py), but for `gep feedback`'s two appends, made with
the sqlite3 module as that helper's insert-unless-the-key-exists makes them (gep/store/quick_write.py).

Layout: full.py (the Store class: every aggregate's mixin), base.py (opening, scope, sessions, counters),
engine.py (engines, one-line errors), foreign_objects.py (a file holding what gep never creates is refused),
bindings.py (where each workspace id is bound, per host), events.py, objects.py (genes, capsules, failed
capsules, validation reports), runs.py (runs, state), learned.py (feedback, lessons and their deletions,
verified fixes), behavior.py (behavioural signals), retirements.py (gene statuses, distillation log),
graph_history.py, prune.py, export.py, copy.py (`gep store copy`), migrations.py, upsert.py, tables.py (the
SQLModel classes). Without SQLAlchemy: schema.py (file, table and migration names), codec.py, rows.py (the
rows both write paths insert), quick_read.py (the read path of store-only commands: the sqlite3 module,
read-only, falling back to Store) and quick_write.py (`gep feedback`'s append).

Imports core modules only (tests/test_store_imports.py): the values it keeps are gep/core/learned.py's and
gep/core/behavior_signal.py's, and what events teach is folded with the arithmetic its caller gives
(graph_history.py's MemoryFold: gep.learning.memory_graph.MEMORY_FOLD). It never calls learning, selection or distillation.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gep.store.base import UNSCOPED
    from gep.store.codec import as_read_json, asset_json, stamp
    from gep.store.engine import default_url, make_engine
    from gep.store.full import Store
    from gep.store.objects import StoredCapsule
    from gep.store.prune import PRUNE_HOOKS, PRUNE_KEEP_EVENTS, PruneHook, PruneReport, after_cycle
    from gep.store.runs import OPEN_RUN_STATUSES

# Imported on first use: a store-only command reads through gep/store/quick_read.py (the sqlite3 module) and
# must not pay for SQLAlchemy and SQLModel (~0.4 s) by importing this package's light modules.
_WHERE = {
    "OPEN_RUN_STATUSES": "runs", "PRUNE_HOOKS": "prune", "PRUNE_KEEP_EVENTS": "prune", "UNSCOPED": "base",
    "PruneHook": "prune", "PruneReport": "prune", "Store": "full",
    "StoredCapsule": "objects", "after_cycle": "prune", "as_read_json": "codec", "asset_json": "codec",
    "default_url": "engine", "make_engine": "engine", "stamp": "codec",
}


def __getattr__(name: str) -> object:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = ["OPEN_RUN_STATUSES", "PRUNE_HOOKS", "PRUNE_KEEP_EVENTS", "UNSCOPED", "PruneHook",
           "PruneReport", "Store", "StoredCapsule", "after_cycle", "as_read_json", "asset_json", "default_url",
           "make_engine", "stamp"]
