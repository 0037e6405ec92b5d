"""What reaches the agent's own sessions: the SessionStart hook's context, `gep context`, and whether it helped."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from learning_helpers import (
    REPAIR,
    agent_workspace,
    committed_fix,
    cycle,
    later,
    log_again,
    store_of,
    venv_first,
)
from typer.testing import CliRunner

from gep import CycleRequest, run_cycle
from gep.cli.root import app
from gep.core.models import EvolutionEvent, Outcome
from gep.learning.agent_context import HEADER, LINE_CHARS, build_context, within_chars
from gep.learning.context_cache import answer_from_cache
from gep.learning.feedback import FeedbackKind, FeedbackSignal, Observation
from gep.learning.injections import (
    DROP_BELOW,
    Injected,
    Injection,
    Judgment,
    judge_injections,
    read_log,
    record_injection,
    scores,
)
from gep.learning.lessons import Lesson, LessonCategory, LessonInput, Stance, build_lesson
from gep.signals.behavior import BehaviorSignal, Detected
from gep.signals.behavior_log import record
from gep.signals.sources import FileTail, TailLine

pytestmark = pytest.mark.timeout(300)
GEP = str(Path(sys.executable).parent / "gep")
TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
BREAK = "import pathlib, sys; sys.stdin.read(); pathlib.Path('stats.py').write_text('def mean(:\\n')"
PREFERENCE = "User prefers small focused commits"
NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
ERR = "errsig:TypeError: add() takes 2 positional arguments but 3 were given"


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    venv_first(monkeypatch)
    return agent_workspace(tmp_path / "ws")


def failed_attempt(ws: Path) -> EvolutionEvent:
    """A command agent breaks the example's tests: the cycle fails and writes a failure lesson on the error."""
    event = run_cycle(CycleRequest(workspace=ws, mutator="command", seed=1,
                                   agent_cmd=shlex.join([sys.executable, "-c", BREAK])), env=dict(os.environ))
    assert event is not None and event.outcome.status == "failed" and event.genes_used == [REPAIR]
    return event


def prefer(ws: Path, at: datetime) -> None:
    signal = BehaviorSignal(ts=at.isoformat(), type="preference", summary=PREFERENCE, intensity=4)
    record(ws, [Detected(key=f"k{at.timestamp()}", source="claude_code", session_id="s0", ts=at, signals=[signal])])


def session_start(ws: Path, cwd: Path, session: str = "sess-1") -> subprocess.CompletedProcess[str]:
    payload = {"session_id": session, "transcript_path": "", "cwd": str(cwd), "hook_event_name": "SessionStart",
               "source": "startup"}
    env = {k: v for k, v in os.environ.items() if k != "CLAUDE_PROJECT_DIR"}
    return subprocess.run([GEP, "capture"], input=json.dumps(payload), capture_output=True, text=True, env=env,
                          timeout=60, check=True)


def test_session_start_carries_a_failed_attempt_and_a_preference_and_no_secret(ws: Path) -> None:
    failed = failed_attempt(ws)
    prefer(ws, datetime.now(UTC))
    with store_of(ws) as store:
        store.add_feedback(FeedbackSignal(id="fb_1", gene_id=REPAIR, event_id=failed.id, kind=FeedbackKind.not_helpful,
                                          confidence=1.0, origin=Observation.person, created_at=datetime.now(UTC),
                                          note=f"broke the parser, token {TOKEN}"))
        lesson = next(x for x in store.list_lessons() if x.event_id == failed.id)
    (ws / "sub").mkdir()
    done = session_start(ws, ws / "sub")  # a session started in a sub-folder of the workspace
    answer = json.loads(done.stdout)
    text = answer["hookSpecificOutput"]["additionalContext"]
    assert answer["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert text.startswith(HEADER) and len(text) <= 1500
    # what the agent can act on (issue 41): the live problem as the logs say it, the change tried and how it
    # failed; never a line that steers away from the file to fix ("Avoid ...: touched stats.py")
    assert "Live problem (the logs say): [ERROR] report: AssertionError: mean([2, 4, 6]) returned 6.0" in text
    assert lesson.id and "Tried before on a live problem and failed: changed stats.py mean()" in text
    assert "+ def mean(:" in text and "checks said" in text  # the change from its diff, then how it failed
    assert "touched" not in text.lower() and "avoid" not in text.lower()
    assert f"Preference: {PREFERENCE}" in text and "broke the parser" in text
    assert f"(about {REPAIR}'s change {failed.id} (changed stats.py mean()" in text  # the note names its change
    assert TOKEN not in text and TOKEN not in (ws / ".gep" / "context" / "injections.jsonl").read_text()
    injections, _ = read_log(ws)
    assert [(i.session, [x.ref for x in i.items if x.kind == "avoid"]) for i in injections] == [("sess-1", [lesson.id])]
    # `gep context` prints the same text (for other agents), and records nothing without --session
    printed = CliRunner().invoke(app, ["context", "--workspace", str(ws)])
    assert printed.exit_code == 0 and printed.stdout.strip() == text
    assert len(read_log(ws)[0]) == 1


def test_nothing_from_a_resolved_problem(ws: Path) -> None:
    fixed = committed_fix(ws)
    said = CliRunner().invoke(app, ["feedback", fixed.id, "not_helpful", "--note", "the mean still looks off",
                                    "--workspace", str(ws)])
    assert said.exit_code == 0, said.output
    before = CliRunner().invoke(app, ["context", "--workspace", str(ws)]).stdout
    assert "on a live problem" in before and "the mean still looks off" in before  # live until checked
    after = cycle(ws, 2)  # reads the same log: every error line predates the fix, so it is resolved
    assert not any(s.startswith("errsig:") for s in after.signals), after.signals
    text = CliRunner().invoke(app, ["context", "--workspace", str(ws)]).stdout
    assert "on a live problem" not in text and "Live problem" not in text and "the mean" not in text
    # after the verified fix, the next session is told the change that worked (issue 41)
    assert "Fixed, and the fix held" in text and "changed stats.py mean()" in text and fixed.id in text, text


def test_a_workspace_without_cycles_gets_nothing_and_no_store(tmp_path: Path) -> None:
    ws = agent_workspace(tmp_path / "fresh")
    assert session_start(ws, ws).stdout == ""
    assert not (ws / ".gep" / "gep.db").exists()


def test_an_injection_is_judged_by_the_next_cycle_and_shown_in_lessons_list(ws: Path) -> None:
    failed = failed_attempt(ws)
    session_start(ws, ws)
    log_again(ws, later(1))  # the problem comes back after the session received its lesson
    cycle(ws, 2, clock=lambda: later(2))
    _, judgments = read_log(ws)
    with store_of(ws) as store:
        lesson = next(x for x in store.list_lessons() if x.event_id == failed.id)
    assert (lesson.id, "ignored") in {(j.ref, j.verdict) for j in judgments}
    listed = CliRunner().invoke(app, ["lessons", "list", "--workspace", str(ws)], env={"COLUMNS": "80"})
    assert "sessions: injected 1x, used 0, ignored 1, score 0.45" in listed.stdout, listed.stdout
    rows = json.loads(CliRunner().invoke(app, ["lessons", "list", "--workspace", str(ws), "--json"]).stdout)
    assert next(r for r in rows if r["id"] == lesson.id)["sessions"]["ignored"] == 1


# ------------------------------------------------------------------ the pure parts


def _event(eid: str, signals: list[str], at: datetime) -> EvolutionEvent:
    return EvolutionEvent(id=eid, signals=signals, genes_used=[REPAIR], outcome=Outcome(status="failed"),
                          meta={"at": at.isoformat()})


def _lesson(lid: str, eid: str, stance: Stance, content: str, at: datetime) -> Lesson:
    category = LessonCategory.failure if stance == Stance.fails else LessonCategory.success
    return Lesson(id=lid, topic="t", gene_id=REPAIR, category=category, stance=stance, content=content,
                  event_id=eid, created_at=at)


def test_failures_come_first_the_budget_holds_and_the_same_store_gives_the_same_text() -> None:
    events = [_event("e2", [ERR, "log_error"], NOW), _event("e1", [ERR], NOW - timedelta(hours=1))]
    lessons = [_lesson("l_ok", "e1", Stance.works, "renamed the argument", NOW - timedelta(hours=1)),
               _lesson("l_bad", "e2", Stance.fails, "added a third parameter: tests failed", NOW)]
    got = build_context(events=events, lessons=lessons, feedback=[], signals=[], now=NOW)
    assert [i.ref for i in got.items][1:] == ["l_bad", "l_ok"] and got.items[1].kind == "avoid"
    assert got.items[0].kind == "problem" and "TypeError: add() takes 2" in got.items[0].text  # named first
    assert got == build_context(events=events, lessons=lessons, feedback=[], signals=[], now=NOW)
    small = build_context(events=events, lessons=lessons, feedback=[], signals=[], now=NOW, budget_chars=150)
    assert len(small.text) <= 150 and [i.ref for i in small.items] == ["l_ok"]  # the longer lines did not fit
    assert build_context(events=events, lessons=lessons, feedback=[], signals=[], now=NOW,
                         skip={"l_bad"}).items[1].ref == "l_ok"
    assert within_chars([], 100) == ("", [])


def _tail(text: str, at: datetime) -> FileTail:
    return FileTail(path="logs/app.log", kind="log", size=100, lines=[TailLine(start=0, at=at, text=text)])


def test_judging_ignored_when_the_problem_returns_used_when_not_and_ignored_items_drop_out() -> None:
    problem = "errsig:typeerror: add() takes <n> positional arguments but <n> were given"
    inj = Injection(id="inj_1", at=NOW, session="s", items=[Injected(ref="l_bad", kind="avoid", problems=[problem])])
    line = "2026-11-28T13:00:00Z TypeError: add() takes 2 positional arguments but 3 were given"
    from gep.learning.resolved import normalized_line, signal_identity

    identity = signal_identity(ERR)
    assert identity is not None
    inj.items[0].problems = [identity]
    assert normalized_line(line).startswith(identity.split(":", 1)[1][:20])
    back = judge_injections_pure(inj, [_tail(line, NOW + timedelta(hours=1))])
    gone = judge_injections_pure(inj, [_tail(line, NOW - timedelta(hours=1))])  # only before the injection
    assert (back, gone) == ("ignored", "used")
    twice = [Judgment(injection=f"i{n}", ref="l_bad", verdict="ignored", at=NOW + timedelta(hours=n)) for n in (1, 2)]
    table = scores([inj], twice, NOW + timedelta(hours=2))
    assert table["l_bad"].ignored == 2 and table["l_bad"].score < DROP_BELOW


def test_an_items_score_decays_back_toward_neutral_as_genes_do() -> None:
    inj = Injection(id="inj_1", at=NOW, session="s", items=[Injected(ref="l_bad", kind="avoid", problems=["p"])])
    twice = [Judgment(injection=f"i{n}", ref="l_bad", verdict="ignored", at=NOW + timedelta(hours=n)) for n in (1, 2)]
    now, later_ = scores([inj], twice, NOW + timedelta(hours=2)), scores([inj], twice, NOW + timedelta(days=365))
    assert now["l_bad"].score < DROP_BELOW < later_["l_bad"].score < 0.5  # a year on, it may be given again


def judge_injections_pure(inj: Injection, tails: list[FileTail]) -> str:
    from gep.learning.injections import _verdict

    verdict = _verdict(inj.items[0], inj.at, tails, [])
    assert verdict is not None
    return verdict


def test_a_correction_given_to_a_session_is_ignored_when_it_is_made_again_and_used_when_not(tmp_path: Path) -> None:
    """Seed 003 through the hook: the same correction captured after the session received it means the
    session did not heed it."""
    said = BehaviorSignal(ts=(NOW - timedelta(hours=2)).isoformat(), type="correction", intensity=3,
                          summary="User corrected: run the linter before committing")
    items = build_context(events=[], lessons=[], feedback=[], signals=[said], now=NOW).items
    assert [i.kind for i in items] == ["preference"] and items[0].ref.startswith("signal:correction:")
    record_injection(tmp_path, session="s", items=items, now=NOW)
    again = said.model_copy(update={"ts": (NOW + timedelta(minutes=30)).isoformat()})
    before = said.model_copy(update={"ts": (NOW - timedelta(minutes=30)).isoformat()})
    other = tmp_path / "other"
    other.mkdir()
    record_injection(other, session="s", items=items, now=NOW)
    later_ = NOW + timedelta(hours=1)
    assert [j.verdict for j in judge_injections(tmp_path, started_at=later_, tails=[], signals=[said, again],
                                                now=later_)] == ["ignored"]
    assert [j.verdict for j in judge_injections(other, started_at=later_, tails=[], signals=[said, before],
                                                now=later_)] == ["used"]


def test_judge_injections_appends_once(tmp_path: Path) -> None:
    item = build_context(events=[_event("e", [ERR], NOW)], lessons=[_lesson("l", "e", Stance.fails, "x", NOW)],
                         feedback=[], signals=[], now=NOW).items
    record_injection(tmp_path, session="s", items=item, now=NOW)
    first = judge_injections(tmp_path, started_at=NOW + timedelta(hours=1), tails=[], signals=[], now=NOW)
    again = judge_injections(tmp_path, started_at=NOW + timedelta(hours=2), tails=[], signals=[], now=NOW)
    assert [j.verdict for j in first] == ["used"] * len(item) and len(item) == 2 and again == []


def test_the_hook_answers_from_its_cache_until_the_store_changes(ws: Path) -> None:
    fixed = committed_fix(ws)
    first = session_start(ws, ws).stdout
    assert (ws / ".gep" / "context" / "cache.json").is_file()
    assert session_start(ws, ws, "sess-2").stdout == first  # from the cache (no store change)
    assert [i.session for i in read_log(ws)[0]] == ["sess-1", "sess-2"]  # both injections recorded
    said = CliRunner().invoke(app, ["feedback", fixed.id, "not_helpful", "--note", "prefer a smaller diff",
                                    "--workspace", str(ws)])
    assert said.exit_code == 0, said.output
    assert "prefer a smaller diff" in session_start(ws, ws, "sess-3").stdout  # the change is seen at once


def test_the_hooks_cache_follows_the_gep_environment(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """GEP_LEARNING=off (the kill switch) silences the hook at once, though the cache was built with learning
    on and no file it watches changed; the environment's values are kept as a digest, never in clear."""
    committed_fix(ws)
    first = session_start(ws, ws).stdout
    assert "What this workspace has learned" in first
    assert session_start(ws, ws, "sess-1b").stdout == first  # the cache is in place
    monkeypatch.setenv("GEP_LEARNING", "off")
    assert session_start(ws, ws, "sess-2").stdout == ""
    monkeypatch.setenv("GEP_LEARNING", "on")
    monkeypatch.setenv("GEP_DATABASE_URL_NOTE", "postgres://u:cache-secret-9Qz@h/db")
    assert session_start(ws, ws, "sess-3").stdout == first
    assert "cache-secret-9Qz" not in (ws / ".gep" / "context" / "cache.json").read_text()


def test_the_first_answer_after_a_cycle_is_cached_for_the_next_session(ws: Path) -> None:
    """The hook's read of the store leaves an empty WAL file where none was: that is no change to the store,
    so the answer the first session built is the next session's (before, the second session built it again,
    1-5 s on a loaded machine against the hook's 0.3 s)."""
    from gep.learning.context_cache import read

    committed_fix(ws)
    assert not (ws / ".gep" / "gep.db-wal").exists()  # the cycle's store is closed
    session_start(ws, ws)
    assert read(ws, datetime.now(UTC).date().isoformat()) is not None


def test_the_avoid_line_carries_what_was_tried_and_what_the_checks_said_within_its_budget() -> None:
    iso = "errsig:2026-11-28T00:12:13.024Z ERROR nightly [worker-3] TypeError: add() takes 2 positional arguments " \
          "but 3 were given (while summing invoice rows for account 8812, batch 2026-11-28/17)"
    event = EvolutionEvent(id="e1", signals=["log_error", iso], genes_used=[REPAIR], outcome=Outcome(status="failed"),
                           meta={"at": NOW.isoformat(), "changed_files": ["calc.py", "tests/test_calc.py"],
                                 "mutator_result": {"status": "changed", "summary": "added a third parameter to add()"},
                                 "failure_reasons": ["validation: pytest exited 1"]})
    lesson = build_lesson(LessonInput(event_id="e1", gene_id=REPAIR, signals=event.signals, outcome="failed",
                                      failure_reasons=["validation: pytest exited 1"],
                                      validation_summary="pytest -q: FAILED (E assert 6 == 5 | FAILED test_add)",
                                      files_changed=2, files=["calc.py", "tests/test_calc.py"]), [], NOW)
    got = build_context(events=[event], lessons=[lesson], feedback=[], signals=[], now=NOW, avoid=False)
    line = next(i.text for i in got.items if i.kind == "avoid")
    assert len(line) <= LINE_CHARS
    assert line.startswith("Tried before on a live problem and failed: tried added a third parameter to add()")
    assert "touched" not in line and "E assert 6 == 5 | FAILED test_add" in line  # no file to keep away from
    assert "2026-11-28T00" not in line and "errsig:" not in line.split("[on ")[0]  # the key, after the content


def test_a_cycle_refreshes_the_cache_so_the_next_session_does_not_rebuild(ws: Path) -> None:
    session_start(ws, ws, "before")  # a cache from before the cycle: the cycle changes the store under it
    failed = failed_attempt(ws)
    hit = answer_from_cache(ws, "sess-after", datetime.now(UTC))  # the hook's fast path: None means rebuild
    assert hit is not None, "the first session after a cycle had to build the context again"
    with store_of(ws) as store:
        lesson = next(x for x in store.list_lessons() if x.event_id == failed.id)
    assert "changed stats.py" in json.loads(hit)["hookSpecificOutput"]["additionalContext"]  # the cycle's lesson
    assert [x.ref for i in read_log(ws)[0] if i.session == "sess-after" for x in i.items if x.kind == "avoid"][:1] == [lesson.id]


def test_the_avoid_list_on_a_live_problem_leads_the_context() -> None:
    failed = [EvolutionEvent(id=f"f{i}", signals=[ERR], genes_used=[REPAIR], blast_radius={"files": 1, "lines": 3},
                             outcome=Outcome(status="failed"),
                             meta={"at": (NOW - timedelta(hours=3 - i)).isoformat(), "changed_files": ["calc.py"],
                                   "failure_reasons": ["validation: pytest exited 1"]}) for i in range(2)]
    latest = _event("e3", [ERR, "log_error"], NOW)
    got = build_context(events=[latest, *reversed(failed)], lessons=[], feedback=[], signals=[], now=NOW)
    assert got.items[0].kind == "problem" and got.items[1].kind == "avoid"
    assert got.items[1].ref.startswith(f"avoid:{REPAIR}:")
    assert f"On a live problem, {REPAIR}'s approach failed 2 times on this problem; last change in calc.py" in got.text
    assert "touched" not in got.text and "do not" not in got.text
    elsewhere = _event("e3", ["errsig:KeyError: 'id'"], NOW)  # the latest cycle saw another problem only
    assert build_context(events=[elsewhere, *reversed(failed)], lessons=[], feedback=[], signals=[], now=NOW).items == []


@pytest.mark.parametrize("toml", ['learning = "off"\n', 'learning_off = ["context"]\n'])
def test_learning_off_gives_sessions_nothing(tmp_path: Path, toml: str) -> None:
    from conftest import init_repo

    from gep.sessions.session_start import workspace_context
    from gep.store import Store

    ws = init_repo(tmp_path / "ws")
    with Store.for_workspace(ws) as store:
        store.add_event(_event("e1", [ERR], NOW))
        store.append_lesson(_lesson("l1", "e1", Stance.fails, "added a third parameter", NOW))
    assert "added a third parameter" in workspace_context(ws, NOW).text
    (ws / "gep.toml").write_text(toml)
    assert workspace_context(ws, NOW).text == ""
    avoid_off = build_context(events=[_event("e3", [ERR], NOW)], lessons=[], feedback=[], signals=[], now=NOW,
                              avoid=False)
    assert avoid_off.items == []


def test_a_failed_refresh_never_fails_the_cycle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                caplog: pytest.LogCaptureFixture) -> None:
    from conftest import init_repo

    from gep.core.config import Settings
    from gep.cycle import session_context
    from gep.store import Store

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    ws = init_repo(tmp_path / "ws")
    monkeypatch.setattr(session_context, "build_and_cache", broken)
    with Store.for_workspace(ws) as store:
        session_context.refresh_after_cycle(ws, store, Settings(), NOW)  # logged, not raised
    assert "the session context was not refreshed: disk full" in caplog.text
