"""The Claude signal pass (seed 001) through the real anthropic SDK against the local fake Messages API."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fake_anthropic import FakeAnthropic, RecordedRequest, error_reply, message, text_block, tool_use

from gep.core.config import Settings
from gep.core.errors import ConfigError
from gep.mutators.anthropic_mutator import estimate_cost
from gep.signals.behavior_log import read_signals, seen
from gep.signals.claude_pass import (
    SYSTEM,
    TOOL,
    LlmSignal,
    capture_llm,
    check_llm_settings,
    gep_signal,
    llm_candidates,
    llm_pass_due,
    run_llm_pass,
    wants_llm,
)
from gep.signals.sources import TranscriptExchange, transcript_exchanges

KEY = "sk-ant-api03-test-" + "k" * 24
NOW = datetime(2026, 3, 14, 12, 0, tzinfo=UTC)
FIXTURES = Path(__file__).parent / "fixtures"
USER = "honestly I just want the code, every paragraph of prose costs me time when I review"


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        yield server


def env(fake: FakeAnthropic) -> dict[str, str]:
    return {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": fake.url}


def ex(user: str = USER, agent: str = "Here is a long explanation of the change, then the code.") -> TranscriptExchange:
    return TranscriptExchange(source="claude_code", session_id="s1", agent=agent, user=user, ts=NOW)


def extract(kind: str, content: str, source: str, confidence: float) -> dict[str, Any]:
    return tool_use("extract_signal", {"type": kind, "content": content, "source": source, "confidence": confidence})


def test_keeps_confident_sourced_signals_and_drops_and_counts_the_rest(fake: FakeAnthropic) -> None:
    fake.script = [
        message(
            extract("preference", "Wants code without explanatory prose", "I just want the code", 0.9),
            extract("value", "Values review time", "my time is precious", 0.8),  # never said: hallucinated
            extract("style", "Writes casually", "honestly", 0.5),  # not confident enough
            extract("approval", "Said I just want the code, every paragraph of prose", "just want the code", 0.95),
            input_tokens=300, output_tokens=80),
        message(extract("pattern", "Reviews every change closely", "when I  REVIEW", 0.7),
                input_tokens=350, output_tokens=40),
        message(text_block("Never asked: two turns per exchange at most.")),
    ]
    result = run_llm_pass([ex()], settings=Settings(), env=env(fake), now=NOW)
    assert (result.record.asked, result.record.kept) == (1, 2)
    assert (result.record.dropped_unsourced, result.record.dropped_low_confidence, result.record.dropped_quoting) == (1, 1, 1)
    assert result.gep_signals == ["user_preference:Wants code without explanatory prose",
                                  "user_pattern:Reviews every change closely"]
    [found] = result.detected
    assert [(s.type, s.intensity, s.summary) for s in found.signals] == \
        [("preference", 5, "Wants code without explanatory prose")]  # the core types only; no source stored
    assert "want the code" not in json.dumps([s.model_dump() for s in found.signals])

    first, second = fake.requests
    assert first.body["system"] == SYSTEM and "not conducting an interview" in SYSTEM and "2-3" in SYSTEM
    assert first.body["tools"] == [TOOL] and TOOL["name"] == "extract_signal"
    assert set(TOOL["input_schema"]["properties"]) == {"type", "content", "source", "confidence"}
    assert set(TOOL["input_schema"]["properties"]["type"]["enum"]) == {
        "preference", "emotion", "correction", "approval", "style", "pattern", "value", "fear", "defense"}
    assert [json.loads(r["content"]) for r in second.tool_results()] == [{"extracted": True}] * 4

    m = result.record.metrics
    assert (m.input_tokens, m.output_tokens) == (650, 120) and m.estimated_cost_usd == estimate_cost(m.model, m) > 0


def test_what_is_sent_is_redacted(fake: FakeAnthropic) -> None:
    fake.script = [message(text_block("Nothing clear."))]
    secret = "sk-ant-api03-" + "s" * 30
    run_llm_pass([ex(user=f"mail dana.k@example.com the key {secret} now please",
                     agent="I stored it in /home/dana/app/.env for you.")],
                 settings=Settings(), env=env(fake), now=NOW)
    sent = json.dumps(fake.requests[0].body)
    assert "dana.k@example.com" not in sent and secret not in sent and "/home/dana/" not in sent
    assert "[REDACTED]" in sent


def test_the_token_budget_stops_asking_and_says_how_many_were_left(fake: FakeAnthropic) -> None:
    fake.script = lambda req: message(text_block("Nothing."), input_tokens=700, output_tokens=50)
    settings = Settings(llm_signals_token_budget=1400)
    result = run_llm_pass([ex(), ex(user="second one"), ex(user="third one")], settings=settings,
                          env=env(fake), now=NOW)
    assert (result.record.asked, result.record.skipped_budget, len(fake.requests)) == (1, 2, 1)
    assert result.record.metrics.total_tokens == 750


def test_api_errors_and_malformed_calls_are_counted_not_raised(fake: FakeAnthropic) -> None:
    fake.script = [error_reply(400, "invalid_request_error", "bad request"),
                   message(tool_use("extract_signal", {"type": "preference", "content": "x", "source": "second",
                                                       "confidence": "very"})),
                   message(text_block("ok"))]
    result = run_llm_pass([ex(), ex(user="second one here")], settings=Settings(), env=env(fake), now=NOW)
    assert result.record.asked == 2 and len(result.record.errors) == 1 and "bad request" in result.record.errors[0]
    assert result.record.dropped_malformed == 1
    assert len(result.detected) == 1  # the failed exchange is not marked: asked again next cycle


def test_every_type_maps_to_a_gep_signal() -> None:
    def one(kind: str, content: str = "Something about the user", confidence: float = 0.95) -> str:
        return gep_signal(LlmSignal(type=kind, content=content, source="x", confidence=confidence))

    assert one("correction") == "user_correction:Something about the user"
    assert one("preference") == "user_preference:Something about the user"
    assert one("approval") == "user_approval"
    assert one("style") == "user_style:Something about the user"
    assert one("emotion", "User is frustrated by the repeated failures") == "user_frustration"
    assert one("emotion", "User is frustrated", confidence=0.7) == "user_emotion:User is frustrated"
    assert one("emotion", "User is delighted") == "user_emotion:User is delighted"
    for kind in ("pattern", "value", "fear", "defense"):
        assert one(kind) == f"user_{kind}:Something about the user"


def test_which_exchanges_are_asked_about() -> None:
    assert wants_llm(ex(), []) and not wants_llm(ex(user="ok"), []) and not wants_llm(ex(user="push it"), [])
    assert not wants_llm(ex(user="/compact now please"), []) and wants_llm(ex(user="这个方案我不太放心"), [])
    assert [llm_pass_due(n, 3) for n in range(7)] == [False, False, False, True, False, False, True]
    assert not llm_pass_due(10, 0)


def test_settings_and_their_check() -> None:
    settings = Settings(llm_signals=True)
    assert (settings.llm_signals_every, settings.llm_signals_token_budget) == (10, 20_000)
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        check_llm_settings(settings, {})
    check_llm_settings(settings, {"ANTHROPIC_API_KEY": KEY})
    check_llm_settings(Settings(), {})


def _answer_with_a_preference(req: RecordedRequest) -> dict[str, Any]:
    if req.tool_results():
        return message(text_block("Done."))
    user_turn = req.messages[0]["content"][0]["text"].split("<user_turn>\n")[1].split("\n</user_turn>")[0]
    words = user_turn.split()[:3]
    return message(extract("preference", "Prefers fixes to come with a reproduction", " ".join(words), 0.8))


def test_capture_llm_asks_once_per_exchange_and_records_what_it_keeps(fake: FakeAnthropic, tmp_path: Path) -> None:
    session = transcript_exchanges((FIXTURES / "behavior_claude_code.jsonl").read_text(encoding="utf-8"))
    settings = Settings(llm_signals=True, llm_signals_every=0)
    fake.script = _answer_with_a_preference
    assert capture_llm(tmp_path, [session], settings=Settings(), env=env(fake), now=NOW, cycle_number=1).record.asked == 0

    result = capture_llm(tmp_path, [session], settings=settings, env=env(fake), now=NOW, cycle_number=1)
    # the rules found nothing in two exchanges worth asking about ("ok", "lint", "commit" are not)
    assert result.record.asked == 2 and result.record.kept == 2
    assert [s.type for s in read_signals(tmp_path).signals] == ["preference"] * 2
    assert len(seen(tmp_path, "llm")) == 2
    again = capture_llm(tmp_path, [session], settings=settings, env=env(fake), now=NOW, cycle_number=2)
    assert again.record.asked == 0 and len(fake.requests) == 4  # two conversations of two turns, nothing new

    periodic = llm_candidates(tmp_path, [session], now=NOW, periodic=True)
    assert {e.user for e in periodic} >= {"Perfect, thanks!", "This is so frustrating!!!"}  # the rules' too
