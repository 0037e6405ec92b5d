"""A problem a person said is not fixed goes first among the cycle's live problems (issue 41, point 3).

Real git repository, real store, the cycle's own collect and extract stages; the pure rule besides."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from conftest import git, init_repo

from gep.core.config import Settings
from gep.core.learned import FeedbackKind, FeedbackSignal, Observation, Resolution
from gep.core.models import EventMeta, EvolutionEvent, Outcome
from gep.core.request import CycleRequest
from gep.cycle.context import CycleContext
from gep.cycle.fixes import remember_commit
from gep.cycle.stages import collect, extract
from gep.cycle.state import CycleState
from gep.git import open_repo
from gep.learning.human_verdicts import give_feedback
from gep.learning.persons_problems import flagged_functions, persons_problems_first
from gep.store import Store

BILLING = "def total_invoice(pair):\n    total, count = pair\n    return total / count\n"
SWALLOWED = ("def total_invoice(pair):\n    try:\n        total, count = pair\n        return total / count\n"
             "    except Exception:\n        return None\n")
USERS = "def load_user(rec):\n    return rec['name']\n"
T0 = datetime(2026, 11, 28, 2, 0, tzinfo=UTC)
ERR = "ERROR app.billing: ZeroDivisionError: division by zero in app.billing.total_invoice"
WARN = "WARNING app.billing: total_invoice returned no result"
OTHER = "ERROR app.users: KeyError: 'name' in app.users.load_user"


def _at(t: datetime) -> str:
    return f"{t:%Y-%m-%dT%H:%M:%S}.5Z"


def _signals_next_cycle(tmp_path: Path, verdict: str | None, settings: Settings | None = None) -> list[str]:
    """A change swallowed total_invoice's error (it now warns); load_user fails anew; a person gives ``verdict``
    on the change; the next cycle's signals as its collect and extract stages make them."""
    ws = tmp_path / "ws"
    (ws / "app").mkdir(parents=True)
    (ws / "logs").mkdir()
    (ws / ".gitignore").write_text("logs/\n.gep/\n")
    init_repo(ws, {"app/__init__.py": "", "app/billing.py": BILLING, "app/users.py": USERS})
    log = ws / "logs" / "job.log"
    log.write_text(f"{_at(T0 - timedelta(hours=1))} {ERR}\n")
    (ws / "app" / "billing.py").write_text(SWALLOWED)
    git(ws, "commit", "-qam", "swallow")
    event = EvolutionEvent(id="evt_quiet", genes_used=["gene_quiet"], signals=[f"errsig:{ERR}"],
                           outcome=Outcome(status="success", score=0.8),
                           meta=EventMeta(commit=git(ws, "rev-parse", "HEAD").strip(), solidified_at=T0.isoformat()))
    later = T0 + timedelta(hours=1)
    settings = settings or Settings()
    with Store.for_workspace(ws) as store:
        store.add_event(event)
        ctx = CycleContext(request=CycleRequest(workspace=ws), settings=settings, repo=open_repo(ws), store=store,
                           event_id="evt_next", cycle_number=2, seed=1, started_at=T0, clock=lambda: T0)
        remember_commit(ctx, event)
        with log.open("a") as fh:  # the warning first: the log's order alone would put it second (see below)
            fh.write(f"{_at(later - timedelta(minutes=40))} {WARN}\n{_at(later - timedelta(minutes=39))} {OTHER}\n")
        if verdict is not None:
            give_feedback(store, "evt_quiet", verdict, now=later - timedelta(minutes=30), author="ana")
        nxt = ctx.model_copy(update={"started_at": later, "clock": lambda: later})
        state = extract(nxt, collect(nxt, CycleState()))
    return [s for s in state.signals if s.startswith("errsig:")]


def test_a_problem_a_person_said_is_not_fixed_is_worked_on_first(tmp_path: Path) -> None:
    signals = _signals_next_cycle(tmp_path, "not_helpful")
    assert "total_invoice returned no result" in signals[0]
    assert any("load_user" in s for s in signals[1:])  # nothing dropped


def test_without_the_persons_word_or_with_feedback_off_the_order_is_the_logs(tmp_path: Path) -> None:
    assert "load_user" in _signals_next_cycle(tmp_path / "a", None)[0]
    assert "load_user" in _signals_next_cycle(tmp_path / "b", "helpful")[0]
    assert "load_user" in _signals_next_cycle(tmp_path / "c", "not_helpful", Settings(learning_off=["feedback"]))[0]


def _word(event: str, kind: FeedbackKind, at: datetime, origin: Observation = Observation.person) -> FeedbackSignal:
    return FeedbackSignal(id=f"{event}-{kind.value}-{at:%H}", gene_id="g", event_id=event, kind=kind,
                          confidence=1.0, origin=origin, created_at=at)


def _fix(event: str, at: datetime, touched: list[str]) -> Resolution:
    return Resolution(event_id=event, signals=[], commit_sha=event, committed_at=at, touched=touched)


def test_only_the_latest_word_on_the_latest_change_counts_and_nothing_is_added() -> None:
    now = T0 + timedelta(hours=6)
    fixes = [_fix("e1", T0, ["total_invoice"]), _fix("e2", T0 + timedelta(hours=1), ["load_user"])]
    nh, ok = FeedbackKind.not_helpful, FeedbackKind.helpful
    assert flagged_functions([_word("e1", nh, T0 + timedelta(hours=2))], fixes, now) == ["total_invoice"]
    # a later helpful takes it back; a cycle's own verdicts are no person's word
    assert flagged_functions([_word("e1", nh, T0 + timedelta(hours=2)), _word("e1", ok, T0 + timedelta(hours=3))],
                             fixes, now) == []
    assert flagged_functions([_word("e2", FeedbackKind.ignored, now, Observation.fix_did_not_hold)], fixes, now) == []
    # a newer change to the function answers the old word: the person has not judged it yet
    newer = [*fixes, _fix("e3", T0 + timedelta(hours=4), ["total_invoice"])]
    assert flagged_functions([_word("e1", nh, T0 + timedelta(hours=2))], newer, now) == []
    # a word older than the window is not acted on
    assert flagged_functions([_word("e1", nh, T0)], fixes, T0 + timedelta(days=8)) == []
    signals = ["log_error", f"errsig:{OTHER}", "perf_bottleneck"]
    assert persons_problems_first(signals, [_word("e1", nh, T0 + timedelta(hours=2))], fixes, now) == (signals, [])
    moved, named = persons_problems_first([*signals, f"errsig:{WARN}"], [_word("e1", nh, T0 + timedelta(hours=2))],
                                          fixes, now)
    assert (moved[0], named) == (f"errsig:{WARN}", ["total_invoice"])


def test_the_gene_a_person_rejected_on_a_problem_is_not_sent_at_it_again() -> None:
    from gep.learning.persons_problems import rejected_here

    now = T0 + timedelta(hours=6)
    fixes = [Resolution(event_id="e1", gene_id="gene_quiet", signals=[], commit_sha="e1", committed_at=T0,
                        touched=["total_invoice"])]
    said = [_word("e1", FeedbackKind.not_helpful, T0 + timedelta(hours=2))]
    assert list(rejected_here([f"errsig:{WARN}", f"errsig:{OTHER}"], said, fixes, now)) == ["gene_quiet"]
    # another problem first: the person said nothing about the gene there
    assert rejected_here([f"errsig:{OTHER}", f"errsig:{WARN}"], said, fixes, now) == {}
    taken_back = [*said, _word("e1", FeedbackKind.helpful, T0 + timedelta(hours=3))]
    assert rejected_here([f"errsig:{WARN}"], taken_back, fixes, now) == {}
