"""One evolution cycle as plain, typed stages.

flows/cycle.py wraps each stage as a Prefect task; `run_cycle` chains them without Prefect (tests,
benchmarks, replay). Every cycle ends in a recorded outcome: success, failed (with reasons), empty,
awaiting changes, abandoned or interrupted.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from gep import constants as C
from gep.assets import workspace_genes
from gep.config import Settings, load_settings
from gep.errors import ConfigError, GepError, PendingCycleError, WorkspaceError
from gep.models import (
    Capsule,
    CycleRun,
    EvolutionEvent,
    Gene,
    Mutation,
    Outcome,
    OutcomeStatus,
    PersonalityState,
    iso,
    utc_now,
)
from gep.mutation import build_mutation
from gep.mutators import MUTATORS, default_mutator, get_mutator
from gep.mutators.base import MutationRequest, MutatorResult
from gep.mutators.command import split_command
from gep.personality import (
    PersonalitySelection,
    PersonalityStats,
    personality_key,
    select_personality,
    update_stats,
)
from gep.prompt import PromptInput, build_prompt
from gep.selector import SelectorDecision, select_gene_and_capsule
from gep.signals import HistoryAnalysis, analyze_recent_history, extract_signals
from gep.solidify import ReviewRequest, SolidifyInput, SolidifyResult, solidify
from gep.sources import SourceBundle, collect_sources
from gep.store import Store
from gep.strategy import resolve_strategy
from gep.workspace import Workspace, recover

HISTORY_EVENTS = max(C.HISTORY_WINDOW, C.DOMINANCE_WINDOW, C.BAN_CYCLES) + 10
SOLIDIFY_TERMINAL = {"success", "failed", "empty", "abandoned", "interrupted"}


class CycleOptions(BaseModel):
    """What a user (CLI, Prefect form, schedule) asks of one cycle."""
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
    flow_run_id: str | None = None


class CycleContext(BaseModel):
    """What the stages of one cycle share. Lives only for the cycle (holds the lock and the store)."""
    model_config = ConfigDict(arbitrary_types_allowed=True)

    options: CycleOptions
    settings: Settings
    workspace: Workspace
    store: Store
    event_id: str
    cycle_number: int
    seed: int
    started_at: datetime
    stack: ExitStack = Field(default_factory=ExitStack)
    run: CycleRun | None = None
    recovered: list[str] = Field(default_factory=list)

    def rng(self, stage: str) -> random.Random:
        """A per-stage RNG derived from the cycle seed, so stages replay independently."""
        return random.Random(f"{self.seed}:{stage}")

    def now(self) -> datetime:
        return utc_now()

    def close(self) -> None:
        self.stack.close()


class Plan(BaseModel):
    """Signals, selection, strategy, personality and mutation: everything decided before the change."""
    signals: list[str]
    history: HistoryAnalysis
    gene: Gene | None
    capsule: Capsule | None
    selector: SelectorDecision
    mutation: Mutation | None
    personality: PersonalitySelection
    strategy: str
    sources: SourceBundle


# ------------------------------------------------------------------ ids


def new_event_id(now: datetime) -> str:
    """``evt_<ms>_<rand>``: ordered by time like the reference's ids, unique across processes."""
    return f"evt_{int(now.timestamp() * 1000)}_{os.urandom(3).hex()}"


# ------------------------------------------------------------------ stage 0: prepare


def check_request(options: CycleOptions, settings: Settings, env: Mapping[str, str]) -> None:
    """Refuse an unusable request before anything is recorded: a typo in a mutator or strategy name, or a
    mutator without what it needs, is a user error, not a failed cycle that would count against a gene."""

    name = (options.mutator or settings.mutator or default_mutator(env)).strip().lower()
    if name not in MUTATORS:
        raise ConfigError(f"unknown mutator '{options.mutator or settings.mutator}'; valid: {', '.join(MUTATORS)}")
    if name == "command":
        split_command(settings.agent_cmd)
    if name == "anthropic" and not env.get("ANTHROPIC_API_KEY"):
        raise ConfigError("mutator 'anthropic' needs ANTHROPIC_API_KEY in the environment")
    resolve_strategy(requested=options.strategy or settings.strategy, env=env, cycle_count=0, signals=[])


def ensure_state_dir(ws: Workspace) -> Path:
    """``<workspace>/.gep/``, or a one-line WorkspaceError when it cannot be created (read-only, a file)."""
    try:
        return ws.ensure_gep_dir()
    except OSError as exc:
        raise WorkspaceError(f"cannot write engine state in {ws.path / '.gep'}: "
                             f"{exc.strerror or type(exc).__name__}") from None


def open_settings(options: CycleOptions, env: Mapping[str, str] | None = None) -> tuple[Workspace, Settings]:
    """The workspace and its settings for this request, checked (no lock taken, nothing recorded)."""
    env = os.environ if env is None else env
    ws = Workspace.open(options.workspace)
    settings = load_settings(ws.path, env=env, strategy=options.strategy, agent_cmd=options.agent_cmd,
                             mutator=options.mutator, branch=options.branch)
    check_request(options, settings, env)
    ensure_state_dir(ws)
    return ws, settings


def pending_message(ws_path: Path, event_id: str) -> str:
    return (f"cycle {event_id} is still awaiting changes on {ws_path}: finish it with "
            f"'gep solidify --workspace {ws_path}' or start over with --abandon-pending")


def preflight(options: CycleOptions, env: Mapping[str, str] | None = None) -> None:
    """What `prepare` would refuse, found without starting anything (the CLI calls it before Prefect)."""
    ws, settings = open_settings(options, env)
    if options.abandon_pending:
        return
    with Store.for_workspace(ws.path, settings) as store:
        pending = [r for r in store.open_runs() if r.status == "awaiting_changes"]
    if pending:
        raise PendingCycleError(pending_message(ws.path, pending[0].event_id))


def preflight_solidify(workspace: Path, env: Mapping[str, str] | None = None) -> None:
    """What `open_pending` would refuse (no cycle awaiting changes), found without starting anything."""
    env = os.environ if env is None else env
    ws = Workspace.open(workspace)
    settings = load_settings(ws.path, env=env)
    ensure_state_dir(ws)
    with Store.for_workspace(ws.path, settings) as store:
        if not any(r.status == "awaiting_changes" for r in store.open_runs()):
            raise WorkspaceError(f"no cycle is awaiting changes on {ws.path} (start one with `gep cycle`)")


def prepare(options: CycleOptions, env: Mapping[str, str] | None = None) -> CycleContext:
    """Open the workspace and store, recover crashed cycles, take the lock, refuse a pending cycle."""
    env = os.environ if env is None else env
    ws, settings = open_settings(options, env)
    store = Store.for_workspace(ws.path, settings)
    stack = ExitStack()
    stack.callback(store.close)
    try:
        stack.enter_context(ws.lock(settings.lock_timeout_s))
        recovered = [r.event_id for r in recover(workspace=ws.path, store=store, settings=settings)]
        pending = [r for r in store.open_runs() if r.status == "awaiting_changes"]
        if pending:
            if not options.abandon_pending:
                raise PendingCycleError(pending_message(ws.path, pending[0].event_id))
            for run in pending:
                abandon(ws, store, run, settings)
        now = utc_now()
        seed = options.seed if options.seed is not None else random.SystemRandom().randrange(2**31)
        return CycleContext(options=options, settings=settings, workspace=ws, store=store,
                            event_id=new_event_id(now), cycle_number=store.count_events() + 1, seed=seed,
                            started_at=now, stack=stack, recovered=recovered)
    except BaseException:
        stack.close()
        raise


def abandon(ws: Workspace, store: Store, run: CycleRun, settings: Settings | None = None) -> EvolutionEvent:
    """Roll a pending (awaiting changes) cycle back and record it as abandoned.

    Empty only if nothing had been changed yet: edits that are thrown away were still made (as for a
    failed cycle, seed 002 counts a 0-file blast radius as empty)."""
    event = store.get_event(run.event_id) or EvolutionEvent(id=run.event_id)
    try:
        blast = ws.blast_radius(run, settings)
        event.blast_radius = blast.radius
        empty = blast.files == 0
    except Exception:  # noqa: BLE001 - abandoning must not fail on a diff; nothing known to be changed
        empty = True
    ws.rollback(run)
    ws.restore_user_changes(run)
    event.outcome = Outcome(status=OutcomeStatus.abandoned.value, score=0.0)
    event.meta["failure_reasons"] = ["abandoned: a new cycle was started with --abandon-pending"]
    event.meta["empty_cycle"] = empty
    store.add_event(event)
    store.close_run(run.event_id)
    return event


# ------------------------------------------------------------------ stage 1-4: sources, signals, history, plan


def collect(ctx: CycleContext) -> SourceBundle:

    return collect_sources(ctx.workspace.path, ctx.settings, now=ctx.started_at)


def recent_events(ctx: CycleContext) -> list[EvolutionEvent]:
    return ctx.store.recent_events(HISTORY_EVENTS)


def extract(ctx: CycleContext, sources: SourceBundle, events: list[EvolutionEvent]) -> list[str]:

    return extract_signals(
        recent_session_transcript=sources.recent_session_transcript,
        today_log=sources.today_log,
        memory_snippet=sources.memory_snippet,
        user_snippet=sources.user_snippet,
        recent_events=[e for e in events if e.outcome.status in SOLIDIFY_TERMINAL][-C.HISTORY_WINDOW:],
    )


def analyse(events: list[EvolutionEvent]) -> HistoryAnalysis:

    return analyze_recent_history([e for e in events if e.outcome.status in SOLIDIFY_TERMINAL][-C.HISTORY_WINDOW:])


def select(ctx: CycleContext, sources: SourceBundle, signals: list[str], history: HistoryAnalysis,
           events: list[EvolutionEvent]) -> Plan:
    """Pick strategy, gene, capsule and personality (pure given the store's contents)."""
    now = ctx.started_at
    # selection learns from a long history (memory graph); the loop rules only read the last few events
    finished = [e for e in ctx.store.recent_events(C.MEMORY_GRAPH_EVENTS) if e.outcome.status in SOLIDIFY_TERMINAL]
    strategy = resolve_strategy(requested=ctx.options.strategy or ctx.settings.strategy, env=os.environ,
                                cycle_count=ctx.cycle_number - 1, signals=signals)
    genes = workspace_genes(ctx.workspace.path, ctx.store)
    selection = select_gene_and_capsule(
        genes=genes, capsules=ctx.store.list_capsules(), failed_capsules=ctx.store.list_failed_capsules(),
        signals=signals, recent_events=finished, settings=ctx.settings, rng=ctx.rng("select"), now=now,
        drift=ctx.options.drift)
    current = ctx.store.get_state("personality.current", PersonalityState) or PersonalityState()
    stats = ctx.store.get_state("personality.stats", PersonalityStats) or PersonalityStats()
    persona = select_personality(current=current, stats=stats, recent_events=finished,
                                 rng=ctx.rng("personality"), now=now, signals=signals, drift=ctx.options.drift)
    return Plan(
        signals=signals,
        history=history,
        gene=selection.gene,
        capsule=selection.capsule,
        selector=selection.decision,
        mutation=None,
        personality=persona,
        strategy=strategy.name,
        sources=sources,
    )


def mutate(ctx: CycleContext, p: Plan) -> Plan:
    """The Mutation for the selected gene under the cycle's strategy and personality."""
    if p.gene is None:
        return p
    strategy = resolve_strategy(requested=p.strategy, env={}, cycle_count=ctx.cycle_number - 1, signals=p.signals)
    mutation = build_mutation(signals=p.signals, gene=p.gene, personality=p.personality.state, strategy=strategy,
                              rng=ctx.rng("mutation"), now=ctx.started_at, drift=ctx.options.drift)
    return p.model_copy(update={"mutation": mutation})


# ------------------------------------------------------------------ stage 5: begin (baseline + running record)


def draft_event(ctx: CycleContext, p: Plan) -> EvolutionEvent:
    return EvolutionEvent(
        id=ctx.event_id,
        parent=ctx.store.last_event_id(),
        intent=(p.mutation.category.value if p.mutation else "repair"),
        signals=p.signals,
        genes_used=[p.gene.id] if p.gene else [],
        mutation_id=p.mutation.id if p.mutation else None,
        personality_state=p.personality.state,
        outcome=Outcome(status=OutcomeStatus.running.value, score=0.0),
        meta={
            "at": iso(ctx.started_at),
            "cycle": ctx.cycle_number,
            "seed": ctx.seed,
            "strategy": p.strategy,
            # the JSON edge: the event's meta is what the store, exports and the reference's tools read
            "selector": p.selector.model_dump(mode="json"),
            "mutation": p.mutation.model_dump(mode="json") if p.mutation else None,
            "personality": p.personality.model_dump(mode="json", exclude={"state"}),
            "history": p.history.model_dump(mode="json"),
            "capsule_reused": p.capsule.id if p.capsule else None,
            "sources": {"files": [f.model_dump(mode="json") for f in p.sources.files]},
            "flow_run_id": ctx.options.flow_run_id,
            "recovered": ctx.recovered,
        },
    )


def begin(ctx: CycleContext, event: EvolutionEvent) -> CycleRun:
    """Record the baseline and the running event before anything in the workspace changes."""
    ctx.store.add_event(event)
    run = ctx.workspace.begin(event_id=event.id, store=ctx.store, allow_dirty=ctx.options.allow_dirty)
    ctx.run = run
    return run


# ------------------------------------------------------------------ stage 6: apply


def apply(ctx: CycleContext, p: Plan, event: EvolutionEvent, sources: SourceBundle) -> MutatorResult:

    assert p.gene is not None and p.mutation is not None
    history = [e for e in ctx.store.recent_events(C.HISTORY_TAIL) if e.id != event.id]
    prompt = build_prompt(
        PromptInput(mutation=p.mutation, gene=p.gene, capsule=p.capsule, signals=p.signals,
                    recent_events=history, lessons=lessons(history), sources=sources,
                    workspace_name=ctx.workspace.path.name, cycle_id=event.id, personality=p.personality.state,
                    strategy_name=p.strategy, protected_paths=list(ctx.settings.protected_paths)),
        context_chars=ctx.settings.prompt_context_chars)
    event.meta["prompt_sizes"] = prompt.sizes.model_dump(mode="json")
    forbidden = sorted({*p.gene.constraints.forbidden_paths, ".git", ".gep", *ctx.settings.protected_paths})
    mutator = get_mutator(ctx.options.mutator or ctx.settings.mutator, ctx.settings, os.environ)
    event.meta["mutator"] = mutator.name
    req = MutationRequest(workspace=ctx.workspace.path, cycle_id=event.id, prompt=prompt, gene=p.gene,
                          settings=ctx.settings, forbidden_paths=forbidden,
                          validation_commands=list(p.gene.validation))
    return mutator.apply(req)


def lessons(history: list[EvolutionEvent]) -> list[str]:
    """Short lessons from recent failures, so the next attempt does not repeat them."""
    out: list[str] = []
    for e in reversed(history):
        reasons = e.meta.get("failure_reasons") or []
        if e.outcome.status == "failed" and reasons:
            gene = e.genes_used[0] if e.genes_used else "?"
            out.append(f"{gene} failed ({e.id}): " + "; ".join(str(r) for r in reasons)[:300])
    return out[:5]


# ------------------------------------------------------------------ stage 7: solidify / record


def record_mutator_result(event: EvolutionEvent, result: MutatorResult) -> None:
    event.meta["mutator_result"] = {
        "status": result.status,
        "summary": result.summary,
        "rationale": result.rationale,
        "error": result.error,
        "metrics": result.metrics.model_dump(mode="json"),
        "output": result.output,
        "prompt_file": result.prompt_file,
    }


def mark_awaiting(ctx: CycleContext, event: EvolutionEvent, p: Plan, result: MutatorResult) -> EvolutionEvent:
    """Prompt mode: keep the run open for `gep solidify` and record the event as awaiting changes."""
    assert ctx.run is not None
    record_mutator_result(event, result)
    event.outcome = Outcome(status=OutcomeStatus.awaiting_changes.value, score=0.0)
    ctx.run.status = "awaiting_changes"
    ctx.run.stage = "awaiting_changes"
    ctx.run.pending = {
        "event": event.model_dump(mode="json"),
        "gene": p.gene.model_dump(mode="json") if p.gene else None,
        "mutation": p.mutation.model_dump(mode="json") if p.mutation else None,
        "review": ctx.options.review,
        "branch": ctx.options.branch or ctx.settings.branch,
    }
    ctx.store.save_run(ctx.run)
    ctx.store.add_event(event)
    return event


def solidify_change(ctx: CycleContext, event: EvolutionEvent, gene: Gene, mutation: Mutation,
                    summary: str, approve: Callable[[ReviewRequest], bool] | None = None) -> SolidifyResult:
    """Check the change, then commit or roll back, and store the outcome."""
    assert ctx.run is not None
    return solidify(SolidifyInput(
        workspace=ctx.workspace, store=ctx.store, settings=ctx.settings, run=ctx.run, event=event, gene=gene,
        mutation=mutation, summary=summary or default_summary(gene, mutation),
        branch=ctx.options.branch or ctx.settings.branch, now=utc_now, approve=approve))


def fail_cycle(ctx: CycleContext, event: EvolutionEvent, reason: str) -> EvolutionEvent:
    """A stage raised: undo whatever the cycle changed and record the failure (never a hung run)."""
    if ctx.run is not None and ctx.run.status == "running":
        try:
            # what is about to be undone: a change that was made is not an empty cycle (seed 002 counts
            # 0 files / 0 lines), as for a change that failed validation or an interrupted cycle
            blast = ctx.workspace.blast_radius(ctx.run, ctx.settings)
            event.blast_radius = blast.radius
            event.meta.setdefault("empty_cycle", blast.files == 0)
        except Exception:  # noqa: BLE001 - the failure being recorded matters more; empty by default
            pass
        try:
            ctx.workspace.rollback(ctx.run)
        finally:
            ctx.workspace.restore_user_changes(ctx.run)
            ctx.store.close_run(ctx.run.event_id)
    event.outcome = Outcome(status=OutcomeStatus.failed.value, score=C.FAILURE_SCORE)
    event.meta.setdefault("failure_reasons", []).append(reason)
    event.meta.setdefault("empty_cycle", True)
    ctx.store.add_event(event)
    return event


def fail_before_plan(ctx: CycleContext, exc: BaseException) -> EvolutionEvent:
    """A stage before the plan (sources, signals, history, selection, mutation) raised: nothing in the
    workspace changed yet, but the cycle still ends in a recorded failed event (with no gene to blame)."""
    event = EvolutionEvent(id=ctx.event_id, parent=ctx.store.last_event_id(), meta={
        "at": iso(ctx.started_at), "cycle": ctx.cycle_number, "seed": ctx.seed,
        "flow_run_id": ctx.options.flow_run_id, "recovered": ctx.recovered})
    return fail_cycle(ctx, event, describe_error(exc))


def record_empty(ctx: CycleContext, event: EvolutionEvent, reason: str) -> EvolutionEvent:
    """Nothing to do (no gene matched): an empty cycle, recorded as such."""
    event.outcome = Outcome(status=OutcomeStatus.empty.value, score=0.0)
    event.meta["empty_cycle"] = True
    event.meta["empty_reason"] = reason
    ctx.store.add_event(event)
    return event


def update_personality(ctx: CycleContext, event: EvolutionEvent) -> None:
    """After every solidify: the personality that ran this cycle learns from its outcome."""
    if event.personality_state is None or event.outcome.status not in SOLIDIFY_TERMINAL:
        return
    stats = ctx.store.get_state("personality.stats", PersonalityStats) or PersonalityStats()
    stats = update_stats(stats, personality_key(event.personality_state), event.outcome.status,
                         event.outcome.score, utc_now())
    ctx.store.set_state("personality.stats", stats)
    ctx.store.set_state("personality.current", event.personality_state)


# ------------------------------------------------------------------ the whole cycle, without Prefect


def run_cycle(options: CycleOptions, env: Mapping[str, str] | None = None) -> EvolutionEvent:
    """All stages in order. Raises GepError for problems found before the cycle starts."""
    ctx = prepare(options, env)
    try:
        return run_stages(ctx)
    finally:
        ctx.close()


def run_stages(ctx: CycleContext) -> EvolutionEvent:
    try:
        sources = collect(ctx)
        events = recent_events(ctx)
        signals = extract(ctx, sources, events)
        history = analyse(events)
        p = mutate(ctx, select(ctx, sources, signals, history, events))
    except Exception as exc:  # noqa: BLE001 - recorded as a failed cycle, like a later stage's failure
        return finish(ctx, fail_before_plan(ctx, exc))
    event = draft_event(ctx, p)
    if p.gene is None or p.mutation is None:
        return record_empty(ctx, event, "no gene matched the signals (or every match is banned)")
    begin(ctx, event)
    try:
        result = apply(ctx, p, event, sources)
        if result.status == "awaiting_changes":
            return mark_awaiting(ctx, event, p, result)
        record_mutator_result(event, result)
        if result.status == "error":
            return finish(ctx, fail_cycle(ctx, event, f"mutator: {result.error}"))
        outcome = solidify_change(ctx, event, p.gene, p.mutation, result.summary)
        return finish(ctx, outcome.event)
    except Exception as exc:  # noqa: BLE001 - whatever broke, the workspace is restored and the cycle recorded
        return finish(ctx, fail_cycle(ctx, event, describe_error(exc)))


def describe_error(exc: BaseException) -> str:
    """One line for the event: user errors as they are, bugs with their type."""
    if isinstance(exc, GepError):
        return str(exc)
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:500]


def finish(ctx: CycleContext, event: EvolutionEvent) -> EvolutionEvent:
    update_personality(ctx, event)
    return event


# ------------------------------------------------------------------ two-phase: finishing a pending cycle


class PendingCycle(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    ctx: CycleContext
    event: EvolutionEvent
    gene: Gene
    mutation: Mutation
    review: bool = False


def open_pending(workspace: Path, flow_run_id: str | None = None,
                 env: Mapping[str, str] | None = None) -> PendingCycle:
    """The cycle awaiting changes on a workspace, ready for solidify (lock held until ctx.close())."""
    env = os.environ if env is None else env
    ws = Workspace.open(workspace)
    settings = load_settings(ws.path, env=env)
    ensure_state_dir(ws)
    store = Store.for_workspace(ws.path, settings)
    stack = ExitStack()
    stack.callback(store.close)
    try:
        stack.enter_context(ws.lock(settings.lock_timeout_s))
        pending = [r for r in store.open_runs() if r.status == "awaiting_changes"]
        if not pending:
            raise WorkspaceError(f"no cycle is awaiting changes on {ws.path} (start one with `gep cycle`)")
        run = pending[0]
        event = EvolutionEvent.model_validate(run.pending["event"])
        gene = Gene.model_validate(run.pending["gene"])
        mutation = Mutation.model_validate(run.pending["mutation"])
        if flow_run_id:
            event.meta["solidify_flow_run_id"] = flow_run_id
        run.status = "running"  # a crash from here on is recovered like any running cycle
        run.stage = "solidify"
        run.pid = os.getpid()
        store.save_run(run)
        options = CycleOptions(workspace=ws.path, branch=run.pending.get("branch"),
                               review=bool(run.pending.get("review")), flow_run_id=flow_run_id)
        ctx = CycleContext(options=options, settings=settings, workspace=ws, store=store, event_id=event.id,
                           cycle_number=int(event.meta.get("cycle") or 0), seed=int(event.meta.get("seed") or 0),
                           started_at=utc_now(), stack=stack, run=run)
        return PendingCycle(ctx=ctx, event=event, gene=gene, mutation=mutation, review=options.review)
    except BaseException:
        stack.close()
        raise


def default_summary(gene: Gene, mutation: Mutation) -> str:
    """The commit subject when nobody wrote one: what the mutation set out to do."""
    return mutation.expected_effect or gene.summary or gene.id
