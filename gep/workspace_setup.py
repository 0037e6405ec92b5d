"""`gep init`'s files: a commented gep.toml written only where there is none (a person's own is never touched).

Every line but ``[gep]`` is a comment, so the file changes nothing until a line is uncommented: the defaults it
shows are the engine's own (gep/core/config.py), and a test loads the file with each line uncommented.
"""

from __future__ import annotations

import os
from pathlib import Path

from gep.core.config import CONFIG_FILE

CONFIG_TEMPLATE = """\
# gep's settings for this workspace (every field of gep/core/config.py:Settings can be set here;
# GEP_<NAME> environment variables and `gep cycle` options override them). Uncomment to change.
[gep]
# Who makes a cycle's change: "anthropic" (Claude through tools; needs ANTHROPIC_API_KEY), "command"
# (your agent CLI, agent_cmd below) or "prompt" (you, then `gep solidify`). Unset: anthropic when
# ANTHROPIC_API_KEY is set, else prompt.
# mutator = "command"
# agent_cmd = "claude -p --permission-mode acceptEdits"
# agent_timeout_s = 900

# What a cycle reads: logs, memory and the agent's session transcripts.
# log_globs = ["logs/**/*.log"]
# memory_file = "MEMORY.md"
# transcript_max_age_hours = 24

# Validation: this workspace's checks, run instead of each gene's own (empty: each gene's own), with
# the programs they may run; "auto" runs them in bubblewrap when it is installed.
# validation = ["python -m pytest -q"]
# command_allowlist = ["python", "python3", "pytest", "ruff", "mypy", "make", "node"]
# validation_timeout_s = 300
# sandbox = "auto"

# Files a change may never delete or empty (only append to).
# protected_paths = ["gep.toml", "MEMORY.md", "USER.md", "AGENTS.md", "CLAUDE.md", "SOUL.md"]

# Put cycles' commits on this branch instead of yours.
# branch = "gep/evolution"

# Claude's tokens per UTC day for Claude-driven cycles (unset: no cap).
# daily_token_budget = 200000

# "off": the plain engine, nothing learned steers selection (docs/evaluation.md).
# learning = "on"
"""


def write_config(workspace: Path) -> bool:
    """Write the commented gep.toml into ``workspace`` unless one is there; whether it was written.

    Created exclusively: a file that appears meanwhile (or a symlink named gep.toml) is never overwritten."""
    try:
        fd = os.open(workspace / CONFIG_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(CONFIG_TEMPLATE)
    return True
