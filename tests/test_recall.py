"""What gep_recall finds (gep/learning/recall.py, pure): cycles on a problem asked for by its key or by the error
as logged, on a file by its path or name, each change in a few lines, notes, and the items to record."""

from __future__ import annotations

from datetime import UTC, datetime

from gep.core.models import EventMeta, EvolutionEvent, FailedCapsule, Outcome
from gep.learning.agent_context import problem_identities
from gep.learning.feedback import FeedbackKind, FeedbackSignal, Observation
from gep.learning.recall import change_lines, recall

ERR = "errsig:2026-11-21T09:14:03Z [ERROR] report: ZeroDivisionError: division by zero in stats.py"
OTHER = "errsig:[ERROR] billing: KeyError: 'total'"
DIFF = ("diff --git a/stats.py b/stats.py\n--- a/stats.py\n+++ b/stats.py\n@@ -1,3 +1,3 @@\n def mean(v):\n"
        + "".join(f"-    old line {i}\n" for i in range(20)) + "+    return sum(v) / len(v)\n")
NOW = datetime(2026, 12, 1, tzinfo=UTC)


def _event(eid: str, signals: list[str], status: str, files: list[str]) -> EvolutionEvent:
    return EvolutionEvent(id=eid, signals=["log_error", *signals], genes_used=["gene_repair_from_errors"],
                          outcome=Outcome(status=status), meta=EventMeta(at="2026-12-01T00:00:00.000Z",
                                                                         changed_files=files))


EVENTS = [_event("evt_3_cccccc", [OTHER], "success", ["billing.py"]),
          _event("evt_2_bbbbbb", [ERR], "failed", ["stats.py"]),
          _event("evt_1_aaaaaa", [ERR.replace("09:14:03", "08:00:00")], "failed", ["lib/stats.py"])]
FAILED = [FailedCapsule(id="failed_capsule_2_bbbbbb", diff_snapshot=DIFF, failure_reason="tests failed")]
NOTE = FeedbackSignal(id="fb1", gene_id="gene_repair_from_errors", event_id="evt_2_bbbbbb",
                      kind=FeedbackKind.not_helpful, confidence=1.0, origin=Observation.person, created_at=NOW,
                      note="divided by the wrong count")


def test_a_problem_by_its_key_or_as_logged_finds_every_cycle_on_it_newest_first() -> None:
    key = problem_identities([ERR])[0]
    by_key = recall(events=EVENTS, failed=FAILED, feedback=[NOTE], problem=key)
    by_line = recall(events=EVENTS, failed=FAILED, feedback=[NOTE],
                     problem="[ERROR] report: ZeroDivisionError: division by zero in stats.py")
    assert [a.event for a in by_key.answer.attempts] == ["bbbbbb", "aaaaaa"]
    assert by_line.answer.attempts == by_key.answer.attempts
    first = by_key.answer.attempts[0]
    assert first.outcome == "failed" and first.checks == ["tests failed"]
    assert first.change[0] == "+++ b/stats.py" and first.change[-1] == "+    return sum(v) / len(v)"
    assert len(first.change) <= 12
    assert [(n.event, n.note) for n in by_key.answer.notes] == [("bbbbbb", "divided by the wrong count")]
    assert [(i.ref, i.kind, i.problems) for i in by_key.items] == [("event:evt_2_bbbbbb", "avoid", [key]),
                                                                    ("event:evt_1_aaaaaa", "avoid", [key])]


def test_a_file_by_its_path_or_its_name() -> None:
    by_name = recall(events=EVENTS, failed=FAILED, feedback=[], file="stats.py")
    by_path = recall(events=EVENTS, failed=FAILED, feedback=[], file="lib/stats.py")
    assert [a.event for a in by_name.answer.attempts] == ["bbbbbb", "aaaaaa"]
    assert [a.event for a in by_path.answer.attempts] == ["aaaaaa"]
    assert recall(events=EVENTS, failed=FAILED, feedback=[], file="nothing.py").answer.attempts == []


def test_a_short_or_unrelated_problem_finds_nothing() -> None:
    assert recall(events=EVENTS, failed=FAILED, feedback=[], problem="err").answer.attempts == []
    assert recall(events=EVENTS, failed=FAILED, feedback=[], problem="TimeoutError in fetch").items == []


def test_a_rewritten_file_still_shows_what_it_became() -> None:
    lines = change_lines(DIFF, limit=8)
    assert lines[0] == "+++ b/stats.py" and lines[-1].startswith("+") and len(lines) == 8


def test_a_verified_fix_of_a_similar_problem_is_named() -> None:
    fixed = _event("evt_0_dddddd", ["errsig:[ERROR] report: ZeroDivisionError: division by zero in median()"],
                   "success", ["stats.py"])
    fixed.meta.fix_verdict = "verified"
    got = recall(events=[*EVENTS, fixed], failed=FAILED, feedback=[], problem=problem_identities([ERR])[0])
    assert len(got.answer.worked_on_similar) == 1 and "ZeroDivisionError" in got.answer.worked_on_similar[0]
    assert "evt_0_dddddd" not in [a.event for a in got.answer.attempts]
