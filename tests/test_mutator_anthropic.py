"""Anthropic mode against a fake Messages API on 127.0.0.1, through the real anthropic SDK."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_anthropic import (
    FakeAnthropic,
    FakeReply,
    RecordedRequest,
    error_reply,
    message,
    rate_limited,
    server_error,
    text_block,
    tool_use,
)

from gep.core.config import Settings
from gep.core.errors import ConfigError
from gep.core.models import Gene, Mutation
from gep.mutators import get_mutator
from gep.mutators.anthropic_mutator import AnthropicMutator, estimate_cost
from gep.mutators.base import MutationRequest, MutatorMetrics
from gep.mutators.gep_prompt import PromptInput, build_prompt
from gep.mutators.prompt_mode import PromptMutator

ROOT = Path(__file__).resolve().parent.parent
KEY = "sk-ant-api03-test-" + "k" * 24
MODEL = "claude-sonnet-4-6"
BUGGY = "    return sum(values) / (len(values) - 1)\n"
FIXED = "    return sum(values) / len(values)\n"


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    server = FakeAnthropic()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def venv_python_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """`python` in gene validation resolves to this interpreter (which has pytest)."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")


def gene() -> Gene:
    g = Gene.model_validate(json.loads((ROOT / "genes" / "gene_repair_from_errors.json").read_text()))
    # -p no:cacheprovider: no .pytest_cache left behind in the workspace
    return g.model_copy(update={"validation": ["python -m pytest -q -p no:cacheprovider"]})


def request(ws: Path, settings: Settings | None = None, cycle_id: str = "evt_test_1") -> MutationRequest:
    settings = settings or Settings(model=MODEL)
    g = gene()
    prompt = build_prompt(PromptInput(
        mutation=Mutation(id="mut_1", category="repair", trigger_signals=["log_error"],
                          expected_effect="stats.mean returns the true mean"),
        gene=g, signals=["log_error", "errsig:ZeroDivisionError"], cycle_id=cycle_id, workspace_name=ws.name,
    ), context_chars=settings.prompt_context_chars)
    forbidden = sorted({*g.constraints.forbidden_paths, ".git", ".gep", *settings.protected_paths})
    return MutationRequest(work_tree=ws, cycle_id=cycle_id, prompt=prompt, gene=g, settings=settings,
                           forbidden_paths=forbidden, validation_commands=list(g.validation))


def mutator(fake: FakeAnthropic, settings: Settings | None = None, retries: int = 2) -> AnthropicMutator:
    return AnthropicMutator(settings or Settings(model=MODEL), {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": fake.url},
                            max_retries=retries)


def fixing_session() -> list[dict]:
    return [
        message(text_block("Let me look around."), tool_use("list_files", {}), input_tokens=1200,
                output_tokens=40, cache_creation=3000),
        message(tool_use("read_file", {"path": "stats.py"}), input_tokens=150, output_tokens=30, cache_read=3000),
        message(tool_use("search", {"pattern": r"len\(values\) - 1"}), input_tokens=200, output_tokens=30,
                cache_read=3100),
        message(tool_use("edit_file", {"path": "stats.py", "old_text": BUGGY, "new_text": FIXED}),
                input_tokens=220, output_tokens=60, cache_read=3200),
        message(tool_use("run_validation", {}), input_tokens=240, output_tokens=20, cache_read=3300),
        message(text_block("All tests pass."),
                tool_use("finish", {"summary": "Fix stats.mean dividing by len-1",
                                    "rationale": "mean divided by n-1; it now divides by n. pytest passes."}),
                input_tokens=300, output_tokens=50, cache_read=3400),
    ]


def test_claude_session_fixes_the_example(fake: FakeAnthropic, example_ws: Path, venv_python_first: None) -> None:
    fake.script = fixing_session()
    result = mutator(fake).apply(request(example_ws))

    assert result.status == "changed", result.error
    assert result.error is None
    assert result.summary == "Fix stats.mean dividing by len-1"
    assert "divides by n" in result.rationale
    assert FIXED in (example_ws / "stats.py").read_text()
    m = result.metrics
    assert (m.model, m.turns, m.tool_calls, m.tool_refusals) == (MODEL, 6, 6, 0)
    assert (m.input_tokens, m.output_tokens) == (2310, 230)
    assert (m.cache_creation_input_tokens, m.cache_read_input_tokens) == (3000, 16000)
    assert m.estimated_cost_usd == pytest.approx((2310 * 3 + 3000 * 3.75 + 16000 * 0.3 + 230 * 15) / 1e6)
    assert "edit_file" in result.output and "run_validation" in result.output
    assert result.prompt_file and Path(result.prompt_file).is_file()

    reqs = fake.requests
    assert len(reqs) == 6
    first = reqs[0].body
    assert first["model"] == MODEL
    # prompt caching: the static system block and the last tool definition carry a breakpoint
    assert first["system"] == [{"type": "text", "text": request(example_ws).prompt.system,
                                "cache_control": {"type": "ephemeral"}}]
    assert [t["name"] for t in first["tools"]] == ["list_files", "read_file", "search", "write_file",
                                                   "edit_file", "run_validation", "finish"]
    assert first["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert all("cache_control" not in t for t in first["tools"][:-1])
    assert first["messages"][0]["content"][0]["text"].startswith("# Cycle evt_test_1")
    assert KEY in (reqs[0].headers.get("x-api-key", "") + reqs[0].headers.get("authorization", ""))
    # the tool results went back to the model
    listing = reqs[1].tool_results()[0]["content"]
    assert "stats.py" in listing and ".git/" not in listing and "MEMORY.md" not in listing
    assert "8\t" + BUGGY.rstrip("\n") in reqs[2].tool_results()[0]["content"]
    assert reqs[3].tool_results()[0]["content"].startswith("stats.py:8:")
    assert reqs[4].tool_results()[0]["content"].startswith("edited stats.py")
    validation = reqs[5].tool_results()[0]
    assert validation["content"].startswith("validation PASSED") and "4 passed" in validation["content"]
    assert all("is_error" not in r for q in reqs[1:] for r in q.tool_results())
    # the conversation is replayed in order: assistant tool_use, then user tool_result with the same id
    last = reqs[5].messages
    assert last[-2]["role"] == "assistant" and last[-2]["content"][0]["type"] == "tool_use"
    assert last[-1]["content"][0]["tool_use_id"] == last[-2]["content"][0]["id"]
    # only the newest message carries the moving cache breakpoint (4 breakpoints at most per request)
    marks = [b for msg in last for b in msg["content"] if isinstance(b, dict) and "cache_control" in b]
    assert len(marks) == 1 and marks[0] is last[-1]["content"][-1]


def test_rate_limit_is_retried_by_the_sdk(fake: FakeAnthropic, repo: Path) -> None:
    fake.script = [rate_limited(), message(tool_use("finish", {"summary": "Nothing to change", "rationale": "ok"}))]
    mut = mutator(fake, retries=2)
    waits: list[float] = []
    sdk_wait = mut.client._calculate_retry_timeout

    def recorded(*args: Any) -> float:
        waits.append(sdk_wait(*args))
        return waits[-1]

    mut.client._calculate_retry_timeout = recorded  # type: ignore[method-assign]
    result = mut.apply(request(repo))
    assert result.status == "no_change", result.error
    assert result.summary == "Nothing to change"
    assert len(fake.requests) == 2
    assert fake.requests[1].headers.get("x-stainless-retry-count") == "1"  # the SDK's own retry
    assert fake.requests[0].body == fake.requests[1].body
    assert waits == [0.005]  # it waited what the server's retry-after-ms asked, not its own back-off


def test_persistent_server_errors_end_in_an_error_result(fake: FakeAnthropic, repo: Path) -> None:
    fake.script = [server_error(), server_error(), server_error()]
    result = mutator(fake, retries=1).apply(request(repo))
    assert result.status == "error"
    assert result.error == "Messages API error 500: Internal server error"
    assert len(fake.requests) == 2  # one try plus one retry


def test_client_errors_are_not_retried(fake: FakeAnthropic, repo: Path) -> None:
    fake.script = [error_reply(401, "authentication_error", "invalid x-api-key")]
    result = mutator(fake).apply(request(repo))
    assert (result.status, result.error) == ("error", "Messages API error 401: invalid x-api-key")
    assert len(fake.requests) == 1


@pytest.mark.parametrize(("reply", "why"), [
    (FakeReply(200, "this is not json{"), "reply is not JSON"),
    (FakeReply(200, {"type": "message", "role": "assistant"}), "reply field 'content'"),
    (FakeReply(200, {"type": "message", "content": [{"type": "tool_use", "name": "read_file"}]}),
     "tool_use block without id, name or input"),
    (FakeReply(200, {"type": "completion", "content": []}), "reply type is 'completion'"),
])
def test_malformed_reply_is_an_error_result(fake: FakeAnthropic, repo: Path, reply: FakeReply, why: str) -> None:
    fake.script = [message(tool_use("list_files", {})), reply]
    result = mutator(fake).apply(request(repo))
    assert result.status == "error"
    assert result.error is not None and result.error.startswith("malformed reply from the Messages API (turn 2)")
    assert why in result.error
    assert "\n" not in result.error
    assert result.metrics.turns == 1 and result.metrics.tool_calls == 1


def test_escape_attempts_are_refused_counted_and_harmless(fake: FakeAnthropic, example_ws: Path,
                                                          tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_text("untouched\n")
    (example_ws / "escape").symlink_to(outside)
    before_git_config = (example_ws / ".git" / "config").read_text()
    fake.script = [
        message(tool_use("read_file", {"path": "../../etc/passwd"}),
                tool_use("read_file", {"path": "/etc/passwd"})),
        message(tool_use("write_file", {"path": "escape/victim.txt", "content": "pwned\n"}),
                tool_use("edit_file", {"path": "escape/victim.txt", "old_text": "untouched", "new_text": "x"})),
        message(tool_use("write_file", {"path": ".git/config", "content": "[core]\n"}),
                tool_use("read_file", {"path": ".git/config"})),
        message(tool_use("write_file", {"path": "MEMORY.md", "content": ""})),
        message(tool_use("finish", {"summary": "Give up", "rationale": "every path was refused"})),
    ]
    result = mutator(fake).apply(request(example_ws))

    assert result.status == "no_change"
    assert result.metrics.tool_refusals == 7
    assert result.metrics.tool_calls == 8
    assert (outside / "victim.txt").read_text() == "untouched\n"
    assert sorted(p.name for p in outside.iterdir()) == ["victim.txt"]
    assert (example_ws / ".git" / "config").read_text() == before_git_config
    assert (example_ws / "MEMORY.md").read_text().startswith("# MEMORY")
    # each refusal went back to the model as a tool error
    errors = [r for q in fake.requests[1:] for r in q.tool_results()]
    assert len(errors) == 7 and all(r.get("is_error") is True for r in errors)
    assert all(r["content"].startswith("refused:") for r in errors)
    assert "root:x:0:0" not in json.dumps([q.body for q in fake.requests])  # /etc/passwd never read
    assert "REFUSED" in result.output


def test_turn_budget_is_enforced(fake: FakeAnthropic, repo: Path) -> None:
    fake.script = lambda req: message(tool_use("list_files", {}))  # a model that never finishes
    settings = Settings(max_turns=3, model=MODEL)
    result = mutator(fake, settings).apply(request(repo, settings))
    assert result.status == "error"
    assert result.error == "turn budget exhausted (3 turns) before finish"
    assert len(fake.requests) == 3 and result.metrics.turns == 3


def test_token_budget_is_enforced(fake: FakeAnthropic, repo: Path) -> None:
    fake.script = lambda req: message(tool_use("list_files", {}), input_tokens=3000, output_tokens=500)
    settings = Settings(max_tokens_per_cycle=8000, model=MODEL)
    result = mutator(fake, settings).apply(request(repo, settings))
    assert result.status == "error"
    assert result.error is not None and result.error.startswith("token budget exhausted (10500 of 8000 tokens)")
    assert len(fake.requests) == 3
    # each request asked for no more output than the budget had left
    assert [q.body["max_tokens"] for q in fake.requests] == [8000, 4500, 1000]


def test_end_turn_without_finish_keeps_the_change_for_solidify(fake: FakeAnthropic, example_ws: Path) -> None:
    fake.script = [
        message(tool_use("edit_file", {"path": "stats.py", "old_text": BUGGY, "new_text": FIXED})),
        message(text_block("I fixed the division in stats.mean.")),
    ]
    result = mutator(fake).apply(request(example_ws))
    assert result.status == "changed"
    assert result.summary == ""  # no finish: the cycle falls back to the mutation's expected effect
    assert result.rationale == "I fixed the division in stats.mean."
    assert FIXED in (example_ws / "stats.py").read_text()


def test_tool_errors_go_back_and_the_session_continues(fake: FakeAnthropic, repo: Path) -> None:
    fake.script = [
        message(tool_use("edit_file", {"path": "README.md", "old_text": "nope", "new_text": "x"})),
        message(tool_use("no_such_tool", {})),
        message(tool_use("write_file", {"path": "notes/new.md", "content": "hello\n"})),
        message(tool_use("finish", {"summary": "Add notes", "rationale": "r"})),
    ]
    result = mutator(fake).apply(request(repo))
    assert result.status == "changed" and result.summary == "Add notes"
    assert result.metrics.tool_refusals == 0 and result.metrics.tool_calls == 4
    assert fake.requests[1].tool_results()[0]["is_error"] is True
    assert "unknown tool" in fake.requests[2].tool_results()[0]["content"]
    assert (repo / "notes" / "new.md").read_text() == "hello\n"


def test_unreachable_api_is_an_error_result(repo: Path) -> None:
    server = FakeAnthropic().start()
    url = server.url
    server.stop()  # nothing listens there any more
    result = AnthropicMutator(Settings(model=MODEL), {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": url},
                              max_retries=0).apply(request(repo))
    assert result.status == "error" and result.error is not None
    assert result.error.startswith("cannot reach the Messages API")


def test_secrets_do_not_leave_in_requests(fake: FakeAnthropic, repo: Path) -> None:
    secret = "ghp_" + "Q1w2E3r4T5y6U7i8O9p0" * 2
    (repo / "deploy.sh").write_text(f"TOKEN={secret}\n")
    fake.script = [message(tool_use("read_file", {"path": "deploy.sh"})),
                   message(tool_use("finish", {"summary": "Nothing", "rationale": "n"}))]
    mutator(fake).apply(request(repo))
    assert secret not in json.dumps([q.body for q in fake.requests])


def test_cost_table_by_model_family() -> None:
    m = MutatorMetrics(input_tokens=1_000_000, output_tokens=1_000_000)
    assert estimate_cost("claude-sonnet-4-5", m) == pytest.approx(18.0)
    assert estimate_cost("claude-opus-4-1", m) == pytest.approx(90.0)
    assert estimate_cost("claude-opus-4-5-20251101", m) == pytest.approx(30.0)
    assert estimate_cost("claude-opus-4-20250514", m) == pytest.approx(90.0)
    assert estimate_cost("claude-opus-4-6", m) == pytest.approx(30.0)
    assert estimate_cost("claude-3-5-haiku-latest", m) == pytest.approx(4.8)
    assert estimate_cost("claude-haiku-4-5", m) == pytest.approx(6.0)
    assert estimate_cost("claude-3-haiku-20240307", m) == pytest.approx(1.5)
    assert estimate_cost("some-other-model", m) is None


def test_get_mutator_chooses_and_validates(repo: Path) -> None:
    s = Settings()
    assert isinstance(get_mutator(None, s, {}), PromptMutator)
    assert get_mutator(None, s, {"ANTHROPIC_API_KEY": KEY}).name == "anthropic"
    assert get_mutator(None, Settings(mutator="prompt"), {"ANTHROPIC_API_KEY": KEY}).name == "prompt"
    assert get_mutator("command", Settings(agent_cmd="my-agent --yes"), {}).name == "command"
    with pytest.raises(ConfigError, match="unknown mutator 'claude'; valid: anthropic, command, prompt"):
        get_mutator("claude", s, {})
    with pytest.raises(ConfigError, match="agent command"):
        get_mutator("command", s, {})
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        get_mutator("anthropic", s, {})


def test_recorded_request_helpers() -> None:
    req = RecordedRequest("/v1/messages", {}, {"messages": [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": "x"}]}]})
    assert req.tool_results() == [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]


def test_secrets_in_the_workspace_logs_reach_no_prompt_request_or_store(
        fake: FakeAnthropic, example_ws: Path, venv_python_first: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A whole Claude-driven cycle (no Prefect) on a workspace whose log holds an Anthropic key, a GitHub
    token, a password and a PEM key: none of them is in the prompt file, any request the API received
    (system, context, tool results), the stored event or anything else in the store, or the commit."""
    import sqlite3

    from conftest import git

    from gep import CycleRequest, run_cycle

    secrets = ["sk-ant-api03-" + "Zx9" * 14, "ghp_" + "Q1w2E3r4T5y6U7i8O9p0" * 2, "hunter2-Very-Secret",
               "MIIEowIBAAKCAQEAsecretPemBodyLine0123456789"]
    log = example_ws / "logs" / "agent.log"
    log.write_text(log.read_text() + (
        f"2026-11-21T09:15:00Z [ERROR] auth: request failed with key {secrets[0]}\n"
        f"2026-11-21T09:15:01Z [ERROR] git push rejected: token {secrets[1]}\n"
        f"2026-11-21T09:15:02Z [ERROR] db: connect failed password={secrets[2]}\n"
        f"-----BEGIN RSA PRIVATE KEY-----\n{secrets[3]}\n-----END RSA PRIVATE KEY-----\n"))
    git(example_ws, "commit", "-qam", "logs")
    fake.script = [message(tool_use("read_file", {"path": "logs/agent.log"}),
                           tool_use("search", {"pattern": "password|BEGIN|ghp_|sk-ant"})),
                   *fixing_session()[3:]]
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
    env = {**os.environ, "GEP_MODEL": MODEL}
    event = run_cycle(CycleRequest(workspace=example_ws, mutator="anthropic"), env=env)

    assert event.outcome.status == "success", event.meta.failure_reasons
    sent = json.dumps([q.body for q in fake.requests])
    assert "[REDACTED]" in sent and "git push rejected" in sent  # the log did go out, redacted
    prompt_file = Path(event.meta.mutator_result.prompt_file).read_text()
    with sqlite3.connect(example_ws / ".gep" / "gep.db") as db:
        stored = "\n".join(db.iterdump())
    engine_commit = git(example_ws, "show", "HEAD")
    assert "GEP-Event: " + event.id in engine_commit
    for secret in secrets:
        for where, text in (("request", sent), ("prompt file", prompt_file), ("store", stored),
                            ("engine's commit", engine_commit)):
            assert secret not in text, f"{secret[:8]}... leaked into the {where}"
