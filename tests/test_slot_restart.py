"""The workspace's Prefect slot across a server restart (issue 32, finding 11): a cycle holding it while the
server restarts gives it back, and the next cycle runs; a server that cannot be reached costs one line.

One real `gep server start` (tests/live_prefect.py), restarted in place (same PREFECT_HOME and port): first
with Prefect's default in-memory lease storage (a restart forgets the lease and keeps the slot counted), then
with what `gep server start` sets (leases on disk, kept across the restart). The first restart brings the
server back with leases on disk, so three starts cover both (the lease held in memory is lost all the same)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import prefect_db_template
from live_prefect import LiveServer

MEMORY = "prefect.server.concurrency.lease_storage.memory"


def held(server: LiveServer, ws: Path) -> int:
    from flows.slot import slot_name

    with server.client() as client:
        return client.read_global_concurrency_limit_by_name(slot_name(ws)).active_slots


async def hold_across(server: LiveServer, ws: Path, restart: bool = True, then_on_disk: bool = False) -> bool:
    """Take the slot, restart (or only stop) the server while holding it, give it back. Whether the server
    still knew the lease after the restart (its file under PREFECT_HOME/concurrency_leases). ``then_on_disk``:
    the server comes back with the leases on disk, as `gep server start` sets (one start fewer for the test)."""
    from flows.slot import workspace_slot

    async with workspace_slot(ws, 5):
        server.stop()
        if not restart:
            return False
        if then_on_disk:
            del server._server_env["PREFECT_SERVER_CONCURRENCY_LEASE_STORAGE"]
        server.start()
        leases = server.home / "concurrency_leases"
        return held(server, ws) == 1 and any(p.name != "expirations.json" for p in leases.glob("*.json"))


def next_cycle_runs(ws: Path) -> bool:
    from flows.slot import workspace_slot

    async def take() -> bool:
        async with workspace_slot(ws, 3):
            return True

    try:
        return asyncio.run(take())
    except TimeoutError:
        return False


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def caplog() -> Iterator[Lines]:
    """The slot's warnings (the "gep" loggers do not reach pytest's caplog)."""
    lines = Lines()
    logging.getLogger("gep.slot").addHandler(lines)
    yield lines
    logging.getLogger("gep.slot").removeHandler(lines)


def test_a_slot_held_across_a_server_restart_is_given_back_and_the_next_cycle_runs(
        tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch, caplog: Lines):
    from prefect.settings import temporary_settings

    import flows.slot

    ws = tmp_path / "ws"
    ws.mkdir()
    server = LiveServer(tmp_path / "prefect", server_env={"PREFECT_SERVER_CONCURRENCY_LEASE_STORAGE": MEMORY},
                        template=prefect_db_template(tmp_path_factory))
    with server, temporary_settings(updates={"api.url": server.api_url}):
        monkeypatch.setattr(flows.slot, "RELEASE_TIMEOUT_S", 45.0)
        # Prefect's default: the restart forgets the lease (it was in the stopped server's memory); the slot
        # stays counted, and is given back by name
        assert asyncio.run(hold_across(server, ws, then_on_disk=True)) is False
        assert held(server, ws) == 0 and next_cycle_runs(ws)
        assert caplog.lines == [
            f"the Prefect server forgot the lease of {flows.slot.slot_name(ws)} (restarted?); the slot was "
            "given back by name"]
        # what `gep server start` sets (the server runs so since the restart): the lease survives the next
        # restart and is released by lease
        caplog.lines.clear()
        assert asyncio.run(hold_across(server, ws)) is True
        assert held(server, ws) == 0 and next_cycle_runs(ws) and caplog.lines == []
        # the server gone when the slot is given back: one line, no exception, within the release's limit
        monkeypatch.setattr(flows.slot, "RELEASE_TIMEOUT_S", 3.0)
        asyncio.run(hold_across(server, ws, restart=False))
        (line,) = caplog.lines
        assert line.startswith(f"could not give back the workspace slot {flows.slot.slot_name(ws)} (")
        assert "\n" not in line and line.endswith("the server frees it when its lease ends")


@pytest.mark.parametrize("storage", [None, MEMORY])
def test_gep_server_start_keeps_leases_on_disk_unless_told_otherwise(storage):
    from gep.server import LEASE_STORAGE, _server_env

    env = {} if storage is None else {"PREFECT_SERVER_CONCURRENCY_LEASE_STORAGE": storage}
    assert _server_env(env, 4300)["PREFECT_SERVER_CONCURRENCY_LEASE_STORAGE"] == (storage or LEASE_STORAGE)
