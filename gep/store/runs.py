"""A workspace's cycle runs (what crash recovery reads) and its small typed state (personality, ...)."""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel
from sqlmodel import col, select

from gep.core.models import CycleRun
from gep.core.salvage import salvage
from gep.store import schema
from gep.store.base import StoreBase
from gep.store.engine import store_errors
from gep.store.tables import RunRow, StateRow
from gep.store.upsert import upsert

M = TypeVar("M", bound=BaseModel)

OPEN_RUN_STATUSES = schema.OPEN_RUN_STATUSES
UNREADABLE_RUN = "unreadable"  # a run record moved aside: kept for a person to look at, never read again


class RunsMixin(StoreBase):
    @store_errors
    def save_run(self, run: CycleRun) -> None:
        with self.writing() as s:
            upsert(s, RunRow, {"workspace_id": self.workspace_id, "event_id": run.event_id},
                   {"status": run.status, "data": run.model_dump_json()})

    @store_errors
    def open_runs(self) -> list[CycleRun]:
        """Runs not closed: running (maybe crashed) or awaiting changes. A record that cannot be read is moved
        aside (status ``unreadable``, its data kept) with a warning (:meth:`take_warnings`): it never blocks
        the workspace."""
        with self.session() as s:
            # IN over the open statuses reads the status index; "!= 'closed'" would scan every closed run
            rows = s.exec(select(RunRow.event_id, RunRow.data).where(
                RunRow.workspace_id == self.workspace_id, col(RunRow.status).in_(OPEN_RUN_STATUSES))).all()
        runs, warnings = salvage([(event_id, data) for event_id, data in rows],
                                 lambda data: CycleRun.model_validate_json(str(data)), self._move_run_aside)
        self.run_warnings += [f"the run record of cycle {w.removeprefix('record ')}" for w in warnings]
        return runs

    def _move_run_aside(self, event_id: str, _reason: str) -> None:
        with self.writing() as s:
            row = s.get(RunRow, (self.workspace_id, event_id))
            if row is not None:
                row.status = UNREADABLE_RUN
                s.add(row)

    def take_warnings(self) -> list[str]:
        """The warnings of run records moved aside since the last call."""
        out, self.run_warnings = self.run_warnings, []
        return out

    @store_errors
    def get_run(self, event_id: str) -> CycleRun | None:
        with self.session() as s:
            row = s.get(RunRow, (self.workspace_id, event_id))
            return CycleRun.model_validate_json(row.data) if row else None

    @store_errors
    def close_run(self, event_id: str) -> None:
        with self.writing() as s:
            row = s.get(RunRow, (self.workspace_id, event_id))
            if row is not None:
                row.status = "closed"
                try:
                    run = CycleRun.model_validate_json(row.data)
                    run.status = "closed"
                    row.data = run.model_dump_json()
                except ValueError:  # an unreadable record is closed as it is
                    pass
                s.add(row)

    # ---------------------------------------------------------------- small typed state

    @store_errors
    def get_state(self, key: str, cls: type[M]) -> M | None:
        with self.session() as s:
            row = s.get(StateRow, (self.workspace_id, key))
            return cls.model_validate_json(row.data) if row else None

    @store_errors
    def set_state(self, key: str, value: BaseModel) -> None:
        with self.writing() as s:
            upsert(s, StateRow, {"workspace_id": self.workspace_id, "key": key}, {"data": value.model_dump_json()})
