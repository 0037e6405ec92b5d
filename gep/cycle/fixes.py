"""Verified fixes in the cycle: success means the problem went away (gep/learning/resolved.py does the judging).

When a cycle's change is committed, :func:`remember_commit` keeps what it addressed and how long each log
and transcript was at that moment. Every later cycle, :func:`check_fixes` runs right after signal extraction:
a signal a fix addressed that shows only in lines written before its commit is dropped (it does not drive
repair again), one that shows in a newer line stays (the fix did not hold). The first check after a fix gives
its verdict, recorded on the fix's event (``meta.fix_verdict``) and capsule, as an implicit feedback signal
(verified: ``used``; did not hold: ``ignored``) and as a lesson that supersedes the fix's own.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from gep.core.models import Capsule, EventMeta, EvolutionEvent, iso
from gep.core.records import FixCheckRecord, FixCreditRecord, ResolvedRecord
from gep.cycle.context import CycleContext
from gep.git.change_scope import ChangeScope, change_scope
from gep.learning.feedback import Observation, implicit_signal
from gep.learning.fix_credit import Credit, credit_change, live_errors
from gep.learning.lessons import LessonInput, build_lesson, record_lesson
from gep.learning.memory_graph import parse_at
from gep.learning.resolved import (
    FixVerdict,
    ResolutionCheck,
    ResolvedSignal,
    check_resolutions,
    is_specific,
    resolution_for_commit,
)
from gep.signals.sources import collect_tails, file_marks
from gep.signals.unread import READ_MARKS_KEY, marks_of
from gep.store import Store

VERDICT_KEY = "fix_verdict"  # also kept on the fix's capsule (an extra field: capsules keep unknown fields)


def check_fixes(ctx: CycleContext, signals: Sequence[str], recent: str = "") -> ResolutionCheck:
    """This cycle's signals with resolved ones dropped; verdicts on earlier fixes recorded as they fall.
    ``recent``: the log lines this cycle reads (a problem a fix only moved still shows there)."""
    resolutions = ctx.store.recent_resolutions()
    if not resolutions:
        return ResolutionCheck(signals=list(signals))
    tails = collect_tails(ctx.repo.path, ctx.settings, ctx.started_at)
    check = check_resolutions(signals, resolutions, tails, ctx.started_at, recent=recent)
    for res in check.updated:
        ctx.store.save_resolution(res)
    for verdict in check.verdicts:
        record_verdict(ctx, verdict)
    return check


def record_verdict(ctx: CycleContext, verdict: FixVerdict) -> None:
    """The verdict on an earlier fix, given by this cycle (see :func:`apply_verdict`)."""
    apply_verdict(ctx.store, verdict, ctx.started_at)


def apply_verdict(store: Store, verdict: FixVerdict, now: datetime) -> None:
    """The verdict on an earlier fix: on its event and capsule, as feedback on its gene, and as a lesson.
    (bench/selection.py feeds its simulated fixes' verdicts through here too.)"""
    event = store.get_event(verdict.event_id)
    if event is None:  # pruned, or imported without its event: nothing left to mark
        return
    event.meta.fix_verdict = verdict.verdict
    credit = event.meta.fix_credit or FixCreditRecord()
    event.meta.fix_credit = credit.model_copy(update={"judged": list(verdict.judged)})
    store.add_event(event)
    capsule = store.get_capsule(event.capsule_id) if event.capsule_id else None
    if capsule is not None:
        setattr(capsule, VERDICT_KEY, verdict.verdict)
        store.upsert_capsule(capsule)
    held = verdict.verdict == "verified"
    gene = event.gene_id
    signals = about(event, verdict)
    signal = implicit_signal(event_id=event.id, gene_id=gene, signals=signals, at=now,
                             observation=Observation.fix_verified if held else Observation.fix_did_not_hold)
    if signal is not None:
        store.add_feedback(signal)
    if gene is not None:
        inp = LessonInput(event_id=event.id, gene_id=gene, signals=signals, outcome="success",
                          fix_held=held, files_changed=event.blast_radius.files,
                          change=event.meta.change_excerpt or "")
        record_lesson(store, build_lesson(inp, store.list_lessons(gene), now))


def credit_of(ctx: CycleContext, event: EvolutionEvent, scope: ChangeScope | None) -> Credit:
    """What the committed change addressed: the errors in the logs whose code it touched (gep/learning/fix_credit.py)."""
    lines = [line.text for tail in collect_tails(ctx.repo.path, ctx.settings, ctx.clock())
             if tail.kind != "transcript" for line in tail.lines]
    settled = [r.signal for r in event.meta.resolved or []]
    tests_passed = bool(event.meta.validation_ok) and any("pytest" in v.cmd for v in event.meta.validation or [])
    return credit_change(event.signals, live_errors(lines), scope, tests_passed=tests_passed, settled=settled)


def touched_functions(scope: ChangeScope | None) -> list[str]:
    """The functions a change touched, outside its tests (a new warning naming one is its problem moved)."""
    if scope is None:
        return []
    return list(dict.fromkeys(f for c in scope.files if not _is_test(c.path) for f in c.functions))


def _is_test(path: str) -> bool:
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    return name.startswith("test_") or name.endswith("_test.py") or "/tests/" in "/" + path


def about(event: EvolutionEvent, verdict: FixVerdict) -> list[str]:
    """The signals a verdict's feedback and lesson are filed under: the errors the change was judged on (a fix
    triggered by ``perf_bottleneck`` that fixed an error belongs to that error), then its trigger signals."""
    judged = [s for s in verdict.judged if is_specific(s)]
    return list(dict.fromkeys([*judged, *event.signals]))


def remember_commit(ctx: CycleContext, event: EvolutionEvent) -> None:
    """Right after a cycle's change landed: what it addressed, and where the logs stood. A commit kept on its
    own branch (``gep/<event>``, not merged) has changed nothing the agent runs yet: it resolves nothing."""
    if event.outcome.status != "success" or not event.meta.commit or event.meta.delivery == "kept":
        return
    committed_at = parse_at(event.meta.solidified_at) or ctx.clock()
    scope = change_scope(ctx.repo.path, event.meta.commit)
    credit = credit_of(ctx, event, scope)
    res = resolution_for_commit(event_id=event.id, gene_id=event.gene_id,
                                signals=credit.addressed, commit_sha=event.meta.commit, committed_at=committed_at,
                                files=file_marks(ctx.repo.path, ctx.settings, ctx.clock()),
                                missed=credit.missed, credited=credit.credited, rerun=credit.rerun,
                                touched=touched_functions(scope),
                                touched_files=[f.path for f in scope.files] if scope is not None else [])
    if res is not None:
        ctx.store.save_resolution(res)
        event.meta.fix_credit = FixCreditRecord(addressed=res.signals, credited=res.credited, missed=res.missed)
        ctx.store.add_event(event)


def mark_read(ctx: CycleContext, event: EvolutionEvent) -> None:
    """Right after a change landed in the workspace: the lines written so far describe the code before it, so
    the next cycles read only what is written after (gep/signals/unread.py). Every arm, learning off too."""
    if event.outcome.status != "success" or not event.meta.commit or event.meta.delivery == "kept":
        return
    at = parse_at(event.meta.solidified_at) or ctx.clock()
    tails = collect_tails(ctx.repo.path, ctx.settings, ctx.clock(), warnings=[])
    ctx.store.set_state(READ_MARKS_KEY, marks_of(tails, at))


def reusable(capsules: Sequence[Capsule]) -> list[Capsule]:
    """Capsules selection may offer: not one whose fix did not hold (its approach did not make the problem go)."""
    return [c for c in capsules if (c.model_extra or {}).get(VERDICT_KEY) != "did_not_hold"]


# ------------------------------------------------------------------ what the event records


def _ref(r: ResolvedSignal) -> ResolvedRecord:
    return ResolvedRecord(signal=r.signal, event_id=r.event_id, commit=r.commit_sha, committed_at=iso(r.committed_at))


def annotate(meta: EventMeta, check: ResolutionCheck | None, capsule: Capsule | None) -> None:
    """The event's record of resolved and returning signals, verdicts given, and the reused capsule's origin."""
    if check is not None:
        if check.resolved:
            meta.resolved = [_ref(r) for r in check.resolved]
        if check.live_again:
            meta.live_again = [_ref(r) for r in check.live_again]
        if check.verdicts:
            meta.fix_checks = [FixCheckRecord(event_id=v.event_id, commit=v.commit_sha, verdict=v.verdict,
                                              live_signals=v.live_signals, new_lines=v.new_lines,
                                              evidence=v.evidence)
                               for v in check.verdicts]
    origin = getattr(capsule, "origin", None)  # a StoredCapsule knows the workspace that recorded it
    if origin is not None:
        meta.capsule_origin = origin
