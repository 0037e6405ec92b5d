"""Ways of applying a mutation, behind one interface (``Mutator.apply``, base.py).

- ``anthropic`` (anthropic_mutator.py): Claude edits the workspace through tools (tools.py; needs
  ANTHROPIC_API_KEY).
- ``command`` (command.py): the user's own agent CLI (``agent_cmd``), prompt on stdin and in GEP_PROMPT_FILE.
- ``prompt`` (prompt_mode.py): the prompt is written for a human or agent; ``gep solidify`` finishes the
  cycle later.

The prompt's static protocol text, apart from each cycle's context: gep_prompt.py.

Imports core/, git/, validation/, signals/, learning/ and genes/; never assets/, report/, a
cycle or the CLI.
"""

from __future__ import annotations

from collections.abc import Mapping

from gep.core.config import Settings
from gep.core.errors import ConfigError
from gep.mutators.base import MutationRequest, Mutator, MutatorMetrics, MutatorResult

MUTATORS = ("anthropic", "command", "prompt")

__all__ = ["MUTATORS", "Mutator", "MutatorMetrics", "MutatorResult", "MutationRequest", "default_mutator",
           "get_mutator"]


def default_mutator(env: Mapping[str, str]) -> str:
    return "anthropic" if env.get("ANTHROPIC_API_KEY") else "prompt"


def get_mutator(name: str | None, settings: Settings, env: Mapping[str, str]) -> Mutator:
    """The mutator called ``name`` (None: settings.mutator, then anthropic if a key is set, else prompt)."""
    chosen = (name or settings.mutator or default_mutator(env)).strip().lower()
    if chosen == "anthropic":
        from gep.mutators.anthropic_mutator import AnthropicMutator

        return AnthropicMutator(settings, env)
    if chosen == "command":
        from gep.mutators.command import CommandMutator

        return CommandMutator(settings, env)
    if chosen == "prompt":
        from gep.mutators.prompt_mode import PromptMutator

        return PromptMutator()
    raise ConfigError(f"unknown mutator '{name or settings.mutator}'; valid: {', '.join(MUTATORS)}")
