"""The tables, as SQLModel classes for queries. The migrations (gep/store/migrations.py) create them;
tests/test_store_schema.py checks that both agree, on SQLite and PostgreSQL.

Every row that belongs to a workspace carries its ``workspace_id`` (see gep/core/workspace_id.py) and every
query of one workspace reads through an index that starts with it. Genes are shared by the fleet.
Each object is kept whole as JSON in ``data`` (gep/store/codec.py) next to the few columns queries use.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Index, Integer, Text
from sqlmodel import Field, SQLModel

from gep.store import schema

# BIGSERIAL on PostgreSQL; SQLite's rowid alias must be spelled INTEGER
SEQ = BigInteger().with_variant(Integer(), "sqlite")


def _seq() -> int | None:
    return Field(default=None, primary_key=True, sa_type=SEQ)


def _text(*, primary_key: bool = False, nullable: bool = False) -> str:
    return Field(primary_key=primary_key, nullable=nullable, sa_type=Text)


def _opt_text() -> str | None:
    return Field(default=None, nullable=True, sa_type=Text)


def _ws_indexes(table: str, key: str = "id") -> tuple[Index, Index]:
    """One object per ``key`` in a workspace; a workspace's rows in insertion order."""
    return (Index(f"ix_{table}_ws_{key}", "workspace_id", key, unique=True),
            Index(f"ix_{table}_ws_seq", "workspace_id", "seq"))


class WorkspaceRow(SQLModel, table=True):
    __tablename__ = schema.WORKSPACES
    id: str = _text(primary_key=True)
    path: str = _text()
    name: str = _text()
    created_at: str = _text()
    updated_at: str = _text()


class EventRow(SQLModel, table=True):
    __tablename__ = schema.EVENTS
    __table_args__ = (*_ws_indexes("events"),
                      Index("ix_events_ws_status_seq", "workspace_id", "status", "seq"),
                      Index("ix_events_flow_run", "flow_run_id"),
                      {"sqlite_autoincrement": True})
    seq: int | None = _seq()
    workspace_id: str = _text()
    id: str = _text()
    created_at: str = _text()
    intent: str = _text()
    status: str = _text()
    gene_id: str | None = _opt_text()
    flow_run_id: str | None = _opt_text()
    data: str = _text()


class GeneRow(SQLModel, table=True):
    __tablename__ = schema.GENES
    id: str = _text(primary_key=True)
    source: str = Field(default="workspace", sa_type=Text)
    updated_at: str = _text()
    data: str = _text()


class CapsuleRow(SQLModel, table=True):
    __tablename__ = "capsules"
    __table_args__ = (*_ws_indexes("capsules"), {"sqlite_autoincrement": True})
    seq: int | None = _seq()
    workspace_id: str = _text()
    id: str = _text()
    gene_id: str | None = _opt_text()
    data: str = _text()


class FailedCapsuleRow(SQLModel, table=True):
    __tablename__ = schema.FAILED_CAPSULES
    __table_args__ = (*_ws_indexes("failed_capsules"), {"sqlite_autoincrement": True})
    seq: int | None = _seq()
    workspace_id: str = _text()
    id: str = _text()
    gene_id: str | None = _opt_text()
    data: str = _text()


class ValidationReportRow(SQLModel, table=True):
    __tablename__ = "validation_reports"
    __table_args__ = (*_ws_indexes("validation_reports"), {"sqlite_autoincrement": True})
    seq: int | None = _seq()
    workspace_id: str = _text()
    id: str = _text()
    data: str = _text()


class RunRow(SQLModel, table=True):
    __tablename__ = "runs"
    __table_args__ = (Index("ix_runs_ws_status", "workspace_id", "status"),)
    workspace_id: str = _text(primary_key=True)
    event_id: str = _text(primary_key=True)
    status: str = _text()
    data: str = _text()


class StateRow(SQLModel, table=True):
    __tablename__ = "state"
    workspace_id: str = _text(primary_key=True)
    key: str = _text(primary_key=True)
    data: str = _text()


class CounterRow(SQLModel, table=True):
    __tablename__ = "counters"
    workspace_id: str = _text(primary_key=True)
    name: str = _text(primary_key=True)
    value: int = Field(default=0, sa_type=BigInteger)


class MemorySummaryRow(SQLModel, table=True):
    """One SituationSummary (gep/learning/memory_graph.py): a gene's outcomes in one signal situation, folded."""

    __tablename__ = "memory_summaries"
    __table_args__ = (Index("ix_memory_summaries_ws_key", "workspace_id", "situation", "gene_id", unique=True),
                      Index("ix_memory_summaries_ws_seq", "workspace_id", "seq"),
                      {"sqlite_autoincrement": True})
    seq: int | None = _seq()
    workspace_id: str = _text()
    situation: str = _text()  # sha256 of the signal key (keys can be longer than an index entry may be)
    gene_id: str = _text()
    data: str = _text()


class GeneStatusRow(SQLModel, table=True):
    """A gene's standing in this workspace's pool (gep.genes.eligibility.GeneStatus: retired or not, and its history)."""

    __tablename__ = schema.GENE_STATUS
    workspace_id: str = _text(primary_key=True)
    gene_id: str = _text(primary_key=True)
    retired: bool = Field(default=False)
    data: str = _text()


class GeneOwnerRow(SQLModel, table=True):
    """A workspace that put a gene in the store: without ``share_genes`` a workspace selects only its own."""

    __tablename__ = schema.GENE_OWNERS
    workspace_id: str = _text(primary_key=True)
    gene_id: str = _text(primary_key=True)


class DistillRunRow(SQLModel, table=True):
    """One distillation run of a workspace (gep.genes.distiller.DistillRun): kept, rejected or skipped."""

    __tablename__ = "distill_runs"
    __table_args__ = (*_ws_indexes("distill_runs"), {"sqlite_autoincrement": True})
    seq: int | None = _seq()
    workspace_id: str = _text()
    id: str = _text()
    at: str = _text()
    status: str = _text()
    data: str = _text()


class BehaviorSignalRow(SQLModel, table=True):
    """One behavioural signal (gep.signals.behavior.StoredSignal); the workspace's daily JSONL files hold the same."""

    __tablename__ = "behavior_signals"
    __table_args__ = (*_ws_indexes("behavior_signals"),
                      Index("ix_behavior_signals_ws_ts", "workspace_id", "ts"),
                      {"sqlite_autoincrement": True})
    seq: int | None = _seq()
    workspace_id: str = _text()
    id: str = _text()
    ts: str = _text()
    type: str = _text()
    data: str = _text()


class FeedbackRow(SQLModel, table=True):
    """One feedback signal (gep/learning/feedback.py): append-only, the truth gene usefulness scores fold."""

    __tablename__ = schema.FEEDBACK
    __table_args__ = (*_ws_indexes("feedback"), Index("ix_feedback_ws_gene", "workspace_id", "gene_id"),
                      {"sqlite_autoincrement": True})
    seq: int | None = _seq()
    workspace_id: str = _text()
    id: str = _text()
    gene_id: str = _text()
    event_id: str | None = _opt_text()
    created_at: str = _text()
    data: str = _text()


class LessonRow(SQLModel, table=True):
    """One lesson (gep/learning/lessons.py): append-only; only its conflict_resolved flag is ever set afterwards."""

    __tablename__ = schema.LESSONS
    __table_args__ = (*_ws_indexes("lessons"), Index("ix_lessons_ws_gene_seq", "workspace_id", "gene_id", "seq"),
                      Index("ix_lessons_ws_event", "workspace_id", "event_id"), {"sqlite_autoincrement": True})
    seq: int | None = _seq()
    workspace_id: str = _text()
    id: str = _text()
    gene_id: str = _text()
    event_id: str | None = _opt_text()
    category: str = _text()
    created_at: str = _text()
    data: str = _text()


class LessonDeletionRow(SQLModel, table=True):
    """The audit record of a deleted lesson: who, when, why, and the lesson as it was."""

    __tablename__ = schema.LESSON_DELETIONS
    __table_args__ = (*_ws_indexes("lesson_deletions", "lesson_id"), {"sqlite_autoincrement": True})
    seq: int | None = _seq()
    workspace_id: str = _text()
    lesson_id: str = _text()
    deleted_at: str = _text()
    data: str = _text()


class ResolutionRow(SQLModel, table=True):
    """What a committed fix addressed (gep/learning/resolved.py), one per fixing event; its status changes."""

    __tablename__ = "resolutions"
    __table_args__ = (*_ws_indexes("resolutions", "event_id"), {"sqlite_autoincrement": True})
    seq: int | None = _seq()
    workspace_id: str = _text()
    event_id: str = _text()
    status: str = _text()
    data: str = _text()


# the tables whose rows belong to one workspace (and move with it: adoption, copy)
SCOPED_TABLES: tuple[type[SQLModel], ...] = (EventRow, CapsuleRow, FailedCapsuleRow, ValidationReportRow, RunRow,
                                             StateRow, CounterRow, MemorySummaryRow, GeneStatusRow, GeneOwnerRow,
                                             DistillRunRow,
                                             BehaviorSignalRow, FeedbackRow, LessonRow, LessonDeletionRow,
                                             ResolutionRow)
