"""Opening a cycle: the request checked, the workspace, its settings and store, the lock, crash recovery.

:func:`open_cycle` is the one way in, for a new cycle and for finishing one that awaits changes
(``resume=True``); ``check_only=True`` finds what it would refuse without taking the lock or recording
anything (the CLI calls it before starting Prefect). The context carries the clock, the environment and
the seed, so every stage reads time, settings and randomness from one place and a cycle can be replayed.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from gep.config import Settings, load_settings
from gep.errors import ConfigError, PendingCycleError, WorkspaceError
from gep.llm_signals import check_llm_settings
from gep.models import CycleRun, EvolutionEvent, Outcome, OutcomeStatus, utc_now
from gep.mutators import MUTATORS, default_mutator
from gep.mutators.command import split_command
from gep.solidify import ReviewRequest
from gep.store import Store
from gep.strategy import resolve_strategy
from gep.workspace import Workspace, recover

Clock = Callable[[], datetime]
Approve = Callable[[ReviewRequest], bool]


class CycleRequest(BaseModel):
    """What a user (CLI, Prefect form, schedule) asks of one cycle, or of finishing a pending one."""

    workspace: Path
    mutator: str | None = None
    strategy: str | None = None
    agent_cmd: str | None = None
    allow_dirty: bool = False
    abandon_pending: bool = False
    branch: str | None = None
    review: bool = False
    drift: bool = False
    seed: int | None = None
    scheduled: bool = False  # a scheduled tick: under steady state most ticks are skipped
    llm_signals: bool | None = None  # the Claude signal pass (gep/llm_signals.py); None: as gep.toml says
    summary: str | None = None  # finishing a pending cycle: the commit subject
    flow_run_id: str | None = None


class CycleContext(BaseModel):
    """What the stages of one cycle share. Lives only for the cycle (holds the lock and the store)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    request: CycleRequest
    settings: Settings
    workspace: Workspace
    store: Store
    event_id: str
    cycle_number: int
    seed: int
    started_at: datetime
    clock: Clock = utc_now
    env: Mapping[str, str] = Field(default_factory=dict)
    stack: ExitStack = Field(default_factory=ExitStack)
    run: CycleRun | None = None
    recovered: list[str] = Field(default_factory=list)
    approve: Approve | None = None  # review mode: asked before committing (the flow pauses for a person)

    def rng(self, stage: str) -> random.Random:
        """A per-stage RNG derived from the cycle seed, so stages replay independently."""
        return random.Random(f"{self.seed}:{stage}")

    @property
    def branch(self) -> str | None:
        return self.request.branch or self.settings.branch

    def close(self) -> None:
        self.stack.close()


def new_event_id(now: datetime) -> str:
    """``evt_<ms>_<rand>``: ordered by time like the reference's ids, unique across processes."""
    return f"evt_{int(now.timestamp() * 1000)}_{os.urandom(3).hex()}"


def pending_message(ws_path: Path, event_id: str) -> str:
    return (f"cycle {event_id} is still awaiting changes on {ws_path}: finish it with "
            f"'gep solidify --workspace {ws_path}' or start over with --abandon-pending")


def no_pending_message(ws_path: Path) -> str:
    return f"no cycle is awaiting changes on {ws_path} (start one with `gep cycle`)"


def check_request(request: CycleRequest, settings: Settings, env: Mapping[str, str]) -> None:
    """Refuse an unusable request before anything is recorded: a typo in a mutator or strategy name, or a
    mutator without what it needs, is a user error, not a failed cycle that would count against a gene."""
    name = (request.mutator or settings.mutator or default_mutator(env)).strip().lower()
    if name not in MUTATORS:
        raise ConfigError(f"unknown mutator '{request.mutator or settings.mutator}'; valid: {', '.join(MUTATORS)}")
    if name == "command":
        split_command(settings.agent_cmd)
    if name == "anthropic" and not env.get("ANTHROPIC_API_KEY"):
        raise ConfigError("mutator 'anthropic' needs ANTHROPIC_API_KEY in the environment")
    resolve_strategy(requested=request.strategy or settings.strategy, env=env, cycle_count=0, signals=[])
    check_llm_settings(settings, env)


def ensure_state_dir(ws: Workspace) -> Path:
    """``<workspace>/.gep/``, or a one-line WorkspaceError when it cannot be created (read-only, a file)."""
    try:
        return ws.ensure_gep_dir()
    except OSError as exc:
        raise WorkspaceError(f"cannot write engine state in {ws.path / '.gep'}: "
                             f"{exc.strerror or type(exc).__name__}") from None


def open_workspace(request: CycleRequest, env: Mapping[str, str], *, resume: bool) -> tuple[Workspace, Settings]:
    """The workspace and its settings for this request, checked (no lock taken, nothing recorded)."""
    ws = Workspace.open(request.workspace)
    if resume:  # finishing keeps what the cycle was started with (stored on the run)
        settings = load_settings(ws.path, env=env)
    else:
        settings = load_settings(ws.path, env=env, strategy=request.strategy, agent_cmd=request.agent_cmd,
                                 mutator=request.mutator, branch=request.branch, llm_signals=request.llm_signals)
        check_request(request, settings, env)
    ensure_state_dir(ws)
    return ws, settings


def _awaiting(store: Store) -> list[CycleRun]:
    return [r for r in store.open_runs() if r.status == "awaiting_changes"]


def _check_pending(store: Store, ws: Workspace, request: CycleRequest, *, resume: bool) -> list[CycleRun]:
    """The runs awaiting changes, or the one-line refusal: a new cycle while one awaits (unless it is to be
    abandoned), or finishing when nothing awaits."""
    pending = _awaiting(store)
    if resume and not pending:
        raise WorkspaceError(no_pending_message(ws.path))
    if not resume and pending and not request.abandon_pending:
        raise PendingCycleError(pending_message(ws.path, pending[0].event_id))
    return pending


def open_cycle(request: CycleRequest, *, resume: bool = False, check_only: bool = False,
               env: Mapping[str, str] | None = None, clock: Clock = utc_now) -> CycleContext | None:
    """Open a cycle (lock held until ``ctx.close()``), or with ``check_only`` only raise what it would refuse
    and return None. ``resume``: the cycle awaiting changes, ready for the solidify stage."""
    env = os.environ if env is None else env
    ws, settings = open_workspace(request, env, resume=resume)
    store = Store.for_workspace(ws.path, settings)
    stack = ExitStack()
    stack.callback(store.close)
    try:
        if check_only:
            _check_pending(store, ws, request, resume=resume)
            stack.close()
            return None
        stack.enter_context(ws.lock(settings.lock_timeout_s))
        if resume:
            return _resume(request, ws, settings, store, stack, env, clock)
        recovered = [r.event_id for r in recover(workspace=ws.path, store=store, settings=settings)]
        for run in _check_pending(store, ws, request, resume=False):
            abandon(ws, store, run, settings, clock)
        now = clock()
        seed = request.seed if request.seed is not None else random.SystemRandom().randrange(2**31)
        return CycleContext(request=request, settings=settings, workspace=ws, store=store,
                            event_id=new_event_id(now), cycle_number=store.count_events() + 1, seed=seed,
                            started_at=now, clock=clock, env=env, stack=stack, recovered=recovered)
    except BaseException:
        stack.close()
        raise


def _resume(request: CycleRequest, ws: Workspace, settings: Settings, store: Store, stack: ExitStack,
            env: Mapping[str, str], clock: Clock) -> CycleContext:
    run = _check_pending(store, ws, request, resume=True)[0]
    pending = run.pending
    if pending.event is None or pending.gene is None or pending.mutation is None:
        raise WorkspaceError(f"the pending cycle {run.event_id} on {ws.path} has no recorded plan; "
                             f"abandon it with `gep cycle --workspace {ws.path} --abandon-pending`")
    run.status = "running"  # a crash from here on is recovered like any running cycle
    run.stage = "solidify"
    run.pid = os.getpid()
    store.save_run(run)
    request = request.model_copy(update={"branch": pending.branch, "review": pending.review})
    meta = pending.event.meta
    return CycleContext(request=request, settings=settings, workspace=ws, store=store, event_id=run.event_id,
                        cycle_number=meta.cycle or 0, seed=meta.seed or 0, started_at=clock(), clock=clock,
                        env=env, stack=stack, run=run)


def abandon(ws: Workspace, store: Store, run: CycleRun, settings: Settings | None = None,
            clock: Clock = utc_now) -> EvolutionEvent:
    """Roll a pending (awaiting changes) cycle back and record it as abandoned.

    Empty only if nothing had been changed yet: edits that are thrown away were still made (as for a
    failed cycle, seed 002 counts a 0-file blast radius as empty)."""
    event = store.get_event(run.event_id) or EvolutionEvent(id=run.event_id)
    try:
        blast = ws.blast_radius(run, settings)
        event.blast_radius = blast.radius
        empty = blast.files == 0
    except WorkspaceError:  # abandoning must not fail on a diff; nothing known to be changed
        empty = True
    ws.rollback(run)
    ws.restore_user_changes(run)
    event.outcome = Outcome(status=OutcomeStatus.abandoned, score=0.0)
    event.meta.failure_reasons = ["abandoned: a new cycle was started with --abandon-pending"]
    event.meta.empty_cycle = empty
    store.add_event(event)
    store.close_run(run.event_id)
    return event
