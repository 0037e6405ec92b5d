"""The agent's own sessions: the Claude Code hooks (``gep capture`` on each prompt, the context at
session start; ``hooks`` installs them for `gep init`), what an agent is told (agent_context, its cache) and whether it helped (injections).

May import every package below it and gep.api; never the CLI, flows/ or Prefect.
"""
