"""Which Prefect API a command's flow run reports to (`gep cycle`, `gep solidify`, `gep fleet --here`), and
the notes every command prints on stderr (``say``). Here, not in gep/cli/root.py, so that command modules
(gep/cli/fleet_cmd.py) use them without importing the root command line back.
"""

from __future__ import annotations

import os
import sys

from rich.console import Console

err = Console(stderr=True, soft_wrap=True)


def say(message: str) -> None:
    err.print(f"gep: {message}", markup=False, highlight=False)


def prefect_api_for_run() -> str:
    """The Prefect API this command's flow run reports to: the one this process's Prefect is already set up
    for (a library caller, tests), PREFECT_API_URL, or gep's background server, started if need be."""
    os.environ.setdefault("DO_NOT_TRACK", "1")  # no analytics from a flow run started here
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    if "prefect" in sys.modules:
        # deferred: flows/ imports Prefect (~1-2 s); here only when this process has already paid for it
        from flows.runtime import api_url_in_process

        url = api_url_in_process()
        if url:
            return url
    # deferred: gep.server imports pydantic and the Prefect API client (~0.15 s), which store-only commands skip
    from gep import server

    url = server.api_for_run(progress=say)
    os.environ["PREFECT_API_URL"] = url  # Prefect's own threads (logs, events) read it too
    return url
