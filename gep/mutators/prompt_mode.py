"""Prompt mode: a human (or any agent) makes the change; the engine only writes the prompt.

The prompt goes to ``.gep/prompts/<cycle>.md`` and the cycle is recorded as awaiting changes;
``gep solidify --workspace DIR`` later checks and commits or rolls back what was changed in between.
"""

from __future__ import annotations

from pathlib import Path

from gep.core.sanitize import redact
from gep.mutators.base import MutationRequest, MutatorResult, write_prompt_file


class PromptMutator:
    name = "prompt"

    def apply(self, req: MutationRequest) -> MutatorResult:
        try:
            path = write_prompt_file(req)
        except OSError as exc:
            return MutatorResult(status="error", error=redact(f"cannot write the prompt file: {exc}"))
        return MutatorResult(
            status="awaiting_changes",
            summary=f"prompt written to {_shown(path, req.work_tree)}",
            rationale="make the change the prompt describes, then run "
                      f"`gep solidify --workspace {req.work_tree}` to validate and commit it (or `gep solidify --abandon` to "
                      "give it up, saved as a patch)",
            prompt_file=str(path),
        )


def _shown(path: Path, workspace: Path) -> str:
    try:
        return path.relative_to(workspace).as_posix()
    except ValueError:
        return str(path)
