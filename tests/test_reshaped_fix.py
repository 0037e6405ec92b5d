"""A fix that only moved the problem does not hold (issue 41): a change that swallows an exception makes its
error line go, and the function it changed then warns about itself. Real git repositories and a real store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from conftest import git, init_repo

from gep.core.config import Settings
from gep.core.models import EventMeta, EvolutionEvent, Outcome
from gep.core.request import CycleRequest
from gep.cycle.context import CycleContext
from gep.cycle.fixes import check_fixes, remember_commit
from gep.git import open_repo
from gep.learning.corrections import record_corrections
from gep.learning.resolved import Resolution, ResolutionCheck
from gep.signals.sources import TranscriptExchange
from gep.store import Store

BILLING = '''def total_invoice(pair):
    total, count = pair
    return total / count
'''
SWALLOWED = '''def total_invoice(pair):
    try:
        total, count = pair
        return total / count
    except Exception:
        return None
'''
FIXED = '''def total_invoice(pair):
    total, count = pair
    return total / count if count else 0.0
'''
T0 = datetime(2026, 11, 28, 2, 0, tzinfo=UTC)
ERR = "ERROR app.billing: ZeroDivisionError: division by zero in app.billing.total_invoice"
WARN = "WARNING app.billing: total_invoice returned no result"
SLOW = "WARNING app.job: request took 6.2s, slow response from upstream"


def _at(t: datetime) -> str:
    return f"{t:%Y-%m-%dT%H:%M:%S}.5Z"


def _cycle(tmp_path: Path, body: str, after: list[str], before: tuple[str, ...] = ()) -> tuple[
        ResolutionCheck, str | None]:
    """The error logged, a change to ``body`` committed and remembered, ``after`` logged, the next cycle's check."""
    ws = tmp_path / "ws"
    (ws / "app").mkdir(parents=True)
    (ws / "logs").mkdir()
    (ws / ".gitignore").write_text("logs/\n")
    init_repo(ws, {"app/__init__.py": "", "app/billing.py": BILLING})
    log = ws / "logs" / "job.log"
    early = T0 - timedelta(hours=1)
    log.write_text("".join(f"{_at(early)} {x}\n" for x in (ERR, *before)))
    (ws / "app" / "billing.py").write_text(body)
    git(ws, "commit", "-qam", "change")
    sha = git(ws, "rev-parse", "HEAD").strip()
    signal = f"errsig:{_at(early)} {ERR}"
    event = EvolutionEvent(id="evt_fix", genes_used=["gene_quiet"], signals=[signal],
                           outcome=Outcome(status="success", score=0.8),
                           meta=EventMeta(commit=sha, solidified_at=T0.isoformat()))
    later = T0 + timedelta(hours=1)
    with Store.for_workspace(ws) as store:
        store.add_event(event)
        ctx = CycleContext(request=CycleRequest(workspace=ws), settings=Settings(), repo=open_repo(ws),
                           store=store, event_id="evt_fix", cycle_number=1, seed=1, started_at=T0, clock=lambda: T0)
        remember_commit(ctx, event)
        new = "".join(f"{_at(later + timedelta(seconds=i))} {x}\n" for i, x in enumerate(after))
        with log.open("a") as fh:
            fh.write(new)
        check = check_fixes(ctx.model_copy(update={"started_at": later, "clock": lambda: later}),
                            ["perf_bottleneck"], recent=new)
        judged = store.get_event("evt_fix")
    assert judged is not None
    return check, judged.meta.fix_verdict


def test_a_swallowed_error_that_now_warns_did_not_hold_and_drives_repair(tmp_path: Path) -> None:
    check, verdict = _cycle(tmp_path, SWALLOWED, [WARN, SLOW])
    assert verdict == "did_not_hold"
    [v] = check.verdicts
    assert any("total_invoice returned no result" in s for s in v.live_signals)
    # the warning carries no error word: the log rules never name it, the verdict does, while it shows
    assert [s for s in check.signals if "returned no result" in s] == [
        f"errsig:{_at(T0 + timedelta(hours=1))} {WARN}"]


def test_a_real_fix_with_unrelated_warnings_is_verified(tmp_path: Path) -> None:
    check, verdict = _cycle(tmp_path, FIXED, [SLOW])
    assert verdict == "verified"
    assert not any("returned no result" in s for s in check.signals)


def test_a_warning_the_function_logged_before_the_change_is_no_new_shape(tmp_path: Path) -> None:
    check, verdict = _cycle(tmp_path, FIXED, [WARN, SLOW], before=(WARN,))
    assert verdict == "verified"


def _remembered(tmp_path: Path, store: Store) -> tuple[EvolutionEvent, CycleContext]:
    ws = tmp_path / "ws"
    event = EvolutionEvent(id="evt_quiet", genes_used=["gene_quiet"], signals=[f"errsig:{ERR}"],
                           outcome=Outcome(status="success", score=0.8),
                           meta=EventMeta(commit=git(ws, "rev-parse", "HEAD").strip(), solidified_at=T0.isoformat()))
    store.add_event(event)
    ctx = CycleContext(request=CycleRequest(workspace=ws), settings=Settings(), repo=open_repo(ws),
                       store=store, event_id="evt_quiet", cycle_number=1, seed=1, started_at=T0, clock=lambda: T0)
    remember_commit(ctx, event)
    return event, ctx


def _exchange(text: str, at: datetime) -> TranscriptExchange:
    return TranscriptExchange(source="claude_code", session_id="s1", agent="I'll fix the input handling instead.",
                              user=text, ts=at)


def test_a_correction_naming_what_a_change_touched_is_not_helpful_for_its_gene_once(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "app").mkdir(parents=True)
    init_repo(ws, {"app/__init__.py": "", "app/billing.py": BILLING, "app/users.py": "def load_user(x):\n    return x\n"})
    (ws / "app" / "billing.py").write_text(SWALLOWED)
    git(ws, "commit", "-qam", "swallow")
    later = T0 + timedelta(hours=1)
    named = _exchange("No, that's wrong: total_invoice in app/billing.py now swallows the error and returns None.",
                      later)
    other = _exchange("No, that's wrong: load_user in app/users.py drops the name.", later)
    with Store.for_workspace(ws) as store:
        event, _ctx = _remembered(tmp_path, store)
        fixes = store.recent_resolutions()
        assert record_corrections(store, [other], [event], fixes) == []  # names nothing the change touched
        found = record_corrections(store, [named, named], [event], fixes)
        assert record_corrections(store, [named.model_copy(update={"ts": later + timedelta(hours=1)})], [event],
                                  fixes) == []  # counted once
        feedback = store.list_feedback("gene_quiet")
    assert [f.event_id for f in found] == ["evt_quiet"]
    assert [(f.event_id, str(f.kind.value), f.author) for f in feedback] == [
        ("evt_quiet", "not_helpful", "behavioural signal (correction)")]


def test_a_cycle_reading_a_session_records_the_correction_as_not_helpful(tmp_path: Path) -> None:
    """Collect and extract, as a cycle runs them, over a real transcript: the correction reaches the feedback."""
    import json

    from gep.cycle.collect_behavior import capture_behavior, use_behavior

    ws = tmp_path / "ws"
    (ws / "app").mkdir(parents=True)
    init_repo(ws, {"app/__init__.py": "", "app/billing.py": BILLING})
    (ws / "app" / "billing.py").write_text(SWALLOWED)
    git(ws, "commit", "-qam", "swallow")
    at = T0 + timedelta(minutes=30)
    said = "No, that's wrong: total_invoice in app/billing.py now swallows the error and returns None."
    turns = [("user", "Please look at the nightly job."), ("assistant", "I made total_invoice return None."),
             ("user", said), ("assistant", "You're right, I'll fix the input handling instead.")]
    (ws / "sessions").mkdir()
    (ws / "sessions" / "s1.jsonl").write_text("".join(json.dumps(
        {"type": role, "timestamp": (at + timedelta(seconds=i)).isoformat(), "message": {"role": role, "content": text}})
        + "\n" for i, (role, text) in enumerate(turns)))
    settings = Settings(transcript_max_age_hours=0)
    now = T0 + timedelta(hours=1)
    with Store.for_workspace(ws) as store:
        event, _ctx = _remembered(tmp_path, store)
        capture = capture_behavior(ws, settings=settings, env={}, now=now, cycle_number=2)
        use_behavior(capture, corpus=["stable_success_plateau"], workspace=ws, store=store, events=[event],
                     settings=settings, now=now)
        feedback = store.list_feedback("gene_quiet")
    assert [f.event_id for f in capture.record.corrected] == ["evt_quiet"]
    assert [(f.kind.value, f.note) for f in feedback] == [
        ("not_helpful", "a person corrected the agent about total_invoice, which this change touched")]


def test_a_new_warning_is_held_against_the_newer_of_two_changes_to_the_function() -> None:
    """A real fix, then a later change that swallows the error in the same function: the warning is the later
    change's doing; the earlier fix is not judged on it."""
    from gep.learning.resolved import check_resolutions, resolution_for_commit
    from gep.signals.sources import FileTail, TailLine

    def res(event: str, at: datetime) -> Resolution:
        made = resolution_for_commit(event_id=event, gene_id="g", signals=[f"errsig:{ERR}"], commit_sha=event,
                                     committed_at=at, files=[], touched=["total_invoice"])
        assert made is not None
        return made.model_copy(update={"status": "verified"} if event == "fix" else {})

    later = T0 + timedelta(hours=3)
    tail = FileTail(path="logs/job.log", kind="log", size=999, lines=[
        TailLine(start=0, at=T0 - timedelta(hours=1), text=f"{_at(T0 - timedelta(hours=1))} {ERR}"),
        TailLine(start=100, at=later, text=f"{_at(later)} {WARN}")])
    check = check_resolutions(["perf_bottleneck"], [res("fix", T0), res("swallow", T0 + timedelta(hours=2))],
                              [tail], later + timedelta(minutes=5))
    assert [(v.event_id, v.verdict) for v in check.verdicts] == [("swallow", "did_not_hold")]
