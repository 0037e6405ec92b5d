"""The `gep` console script's entry point.

`gep capture` runs before every prompt a person submits (a Claude Code hook), so it is dispatched here,
before `gep.cli.root` imports typer and rich (~70 ms of the hook's ~0.1 s of CPU). Every other command goes to
`gep.cli.root.main`, with the garbage collector paused while it imports (gep/core/collector.py), but
`gep mcp`, whose client waits for the tools' listing: it goes to the server without typer and the commands.
"""

from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:2] == ["capture"] and not {"--help", "-h"} & set(sys.argv[2:]):  # help: typer prints it
        from gep.sessions.capture import main as capture_main

        sys.exit(capture_main(sys.argv[2:]))
    from gep.core.collector import pause_while_starting

    pause_while_starting()
    if sys.argv[1:2] == ["mcp"] and not {"--help", "-h"} & set(sys.argv[2:]):  # an MCP client waits for it
        from pydantic import BaseModel

        BaseModel.model_config["defer_build"] = True  # as the CLI does (gep/cli/root.py _defer_model_builds)
        from gep.sessions.mcp_server import main as mcp_main

        sys.exit(mcp_main(sys.argv[2:]))
    from gep.cli.root import main as cli_main

    cli_main()
