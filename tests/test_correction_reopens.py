"""A person's correction in a session is about the function it names (gep/learning/corrections.py): it counts
against the change that touched that function, not a newer change to another function of the same file, and,
said since the last cycle, it puts the problem that change addressed first again (issue 41, point 3: a change
that makes a failure silent is verified by the logs; only the person can say it is not fixed). Real git
repository, real store, the cycle's own collect and extract stages over a real transcript."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from conftest import git, init_repo

from gep.core.config import Settings
from gep.core.learned import Resolution
from gep.core.models import EventMeta, EvolutionEvent, Outcome
from gep.core.request import CycleRequest
from gep.cycle.context import CycleContext
from gep.cycle.fixes import remember_commit
from gep.cycle.stages import collect, extract
from gep.cycle.state import CycleState
from gep.git import open_repo
from gep.learning.corrections import corrected_changes, reopened_by_corrections
from gep.signals.sources import TranscriptExchange
from gep.store import Store

T0 = datetime(2026, 11, 28, 2, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)
ERR_TOTAL = "errsig:2026-11-28T01:00:00.5Z ERROR app.billing: ZeroDivisionError: division by zero in app.billing.total_invoice"
ERR_LIMIT = "errsig:2026-11-28T02:00:00.5Z ERROR app.billing: ValueError: invalid literal in app.billing.load_limit"
SAID = "No, that's wrong: total_invoice in app/billing.py now swallows the error and returns a made-up value."
BILLING = "def total_invoice(pair):\n    total, count = pair\n    return total / count\n\n\n" \
          "def load_limit(text):\n    return int(text)\n"


def _event(eid: str, gene: str, signal: str, at: datetime, sha: str = "c") -> EvolutionEvent:
    return EvolutionEvent(id=eid, genes_used=[gene], signals=[signal], outcome=Outcome(status="success", score=0.8),
                          meta=EventMeta(at=at.isoformat(), commit=sha, solidified_at=at.isoformat()))


def _res(eid: str, signal: str, at: datetime, touched: str) -> Resolution:
    return Resolution(event_id=eid, signals=[signal], commit_sha="c", committed_at=at, touched=[touched],
                      touched_files=["app/billing.py"], status="verified")


def _said(text: str, at: datetime) -> TranscriptExchange:
    return TranscriptExchange(source="claude_code", session_id="s1", agent="I'll fix it.", user=text, ts=at)


QUIET = _event("evt_quiet", "gene_quiet", ERR_TOTAL, T0)
REPAIR = _event("evt_repair", "gene_repair", ERR_LIMIT, T0 + HOUR)
FIXES = [_res("evt_quiet", ERR_TOTAL, T0, "total_invoice"), _res("evt_repair", ERR_LIMIT, T0 + HOUR, "load_limit")]


def test_a_correction_counts_against_the_change_to_the_function_it_names_not_the_newest_to_its_file() -> None:
    [(_ex, event, named)] = corrected_changes([_said(SAID, T0 + 2 * HOUR)], [QUIET, REPAIR], FIXES)
    assert (event.id, named) == ("evt_quiet", "total_invoice")
    # naming only the file, it is the newest change to the file's
    [(_ex, event, named)] = corrected_changes([_said("No, app/billing.py is wrong now.", T0 + 2 * HOUR)],
                                              [QUIET, REPAIR], FIXES)
    assert (event.id, named) == ("evt_repair", "app/billing.py")
    # the change to the function it names is out of the window, the newer change to its file is not: that change
    # does not take the word by the file
    late = T0 + timedelta(hours=24, minutes=30)
    assert corrected_changes([_said(SAID, late)], [QUIET, REPAIR], FIXES) == []


def test_a_new_correction_naming_a_changed_function_puts_its_problem_first() -> None:
    signals = ["log_error", ERR_LIMIT.replace("02:00", "04:00"), "perf_bottleneck"]
    said = _said(SAID, T0 + 2 * HOUR)
    out, back = reopened_by_corrections(signals, [said], [QUIET, REPAIR], FIXES, since=T0 + 1.5 * HOUR)
    assert back == [ERR_TOTAL]
    assert out == [ERR_TOTAL, *signals]
    # said before the last cycle: it had its turn then
    assert reopened_by_corrections(signals, [said], [QUIET, REPAIR], FIXES, since=T0 + 3 * HOUR)[1] == []
    # a change after the correction touched the function again: that change answered it
    again = [*FIXES, _res("evt_again", ERR_TOTAL, T0 + 2.5 * HOUR, "total_invoice")]
    assert reopened_by_corrections(signals, [said], [QUIET, REPAIR], again, since=T0 + 1.5 * HOUR)[1] == []
    # a file alone is too wide to send the agent back to
    file_only = _said("No, app/billing.py is wrong now.", T0 + 2 * HOUR)
    assert reopened_by_corrections(signals, [file_only], [QUIET, REPAIR], FIXES, since=T0 + 1.5 * HOUR)[1] == []
    # the problem is already among the signals: not twice
    assert reopened_by_corrections([ERR_TOTAL], [said], [QUIET, REPAIR], FIXES, since=T0 + 1.5 * HOUR) == (
        [ERR_TOTAL], [])


def _workspace(tmp_path: Path) -> Path:
    """Two committed changes to app/billing.py: gene_quiet's to total_invoice, then gene_repair's to load_limit;
    then a person corrects the agent about total_invoice in a session."""
    ws = tmp_path / "ws"
    (ws / "app").mkdir(parents=True)
    (ws / "logs").mkdir()
    (ws / ".gitignore").write_text("logs/\n.gep/\n")
    init_repo(ws, {"app/__init__.py": "", "app/billing.py": BILLING})
    (ws / "logs" / "job.log").write_text("")
    turns = [("user", "Please look at the nightly job."), ("assistant", "I made total_invoice return a default."),
             ("user", SAID), ("assistant", "You're right, I'll fix the input handling instead.")]
    (ws / "sessions").mkdir()
    at = T0 + 2 * HOUR
    (ws / "sessions" / "s1.jsonl").write_text("".join(json.dumps(
        {"type": role, "timestamp": (at + timedelta(seconds=i)).isoformat(), "message": {"role": role, "content": text}})
        + "\n" for i, (role, text) in enumerate(turns)))
    return ws


def _commit(ws: Path, store: Store, eid: str, gene: str, signal: str, at: datetime, old: str, new: str) -> None:
    path = ws / "app" / "billing.py"
    path.write_text(path.read_text().replace(old, new))
    git(ws, "commit", "-qam", eid)
    event = _event(eid, gene, signal, at, git(ws, "rev-parse", "HEAD").strip())
    store.add_event(event)
    ctx = CycleContext(request=CycleRequest(workspace=ws), settings=Settings(), repo=open_repo(ws), store=store,
                       event_id=eid, cycle_number=1, seed=1, started_at=at, clock=lambda: at)
    remember_commit(ctx, event)


def _signals(tmp_path: Path, settings: Settings) -> tuple[list[str], list[str]]:
    ws = _workspace(tmp_path)
    now = T0 + 3 * HOUR
    with Store.for_workspace(ws) as store:
        _commit(ws, store, "evt_quiet", "gene_quiet", ERR_TOTAL, T0, "return total / count",
                "return total / count if count else 1.0")
        _commit(ws, store, "evt_repair", "gene_repair", ERR_LIMIT, T0 + HOUR, "return int(text)",
                "return int(float(text))")
        ctx = CycleContext(request=CycleRequest(workspace=ws), settings=settings, repo=open_repo(ws), store=store,
                           event_id="evt_next", cycle_number=3, seed=1, started_at=now, clock=lambda: now)
        state = extract(ctx, collect(ctx, CycleState()))
        lessons = [(x.event_id, x.stance.value, x.content) for x in store.list_lessons() if x.category == "person"]
    assert state.behavior is not None
    # the person's word is a lesson too, as a label's is, about the change to the function they named
    assert [(e, s) for e, s, _ in lessons] == [("evt_quiet", "fails")]
    assert "a person corrected the agent about total_invoice" in lessons[0][2]
    return state.signals, state.behavior.record.reopened


def test_the_cycle_leads_with_the_problem_a_person_says_a_change_left_unfixed(tmp_path: Path) -> None:
    base = Settings(transcript_max_age_hours=0)
    signals, reopened = _signals(tmp_path / "on", base)
    assert reopened == [ERR_TOTAL]
    assert signals[0] == ERR_TOTAL
    # feedback off (the person's word not used): the logs said nothing, so nothing is worked on again
    signals, reopened = _signals(tmp_path / "off", base.model_copy(update={"learning_off": ["feedback"]}))
    assert reopened == [] and ERR_TOTAL not in signals
