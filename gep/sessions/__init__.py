"""The agent's own sessions: the Claude Code hooks (``gep capture`` on each prompt, the context at
session start), what an agent is told (agent_context, its cache) and whether it helped (injections).

capture.py (``gep capture``: the behavioural signals of one prompt, live), session_start.py (the context
a new agent session receives; what it is built from: gep/learning/agent_context.py, its cache
gep/learning/context_cache.py, and gep/learning/injections.py).

May import every package below it and gep.api; never the CLI, flows/ or Prefect.
"""
