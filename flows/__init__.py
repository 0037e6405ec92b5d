"""Prefect flows around the engine (gep/). Prefect is only imported from here.

The cycle: cycle.py (the flow), stage_tasks.py (each stage a task), states.py (the run's final state),
reporting.py (name, tags, artifacts), report_artifact.py (`gep report`'s charts as an artifact), review.py
(a review-mode pause), slot.py (one cycle at a time per workspace), solidify.py (`gep solidify`),
flowdef.py (how the flows are declared). Beside it: distill.py, feedback.py, fleet.py and fleet_launch.py
(`gep fleet`), serve.py (`gep serve`), runtime.py (how runs from the command line are configured),
threads.py (blocking calls awaited without holding the event loop), mcp_cycle.py (`gep mcp`'s gep_cycle,
a flow run in a child process).

Imports gep's library packages (core up to api and sessions); never the CLI (gep/cli/), which starts
these flows.
"""

import os

# A flow run with no server configured makes Prefect start a temporary one; on a fresh machine creating its
# database takes ~20 s on 2 cores, more than Prefect's default wait (20 s). `gep` itself always names a
# server (gep/server.py); this covers flows called from Python without one.
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
