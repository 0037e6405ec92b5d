"""How flow runs started from the `gep` command line are configured."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from typing import Any

from prefect.client.schemas.objects import State
from prefect.context import SettingsContext, get_settings_context
from prefect.settings import get_current_settings, temporary_settings

from gep.cycle.interrupt import interrupt_stops_the_cycle, stop_now


def api_url_in_process() -> str | None:
    """The API this process's Prefect settings point at (a test harness, a library caller), if any."""
    url = get_current_settings().api.url
    return str(url) if url else None


@contextmanager
def foreground_run(api_url: str | None = None) -> Iterator[None]:
    """Settings for a flow run in the user's own terminal process: this API, no heartbeat thread.

    Heartbeats let a server notice a crashed run that nobody watches, so deployments (worker, `gep serve`)
    keep them. Here the user watches the process; after a crash, `gep recover` (or the next cycle) restores
    the workspace either way. ``api_url`` is always set by the CLI, so Prefect never falls back to a
    temporary server of its own.

    A plain-http API (gep's local server) has no TLS to verify, yet each Prefect client parses the whole CA
    bundle for it (~26 ms; a flow run makes three clients): for such an API, Prefect's clients skip it. An
    https API keeps its verification.

    The CLI sets PREFECT_API_URL before Prefect is imported, so only those fields differ from the settings
    Prefect already built: they are copied in (validating and rebuilding every setting, as
    temporary_settings does, takes ~0.1 s). Another API (a library caller) takes the validated path.
    """
    current = get_settings_context()
    url = api_url or str(current.settings.api.url or "")
    no_tls = url.startswith("http://")
    if api_url and current.settings.api.url != api_url:
        updates: dict[str, Any] = {"flows.heartbeat_frequency": None, "api.url": api_url}
        with temporary_settings(updates={**updates, "api.tls_insecure_skip_verify": True} if no_tls else updates):
            yield
        return
    # None is a valid value (no heartbeats), and no other setting is derived from these two
    flows = current.settings.flows.model_copy(update={"heartbeat_frequency": None})
    api = current.settings.api.model_copy(update={"tls_insecure_skip_verify": True}) if no_tls else current.settings.api
    with SettingsContext(profile=current.profile,
                         settings=current.settings.model_copy(update={"flows": flows, "api": api})):
        yield


def run_flow(call: Coroutine[Any, Any, State]) -> State:
    """Run an async flow call (``return_state=True``) to its final state from sync code. Ctrl-C and SIGTERM stop
    it at once, in one line, its workspace slots given back (gep/cycle/interrupt.py), never after the change is
    committed."""
    with interrupt_stops_the_cycle(), _prefect_sigterm_stops_too():
        return asyncio.run(call)


@contextmanager
def _prefect_sigterm_stops_too() -> Iterator[None]:
    """Prefect's engine puts its own SIGTERM handler in place while a flow runs; it raises TerminationSignal in
    whatever the main thread runs: from the event loop of `gep fleet --here` that was a traceback, after asyncio
    had waited for the stage in its worker thread. For a run from the command line its handler is ours: the
    engine installs what this name holds when the flow starts (a deployment's runs are not started here)."""
    import prefect.utilities.engine as engine

    previous = engine._prefect_sigterm_handler
    engine._prefect_sigterm_handler = stop_now  # type: ignore[assignment]
    try:
        yield
    finally:
        engine._prefect_sigterm_handler = previous


def drain(timeout_s: float = 10.0) -> None:
    """Send what Prefect's log and event workers still hold to the server (they do it at exit otherwise)."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=timeout_s)
    EventsWorker.drain_all(timeout=timeout_s)
