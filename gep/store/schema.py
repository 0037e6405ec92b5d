"""Names both read paths of the store share, without SQLAlchemy: the default file, the tables gep/store/quick_read.py reads (the
SQLModel classes in tables.py are declared with them) and the migrations that make the current schema
(migrations.py pairs each name with its step)."""

from __future__ import annotations

from pathlib import Path

from gep.core.config import gep_dir

DB_FILE = "gep.db"  # a workspace's own store, in .gep/ (when no database_url is set)

WORKSPACES = "workspaces"
EVENTS = "events"
GENES = "genes"
FAILED_CAPSULES = "failed_capsules"
GENE_STATUS = "gene_status"
GENE_OWNERS = "gene_owners"
FEEDBACK = "feedback"
LESSONS = "lessons"
LESSON_DELETIONS = "lesson_deletions"
RUNS = "runs"
STATE = "state"
OPEN_RUN_STATUSES = ("running", "awaiting_changes")  # a run row not closed (gep/store/runs.py)
SCHEMA_MIGRATIONS = "schema_migrations"

# every SQLite connection that may write: wait for the write lock, write-ahead log (readers never block)
SQLITE_PRAGMAS = ("PRAGMA busy_timeout=10000", "PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL")

# in order; append a name here and its step in migrations.py (never edit a released one)
MIGRATION_NAMES: tuple[str, ...] = (
    "001_initial",
    "002_indexes",
    "003_counters",
    "004_drop_duplicate_id_indexes",
    "005_workspaces",
    "006_learning",
    "007_gene_pool",
    "008_behavior_signals",
    "009_gene_owners",
)


def default_db(workspace: Path | str) -> Path:
    """The SQLite file a workspace's store is kept in when no ``database_url`` is set."""
    return (gep_dir(workspace) / DB_FILE).resolve()
