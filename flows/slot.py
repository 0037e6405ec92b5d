"""One cycle at a time per workspace: a Prefect global concurrency limit of 1, held for the whole run.

An overlapping run waits in the UI (its slot shows as held by the running flow run) until the cycle ahead of
it finishes, or gives up after the timeout. The slot is taken with the flow run's own API client, one
request to take it and one to give it back; the limit is created by the first run on a workspace (taking a
slot of a missing limit says so, so no run reads the limit first). Its lease is renewed from a thread, only
for a cycle that outlives three quarters of it, so a long stage that blocks the flow's event loop keeps it
and a short cycle sends no renewal at all. A cycle killed with SIGKILL renews nothing: the server takes the
slot back when the lease runs out (LEASE_S, or GEP_SLOT_LEASE_S seconds), and the next cycle goes ahead.

Giving the slot back never fails the cycle (its event is stored by then) and never leaks the slot when the
server restarted meanwhile: a server that forgot the lease (Prefect keeps leases in memory unless told
otherwise; `gep server start` keeps them on disk) still counts the slot, so the run gives it back by name;
a server that cannot be reached gets one line, and the lease then frees the slot. Each lease held is noted on
disk (gep/prefect_api.py): Ctrl-C or SIGTERM gives it back at once, and `gep recover` or the next cycle on the
workspace give back the slot of a cycle that was killed (SIGKILL) instead of waiting out its lease.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import math
import os
import threading
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx
from prefect import get_client, get_run_logger
from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate
from prefect.client.schemas.objects import ConcurrencyLeaseHolder
from prefect.client.schemas.responses import ConcurrencyLimitWithLeaseResponse
from prefect.exceptions import MissingContextError, ObjectAlreadyExists, ObjectNotFound

from gep.core.errors import ConfigError
from gep.prefect_api import forget_slot, record_slot, release_dead_slots, workspace_slot_name

LEASE_S = 300.0
LEASE_ENV = "GEP_SLOT_LEASE_S"  # how long a dead cycle can keep its workspace's slot
MIN_LEASE_S, MAX_LEASE_S = 60.0, 86400.0  # what the server accepts
LOCKED = 423  # the limit is full: the server says when to ask again (Retry-After)
RETRY_CAP_S = 5.0  # ... up to 30 s; ask at least this often, so a slot given back is taken at once
GONE = 410  # the server does not know the lease (expired, or forgotten by a restart)
RELEASE_TIMEOUT_S = 45.0  # giving the slot back through a server restart (~20 s here); then the lease frees it


def lease_seconds(env: Mapping[str, str] | None = None) -> float:
    """The slot's lease: GEP_SLOT_LEASE_S when set (a one-line ConfigError when it is no number of seconds
    the server accepts), else LEASE_S."""
    raw = (os.environ if env is None else env).get(LEASE_ENV, "").strip()
    if not raw:
        return LEASE_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not MIN_LEASE_S <= value <= MAX_LEASE_S:  # nan compares false: refused too
        raise ConfigError(f"{LEASE_ENV}={raw!r} is not a number of seconds from {MIN_LEASE_S:.0f} to "
                          f"{MAX_LEASE_S:.0f}")
    return value


def slot_name(path: Path, key: str | None = None) -> str:
    return workspace_slot_name(path, key)


def ensure_limit(name: str, limit: int = 1) -> None:
    """Create the limit unless it exists (tests and tools; the flow creates it on first use)."""
    with get_client(sync_client=True) as client:
        try:
            client.read_global_concurrency_limit_by_name(name)
        except ObjectNotFound:
            try:
                client.create_global_concurrency_limit(GlobalConcurrencyLimitCreate(name=name, limit=limit))
            except ObjectAlreadyExists:
                pass


class Lease:
    """The run's lease on the slot, and until when it is valid by this process's clock (renewals move it)."""

    def __init__(self, lease_id: UUID, lease_s: float) -> None:
        self.id = lease_id
        self.taken = time.monotonic()
        self.valid_until = self.taken + lease_s


@asynccontextmanager
async def workspace_slot(path: Path, timeout_s: float, holder: UUID | None = None,
                         lease_s: float = LEASE_S, key: str | None = None) -> AsyncIterator[None]:
    """Hold the workspace's slot (``key``: its workspace_key, when the caller has it); TimeoutError when
    another run held it for ``timeout_s``."""
    name = slot_name(path, key)
    # a cycle killed here before (SIGKILL) gave nothing back: its lease would hold the slot for minutes
    await asyncio.to_thread(release_dead_slots, name)
    async with get_client() as client:  # inside a flow run: the run's own client
        lease = Lease(await _acquire(client, name, timeout_s, holder, lease_s), lease_s)
        # on disk, so SIGINT/SIGTERM (gep/cycle/interrupt.py) and `gep recover` can give it back (gep/prefect_api.py)
        record = record_slot(name, str(lease.id), str(client.api_url))
        stop = threading.Event()
        # the run's settings (API URL) and logger live in context variables: the thread gets a copy
        renew = contextvars.copy_context()
        threading.Thread(target=renew.run, args=(_renew, lease, stop, lease_s), name=f"gep-slot-{name}",
                         daemon=True).start()
        try:
            yield
        finally:
            stop.set()
            await release(client, name, lease)
            forget_slot(record)


async def release(client: Any, name: str, lease: Lease) -> None:
    """Give the slot back; one warning line when that cannot be done, never an exception."""
    try:
        await asyncio.wait_for(_give_back(client, name, lease), RELEASE_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - the cycle is over and stored; its lease frees the slot
        _warn(f"could not give back the workspace slot {name} ({_line(exc)}); the server frees it when its "
              f"lease ends")


async def _give_back(client: Any, name: str, lease: Lease) -> None:
    """Release by lease when the server knows it; by name when it forgot a lease still valid (a restart
    with leases in memory leaves the slot counted and no lease to expire: it would be held for good)."""
    try:  # a server that lost the lease answers its release 204 and keeps the slot: ask first
        await client.renew_concurrency_lease(lease.id, lease_duration=MIN_LEASE_S)
    except httpx.HTTPStatusError as exc:
        if exc.response.status_code != GONE:
            raise
        if time.monotonic() < lease.valid_until:
            await client.release_concurrency_slots(names=[name], slots=1,
                                                   occupancy_seconds=max(time.monotonic() - lease.taken, 1.0))
            _warn(f"the Prefect server forgot the lease of {name} (restarted?); the slot was given back by name")
        return  # else it expired and the server took the slot back itself
    await client.release_concurrency_slots_with_lease(lease.id)


def _line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def _warn(message: str) -> None:
    try:
        get_run_logger().warning(message)
    except MissingContextError:  # outside a run (a tool, a test) or in the renewal thread
        logging.getLogger("gep.slot").warning(message)


async def _acquire(client: Any, name: str, timeout_s: float, holder: UUID | None, lease_s: float) -> UUID:
    deadline = time.monotonic() + timeout_s
    who = ConcurrencyLeaseHolder(type="flow_run", id=holder) if holder else None
    created = False
    while True:
        try:
            response = await client.increment_concurrency_slots_with_lease(
                names=[name], slots=1, mode="concurrency", lease_duration=lease_s, holder=who)
        except httpx.HTTPStatusError as exc:
            if exc.response.status_code != LOCKED:
                raise
            wait = min(float(exc.response.headers.get("Retry-After", 1.0)), RETRY_CAP_S)
            if time.monotonic() + wait > deadline:
                raise TimeoutError(f"{name} stayed held for {timeout_s:.0f} s") from None
            await asyncio.sleep(wait)
            continue
        lease = ConcurrencyLimitWithLeaseResponse.model_validate(response.json())
        if lease.limits:
            return lease.lease_id
        if created:
            raise RuntimeError(f"the concurrency limit {name} was created but cannot be taken")
        try:  # the first cycle on this workspace: the limit does not exist yet
            await client.create_global_concurrency_limit(GlobalConcurrencyLimitCreate(name=name, limit=1))
        except ObjectAlreadyExists:  # created at the same moment by another run
            pass
        created = True


def _renew(lease: Lease, stop: threading.Event, lease_s: float) -> None:
    """Renew the lease each time three quarters of it have passed, until the slot is given back."""
    while not stop.wait(lease_s * 0.75):
        try:
            with get_client(sync_client=True) as client:
                client.renew_concurrency_lease(lease.id, lease_duration=lease_s)
            lease.valid_until = time.monotonic() + lease_s
        except Exception as exc:  # noqa: BLE001 - this thread must keep renewing; the file lock still keeps cycles apart
            _warn(f"could not renew the workspace slot's lease ({_line(exc)})")
