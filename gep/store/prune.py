"""Bounded growth: old events of a workspace are deleted once the memory graph's summaries hold them.

What a prune keeps, so that selection does not change (tests/test_store_prune.py, bench/store.py):
- the newest ``keep_events`` events and those younger than ``keep_days`` (at least the newest FOLD_KEEP:
  the cycle's loop rules read them whole), every unfolded event, and every event a hook keeps;
- capsules referenced by a kept event, and the newest LISTED capsules and failed capsules (what the store
  lists to selection, and to other workspaces with ``share_capsules``);
- failed capsules within the ban window (or undated): older ones no longer ban anything.
Closed runs and validation reports of deleted events go with them. The event counter is not decreased:
it numbers the cycles. Deleted rows leave free pages behind (SQLite reuses them; it does not shrink).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

from pydantic import BaseModel
from sqlalchemy import delete
from sqlmodel import Session, col, func, select

from gep.core import constants
from gep.core.config import Settings
from gep.core.learned import parse_at
from gep.core.models import iso, utc_now
from gep.store.engine import store_errors
from gep.store.graph_history import FOLD_KEEP, FOLDED, MemoryFold, MemoryMixin
from gep.store.tables import CapsuleRow, EventRow, FailedCapsuleRow, RunRow, ValidationReportRow

PRUNE_KEEP_EVENTS = 10_000  # `gep store prune` without a limit from its flags or the settings
LISTED = 200  # Store.list_capsules / list_failed_capsules: what selection reads
# the statuses of the events the cycle gives the selector's ban window (gep.cycle.outcomes.TERMINAL minus
# gep.genes.selector.NOT_A_CYCLE; tests/test_store_prune.py checks they agree)
BAN_WINDOW_STATUSES = ("success", "failed", "empty", "abandoned", "interrupted")
_BATCH = 5_000


class PruneHook(Protocol):
    """Where tables that refer to events (feedback, lessons: later work) take part in a prune, inside its
    transaction: ``keep`` names the events among ``event_ids`` that must stay; ``pruned`` hears which went."""

    def keep(self, s: Session, workspace_id: str, event_ids: Sequence[str]) -> set[str]: ...

    def pruned(self, s: Session, workspace_id: str, event_ids: Sequence[str]) -> None: ...


class PruneHooks:
    """The hooks every prune runs, registered by the modules of the tables they stand for when imported.
    Process-wide on purpose: a table's rules hold for every store the process opens."""

    def __init__(self) -> None:
        self._hooks: list[PruneHook] = []

    def register(self, hook: PruneHook) -> None:
        self._hooks.append(hook)

    def __iter__(self) -> Iterator[PruneHook]:
        return iter(tuple(self._hooks))


PRUNE_HOOKS = PruneHooks()


class PruneReport(BaseModel):
    folded: int = 0  # events folded into the memory graph's summaries by this prune
    events: int = 0  # deleted rows of each kind
    capsules: int = 0
    failed_capsules: int = 0
    validation_reports: int = 0
    runs: int = 0
    kept_events: int = 0  # event rows left in the workspace

    def summary(self) -> str:
        return (f"pruned {self.events} events ({self.kept_events} kept, {self.folded} newly summarised), "
                f"{self.capsules} capsules, {self.failed_capsules} failed capsules, "
                f"{self.validation_reports} validation reports, {self.runs} runs")


class _Plan(BaseModel):
    upto: int  # events up to this seq may go ...
    cutoff: str | None  # ... if created before this
    kept_capsules: set[str]
    kept_reports: set[str]


def _refs(data: str) -> tuple[str | None, str | None]:
    """(capsule_id, validation_report_id) an event's JSON refers to."""
    obj = json.loads(data)
    if not isinstance(obj, dict):
        return None, None
    cap, vr = obj.get("capsule_id"), obj.get("validation_report_id")
    return (cap if isinstance(cap, str) else None), (vr if isinstance(vr, str) else None)


class PruneMixin(MemoryMixin):
    @store_errors
    def prune(self, *, fold: MemoryFold, keep_events: int | None = None, keep_days: float | None = None,
              now: datetime | None = None, ban_cycles: int = constants.BAN_CYCLES) -> PruneReport:
        """Fold what may be folded (``fold``: the memory graph's arithmetic), then delete this workspace's old
        events and what only they used (see the module doc)."""
        if keep_events is None and keep_days is None:
            raise ValueError("prune needs keep_events or keep_days")
        if (keep_events is not None and keep_events < 0) or (keep_days is not None and keep_days < 0):
            raise ValueError("keep_events and keep_days cannot be negative")
        report = PruneReport(folded=self.fold_memory(fold))
        plan = self._plan(keep_events, keep_days, now or utc_now())
        if plan.upto > 0:
            self._delete_events(plan, report)
        report.failed_capsules = self._prune_failed_capsules(ban_cycles)
        with self.session() as s:
            report.kept_events = s.exec(select(func.count()).select_from(EventRow)
                                        .where(EventRow.workspace_id == self.workspace_id)).one()
        return report

    def _plan(self, keep_events: int | None, keep_days: float | None, now: datetime) -> _Plan:
        keep = max(keep_events or 0, FOLD_KEEP)
        with self.snapshot() as s:
            newest_gone = s.exec(select(EventRow.seq).where(EventRow.workspace_id == self.workspace_id)
                                 .order_by(col(EventRow.seq).desc()).offset(keep).limit(1)).first()
            upto = min(newest_gone or 0, self.counter(s, FOLDED))
            cutoff = iso(now - timedelta(days=keep_days)) if keep_days is not None else None
            caps: set[str] = set()
            if upto <= 0:
                return _Plan(upto=0, cutoff=cutoff, kept_capsules=caps, kept_reports=set())
            reports: set[str] = set()
            kept = (col(EventRow.seq) > upto) | (col(EventRow.created_at) >= cutoff) if cutoff \
                else col(EventRow.seq) > upto
            for data in s.exec(select(EventRow.data).where(EventRow.workspace_id == self.workspace_id, kept)):
                cap, vr = _refs(data)
                caps.update([cap] if cap else [])
                reports.update([vr] if vr else [])
            caps.update(s.exec(select(CapsuleRow.id).where(CapsuleRow.workspace_id == self.workspace_id)
                               .order_by(col(CapsuleRow.seq).desc()).limit(LISTED)).all())
        return _Plan(upto=upto, cutoff=cutoff, kept_capsules=caps, kept_reports=reports)

    def _delete_events(self, plan: _Plan, report: PruneReport) -> None:
        last = 0
        while True:
            with self.writing() as s:
                q = select(EventRow.seq, EventRow.id, EventRow.data).where(
                    EventRow.workspace_id == self.workspace_id, col(EventRow.seq) > last,
                    col(EventRow.seq) <= plan.upto)
                if plan.cutoff:
                    q = q.where(col(EventRow.created_at) < plan.cutoff)
                rows = s.exec(q.order_by(col(EventRow.seq)).limit(_BATCH)).all()
                if not rows:
                    return
                last = rows[-1][0] or 0
                self._delete_batch(s, [(seq or 0, eid, data) for seq, eid, data in rows], plan, report)

    def _delete_batch(self, s: Session, rows: list[tuple[int, str, str]], plan: _Plan, report: PruneReport) -> None:
        ids = [eid for _, eid, _ in rows]
        held = set().union(*(hook.keep(s, self.workspace_id, ids) for hook in PRUNE_HOOKS))
        gone = [(seq, eid, _refs(data)) for seq, eid, data in rows if eid not in held]
        gone_ids = [eid for _, eid, _ in gone]
        caps = {cap for _, _, (cap, _) in gone if cap} - plan.kept_capsules
        vrs = {vr for _, _, (_, vr) in gone if vr} - plan.kept_reports
        ws = self.workspace_id
        report.events += self._delete(s, EventRow, col(EventRow.seq).in_([seq for seq, _, _ in gone]))
        report.runs += self._delete(s, RunRow, col(RunRow.event_id).in_(gone_ids), RunRow.status == "closed")
        report.capsules += self._delete(s, CapsuleRow, col(CapsuleRow.id).in_(caps))
        report.validation_reports += self._delete(s, ValidationReportRow, col(ValidationReportRow.id).in_(vrs))
        for hook in PRUNE_HOOKS:
            hook.pruned(s, ws, gone_ids)

    def _delete(self, s: Session, table: Any, *where: Any) -> int:
        result = s.execute(delete(table).where(table.workspace_id == self.workspace_id, *where))
        return int(result.rowcount)  # type: ignore[attr-defined]

    def _prune_failed_capsules(self, ban_cycles: int) -> int:
        """Delete failed capsules dated before the ban window, except the newest LISTED."""
        with self.writing() as s:
            start = self._ban_window_start(s, ban_cycles)
            if start is None:
                return 0
            listed = s.exec(select(FailedCapsuleRow.seq).where(FailedCapsuleRow.workspace_id == self.workspace_id)
                            .order_by(col(FailedCapsuleRow.seq).desc()).offset(LISTED - 1).limit(1)).first()
            if listed is None:
                return 0
            old = s.exec(select(FailedCapsuleRow.seq, FailedCapsuleRow.data).where(
                FailedCapsuleRow.workspace_id == self.workspace_id, col(FailedCapsuleRow.seq) < listed)).all()
            gone = [seq for seq, data in old if (at := parse_at(json.loads(data).get("created_at"))) and at < start]
            return self._delete(s, FailedCapsuleRow, col(FailedCapsuleRow.seq).in_(gone)) if gone else 0

    def _ban_window_start(self, s: Session, ban_cycles: int) -> datetime | None:
        """When the ban window starts (gep.genes.selector's failed-capsule bans), or None: every failure counts."""
        if ban_cycles <= 0:
            return None
        window = (select(EventRow.seq, EventRow.status).where(EventRow.workspace_id == self.workspace_id)
                  .order_by(col(EventRow.seq).desc()).limit(FOLD_KEEP).subquery())
        seq = s.exec(select(window.c.seq).where(window.c.status.in_(BAN_WINDOW_STATUSES))
                     .order_by(window.c.seq.desc()).offset(ban_cycles - 1).limit(1)).first()
        if seq is None:
            return None
        data = s.exec(select(EventRow.data).where(EventRow.seq == seq)).one()
        meta = json.loads(data).get("meta")
        return parse_at(meta.get("at")) if isinstance(meta, dict) else None


def after_cycle(store: PruneMixin, settings: Settings, fold: MemoryFold,
                now: datetime | None = None) -> PruneReport | None:
    """What a cycle calls once its event is recorded: prune as the settings say (``prune_keep_events``,
    ``prune_keep_days``), else only fold settled events into the memory graph's summaries."""
    if settings.prune_keep_events is None and settings.prune_keep_days is None:
        store.fold_memory(fold)
        return None
    return store.prune(fold=fold, keep_events=settings.prune_keep_events, keep_days=settings.prune_keep_days,
                       now=now, ban_cycles=settings.ban_cycles)
