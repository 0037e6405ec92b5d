"""One settings object: defaults < ``<workspace>/gep.toml`` (table ``[gep]`` or top level) < ``GEP_*`` env.

Every field can be set in gep.toml by its name, and from the environment as ``GEP_<NAME>`` (upper case;
lists as comma-separated values). ``ANTHROPIC_API_KEY`` and ``GEP_DATABASE_URL`` are read as is.

Every number is finite and in a stated range (nan, inf, a negative timeout or a tail of terabytes is a
one-line ConfigError naming the setting), and gep.toml must be a regular file of at most 1 MB in the
workspace: a FIFO there would block every command, a symlink to ``/dev/zero`` would fill the memory.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from gep.core import constants
from gep.core.errors import ConfigError, WorkspaceError
from gep.core.safe_files import Unreadable, printable, read_text_capped

GEP_DIR = ".gep"
CONFIG_FILE = "gep.toml"

# npm and npx are off by default: `npm run`/`npm exec`/`npx` run any script or package (see gep/validation/allowlist.py)
DEFAULT_ALLOWLIST = ["python", "python3", "pytest", "ruff", "mypy", "make", "node"]
# what `python -m` may run (gep/validation/allowlist.py refuses debuggers and code runners even when listed)
DEFAULT_PYTHON_MODULES = ["pytest", "unittest", "compileall", "py_compile", "doctest", "mypy", "ruff", "pyflakes",
                          "flake8", "pylint", "black", "isort"]
# the agent's memory and instruction files: never deleted or emptied, only appended to (gep/cycle/checks.py)
DEFAULT_PROTECTED = [CONFIG_FILE, "MEMORY.md", "USER.md", "AGENTS.md", "CLAUDE.md", "SOUL.md"]
DEFAULT_VALIDATION = ["python -m compileall -q .", "python -m pytest -q"]
DEFAULT_ENV_DIRS = [".venv", "venv", "node_modules", ".tox"]

# Ranges every numeric setting falls in (tests/test_inputs_cycle.py checks that each field has one).
# Counts and limits that are only compared against:
Count = Annotated[int, Field(ge=0, le=10**12)]
# ... that size a buffer or a read: a typo must not allocate terabytes
TailBytes = Annotated[int, Field(ge=0, le=constants.SETTINGS_MAX_TAIL_BYTES)]
Chars = Annotated[int, Field(ge=0, le=constants.SETTINGS_MAX_TAIL_BYTES)]
Seconds = Annotated[float, Field(gt=0, le=constants.SETTINGS_MAX_TIMEOUT_S)]  # a timeout: 0 or less disables nothing
Hours = Annotated[float, Field(ge=0, le=24 * 366 * 100)]
Share = Annotated[float, Field(ge=0.0, le=1.0)]
# what `learning_off` can name (gep/core/learning_switch.py says what each one gates)
LearningMechanism = Literal["memory_graph", "feedback", "bans", "verdicts", "lessons", "capsules", "recent_outcomes",
                            "drift", "dominance_cap", "avoid", "problem_memory", "context"]


class Settings(BaseModel):
    # allow_inf_nan=False: a nan timeout compares false with everything, so it silently disables the timeout
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    # store
    database_url: str | None = None
    # a fleet sharing one database: offer other workspaces' capsules to this one's selection
    share_capsules: bool = False
    # ... and other workspaces' genes (imported, automatic, distilled): off, a workspace selects its own only
    share_genes: bool = False
    # prune this workspace's store after each cycle (gep.store.after_cycle): keep the newest N events
    # and/or those younger than N days (unset: never prune; `gep store prune` does it on demand)
    prune_keep_events: int | None = Field(default=None, ge=0, le=10**9)
    prune_keep_days: float | None = Field(default=None, ge=0, le=36_500)

    # sources
    log_globs: list[str] = Field(default_factory=lambda: ["logs/**/*.log"])
    memory_dir: str = "memory"
    memory_file: str = "MEMORY.md"
    user_file: str = "USER.md"
    transcript_globs: list[str] = Field(
        # {claude_project}: where Claude Code keeps this workspace's sessions (see gep/signals/sources.py)
        default_factory=lambda: ["sessions/**/*.jsonl", ".claude/projects/**/*.jsonl", "{claude_project}/*.jsonl"]
    )
    log_tail_bytes: TailBytes = constants.LOG_TAIL_BYTES
    memory_tail_bytes: TailBytes = constants.MEMORY_TAIL_BYTES
    user_tail_bytes: TailBytes = constants.USER_TAIL_BYTES
    transcript_tail_bytes: TailBytes = constants.TRANSCRIPT_TAIL_BYTES
    # sessions last written longer ago are not read (stale talk is not a signal); 0: no limit
    transcript_max_age_hours: Hours = constants.TRANSCRIPT_MAX_AGE_HOURS
    max_source_files: int = Field(default=constants.MAX_SOURCE_FILES, ge=0, le=1000)

    # selection and strategy
    strategy: str | None = None
    ban_cycles: int = Field(default=constants.BAN_CYCLES, ge=0, le=100_000)
    dominance_share: Share = constants.DOMINANCE_SHARE
    dominance_window: int = Field(default=constants.DOMINANCE_WINDOW, ge=1, le=100_000)
    # feedback (seed 003): share of a gene's rank taken by its usefulness score; the rest is the memory
    # graph's expected success. Keep it low: a heavy weight makes a filter bubble (drift and the dominance
    # cap still apply)
    usefulness_weight: Share = constants.USEFULNESS_WEIGHT

    # learning (gep/core/learning_switch.py): "off" is the plain engine (selection by signal match, drift and the
    # dominance cap; nothing learned reaches selection or the prompt); learning_off switches single mechanisms off
    learning: Literal["on", "off"] = "on"
    learning_off: list[LearningMechanism] = Field(default_factory=list)
    # experimental mechanisms (learning_switch.EXPERIMENTAL: not shown to help in their evaluation world) are off
    # unless named here (issue 41)
    learning_on: list[LearningMechanism] = Field(default_factory=list)
    # share of cycles and of agent sessions drawn at random to run without what was learned (learning "off", no
    # session context), marked meta.holdout: `gep report` measures learning's effect here from them (gep/eval/effect.py)
    holdout: Share = 0.0
    # every new warning line of the logs read drives repair like an error line (gep/signals/warning_lines.py):
    # the skeptic's memoryless baseline of the evaluation (bench/evolution.py arm off_warnings); off by default
    warning_signals: bool = False

    # lessons (seed 004): recalled for the prompt by recency and strength
    lesson_recency_weight: Share = constants.LESSON_RECENCY_WEIGHT
    lesson_limit: int = Field(default=constants.LESSON_RECALL_LIMIT, ge=0, le=10_000)
    lesson_prompt_chars: Chars = constants.LESSON_PROMPT_CHARS
    # the context a new agent session receives (gep capture's SessionStart answer, `gep context`)
    context_chars: Chars = constants.CONTEXT_CHARS
    # unresolved conflicts on one topic that make the next cycle on it ask for a synthesis
    lesson_synthesis_threshold: int = Field(default=constants.LESSON_SYNTHESIS_THRESHOLD, ge=1, le=10_000)
    # tokens Claude-driven (anthropic mutator) cycles of this workspace may use per UTC day, as the mutator's
    # metrics count them; once spent, such cycles are skipped with the reason until the next day (unset: no cap)
    daily_token_budget: int | None = Field(default=None, ge=0, le=10**12)

    # solidify
    hard_cap_files: Count = constants.HARD_CAP_FILES
    hard_cap_lines: Count = constants.HARD_CAP_LINES
    hard_cap_bytes: Count = 2_000_000  # bytes added + deleted per cycle (2 MB)
    protected_paths: list[str] = Field(default_factory=lambda: list(DEFAULT_PROTECTED))
    command_allowlist: list[str] = Field(default_factory=lambda: list(DEFAULT_ALLOWLIST))
    python_modules: list[str] = Field(default_factory=lambda: list(DEFAULT_PYTHON_MODULES))
    # validation, the canary and the model's run_validation (gep/validation/sandbox.py): "auto" confines them with
    # bubblewrap when it is installed; "bwrap" requires it; "none" runs them unconfined (the user's choice)
    sandbox: Literal["auto", "bwrap", "none"] = "auto"
    sandbox_memory_mb: int = Field(default=4096, ge=0, le=2**30)  # 0: no limit
    sandbox_max_processes: int = Field(default=512, ge=0, le=2**22)  # 0: no limit
    max_output_bytes: int = Field(default=16 * 1024 * 1024, ge=1024, le=2**40)  # a command printing more is killed
    # extra environment variables validation receives (credential-like names and values are dropped anyway)
    validation_env: list[str] = Field(default_factory=list)
    validation_timeout_s: Seconds = constants.VALIDATION_TIMEOUT_S
    # this workspace's validation commands, run instead of every gene's own (empty: each gene's own); for a
    # machine where a gene's checks cannot run (pytest not installed ...)
    validation: list[str] = Field(default_factory=list)
    output_cap_chars: Chars = constants.OUTPUT_CAP_CHARS
    canary: str = "compileall"  # "compileall" (byte-compile changed .py files), "none", or a command
    lock_timeout_s: float = Field(default=constants.LOCK_TIMEOUT_S, ge=0, le=constants.SETTINGS_MAX_TIMEOUT_S)  # 0: try once
    branch: str | None = None

    # git isolation (gep/git/): folders the checks need that git ignores, linked read-only into a cycle's
    # clone; the largest uncommitted file of a person's that prompt mode copies (bigger: not restorable);
    # how many times a cycle's commit is rebased onto a moving branch before it is kept on gep/<event>
    env_dirs: list[str] = Field(default_factory=lambda: list(DEFAULT_ENV_DIRS))
    snapshot_copy_max_bytes: int = Field(default=64 * 1024 * 1024, ge=0, le=2**40)
    max_rebases: int = Field(default=3, ge=0, le=20)

    # prompt and mutators
    mutator: str | None = None
    model: str = "claude-sonnet-4-6"
    max_turns: int = Field(default=constants.MAX_TURNS, ge=1, le=10_000)
    max_tokens_per_cycle: Count = constants.MAX_TOKENS_PER_CYCLE
    prompt_context_chars: Chars = constants.PROMPT_CONTEXT_CHARS
    agent_cmd: str | None = None
    agent_timeout_s: Seconds = constants.AGENT_TIMEOUT_S
    cycle_timeout_s: Seconds = constants.CYCLE_TIMEOUT_S  # a whole cycle: past it, it fails and its change is saved

    # gene pool (issue 16)
    # validation for genes the engine writes (automatic and distilled genes): the seed genes' Python defaults
    default_validation: list[str] = Field(default_factory=lambda: list(DEFAULT_VALIDATION))
    distill_min_capsules: int = Field(default=10, ge=1, le=10**6)  # fewer successful capsules: nothing to distil yet
    distill_min_score: Share = 0.7  # a capsule succeeded at this outcome score or more
    distill_interval_hours: Hours = 24.0  # at most one distillation attempt per this many hours
    # behavioural signals (gep/signals/behavior.py; the Claude pass, gep/signals/claude_pass.py, needs ANTHROPIC_API_KEY)
    llm_signals: bool = False  # ask Claude about the exchanges the rules found nothing in
    llm_signals_every: int = Field(default=10, ge=0, le=10**6)  # ... and about every new exchange on every Nth cycle (0: never)
    llm_signals_token_budget: Count = 20_000  # tokens the Claude pass may use in one cycle

    # prefect
    ui_url: str | None = None

    @field_validator("env_dirs")
    @classmethod
    def _relative_dirs(cls, value: list[str]) -> list[str]:
        for name in value:
            parts = PurePosixPath(name.strip()).parts
            if not parts or name.strip().startswith("/") or ".." in parts or ".git" in parts or "\n" in name:
                raise ValueError(f"{name!r} is not a folder inside the workspace")
        return value


# Settings that widen what a cycle may run or change. Read once, when the cycle starts (before any mutator,
# whose change may edit gep.toml); a prompt-mode cycle keeps them on its run record for `gep solidify`.
WIDENING = ("command_allowlist", "python_modules", "sandbox", "sandbox_memory_mb", "sandbox_max_processes",
            "max_output_bytes", "validation_env", "validation_timeout_s", "validation", "output_cap_chars", "canary",
            "hard_cap_files", "hard_cap_lines", "hard_cap_bytes", "protected_paths", "env_dirs")


class RunLimits(BaseModel):
    """The widening settings of one cycle, as read when it started (values of :data:`WIDENING`)."""

    model_config = ConfigDict(extra="ignore")

    values: dict[str, Any] = Field(default_factory=dict)  # JSON edge: Settings field -> value, revalidated on use

    @classmethod
    def of(cls, settings: Settings) -> RunLimits:
        return cls(values=settings.model_dump(include=set(WIDENING), mode="json"))

    def apply(self, settings: Settings) -> Settings:
        """``settings`` with these limits in place of whatever gep.toml says now."""
        known = {k: v for k, v in self.values.items() if k in WIDENING}
        return Settings.model_validate({**dict(settings), **known})  # validated again: the values are JSON


_LIST_FIELDS = {name for name, f in Settings.model_fields.items() if "list" in str(f.annotation)}
_ENV_ALIASES = {"database_url": "GEP_DATABASE_URL", "ui_url": "PREFECT_UI_URL"}


def _from_env(env: Mapping[str, str]) -> dict[str, Any]:  # JSON edge: raw values, validated by Settings
    out: dict[str, Any] = {}  # JSON edge: setting name -> value as the environment spells it
    for name in Settings.model_fields:
        key = _ENV_ALIASES.get(name, "GEP_" + name.upper())
        if key in env and env[key] != "":
            raw = env[key]
            out[name] = [p.strip() for p in raw.split(",") if p.strip()] if name in _LIST_FIELDS else raw
    return out


def _from_toml(path: Path) -> dict[str, Any]:  # JSON edge: the file's values, validated by Settings
    """gep.toml's settings ({} when there is none); a ConfigError when it cannot be used."""
    where = printable(path)
    try:
        text = read_text_capped(path, constants.CONFIG_FILE_MAX_BYTES, within=path.parent)
    except FileNotFoundError:
        return {}
    except UnicodeDecodeError:
        raise ConfigError(f"{where}: not UTF-8 text") from None
    except Unreadable as exc:  # a FIFO, a device, a symlink out, too large
        raise ConfigError(f"{where}: not read: {exc.reason}") from None
    except OSError as exc:
        raise ConfigError(f"{where}: cannot be read ({exc.strerror or type(exc).__name__})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{where}: not valid TOML ({exc})") from None
    table = data.get("gep", data)
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: [gep] must be a table")
    return {k.replace("-", "_"): v for k, v in table.items()}


def load_settings(
    workspace: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    **overrides: Any,
) -> Settings:
    """Settings for a workspace. Overrides (e.g. CLI flags) win; None-valued overrides are ignored."""
    env = os.environ if env is None else env
    values: dict[str, Any] = {}  # JSON edge: gep.toml then environment, validated by Settings
    if workspace is not None:
        values.update(_from_toml(Path(workspace) / CONFIG_FILE))
    values.update(_from_env(env))
    values.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return Settings(**values)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        raise ConfigError(f"setting '{field}': {err['msg']}") from None


def validation_commands(settings: Settings, gene_validation: list[str]) -> list[str]:
    """What validates a change: the workspace's ``validation`` setting when set, else the gene's own."""
    return list(settings.validation) if settings.validation else list(gene_validation)


def gep_dir(workspace: Path | str) -> Path:
    """``<workspace>/.gep``. A ``.gep`` that is a symlink leaving the workspace is refused, never followed:
    the engine's state (store, clones, patches) would be written wherever it points (issue 32)."""
    d = Path(workspace) / GEP_DIR
    if d.is_symlink():
        root, target = Path(workspace).resolve(), d.resolve()
        if root not in target.parents:
            raise WorkspaceError(f"{d} is a symlink to {target}, outside the workspace: the engine's state is not "
                                 f"written there; make {GEP_DIR} a folder (or remove the link)")
    return d
