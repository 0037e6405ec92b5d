"""Issue 32 finding 4: every wait a cycle meets has a wall-clock limit of the engine's own.

A Messages API (or a proxy at ANTHROPIC_BASE_URL) answering 429 with ``Retry-After: 100000000`` made the SDK
sleep for weeks while the cycle held its lock and Prefect slot; an agent could run past any budget but its
own. Now ``cycle_timeout_s`` bounds the whole cycle: past it, the cycle fails, its change is saved as a patch
and its lock is released."""

from __future__ import annotations

import sys
import textwrap
import threading
import time
from pathlib import Path

import httpx
import pytest
from fake_anthropic import FakeAnthropic, error_reply, message, tool_use
from test_mutator_anthropic import KEY, MODEL, request

from gep.core import constants
from gep.core.config import Settings
from gep.cycle.context import CycleRequest
from gep.cycle.pipeline import run_cycle
from gep.git import open_repo
from gep.git.lock import workspace_lock
from gep.mutators.anthropic_mutator import AnthropicMutator

pytestmark = pytest.mark.timeout(120)


def _weeks() -> object:
    reply = error_reply(429, "rate_limit_error", "slow down")
    reply.headers["retry-after"] = "100000000"
    return reply


def test_a_retry_after_of_weeks_ends_at_the_cycles_time_limit(repo: Path) -> None:
    with FakeAnthropic([_weeks() for _ in range(5)]) as fake:
        mut = AnthropicMutator(Settings(model=MODEL), {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": fake.url},
                               max_retries=3)
        req = request(repo).model_copy(update={"deadline": time.monotonic() + 50})
        result = mut.apply(req)
        assert req.deadline is not None and time.monotonic() < req.deadline  # refused at once, no wait to it
    assert result.status == "error" and result.error is not None
    assert "asked to wait 60 s before retrying, past the cycle's time limit" in result.error
    assert len(fake.requests) == 1


def test_without_a_deadline_a_retry_after_is_cut_to_a_minute(repo: Path) -> None:
    mut = AnthropicMutator(Settings(model=MODEL), {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": "http://x"})
    from anthropic._models import FinalRequestOptions

    options = FinalRequestOptions(method="post", url="/v1/messages")
    wait = mut.client._calculate_retry_timeout(2, options, httpx.Headers({"retry-after": "100000000"}))
    assert wait == constants.ANTHROPIC_MAX_RETRY_WAIT_S
    assert mut.client._calculate_retry_timeout(2, options, httpx.Headers({"retry-after": "2"})) == 2


def test_the_request_itself_ends_by_the_deadline(repo: Path) -> None:
    answered, release = threading.Event(), threading.Event()

    def hang(_req: object) -> object:  # answers only when the test lets it (or after 60 s)
        release.wait(60)
        answered.set()
        return message(tool_use("finish", {"summary": "late", "rationale": "late"}))

    with FakeAnthropic(hang) as fake:
        mut = AnthropicMutator(Settings(model=MODEL), {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": fake.url},
                               max_retries=0)
        result = mut.apply(request(repo).model_copy(update={"deadline": time.monotonic() + 3}))
        ended_first = not answered.is_set()  # the request ended by the deadline, not by the server's answer
        release.set()
    assert ended_first and result.status == "error" and "timed out" in (result.error or ""), result.error


AGENT = textwrap.dedent("""
    import pathlib, sys, time
    sys.stdin.read()
    p = pathlib.Path("stats.py")
    p.write_text(p.read_text().replace("(len(values) - 1)", "len(values)"))
    time.sleep(120)
    pathlib.Path(sys.argv[1]).write_text("finished")
""")


def test_a_cycle_past_cycle_timeout_fails_saves_its_change_and_releases_the_lock(example_ws: Path,
                                                                               tmp_path: Path) -> None:
    from conftest import git

    (example_ws / "gep.toml").write_text("cycle_timeout_s = 4\n")  # agent_timeout_s stays at 30 minutes
    git(example_ws, "add", "gep.toml")
    git(example_ws, "commit", "-q", "-m", "a short cycle limit")
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    event = run_cycle(CycleRequest(workspace=example_ws, mutator="command", seed=1,
                                   agent_cmd=f"{sys.executable} {agent} {tmp_path / 'agent-finished'}"), env={})
    assert not (tmp_path / "agent-finished").exists()  # stopped at the cycle's limit, not by its 120 s sleep
    assert event is not None and event.outcome.status == "failed"
    reasons = " ".join(event.meta.failure_reasons or [])
    assert "cycle's time limit (cycle_timeout_s)" in reasons, reasons
    assert event.meta.rescued_patch and "len(values)" in Path(event.meta.rescued_patch).read_text()
    assert "len(values) - 1" in (example_ws / "stats.py").read_text()  # the user's tree is untouched
    with workspace_lock(open_repo(example_ws), 0):  # released: taken at once
        pass
