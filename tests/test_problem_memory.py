"""Lessons recalled by problem, whatever gene is picked now (gep/learning/lessons_by_problem.py, issue 28)."""

from __future__ import annotations

import os
import shlex
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from learning_helpers import BUG, REPAIR, agent_workspace, cycle, store_of, venv_first
from typer.testing import CliRunner

from gep import CycleRequest, run_cycle
from gep.cli.root import app
from gep.core.models import Capsule
from gep.cycle.record_learning import failing_lines
from gep.learning.lessons import LessonCategory, LessonInput, build_lesson
from gep.learning.lessons_by_problem import for_this_problem, recall_problem

pytestmark = pytest.mark.timeout(300)
# problem memory is experimental, off by default (issue 41): these tests switch it on
PROBLEM_MEMORY_ON = {"gep.toml": 'learning_on = ["problem_memory"]\n'}
T0 = datetime(2026, 11, 28, 1, 0, tzinfo=UTC)


def _line(day: int, error: str = "AssertionError: mean([2, 4, 6]) returned 6.0, expected 4.0") -> str:
    return f"errsig:2026-11-{day:02d}T0{day % 10}:12:13.{day}24Z [ERROR] report: {error}"


def _lesson(gene: str, signals: list[str], outcome: str, at: datetime, existing: list | None = None):  # type: ignore[type-arg]
    return build_lesson(LessonInput(event_id=f"evt_{gene}_{at.timestamp()}", gene_id=gene, signals=signals,
                                    outcome=outcome, failure_reasons=["validation: tests failed"] if outcome == "failed"
                                    else [], files=["stats.py"]), existing or [], at)


def test_a_lesson_on_one_error_is_recalled_for_it_at_another_time_by_any_gene() -> None:
    tried = _lesson("gene_a", ["log_error", _line(21)], "failed", T0)
    elsewhere = _lesson("gene_a", ["log_error", _line(21, "ZeroDivisionError: division by zero")], "failed", T0)
    generic = _lesson("gene_b", ["perf_bottleneck"], "failed", T0)
    got = recall_problem([tried, elsewhere, generic], signals=["log_error", _line(25)], now=T0 + timedelta(hours=2))
    assert [r.lesson.id for r in got] == [tried.id]
    assert "gene_a failed on" in got[0].text and "Touched: stats.py" in got[0].text


def test_contradicting_lessons_on_a_problem_are_shown_side_by_side() -> None:
    signals = ["log_error", _line(21)]
    works = _lesson("gene_a", signals, "success", T0)
    noise = [_lesson(f"gene_{k}", signals, "empty", T0 + timedelta(minutes=k)) for k in range(1, 4)]
    fails = _lesson("gene_a", signals, "failed", T0 + timedelta(hours=1), [works])
    assert fails.conflicts_with == [works.id]
    got = [r.lesson.id for r in recall_problem([works, *noise, fails], signals=signals, now=T0 + timedelta(hours=2))]
    assert got.index(works.id) == got.index(fails.id) + 1, got


def test_validations_failing_lines_are_what_a_lesson_keeps() -> None:
    out = ("============ FAILURES ============\n____ test_mean ____\n    def test_mean():\n>       assert mean([2, 4, 6]) "
           "== 4\nE       assert 6.0 == 4\nE        +  where 6.0 = mean([2, 4, 6])\nFAILED tests/test_stats.py::"
           "test_mean - assert 6.0 == 4\n1 failed in 0.03s\n")
    assert failing_lines(out) == ("E       assert 6.0 == 4 | E        +  where 6.0 = mean([2, 4, 6]) | FAILED "
                                  "tests/test_stats.py::test_mean - assert 6.0 == 4")


def test_a_lesson_written_on_a_problem_is_in_the_next_prompt_whichever_gene_is_picked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    venv_first(monkeypatch)
    ws = agent_workspace(tmp_path / "ws", PROBLEM_MEMORY_ON)
    wrong = ("import pathlib, sys; sys.stdin.read(); p = pathlib.Path('stats.py'); "
             f"p.write_text(p.read_text().replace({BUG!r}, '(len(values) + 1)'))")
    failed = run_cycle(CycleRequest(workspace=ws, mutator="command", seed=1,
                                    agent_cmd=shlex.join([sys.executable, "-c", wrong])), env=dict(os.environ))
    assert failed is not None and failed.outcome.status == "failed" and failed.genes_used == [REPAIR]
    with store_of(ws) as store:
        lesson = next(x for x in store.list_lessons(REPAIR) if x.category == LessonCategory.failure)
    # the change itself, from its diff kept at record time (issue 41), not the file alone
    assert "Changed: stats.py mean(): - return sum(values) / (len(values) - 1) | + return sum(values) / (len(values) + 1)" in lesson.content and "assert" in lesson.content, lesson.content

    # the repair gene is out of selection: the next cycle on the same error picks another gene
    retired = CliRunner().invoke(app, ["genes", "retire", REPAIR, "--reason", "test", "--workspace", str(ws)])
    assert retired.exit_code == 0, retired.output
    nxt = cycle(ws, 2)
    assert nxt.genes_used and nxt.genes_used != [REPAIR], nxt.meta.selector
    # problem memory recalls the failed try on this problem for whichever gene is picked ...
    with store_of(ws) as store:
        recalled = recall_problem(store.list_lessons(), signals=nxt.signals, now=datetime.now(UTC))
    assert lesson.id in [r.lesson.id for r in recalled], nxt.signals
    # ... and the prompt names that try once: its recent outcome line, with the change tried and how it ended
    # (issue 41: the lesson about the same try is not repeated beside it)
    prompt = Path(nxt.meta.mutator_result.prompt_file).read_text()  # type: ignore[union-attr]
    section = prompt.split("## Recent outcomes", 1)[1].split("\n## ", 1)[0]
    line = next(x for x in section.splitlines() if failed.id in x)
    assert "failed" in line and "changed: stats.py mean():" in line and "+ return sum(values) / (len(values) + 1)" in line
    assert prompt.count("+ return sum(values) / (len(values) + 1)") == 1, prompt
    assert lesson.id not in (nxt.meta.lessons_recalled or [])


def test_a_capsule_is_reused_only_for_the_same_problem() -> None:
    same = Capsule(id="cap_same", gene="gene_a", trigger=["log_error", _line(21)])
    other = Capsule(id="cap_other", gene="gene_a",
                    trigger=["log_error", _line(21, "ZeroDivisionError: division by zero")])
    churn = Capsule(id="cap_churn", gene="gene_b", trigger=["perf_bottleneck", "log_error"])
    assert [c.id for c in for_this_problem([same, other, churn], ["log_error", _line(26)])] == ["cap_same"]
    # a situation that names no specific problem: a similar situation's capsule only
    assert [c.id for c in for_this_problem([same, other, churn], ["perf_bottleneck", "log_error"])] == ["cap_churn"]
