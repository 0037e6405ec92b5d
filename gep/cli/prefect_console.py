"""What a flow run started from the terminal prints: Prefect's INFO lines ("Flow run 'pretty-skunk' - ...")
go to the run's logs in the UI, not to the terminal, unless the person asks for them (-v).

Only the console handler's level is raised (PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL, read when Prefect
configures its logging): the logs the UI shows keep their INFO lines. Set before Prefect is imported."""

from __future__ import annotations

import os
from typing import Annotated

import typer

CONSOLE_LEVEL = "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL"
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="Also print Prefect's log lines (INFO and up) "
                                          "on stderr; by default only warnings and errors, the rest is in the "
                                          "run's logs in the UI.")]


def quiet_prefect_console(verbose: bool) -> None:
    """Warnings and errors only on the terminal, unless ``verbose`` (or the person set the level already)."""
    if verbose:
        os.environ[CONSOLE_LEVEL] = "INFO"
        return
    os.environ.setdefault(CONSOLE_LEVEL, "WARNING")
