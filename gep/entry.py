"""The `gep` console script's entry point.

`gep capture` runs before every prompt a person submits (a Claude Code hook), so it is dispatched here,
before `gep.cli.root` imports typer and rich (~70 ms of the hook's ~0.1 s of CPU). Every other command goes to
`gep.cli.root.main`, with the garbage collector paused while it imports (gep/core/collector.py).
"""

from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:2] == ["capture"] and not {"--help", "-h"} & set(sys.argv[2:]):  # help: typer prints it
        from gep.sessions.capture import main as capture_main

        sys.exit(capture_main(sys.argv[2:]))
    from gep.core.collector import pause_while_starting

    pause_while_starting()
    from gep.cli.root import main as cli_main

    cli_main()
