"""How flow runs started from the `gep` command line are configured."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from prefect.settings import temporary_settings


@contextmanager
def foreground_run() -> Iterator[None]:
    """Settings for a flow run in the user's own terminal process: no heartbeat thread.

    Heartbeats let a server notice a crashed run that nobody watches, so deployments (worker, `gep serve`)
    keep them. Here the user watches the process, and a sync flow would otherwise spend up to a second
    joining that thread at the end. After a crash, `gep recover` (or the next cycle) restores the workspace
    either way.
    """
    with temporary_settings(updates={"flows.heartbeat_frequency": None}):
        yield
