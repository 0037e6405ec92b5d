"""The stages of one cycle, each a function ``(CycleContext, CycleState) -> CycleState``.

gep/cycle/pipeline.py lists them in order and runs them; a stage that settles the outcome (nothing to do,
awaiting someone's changes, solidified) sets ``state.done``. Stages read the clock, the environment and
randomness only from the context, so a cycle can be replayed from its recorded inputs.
"""

from __future__ import annotations

import os
import random
from collections.abc import Mapping, Sequence
from datetime import datetime

from gep.assets.gene_files import workspace_genes
from gep.core import constants
from gep.core.config import Settings, validation_commands
from gep.core.deadline import bounded
from gep.core.learning_switch import learning_switch
from gep.core.models import (
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
from gep.core.records import SourcesRecord
from gep.core.request import chosen
from gep.cycle.abandon import abandon_run, abandoned_line
from gep.cycle.budget import budget_spent, daily_budget_spent, record_skipped
from gep.cycle.collect_behavior import capture_behavior, signals_since, use_behavior
from gep.cycle.context import ORIGINS, CycleContext
from gep.cycle.fixes import annotate, check_fixes, reusable
from gep.cycle.outcomes import (
    TERMINAL,
    event_base,
    fail_cycle,
    mark_awaiting,
    record_empty,
    record_mutator_result,
    update_personality,
)
from gep.cycle.record_learning import (
    PromptMemory,
    catch_up,
    learn_from_cycle,
    recall_for_prompt,
    scan_reverts,
)
from gep.cycle.session_context import refresh_after_cycle
from gep.cycle.solidify import SolidifyInput, solidify
from gep.cycle.state import CycleState
from gep.cycle.tree import CycleTree, tree_edited
from gep.genes.distiller import rejected_capsules
from gep.genes.mutation import build_mutation
from gep.genes.personality import PersonalityStats, select_personality
from gep.genes.pool import fall_back_to_auto_gene, gene_pool
from gep.genes.preconditions import unmet_preconditions
from gep.genes.selector import (
    Selection,
    avoided_genes,
    lead_problem_signals,
    match_score,
    select_gene_and_capsule,
)
from gep.genes.strategy import SchedulerState, resolve_strategy, should_skip_scheduled_tick
from gep.learning.attribution import learns_from, mutator_host_failure
from gep.learning.avoid import refresh_avoid_list
from gep.learning.corrections import reopened_by_corrections
from gep.learning.feedback import FeedbackIndex, FeedbackSignal
from gep.learning.injections import judge_for_cycle
from gep.learning.lessons_by_problem import for_this_problem
from gep.learning.live_problems import restore_live
from gep.learning.memory_graph import MEMORY_FOLD
from gep.learning.persons_word import (
    REJECTED_NET,
    overruled,
    overruled_ids,
    rejections,
    without_overruled_credit,
)
from gep.learning.resolved import ResolutionCheck
from gep.learning.settled_fixes import recounted
from gep.mutators import get_mutator
from gep.mutators.base import MutationRequest
from gep.mutators.gep_prompt import PromptInput, build_prompt
from gep.signals.rules import analyze_recent_history, extract_signals
from gep.signals.sources import collect_sources, collect_tails
from gep.signals.unread import READ_MARKS_KEY, ReadMarks, unread_sources
from gep.signals.warning_lines import with_warning_signals
from gep.store import Store, after_cycle

HISTORY_EVENTS = max(constants.HISTORY_WINDOW, constants.DOMINANCE_WINDOW, constants.BAN_CYCLES) + 10
NO_GENE = "no gene matched the signals (or every match is banned)"


# ------------------------------------------------------------------ reading and deciding


def collect(ctx: CycleContext, state: CycleState) -> CycleState:
    state.sources = collect_sources(ctx.repo.path, ctx.settings, now=ctx.started_at)
    # what was written since the last change landed drives this cycle (gep/signals/unread.py)
    marks = ctx.store.get_state(READ_MARKS_KEY, ReadMarks)
    if marks is not None:
        tails = collect_tails(ctx.repo.path, ctx.settings, ctx.started_at, warnings=[])  # warned above
        state.sources = unread_sources(state.sources, tails, marks)
    no_llm = daily_budget_spent(ctx) if ctx.settings.llm_signals else None  # the pass spends the day's tokens too
    state.behavior = capture_behavior(ctx.repo.path, settings=ctx.settings, env=ctx.env, now=ctx.started_at,
                                      cycle_number=ctx.cycle_number, no_llm=no_llm)
    return state


def finished_events(ctx: CycleContext, limit: int) -> list[EvolutionEvent]:
    # a host failure (gep/learning/attribution.py) is no outcome of a gene: no streak, loop or ban counts it
    return learns_from(e for e in ctx.store.recent_events(limit) if e.outcome.status in TERMINAL)


def extract(ctx: CycleContext, state: CycleState) -> CycleState:
    state.events = finished_events(ctx, HISTORY_EVENTS)[-constants.HISTORY_WINDOW:]
    s = state.sources
    state.signals = extract_signals(recent_session_transcript=s.recent_session_transcript, today_log=s.today_log,
                                    memory_snippet=s.memory_snippet, user_snippet=s.user_snippet,
                                    recent_events=state.events)
    state.signals = keep_live_problems(ctx, state)
    # an error a committed fix resolved does not drive repair again from old lines; people's reverts and
    # outcomes recorded outside the stages are learned before selection reads the scores
    state.fixes = (check_fixes(ctx, state.signals, recent=s.today_log) if learning_switch(ctx.settings).on("verdicts")
                   else ResolutionCheck(signals=state.signals))
    state.signals = state.fixes.signals
    if ctx.settings.warning_signals:  # the skeptic's baseline: every new warning line is a problem too
        state.signals = with_warning_signals(state.signals, s.today_log)
    scan_reverts(ctx)
    catch_up(ctx)
    judge_for_cycle(ctx.repo.path, ctx.settings, ctx.started_at)  # did what sessions received help?
    if state.behavior is not None:  # what people said since the last cycle
        state.signals = use_behavior(state.behavior, corpus=state.signals, workspace=ctx.repo.path,
                                     store=ctx.store, events=state.events, settings=ctx.settings,
                                     now=ctx.started_at)
        if learning_switch(ctx.settings).on("feedback"):  # a person says a function a change touched still fails
            state.signals, state.behavior.record.reopened = reopened_by_corrections(
                state.signals, state.behavior.corrections, state.events, ctx.store.recent_resolutions(),
                signals_since(state.events, ctx.settings, ctx.started_at))
    return state


def keep_live_problems(ctx: CycleContext, state: CycleState) -> list[str]:
    """An error the loop rules removed comes back when new log lines show it (gep/learning/live_problems.py)."""
    s = state.sources
    corpus = extract_signals(recent_session_transcript=s.recent_session_transcript, today_log=s.today_log,
                             memory_snippet=s.memory_snippet, user_snippet=s.user_snippet, recent_events=[])
    if not any(x.startswith("errsig:") and x not in state.signals for x in corpus):
        return state.signals
    tails = collect_tails(ctx.repo.path, ctx.settings, ctx.started_at)
    return restore_live(state.signals, corpus, tails, state.events)


def analyse(ctx: CycleContext, state: CycleState) -> CycleState:
    """Loop rules over the recent history, and the strategy this cycle runs under (resolved once)."""
    state.history = analyze_recent_history(state.events)
    state.strategy = resolve_strategy(requested=chosen(ctx.request.strategy) or ctx.settings.strategy, env=ctx.env,
                                      cycle_count=ctx.cycle_number - 1, signals=state.signals)
    return state


def gate(ctx: CycleContext, state: CycleState) -> CycleState:
    """Scheduled ticks under steady state mostly do nothing (with the reason kept); manual runs always run,
    unless the day's token budget for Claude-driven cycles is spent (a skipped event says so)."""
    behavior = state.behavior.record if state.behavior else None
    spent = budget_spent(ctx)
    if spent is not None:
        state.event, state.done = record_skipped(ctx, state, spent, behavior), True
        return state
    if not ctx.request.scheduled or state.strategy is None:
        return state
    sched = ctx.store.get_state("scheduler", SchedulerState) or SchedulerState()
    steady = state.strategy.schedule_every > 1 or bool({"force_steady_state", "evolution_saturation"}
                                                       & set(state.signals))
    if not steady:
        if sched.steady_ticks:
            ctx.store.set_state("scheduler", sched.model_copy(update={"steady_ticks": 0}))
        return state
    sched.steady_ticks += 1
    reason = should_skip_scheduled_tick(preset=state.strategy, signals=state.signals, tick=sched.steady_ticks)
    if reason:
        sched.skipped += 1
        sched.last_skip_reason = reason
        sched.last_skip_at = iso(ctx.clock())
        state.skipped, state.done = reason, True
        if behavior and behavior.llm and behavior.llm.metrics.total_tokens:  # Claude was asked: the budget counts it
            state.event = record_skipped(ctx, state, reason, behavior)
    ctx.store.set_state("scheduler", sched)
    return state


def select_from_store(store: Store, *, genes: Sequence[Gene], signals: Sequence[str], settings: Settings,
                      rng: random.Random, now: datetime, drift: bool = False,
                      excluded: Mapping[str, str] | None = None, log: str = "") -> tuple[Selection, list[EvolutionEvent]]:
    """The selector fed from the store as every cycle feeds it (bench/selection.py calls it too): the memory
    graph's whole history, reusable capsules, failed capsules and the feedback scores. Also returns the
    finished events it read (the personality stage reads them too). ``log``: the log lines this cycle read
    (a capsule whose function still complains there is not offered as another problem's example)."""
    # selection learns from the whole history (memory graph: summaries of folded events, then the events) and
    # from feedback; the loop rules only read the last few events
    memory = store.memory_history(MEMORY_FOLD)
    finished = learns_from(e for e in memory.events if e.outcome.status in TERMINAL)
    feedback = store.list_feedback()
    if learning_switch(settings).on("feedback"):  # a person's not_helpful outranks a verdict's "verified"
        feedback = without_overruled_credit(feedback, overruled_ids(finished, feedback))
        finished = overruled(finished, feedback)
    capsules = _reusable_here(store, signals, rejected_capsules(memory.events, feedback), log)
    selection = select_gene_and_capsule(
        genes=genes, capsules=capsules, failed_capsules=store.list_failed_capsules(),
        signals=signals, recent_events=finished, settings=settings, rng=rng, now=now, drift=drift,
        excluded=excluded, feedback=FeedbackIndex(feedback), summaries=memory.summaries)
    return selection, finished


def _reusable_here(store: Store, signals: Sequence[str], rejected: set[str], log: str) -> list[Capsule]:
    """Capsules selection may reuse (the ``capsules`` mechanism, gated in the selector): fixes that held, for this
    problem, or else a verified fix of the same kind of problem; never one a person rejected. Part of capsules
    whatever ``problem_memory`` says: a capsule of another error offered as the example is no help (issue 41)."""
    return for_this_problem(reusable(store.list_capsules()), signals, rejected, log)


def persons_rejects(genes: Sequence[Gene], signals: Sequence[str], feedback: Sequence[FeedbackSignal],
                    now: datetime, excluded: Mapping[str, str]) -> dict[str, str]:
    """Genes people rejected across problems (gep/learning/persons_word.py ``rejections``), left out while a gene
    they rejected less matches the problem the cycle leads with (its first error line)."""
    lead = lead_problem_signals(signals)  # the selector's step 3c leads with the same error
    net = rejections(feedback, now)
    if not lead or max(net.values(), default=0) < REJECTED_NET:
        return {}
    able = [g.id for g in genes if g.id not in excluded and match_score(g, lead) > 0]
    return {gid: f"people rejected {net[gid]} more of its changes than they approved"
            for gid in able if net.get(gid, 0) >= REJECTED_NET and any(net.get(o, 0) < net[gid] for o in able)}


def select(ctx: CycleContext, state: CycleState) -> CycleState:
    """Pick gene, capsule and personality (pure given the store's contents)."""
    genes = workspace_genes(ctx.repo.path, ctx.store, state.sources.warnings)  # gene files skipped: recorded
    pool = gene_pool(genes, statuses=ctx.store, workspace=ctx.repo.path, settings=ctx.settings)
    pool.excluded.update(unmet_preconditions(genes, workspace=ctx.repo.path, signals=state.signals))
    if learning_switch(ctx.settings).on("avoid"):
        pool.excluded.update(avoided_genes(refresh_avoid_list(ctx.store), genes, state.signals, pool.excluded))
    if learning_switch(ctx.settings).on("feedback"):
        pool.excluded.update(persons_rejects(genes, state.signals, ctx.store.list_feedback(), ctx.started_at,
                                             pool.excluded))
    state.selection, finished = select_from_store(
        ctx.store, genes=genes, signals=state.signals, settings=ctx.settings, rng=ctx.rng("select"),
        now=ctx.started_at, drift=ctx.request.drift, excluded=pool.excluded, log=state.sources.today_log)
    state.pool = fall_back_to_auto_gene(
        state.selection, genes=genes, pool=pool, signals=state.signals, store=ctx.store,
        workspace=ctx.repo.path, settings=ctx.settings)
    state.gene = state.selection.gene
    current = ctx.store.get_state("personality.current", PersonalityState) or PersonalityState()
    stats = ctx.store.get_state("personality.stats", PersonalityStats) or PersonalityStats()
    state.persona = select_personality(current=current, stats=stats, recent_events=finished,
                                       rng=ctx.rng("personality"), now=ctx.started_at, signals=state.signals,
                                       drift=ctx.request.drift)
    return state


def mutate(ctx: CycleContext, state: CycleState) -> CycleState:
    """The Mutation for the selected gene under the cycle's strategy and personality, and the event that
    will record it; no gene means an empty cycle."""
    if state.gene is not None and state.strategy is not None:
        state.mutation = build_mutation(signals=state.signals, gene=state.gene, personality=_persona(state),
                                        strategy=state.strategy, rng=ctx.rng("mutation"), now=ctx.started_at,
                                        drift=ctx.request.drift)
    state.event = draft_event(ctx, state)
    if state.gene is None or state.mutation is None:
        auto = state.pool.auto_gene if state.pool else None
        state.event = record_empty(ctx, state.event, f"{NO_GENE}; {auto.reason}" if auto else NO_GENE)
        state.done = True
    return state


def _persona(state: CycleState) -> PersonalityState | None:
    return state.persona.state if state.persona else None


def draft_event(ctx: CycleContext, state: CycleState) -> EvolutionEvent:
    event = event_base(ctx, state)
    event.intent = state.mutation.category if state.mutation else event.intent
    event.signals = state.signals
    event.genes_used = [state.gene.id] if state.gene else []
    event.mutation_id = state.mutation.id if state.mutation else None
    event.personality_state = _persona(state)
    event.outcome = Outcome(status=OutcomeStatus.running, score=0.0)
    m = event.meta
    m.strategy = state.strategy.name if state.strategy else None
    m.selector = state.selection.decision if state.selection else None
    m.mutation = state.mutation
    m.personality = state.persona.record if state.persona else None  # its state is the event's personality_state
    m.history = state.history
    capsule = state.selection.capsule if state.selection else None
    m.capsule_reused = capsule.id if capsule else None
    annotate(m, state.fixes, capsule)
    m.sources = SourcesRecord(files=state.sources.files, warnings=state.sources.warnings)
    m.gene_pool = state.pool
    m.behavior = state.behavior.record if state.behavior else None
    return event


# ------------------------------------------------------------------ changing and checking


def begin(ctx: CycleContext, state: CycleState) -> CycleState:
    """Record the running event and the run, then make the tree the change will be made in: a clone for a
    model or an agent, the person's own tree (its baseline recorded, nothing changed) in prompt mode."""
    assert state.event is not None
    ctx.store.add_event(state.event)
    repo = ctx.repo
    state.run = CycleRun(event_id=state.event.id, workspace=repo.path, head_sha=repo.head(),
                         branch=(repo.head_ref() or "").removeprefix("refs/heads/") or None, mode=ctx.mode,
                         pid=os.getpid())
    ctx.store.save_run(state.run)  # first: a crash while the tree is made is recovered from this record
    state.tree = CycleTree.open(repo, state.event.id, ctx.settings, ctx.mode, ORIGINS[ctx.mutator])
    state.run.stage = "begun"
    ctx.store.save_run(state.run)
    return state


def apply(ctx: CycleContext, state: CycleState) -> CycleState:
    """Have the change made: by Claude or an external agent in the cycle's clone, or (prompt mode) a person
    in their own tree later."""
    assert state.event is not None and state.gene is not None and state.mutation is not None
    assert state.tree is not None
    event, gene = state.event, state.gene
    use = learning_switch(ctx.settings)
    # a verified fix of a problem this cycle does not show is not recounted: it names code that works now
    history = (recounted([e for e in ctx.store.recent_events(constants.HISTORY_TAIL) if e.id != event.id],
                         state.signals) if use.on("recent_outcomes") else [])
    # learning off: nothing stored reaches the prompt; else a person's notes always, the rest by its switch
    memory = recall_for_prompt(ctx, gene, state.signals) if ctx.settings.learning != "off" else PromptMemory()
    prompt = build_prompt(
        PromptInput(mutation=state.mutation, gene=gene, capsule=state.selection.capsule if state.selection else None,
                    signals=state.signals, recent_events=history, lessons=memory.lines,
                    lesson_events=memory.line_events, synthesis=memory.synthesis, sources=state.sources,
                    workspace_name=ctx.repo.path.name, cycle_id=event.id, personality=_persona(state),
                    strategy_name=event.meta.strategy or "", protected_paths=list(ctx.settings.protected_paths)),
        context_chars=ctx.settings.prompt_context_chars)
    event.meta.prompt_sizes = prompt.sizes
    told = set(prompt.told_events)  # a lesson about a try the outcomes name is not shown (one account per try)
    shown = [i for i, ev in zip(memory.lesson_ids, memory.lesson_events, strict=True) if not ev or ev not in told]
    event.meta.lessons_recalled, event.meta.synthesis_of = shown or None, memory.synthesis_of or None
    forbidden = sorted({*gene.constraints.forbidden_paths, ".git", ".gep", *ctx.settings.protected_paths})
    mutator = get_mutator(ctx.mutator, ctx.settings, ctx.env)
    event.meta.mutator = mutator.name
    state.result = mutator.apply(MutationRequest(
        work_tree=state.tree.path, state_dir=ctx.repo.gep_dir, cycle_id=event.id, prompt=prompt, gene=gene,
        settings=bounded(ctx.settings, ctx.deadline), origin=ORIGINS[ctx.mutator], forbidden_paths=forbidden,
        validation_commands=validation_commands(ctx.settings, gene.validation), deadline=ctx.deadline))
    if state.result.status == "awaiting_changes":
        state.event, state.done = mark_awaiting(ctx, state, event, gene, state.mutation, state.result), True
    elif state.result.status == "error":
        record_mutator_result(event, state.result)
        event.meta.host_failure = mutator_host_failure(state.result, edited=tree_edited(state.tree))
        state.event, state.done = fail_cycle(ctx, state, event, f"mutator: {state.result.error}"), True
    else:
        record_mutator_result(event, state.result)
        state.summary = state.result.summary
    return state


def solidify_stage(ctx: CycleContext, state: CycleState) -> CycleState:
    """Check the change, then commit and deliver it or end the cycle without it, and store the outcome
    (``gep solidify --abandon``: give the pending change up, saved as a patch)."""
    assert state.run is not None
    if ctx.request.abandon_pending and state.run.status == "awaiting_changes":
        event = abandon_run(ctx.repo, ctx.store, state.run, "abandoned with `gep solidify --abandon`")
        state.notes.append(abandoned_line(event))
        state.event, state.done = event, True
        return state
    assert state.tree is not None and state.event is not None
    assert state.gene is not None and state.mutation is not None
    summary = state.summary or ""  # nobody wrote one: solidify derives it from the diff
    result = solidify(SolidifyInput(
        tree=state.tree, store=ctx.store, settings=bounded(ctx.settings, ctx.deadline), run=state.run, event=state.event,
        gene=state.gene, mutation=state.mutation, summary=summary, branch=_branch(ctx, state), now=ctx.clock,
        approve=state.approve))
    state.event, state.done = result.event, True
    return state


def _branch(ctx: CycleContext, state: CycleState) -> str | None:
    """The branch a clone's commit goes to when the user named one; prompt mode commits on the person's HEAD."""
    mode = state.run.mode if state.run is not None else ctx.mode
    return ctx.branch if mode == "clone" else None


def default_summary(gene: Gene, mutation: Mutation) -> str:
    """The commit subject when nobody wrote one: what the mutation set out to do."""
    return mutation.expected_effect or gene.summary or gene.id


# ------------------------------------------------------------------ after every cycle


def record(ctx: CycleContext, state: CycleState) -> CycleState:
    """What every finished cycle teaches the next one (personality, lessons, feedback, the fix it committed),
    then the store's upkeep (folding old events into the memory graph's summaries; pruning, if set)."""
    if state.event is not None:
        update_personality(ctx, state.event)
        learn_from_cycle(ctx, state.event)
    after_cycle(ctx.store, ctx.settings, MEMORY_FOLD, now=ctx.clock())
    refresh_after_cycle(ctx.repo.path, ctx.store, ctx.settings, utc_now())  # sessions' time, not the clock
    return state


def fail(ctx: CycleContext, state: CycleState, reason: str) -> CycleState:
    """A stage raised: end what the cycle made (a clone's change saved as a patch) and record the failure."""
    state.event, state.done = fail_cycle(ctx, state, state.event, reason), True
    return state
