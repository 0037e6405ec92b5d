"""Opening a cycle: the request checked, the workspace, its settings and store, the lock, crash recovery.

:func:`open_cycle` is the one way in, for a new cycle and for finishing one that awaits changes
(``resume=True``); :func:`check_cycle` finds what it would refuse without taking the lock or recording
anything, and returns what it opened (the CLI calls it before starting Prefect, and hands that to the flow
run: gep/cycle/handoff.py). A refused start stores nothing. The context holds the
cycle's resources only: the clock, the environment and the seed, the settings, the store, the repository
and the lock, so every stage reads time, settings and randomness from one place and a cycle can be
replayed; what opening found (recovery notes; finishing: the pending run and its plan) starts the
cycle's ``CycleState`` (gep/cycle/state.py). Settings are read here, once, before any mutator runs (whatever a change does to
gep.toml cannot widen what this cycle runs); a cycle that awaits changes keeps them on its run record.
"""

from __future__ import annotations

import os
import random
import shlex
import time
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from gep.core.config import Settings, load_settings
from gep.core.errors import ConfigError, PendingCycleError, WorkspaceError
from gep.core.holdout import held_out
from gep.core.models import CycleRun, utc_now
from gep.core.request import CycleRequest, chosen
from gep.core.workspace_id import WorkspaceIdentity
from gep.cycle.abandon import abandon_run, abandoned_line
from gep.cycle.handoff import Opened, request_key, toml_stamp
from gep.cycle.recovery import recover_workspace
from gep.cycle.state import CycleState
from gep.cycle.tree import CycleTree
from gep.genes.strategy import resolve_strategy
from gep.git import Repo, open_repo, workspace_lock
from gep.git.filters import check_filters
from gep.git.plumbing import Git, shown
from gep.git.repo import ensure_state_dir, operation_in_progress
from gep.mutators import MUTATORS, default_mutator
from gep.mutators.command import missing_program
from gep.signals.claude_pass import check_llm_settings
from gep.store import Store
from gep.validation.sandbox import ChangeOrigin, validation_refusal

Clock = Callable[[], datetime]
ORIGINS: dict[str, ChangeOrigin] = {"anthropic": "model", "command": "agent", "prompt": "person"}


class CycleContext(BaseModel):
    """What the stages of one cycle share. Lives only for the cycle (holds the lock and the store)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    request: CycleRequest
    settings: Settings
    repo: Repo  # the workspace, opened: sources and genes are read from its tree
    store: Store
    event_id: str
    cycle_number: int
    seed: int
    started_at: datetime
    holdout: bool | None = None  # drawn into the holdout (settings with learning off); None: no draw was made
    clock: Clock = utc_now
    env: Mapping[str, str] = Field(default_factory=dict)
    stack: ExitStack = Field(default_factory=ExitStack)  # the lock and the store, released by close()
    opened: float = Field(default_factory=time.monotonic)  # when the cycle got its lock: cycle_timeout_s runs

    @property
    def deadline(self) -> float:
        """The ``time.monotonic()`` value past which the cycle fails (gep/core/deadline.py)."""
        return self.opened + self.settings.cycle_timeout_s

    def rng(self, stage: str) -> random.Random:
        """A per-stage RNG derived from the cycle seed, so stages replay independently."""
        return random.Random(f"{self.seed}:{stage}")

    @property
    def branch(self) -> str | None:
        return self.request.branch or self.settings.branch

    @property
    def mutator(self) -> str:
        return mutator_name(self.request, self.settings, self.env)

    @property
    def mode(self) -> Literal["clone", "in_place"]:
        """Where a new cycle's change is made: a model or an agent in a clone, a person (prompt mode) in their
        tree (a pending cycle's is on its run record)."""
        return "in_place" if self.mutator == "prompt" else "clone"

    def close(self) -> None:
        self.stack.close()


def new_event_id(now: datetime) -> str:
    """``evt_<ms>_<rand>``: ordered by time like the reference's ids, unique across processes."""
    return f"evt_{int(now.timestamp() * 1000)}_{os.urandom(3).hex()}"


def pending_message(ws_path: Path, event_id: str) -> str:
    ws = shlex.quote(shown(ws_path))  # every suggestion runs as printed, from anywhere
    return (f"cycle {event_id} is still awaiting changes on {shown(ws_path)}: finish it with "
            f"`gep solidify --workspace {ws}`, give it up with `gep solidify --workspace {ws} --abandon`, "
            f"or start over with `gep cycle --workspace {ws} --abandon-pending`")


def no_pending_message(ws_path: Path) -> str:
    return (f"no cycle is awaiting changes on {shown(ws_path)} (start one with "
            f"`gep cycle --workspace {shlex.quote(shown(ws_path))}`)")


def mutator_name(request: CycleRequest, settings: Settings, env: Mapping[str, str]) -> str:
    return (chosen(request.mutator) or settings.mutator or default_mutator(env)).strip().lower()


def check_request(request: CycleRequest, settings: Settings, env: Mapping[str, str], repo: Repo) -> None:
    """Refuse an unusable request before anything is recorded: a typo in a mutator or strategy name, a
    mutator without what it needs, a model's or an agent's change that could not be validated here, is a
    user error, not a failed cycle that would count against a gene."""
    name = mutator_name(request, settings, env)
    if name not in MUTATORS:
        raise ConfigError(f"unknown mutator '{settings.mutator}'; valid: {', '.join(MUTATORS)}")
    if name == "command":
        missing = missing_program(settings.agent_cmd, env, repo.path)
        if missing:
            raise ConfigError(missing)
    if name == "anthropic" and not env.get("ANTHROPIC_API_KEY"):
        raise ConfigError("mutator 'anthropic' needs ANTHROPIC_API_KEY in the environment")
    resolve_strategy(requested=chosen(request.strategy) or settings.strategy, env=env, cycle_count=0, signals=[])
    # a prompt cycle validates nothing now (`gep solidify` checks its sandbox): no bwrap probe for it
    refusal = validation_refusal(ORIGINS[name], settings) if name != "prompt" else None
    if refusal:
        raise ConfigError(f"cannot run a {name} cycle here: {refusal}")
    if name == "prompt" and request.branch:  # a setting in gep.toml is for the clone cycles: not refused
        raise ConfigError("--branch is for cycles made in a clone (an agent or Claude); a prompt cycle works in "
                          "your tree and commits on your current branch: check out the branch you want first")
    branch = request.branch or settings.branch
    if branch and not Git(repo.path).run("check-ref-format", "--branch", branch, ok=True).ok:
        raise ConfigError(f"'{branch}' is not a valid branch name")
    busy = operation_in_progress(repo) if name == "prompt" else None
    if busy:  # prompt mode works in the person's tree: not in the middle of their merge
        raise WorkspaceError(f"{busy} is in progress in {shown(repo.path)}; finish or abort it first")
    check_llm_settings(settings, env)


def open_workspace(request: CycleRequest, env: Mapping[str, str], *, resume: bool) -> tuple[Repo, Settings]:
    """The workspace and its settings for this request, checked (no lock taken, nothing recorded)."""
    repo = open_repo(request.workspace)
    check_filters(repo)  # a required filter (git-lfs) that is missing: every checkout would fail
    if resume:  # finishing keeps what the cycle was started with (stored on the run)
        settings = load_settings(repo.path, env=env)
    else:
        settings = load_settings(repo.path, env=env, strategy=chosen(request.strategy), agent_cmd=request.agent_cmd,
                                 mutator=chosen(request.mutator), branch=request.branch,
                                 llm_signals=request.llm_signals or None)  # off: as gep.toml says
        check_request(request, settings, env, repo)
    ensure_state_dir(repo)
    return repo, settings


def _awaiting(store: Store) -> list[CycleRun]:
    return [r for r in store.open_runs() if r.status == "awaiting_changes"]


def _check_pending(store: Store, repo: Repo, request: CycleRequest, *, resume: bool) -> list[CycleRun]:
    """The runs awaiting changes, or the one-line refusal: a new cycle while one awaits (unless it is to be
    abandoned), or finishing when nothing awaits."""
    pending = _awaiting(store)
    if resume and not pending:
        raise WorkspaceError(no_pending_message(repo.path))
    if not resume and pending and not request.abandon_pending:
        raise PendingCycleError(pending_message(repo.path, pending[0].event_id))
    return pending


def check_cycle(request: CycleRequest, *, resume: bool = False, env: Mapping[str, str] | None = None) -> Opened:
    """Raise what :func:`open_cycle` would refuse (bad request, unusable workspace, a pending cycle in the
    way or none to finish), without taking the lock or recording anything. What it opened, the store
    included, is returned for the caller to hand to :func:`open_cycle` (gep/cycle/handoff.py) or close."""
    env = os.environ if env is None else env
    repo, settings = open_workspace(request, env, resume=resume)
    stamp = toml_stamp(repo.path)  # gep.toml as read: open_cycle reads it again if it changed since
    store = Store.for_workspace(repo.path, settings)
    try:
        _check_pending(store, repo, request, resume=resume)
    except BaseException:
        store.close()
        raise
    return Opened(request_key(request, resume), repo, settings, store, stamp)


def open_cycle(request: CycleRequest, *, resume: bool = False, env: Mapping[str, str] | None = None,
               clock: Clock = utc_now, opened: Opened | None = None,
               identity: WorkspaceIdentity | None = None) -> tuple[CycleContext, CycleState]:
    """Open a cycle (lock held until ``ctx.close()``): its context, and the state it starts from (what
    opening did; ``resume``: the cycle awaiting changes, ready for the solidify stage). ``opened``: what
    :func:`check_cycle` opened for this request, taken over unless gep.toml changed since (its store stays
    its owner's to close); ``identity``: the workspace's, already worked out."""
    env = os.environ if env is None else env
    stack = ExitStack()
    if opened is not None and opened.serves(request, resume):
        repo, settings, store = opened.repo, opened.settings, opened.store
    else:
        repo, settings = open_workspace(request, env, resume=resume)
        store = Store.for_workspace(repo.path, settings, identity if identity and identity.path == str(repo.path)
                                    else None)
        stack.callback(store.close)
    try:
        stack.enter_context(workspace_lock(repo, settings.lock_timeout_s))
        recovery = recover_workspace(repo, store)
        state = CycleState(notes=[*recovery.warnings, *recovery.actions],
                           recovered=[r.event_id for r in recovery.runs])
        if resume:
            return _resume(request, repo, settings, store, stack, env, clock, state)
        for run in _check_pending(store, repo, request, resume=False):
            event = abandon_run(repo, store, run, "abandoned: a new cycle was started with --abandon-pending")
            state.notes.append(abandoned_line(event))
            state.abandoned.append(run.event_id)
        now = clock()
        seed = request.seed if request.seed is not None else random.SystemRandom().randrange(2**31)
        ctx = CycleContext(request=request, settings=settings, repo=repo, store=store,
                           event_id=new_event_id(now), cycle_number=store.count_events() + 1, seed=seed,
                           started_at=now, clock=clock, env=env, stack=stack)
        return with_holdout(ctx), state
    except BaseException:
        stack.close()
        raise


def with_holdout(ctx: CycleContext) -> CycleContext:
    """Draw whether this cycle is in the holdout (``settings.holdout``; only while learning is on): if it is,
    it runs with ``learning = "off"``, so every mechanism reads the plain engine's switch (gep/core/learning_switch.py)."""
    if ctx.settings.holdout <= 0 or ctx.settings.learning == "off":
        return ctx
    ctx.holdout = held_out(ctx.settings.holdout, ctx.rng("holdout"))
    if ctx.holdout:
        ctx.settings = ctx.settings.model_copy(update={"learning": "off"})
    return ctx


def _resume(request: CycleRequest, repo: Repo, settings: Settings, store: Store, stack: ExitStack,
            env: Mapping[str, str], clock: Clock, state: CycleState) -> tuple[CycleContext, CycleState]:
    run = _check_pending(store, repo, request, resume=True)[0]
    pending = run.pending
    meta = pending.event.meta if pending.event else None
    if pending.limits is not None:  # what may run is what the cycle started with, not gep.toml now
        settings = pending.limits.apply(settings)
    ctx = CycleContext(request=request.model_copy(update={"branch": pending.branch, "review": pending.review}),
                       settings=settings, repo=repo, store=store, event_id=run.event_id,
                       cycle_number=(meta.cycle if meta else None) or 0, seed=(meta.seed if meta else None) or 0,
                       started_at=clock(), clock=clock, env=env, stack=stack)
    if meta is not None and meta.holdout:  # finished as it started: without what was learned
        ctx.holdout, ctx.settings = True, ctx.settings.model_copy(update={"learning": "off"})
    state.run = run
    if request.abandon_pending:
        return ctx, state  # the solidify stage gives it up (gep solidify --abandon)
    if pending.event is None or pending.gene is None or pending.mutation is None:
        raise WorkspaceError(f"the pending cycle {run.event_id} on {shown(repo.path)} has no recorded plan; "
                             f"give it up with `gep solidify --workspace {shown(repo.path)} --abandon`")
    try:
        state.tree = CycleTree.resume(repo, run.event_id, run.mode)
    except WorkspaceError as exc:
        raise WorkspaceError(f"{exc}; give the cycle up with `gep solidify --workspace {shown(repo.path)} "
                             "--abandon`") from None
    run.status, run.stage, run.pid = "running", "solidify", os.getpid()  # a crash from here is recovered
    store.save_run(run)
    return ctx, _with_plan(ctx, state, run)


def _with_plan(ctx: CycleContext, state: CycleState, run: CycleRun) -> CycleState:
    """The state a pending cycle stopped in: its plan (gene, mutation) and event, ready for ``solidify``."""
    pending = run.pending
    event = pending.event.model_copy(deep=True) if pending.event else None
    if event is not None and ctx.request.flow_run_id:
        event.meta.solidify_flow_run_id = ctx.request.flow_run_id
    state.gene, state.mutation, state.event = pending.gene, pending.mutation, event
    state.summary = (ctx.request.summary or "").strip()
    return state
