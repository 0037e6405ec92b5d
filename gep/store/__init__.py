"""Persistence for GEP objects (sqlmodel).

Default: SQLite at ``<workspace>/.gep/gep.db`` in WAL mode; ``GEP_DATABASE_URL`` selects another database
(PostgreSQL works), which a fleet of workspaces may share: every row that belongs to a workspace carries
its id (gep/workspace_id.py) and :meth:`Store.for_workspace` returns a store scoped to it. Genes are shared.
Each object is kept whole as JSON next to the few columns that queries filter or sort on, so that fields
this version does not know survive a round-trip (gep/store/codec.py).

Every query a cycle makes reads through an index that starts with the workspace id (recent events by
sequence, runs by status, the event count from a counter row), so its cost grows neither with the number
of stored events nor with the number of other workspaces (bench/store.py). Old events can be pruned: the
memory graph keeps what they taught as summaries (gep/store/memory.py, gep/store/prune.py).

Schema changes are small named forward-only migrations (gep/store/migrations.py) run on every open; every
write goes through one upsert helper (gep/store/upsert.py).

Layout: base.py (opening, scope, sessions, counters), events.py, objects.py (genes, capsules, failed
capsules, validation reports), runs.py (runs, state), export.py, memory.py, prune.py, copy.py, pool.py (gene
statuses, distillation log), behavior.py (behavioural signals), learning.py (feedback, lessons and their
deletions, verified fixes).
"""

from __future__ import annotations

from gep.store.base import UNSCOPED
from gep.store.behavior import BehaviorMixin
from gep.store.codec import as_read_json, asset_json, stamp
from gep.store.engine import default_url, make_engine
from gep.store.events import EventsMixin
from gep.store.export import ExportMixin
from gep.store.learning import LearningMixin
from gep.store.objects import CapsuleOrigin, ObjectsMixin, StoredCapsule
from gep.store.pool import GenePoolMixin
from gep.store.prune import PRUNE_HOOKS, PRUNE_KEEP_EVENTS, PruneHook, PruneMixin, PruneReport, after_cycle
from gep.store.runs import OPEN_RUN_STATUSES, RunsMixin


class Store(EventsMixin, ObjectsMixin, RunsMixin, ExportMixin, PruneMixin, GenePoolMixin, BehaviorMixin,
            LearningMixin):
    """All reads and writes of GEP objects. Open with :meth:`open` (unscoped) or :meth:`for_workspace`."""


__all__ = [
    "OPEN_RUN_STATUSES",
    "PRUNE_HOOKS",
    "PRUNE_KEEP_EVENTS",
    "UNSCOPED",
    "CapsuleOrigin",
    "PruneHook",
    "PruneReport",
    "Store",
    "StoredCapsule",
    "after_cycle",
    "as_read_json",
    "asset_json",
    "default_url",
    "make_engine",
    "stamp",
]
