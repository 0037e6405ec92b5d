"""Failure attribution (issue 28): a cycle that failed for a reason outside the change is a host failure, and
nothing that learns from outcomes counts it against the gene. Real cycles on the example workspace (real git,
real store, the real SDK against tests/fake_anthropic.py), one per class, and the issue's done-when."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import pytest
from fake_anthropic import FakeAnthropic, rate_limited, server_error
from learning_helpers import BUG, FIX, REPAIR, agent_workspace, store_of, venv_first
from typer.testing import CliRunner

from gep import CycleRequest, run_cycle
from gep.cli.root import app
from gep.core.config import Settings
from gep.core.models import CommandResult, EvolutionEvent, ValidationReport
from gep.core.records import MutatorResult
from gep.genes.selector import active_bans
from gep.learning.attribution import mutator_host_failure, validation_host_failure

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    venv_first(monkeypatch)
    return agent_workspace(tmp_path / "ws")


def _agent(ws: Path, code: str, seed: int = 1, **request: object) -> EvolutionEvent:
    argv = shlex.join([sys.executable, "-c", "import sys, pathlib, time; sys.stdin.read(); " + code])
    event = run_cycle(CycleRequest(workspace=ws, mutator="command", seed=seed, agent_cmd=argv, **request),
                      env=dict(os.environ))
    assert event is not None
    return event


def _nothing_learned_against(ws: Path, event: EvolutionEvent) -> None:
    """No lesson, feedback signal or failed capsule names the event; the personality learned nothing."""
    with store_of(ws) as store:
        assert [x.id for x in store.list_lessons() if x.event_id == event.id] == []
        assert [f.id for f in store.list_feedback() if f.event_id == event.id] == []
        assert store.list_failed_capsules() == []


def test_an_agent_command_that_does_not_exist_is_a_host_failure(ws: Path) -> None:
    event = run_cycle(CycleRequest(workspace=ws, mutator="command", seed=1, agent_cmd="no-such-agent-xyz --go"),
                      env=dict(os.environ))
    assert event is not None and event.outcome.status == "failed"
    assert event.meta.host_failure is not None and event.meta.host_failure.kind == "agent_missing"
    assert "no-such-agent-xyz" in event.meta.host_failure.reason
    _nothing_learned_against(ws, event)
    table = CliRunner().invoke(app, ["history", "--workspace", str(ws)], env={"COLUMNS": "250"})
    assert "failed (host: agent_missing)" in table.stdout, table.stdout
    assert f"{event.id} host failure (agent_missing): cannot start agent command" in table.stdout


def test_an_agent_that_crashes_before_editing_is_a_host_failure_and_one_that_edited_is_not(ws: Path) -> None:
    crashed = _agent(ws, "sys.exit('segfault in the agent')")
    assert crashed.meta.host_failure is not None and crashed.meta.host_failure.kind == "agent_crash"
    _nothing_learned_against(ws, crashed)
    edited = _agent(ws, "pathlib.Path('stats.py').write_text('broken'); sys.exit(2)", seed=2)
    assert edited.outcome.status == "failed" and edited.meta.host_failure is None
    with store_of(ws) as store:
        assert [x.event_id for x in store.list_lessons()] == [edited.id]  # the gene's own doing


def test_the_agents_command_line_is_no_evidence_of_a_provider_error(ws: Path) -> None:
    """An agent run with `--max-turns 500` that edited and then failed failed at the change: the status
    code is looked for in what the agent said, not in its command line (which the error line repeats)."""
    argv = shlex.join([sys.executable, "-c", "import sys, pathlib; sys.stdin.read(); "
                       "pathlib.Path('stats.py').write_text('broken'); sys.exit(2)", "--max-turns", "500"])
    event = run_cycle(CycleRequest(workspace=ws, mutator="command", seed=1, agent_cmd=argv), env=dict(os.environ))
    assert event is not None and event.outcome.status == "failed"
    assert event.meta.host_failure is None, event.meta.host_failure
    with store_of(ws) as store:
        assert [x.event_id for x in store.list_lessons()] == [event.id]


def test_an_agent_timeout_with_no_edit_is_a_host_failure(ws: Path) -> None:
    (ws / "gep.toml").write_text("agent_timeout_s = 1\n")
    event = _agent(ws, "time.sleep(30)")
    assert event.meta.host_failure is not None and event.meta.host_failure.kind == "agent_timeout"
    _nothing_learned_against(ws, event)


def test_a_providers_429_seen_by_an_agent_command_is_a_host_failure(ws: Path) -> None:
    event = _agent(ws, "print('Error: 429 Too Many Requests', file=sys.stderr); sys.exit(1)")
    assert event.meta.host_failure is not None and event.meta.host_failure.kind == "provider"
    _nothing_learned_against(ws, event)


def test_an_agent_that_deleted_the_tests_and_printed_a_429_failed_at_its_change(ws: Path) -> None:
    """Issue 45, C04: an agent that deleted the tests and printed `anthropic.RateLimitError ... 429` was recorded
    as a provider failure three times of three, with no lesson. What it said after editing is no evidence."""
    said = ("anthropic.RateLimitError: Error code: 429 - {'type': 'error', 'error': {'type': 'overloaded_error', "
            "'message': 'Overloaded'}}")
    event = _agent(ws, "import shutil; shutil.rmtree('tests'); "
                       f"print({said!r}, file=sys.stderr); sys.exit(1)")
    assert event.outcome.status == "failed" and event.meta.host_failure is None, event.meta.host_failure
    with store_of(ws) as store:
        assert [x.event_id for x in store.list_lessons()] == [event.id]


@pytest.mark.parametrize("reply", [rate_limited, server_error])
def test_the_messages_apis_429_and_5xx_are_host_failures(ws: Path, monkeypatch: pytest.MonkeyPatch,
                                                         reply: object) -> None:
    with FakeAnthropic([reply() for _ in range(8)]) as fake:  # type: ignore[operator]
        env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test-key", "ANTHROPIC_BASE_URL": fake.url,
               "GEP_MODEL": "claude-sonnet-4-6"}
        (ws / "gep.toml").write_text("")
        event = run_cycle(CycleRequest(workspace=ws, mutator="anthropic", seed=1), env=env)
    assert event is not None and event.outcome.status == "failed", (event.outcome, event.meta.failure_reasons)
    assert event.meta.host_failure is not None and event.meta.host_failure.kind == "provider", event.meta
    _nothing_learned_against(ws, event)


def test_validation_that_cannot_run_here_is_a_host_failure(ws: Path) -> None:
    (ws / "gep.toml").write_text('validation = ["no-such-checker-xyz --all"]\n')
    event = _agent(ws, f"p = pathlib.Path('stats.py'); p.write_text(p.read_text().replace({BUG!r}, {FIX!r}))")
    assert event.outcome.status == "failed", event.meta
    assert event.meta.host_failure is not None and event.meta.host_failure.kind == "validation_not_run", event.meta
    _nothing_learned_against(ws, event)


def test_a_missing_sandbox_is_a_host_failure_and_a_failing_test_is_not() -> None:
    def report(*results: CommandResult) -> ValidationReport:
        return ValidationReport(id="r", gene_id="g", commands=[r.cmd for r in results], results=list(results),
                                overall_ok=False, started_at="", finished_at="")

    missing = validation_host_failure(report(CommandResult(
        cmd="python -m pytest", ok=False, blocked_reason="sandbox: bubblewrap (bwrap) is not installed")))
    assert missing is not None and missing.kind == "sandbox_missing"
    assert validation_host_failure(report(CommandResult(cmd="python -m pytest", ok=False, exit_code=1,
                                                        stderr="E assert 6 == 5"))) is None
    assert validation_host_failure(report(CommandResult(cmd="python -m pytest", ok=False, timed_out=True))) is None
    # a model that ran out of turns failed at the change, not on the host
    assert mutator_host_failure(MutatorResult(status="error", error="turn budget exhausted (8 turns) before finish"),
                                edited=False) is None


def _crashed(output: str) -> MutatorResult:
    return MutatorResult(status="error", error="agent command exited with code 1", output=output)


@pytest.mark.parametrize("output", [
    "============ collected 500 items ============\nFAILED tests/test_calc.py::test_add - assert 6 == 5",
    "Set the api key in config.py before running the client", "Added a rate limit to the retry loop",
    "The quota check now counts whole days", "stats.py: 503 lines, service handler overloaded with branches",
])
def test_plain_words_in_an_agents_output_after_an_edit_are_not_a_provider_failure(output: str) -> None:
    assert mutator_host_failure(_crashed(output), edited=True) is None


@pytest.mark.parametrize("output", [
    "anthropic.BadRequestError: Error code: 429 - {'type': 'error'}", "HTTP 503 from the model endpoint",
    "HTTP/1.1 529", "{'type': 'error', 'error': {'type': 'overloaded_error', 'message': 'Overloaded'}}",
    "{'error': {'type': 'rate_limit_error'}}", "openai.RateLimitError: You exceeded your current quota",
    "Traceback ...\nanthropic.InternalServerError: boom", "APIConnectionError: Connection error.",
    "Error: 429 Too Many Requests", "upstream said 502 Bad Gateway",
])
def test_a_real_provider_error_shape_is_a_host_failure_before_any_edit(output: str) -> None:
    got = mutator_host_failure(_crashed(output), edited=False)
    assert got is not None and got.kind == "provider"
    # after an edit an agent's words are no evidence (issue 45, C04): its change failed
    assert mutator_host_failure(_crashed(output), edited=True) is None


def test_three_host_failures_in_a_row_then_a_working_agent_repairs_the_error(ws: Path) -> None:
    """The issue's done-when: three cycles whose agent got 429 write no lesson against the gene, ban nothing,
    and the next cycle with a working agent repairs the error."""
    failures = [_agent(ws, "print('anthropic: 429 Too Many Requests (rate_limit_error)', file=sys.stderr); "
                           "sys.exit(1)", seed=s) for s in (1, 2, 3)]
    assert [f.meta.host_failure.kind for f in failures if f.meta.host_failure] == ["provider"] * 3
    with store_of(ws) as store:
        assert store.list_lessons() == [] and store.list_feedback() == []
        events, failed = store.recent_events(50), store.list_failed_capsules()
    bans = active_bans(recent_events=events, signals=failures[-1].signals, settings=Settings(),
                       failed_capsules=failed)
    assert bans == []
    fixed = _agent(ws, f"p = pathlib.Path('stats.py'); p.write_text(p.read_text().replace({BUG!r}, {FIX!r}))",
                   seed=4)
    assert fixed.genes_used == [REPAIR], fixed.meta.selector
    assert fixed.outcome.status == "success", fixed.meta.failure_reasons
    assert not (fixed.meta.history and fixed.meta.history.consecutive_failure_count)
