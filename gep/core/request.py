"""What a user asks of one cycle: the typed request the CLI builds and the cycle flow takes as its parameter.

Prefect draws the flow's Run form from these models, so each field the form shows has a type (the
mutator and the strategy are choices), a description and a default; ``auto`` leaves the choice to
gep.toml and the environment. Fields only the engine sets (a scheduled tick, the flow run's id, the
commit subject when finishing) are left out of the form. A bad value is a one-line ConfigError
(:func:`parse_request`), never a pydantic report.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, get_args

from pydantic import BaseModel, Field, ValidationError, field_validator
from pydantic.json_schema import SkipJsonSchema

from gep.core.errors import ConfigError

AUTO = "auto"
Mutator = Literal["auto", "anthropic", "command", "prompt"]
Strategy = Literal["auto", "balanced", "innovate", "harden", "repair-only", "early-stabilize", "steady-state"]


def chosen(value: str) -> str | None:
    """The mutator or strategy the request names; None for ``auto`` (gep.toml, the environment decide)."""
    return None if value == AUTO else value


def _choice(value: Any, choices: object, what: str) -> Any:
    if value is None:
        return AUTO
    if not isinstance(value, str):
        return value  # pydantic refuses it in its own words
    name = value.strip().lower() or AUTO
    name = name.replace("_", "-") if what == "strategy" else name
    valid = get_args(choices)
    if name not in valid:
        listed = ", ".join(v for v in valid if v != AUTO)
        raise ValueError(f"unknown {what} '{value.strip()}'; valid: {listed} (or {AUTO})")
    return name


class ScheduledRequest(BaseModel):
    """What a scheduled cycle is asked: the workspace and who changes it how."""

    workspace: Path = Field(description="Path of the workspace (a git repository with at least one commit) on "
                                        "the worker's machine.")
    mutator: Mutator = Field("auto", description="Who makes the change: anthropic (Claude through tools; needs "
                             "ANTHROPIC_API_KEY), command (an external agent CLI, see agent_cmd) or prompt "
                             "(writes the GEP prompt and waits for `gep solidify`). auto: anthropic when "
                             "ANTHROPIC_API_KEY is set, else prompt (or gep.toml's).")
    strategy: Strategy = Field("auto", description="Strategy preset: balanced, innovate, harden, repair-only, "
                               "early-stabilize or steady-state. auto: chosen from GEP_STRATEGY, early cycles and "
                               "saturation (or gep.toml's).")
    agent_cmd: str | SkipJsonSchema[None] = Field(None, description="The external agent command for mutator "
                                                  "command, e.g. \"claude -p\" (split like a shell would, run "
                                                  "without a shell; the prompt arrives on stdin and in "
                                                  "GEP_PROMPT_FILE). Empty: gep.toml's.")

    @field_validator("workspace", mode="before")
    @classmethod
    def _workspace(cls, value: Any) -> Any:
        if isinstance(value, str) and (not value.strip() or "{{" in value):
            # Path("") is ".", a worker's working directory (the engine's own checkout): never evolve that
            raise ValueError("parameter 'workspace' is empty: deploy with GEP_WORKSPACE=/path/to/workspace or "
                             "fill in the workspace field of the Run form")
        return Path(value.strip()).expanduser() if isinstance(value, str) else value

    @field_validator("mutator", mode="before")
    @classmethod
    def _mutator(cls, value: Any) -> Any:
        return _choice(value, Mutator, "mutator")

    @field_validator("strategy", mode="before")
    @classmethod
    def _strategy(cls, value: Any) -> Any:
        return _choice(value, Strategy, "strategy")

    @field_validator("agent_cmd", mode="before")
    @classmethod
    def _blank_is_none(cls, value: Any) -> Any:
        return (value.strip() or None) if isinstance(value, str) else value


class CycleRequest(ScheduledRequest):
    """What a user (CLI, the Run form, a schedule, the library) asks of one cycle, or of finishing one."""

    abandon_pending: bool = Field(False, description="Give up a cycle still awaiting changes (its change saved "
                                  "as a patch under .gep/rescued/) and record it as abandoned, then run.")
    branch: str | SkipJsonSchema[None] = Field(None, description="Commit on this evolution branch instead of the "
                                               "current one (a cycle made in a clone). Empty: the current branch.")
    review: bool = Field(False, description="Pause for approval in the Prefect UI after validation passes, "
                         "before committing.")
    seed: Annotated[int, Field(ge=0)] | SkipJsonSchema[None] = Field(None, description="Random seed for selection and mutation, to "
                                             "replay a cycle (its event's meta.seed). Empty: random.")
    llm_signals: bool = Field(False, description="Also ask Claude for behavioural signals in the exchanges the "
                              "rules found nothing in (needs ANTHROPIC_API_KEY). Off: as llm_signals in the "
                              "workspace's gep.toml.")
    # set by the engine, not offered on the form
    drift: SkipJsonSchema[bool] = False
    scheduled: SkipJsonSchema[bool] = False  # a scheduled tick: under steady state most ticks are skipped
    summary: SkipJsonSchema[str | None] = None  # finishing a pending cycle: the commit subject
    flow_run_id: SkipJsonSchema[str | None] = None

    @field_validator("branch", mode="before")
    @classmethod
    def _blank_branch(cls, value: Any) -> Any:
        return (value.strip() or None) if isinstance(value, str) else value


R = TypeVar("R", bound=BaseModel)


def parse_request(model: type[R], value: Any) -> R:
    """``value`` (a model, or its fields as a dict) as ``model``; a bad field is one ConfigError line."""
    if isinstance(value, model):
        return value
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        raise ConfigError(error_line(exc)) from None


def error_line(exc: ValidationError) -> str:
    """The first problem of ``exc`` in one line: our own words when a validator said it, else pydantic's."""
    err = exc.errors()[0]
    if err["type"] == "value_error":
        return str(err["ctx"]["error"])
    field = err["loc"][0] if err["loc"] else "request"  # a field's name, not the union member that failed
    return f"parameter '{field}': {err['msg']}"
