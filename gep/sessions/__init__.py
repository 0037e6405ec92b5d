"""The agent's own sessions: the Claude Code hooks (``gep capture`` on each prompt, the context at
session start; ``hooks`` installs them for `gep init`), what an agent is told (agent_context, its cache) and
whether it helped (injections); the MCP server an agent asks mid-task (``gep mcp``: mcp_server, its answers
mcp_answers and models mcp_models; its cycle is a flow run in flows/mcp_cycle.py); the Claude Code plugin's
parts a workspace installs (claude_plugin, ``gep init --claude``).

capture.py (``gep capture``: the behavioural signals of one prompt, live), session_start.py (the context
a new agent session receives; what it is built from: gep/learning/agent_context.py, its cache
gep/learning/context_cache.py, and gep/learning/injections.py), hooks.py (installing the hooks for
`gep init`), mcp_server.py, mcp_answers.py and mcp_models.py (`gep mcp`), claude_plugin.py
(`gep init --claude`).

May import every package below it and gep.api; never the CLI, flows/ or Prefect.
"""
