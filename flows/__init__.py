"""Prefect flows around the engine (gep/). Prefect is only imported from here."""

import os

# A flow run with no server configured makes Prefect start a temporary one; on a fresh machine creating its
# database takes ~20 s on 2 cores, more than Prefect's default wait (20 s). `gep` itself always names a
# server (gep/server.py); this covers flows called from Python without one.
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
