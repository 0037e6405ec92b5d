"""The one interface every way of applying a mutation implements.

A mutator gets the prompt and the workspace, changes files (or, in prompt mode, asks someone else to),
and reports what happened. It never commits or rolls back: solidify does that. ``apply`` never raises for
a failure of the model, the agent or the network; those come back as ``status == "error"`` with a
one-line ``error``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from gep.core import constants
from gep.core.config import GEP_DIR, Settings
from gep.core.models import Gene
from gep.core.records import MutatorMetrics as MutatorMetrics
from gep.core.records import MutatorResult as MutatorResult
from gep.core.records import MutatorStatus as MutatorStatus
from gep.core.sanitize import redact
from gep.mutators.gep_prompt import GepPrompt, render_markdown
from gep.validation.sandbox import ChangeOrigin


class MutationRequest(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    # where the change is made: the cycle's clone (``clone_dir``), or (prompt mode) the workspace itself
    work_tree: Path
    state_dir: Path | None = None  # the engine's .gep/ (the prompt file goes there); default: work_tree/.gep
    origin: ChangeOrigin = "model"  # who makes the change: the sandbox of the model's run_validation tool
    cycle_id: str
    prompt: GepPrompt
    gene: Gene
    settings: Settings
    forbidden_paths: list[str] = Field(default_factory=list)  # gene forbidden + .git + .gep + protected
    validation_commands: list[str] = Field(default_factory=list)
    deadline: float | None = None  # time.monotonic() by which the change must be made (cycle_timeout_s)


@runtime_checkable
class Mutator(Protocol):
    name: str

    def apply(self, req: MutationRequest) -> MutatorResult: ...


def one_line(text: str, limit: int = 300) -> str:
    """First non-empty line of ``text``, redacted and bounded (errors and summaries)."""
    for line in str(text).splitlines():
        if line.strip():
            line = redact(line.strip())
            return line if len(line) <= limit else line[: limit - 3] + "..."
    return ""


def bounded_output(text: str, limit: int = constants.AGENT_OUTPUT_CHARS) -> str:
    """Redacted ``text`` cut to ``limit`` characters, keeping its end (where agents report)."""
    text = redact(text)
    if len(text) <= limit:
        return text
    marker = "[... output truncated ...]\n"
    return marker + text[len(text) - (limit - len(marker)):]


def prompt_path(state_dir: Path, cycle_id: str) -> Path:
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in cycle_id) or "cycle"
    return Path(state_dir) / "prompts" / f"{safe}.md"


def write_prompt_file(req: MutationRequest) -> Path:
    """Write ``.gep/prompts/<cycle>.md`` in the engine's own directory (the user's, never inside a clone,
    where it would be part of the change) and return its path."""
    path = prompt_path(req.state_dir or Path(req.work_tree) / GEP_DIR, req.cycle_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_markdown(req.prompt), encoding="utf-8")
    return path
