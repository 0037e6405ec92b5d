"""What worked on similar problems elsewhere in the workspace reaches the prompt (gep/learning/similar_problems.py),
and a person's note on a cycle reaches the next prompt on its problem, whichever gene is picked (issue 28)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from learning_helpers import (
    LOG,
    REPAIR,
    agent_workspace,
    committed_fix,
    cycle,
    finish,
    later,
    store_of,
    venv_first,
)
from typer.testing import CliRunner

from gep.cli.root import app
from gep.core.models import EventMeta, EvolutionEvent, Outcome
from gep.core.records import FixCreditRecord
from gep.learning.human_verdicts import person_lesson
from gep.learning.lessons import InMemoryLessons
from gep.learning.lessons_by_problem import recall_problem
from gep.learning.similar_problems import similar_fixes

pytestmark = pytest.mark.timeout(300)
# problem memory is experimental, off by default (issue 41): these tests switch it on
PROBLEM_MEMORY_ON = {"gep.toml": 'learning_on = ["problem_memory"]\n'}

ZERO_A = "errsig:2026-11-20T01:02:03Z [ERROR] job: ZeroDivisionError: division by zero in app.billing.total_invoice"
ZERO_B = "errsig:2026-11-21T01:02:03Z [ERROR] job: ZeroDivisionError: division by zero in app.stats.mean_rate"
KEY_SAME_FILE = "errsig:2026-11-21T01:02:03Z [ERROR] job: KeyError: 'currency' in app.billing.format_money"
NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
KEY_ELSEWHERE = "errsig:2026-11-21T01:02:03Z [ERROR] job: KeyError: 'timeout' in app.config.load"


def _verified(line: str, verdict: str = "verified") -> EvolutionEvent:
    meta = EventMeta(at="2026-11-20T02:00:00Z", changed_files=["app/billing.py"], fix_verdict=verdict,
                     fix_credit=FixCreditRecord(addressed=[line], judged=[line]))
    return EvolutionEvent(id="evt_a", genes_used=["gene_fix"], signals=["perf_bottleneck"],
                          outcome=Outcome(status="success", score=0.85), meta=meta)


def test_similar_means_same_error_family_or_same_file_never_the_same_problem_or_generic_signals() -> None:
    fixed = [_verified(ZERO_A)]
    how = {"evt_a": "return 0.0 when the count is zero"}

    def lines(signals: list[str]) -> list[str]:
        return similar_fixes(fixed, signals, lambda e: how[e.id])

    [family] = lines(["log_error", ZERO_B])
    assert family.startswith("worked on a similar problem (also a ZeroDivisionError): gene_fix's fix of [")
    assert "Touched: app/billing.py. Approach: return 0.0 when the count is zero" in family
    assert lines(["log_error", KEY_SAME_FILE])[0].startswith("worked on a similar problem (same file: billing)")
    assert lines(["log_error", KEY_ELSEWHERE]) == []  # another family in another file
    assert lines(["log_error", ZERO_A.replace("2026-11-20", "2026-11-25")]) == []  # the same problem: its own lessons
    assert lines(["log_error", "perf_bottleneck"]) == []  # generic signals name no problem
    # only fixes that held count
    assert similar_fixes([_verified(ZERO_A, "did_not_hold")], ["log_error", ZERO_B]) == []



def test_a_loggers_package_is_not_a_shared_file() -> None:
    """A line's logger (``app.billing:``) names the package too: every error of the package shared "app", so
    an unrelated fix was "a similar problem (same file: app)". The files the fix changed decide."""
    fixed = [_verified("errsig:2026-11-20T01:02:03Z ERROR app.billing: IndexError: list index out of range in "
                       "app.billing.first_item")]
    now = "errsig:2026-11-21T01:02:03Z ERROR app.config: KeyError: 'timeout' in app.config.load"
    assert similar_fixes(fixed, ["log_error", now]) == []
    in_billing = "errsig:2026-11-21T01:02:03Z ERROR app.billing: KeyError: 'currency' in app.billing.format_money"
    assert similar_fixes(fixed, ["log_error", in_billing])[0].startswith(
        "worked on a similar problem (same file: billing)")

def _lessons(event: EvolutionEvent) -> str:
    prompt = Path(event.meta.mutator_result.prompt_file).read_text()  # type: ignore[union-attr]
    assert "## Lessons from earlier cycles" in prompt, prompt[:2000]
    return prompt.split("## Lessons from earlier cycles", 1)[1].split("\n## ", 1)[0]


def _log(ws: Path, message: str, minutes: float) -> None:
    with (ws / LOG).open("a") as fh:
        fh.write(f"{later(minutes).astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%SZ')} [ERROR] report: {message}\n")


def test_a_verified_fix_is_named_in_a_similar_problems_prompt_and_not_in_an_unrelated_ones(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    venv_first(monkeypatch)
    ws = agent_workspace(tmp_path / "ws", PROBLEM_MEMORY_ON)
    fixed = committed_fix(ws)  # problem A: mean() returns the wrong value (AssertionError), fixed by hand
    with (ws / LOG).open("a") as fh:  # the code ran again without the error: evidence the fix held
        fh.write(f"{later(0.5).astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%SZ')} INFO report: mean ok\n")
    checked = cycle(ws, 2)
    assert [(c.event_id, c.verdict) for c in checked.meta.fix_checks or []] == [(fixed.id, "verified")]
    assert checked.outcome.status == "empty"  # only the new line is read (issue 41): nothing to act on

    # an unrelated problem C: another family, another file
    before_c = (ws / LOG).stat().st_size
    _log(ws, "KeyError: 'currency' in loader.read_config", 1)
    unrelated = cycle(ws, 3)
    assert any("KeyError: 'currency'" in s for s in unrelated.signals), unrelated.signals
    prompt_c = Path(unrelated.meta.mutator_result.prompt_file).read_text()  # type: ignore[union-attr]
    assert "worked on a similar problem" not in prompt_c and "Fix the mean" not in prompt_c
    assert finish(ws).outcome.status == "empty"

    # a similar problem B: another function, the same error family (C's line gone: a cycle sees one errsig)
    with (ws / LOG).open("r+") as fh:
        fh.truncate(before_c)
    _log(ws, "AssertionError: median([1, 2, 3]) returned 3, expected 2", 2)
    similar = cycle(ws, 4)
    assert any("median(" in s for s in similar.signals), similar.signals
    section = _lessons(similar)
    assert "worked on a similar problem (also a AssertionError)" in section, section
    assert "Fix the mean" in section and "Touched: stats.py" in section, section
    # the change that worked, from its diff (issue 41): not only its subject
    assert "Approach: Fix the mean (stats.py mean(): - return sum(values) / (len(values) - 1) | + return" in section


def test_a_persons_note_reaches_the_next_prompt_on_the_same_problem_whichever_gene_is_picked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    venv_first(monkeypatch)
    ws = agent_workspace(tmp_path / "ws")  # problem memory off: a person's word still
    fixed = committed_fix(ws)
    note = "the mean must skip None readings; token sk-ant-api03-" + "x" * 40
    said = CliRunner().invoke(app, ["feedback", fixed.id, "not_helpful", "--note", note, "--workspace", str(ws)])
    assert said.exit_code == 0, said.output

    # the problem comes back; the repair gene is out of selection, so another gene works on it
    _log(ws, "AssertionError: mean([2, 4, 6]) returned 6.0, expected 4.0", 2)
    retired = CliRunner().invoke(app, ["genes", "retire", REPAIR, "--reason", "test", "--workspace", str(ws)])
    assert retired.exit_code == 0, retired.output
    nxt = cycle(ws, 5)
    assert nxt.genes_used and nxt.genes_used != [REPAIR], nxt.meta.selector
    section = _lessons(nxt)
    assert "the mean must skip None readings" in section, section
    assert "sk-ant-api03" not in section  # redacted
    with store_of(ws) as store:
        person = [x for x in store.list_lessons() if x.category == "person"]
    assert [x.id for x in person if x.id in (nxt.meta.lessons_recalled or [])], person


def test_a_persons_word_on_a_fix_made_in_a_generic_cycle_is_filed_under_the_error_it_fixed() -> None:
    fixed = _verified(ZERO_A)  # its cycle was triggered by perf_bottleneck; the change fixed ZERO_A
    log = InMemoryLessons()
    person_lesson(log, fixed, "not_helpful", "zero counts must raise, not return 0", NOW)
    got = recall_problem(log.list_lessons(), signals=["log_error", ZERO_A.replace("2026-11-20", "2026-11-26")], now=NOW)
    assert [r.lesson.category for r in got] == ["person"] and "zero counts must raise" in got[0].text

