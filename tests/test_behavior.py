"""Behavioural signal rules (seed 000): the seed's examples, each type from real transcript formats, the caps,
negations, privacy of what is stored, and the mapping into GEP signals."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import ValidationError

from gep.core.sanitize import redact
from gep.signals.behavior import (
    MAX_PER_EXCHANGE,
    BehaviorSignal,
    detect,
    detect_session,
    exchange_key,
    gep_signals,
)
from gep.signals.sources import TranscriptExchange, transcript_exchanges

FIXTURES = Path(__file__).parent / "fixtures"
NOW = datetime(2026, 3, 14, 12, 0, tzinfo=UTC)
DONE = "I refactored the parser into three functions and added tests. All tests pass."


def ex(user: str, agent: str = DONE, tools: list[str] | None = None) -> TranscriptExchange:
    return TranscriptExchange(source="claude_code", session_id="s1", agent=agent, agent_tools=tools or [],
                              user=user, ts=NOW)


def types(user: str, agent: str = DONE, history: list[str] | None = None) -> list[str]:
    past = [ex(h, agent="") for h in history or []]
    return [s.type for s in detect(ex(user, agent), past, now=NOW)]


def one(user: str, agent: str = DONE) -> BehaviorSignal:
    found = detect(ex(user, agent), now=NOW)
    assert len(found) == 1, found
    return found[0]


# ------------------------------------------------------------------ the seed's own examples


def test_seed_preference_example() -> None:
    sig = one("Please just send me the link directly next time",
              agent="Here's the link: https://example.com/docs. This page covers installation and setup.")
    assert sig.type == "preference" and "link" in sig.summary.lower() and sig.intensity >= 3


def test_seed_emotion_example() -> None:
    sig = one("This is so frustrating!!!", agent="The build still fails with the same error.")
    assert sig.type == "emotion" and sig.intensity >= 4 and "frustrated" in sig.summary


@pytest.mark.parametrize("message", ["ok", "OK.", "okay!", "sure, go ahead", "好的", "はい", "继续", "no no no",
                                     "OK OK OK!"])
def test_seed_ambiguous_messages_give_nothing(message: str) -> None:
    assert detect(ex(message), now=NOW) == []


@pytest.mark.parametrize("message", ["I prefer coffee", "My manager prefers weekly reports.", "我喜欢喝咖啡",
                                     "コーヒーの方が好きです"])
def test_seed_preferences_not_about_the_agent_give_nothing(message: str) -> None:
    assert types(message) == []


def test_seed_changed_mind_is_not_a_correction() -> None:
    assert types("Actually, I changed my mind", agent="I'll start with the database layer.") == []
    assert types("No, scratch that, I changed my mind: keep the old name.", agent="Renamed it to `load`.") == []
    assert types("不对不对，我改主意了，用原来的名字", agent="我把它改名为 load 了。") == []


@pytest.mark.parametrize(("message", "kind", "intensity"), [
    ("Thanks so much! This is exactly what I needed!", "approval", 5),
    ("Perfect, thanks!", "approval", 4),
    ("Good job", "approval", 3),
    ("👍", "approval", 2),
    ("lol", "emotion", 3),
    ("No, X is not Y", "correction", 4),
    ("You misunderstood, I meant Z", "correction", 4),
    ("Don't do that, do this instead", "correction", 4),
    ("I don't need explanations, just the answer", "preference", 3),  # the seed gives none: 3
    ("I like when you add emojis", "preference", 3),
])
def test_seed_examples_with_their_intensity(message: str, kind: str, intensity: int) -> None:
    found = {s.type: s for s in detect(ex(message, agent="X is a kind of Y."), now=NOW)}
    assert kind in found and found[kind].intensity == intensity


def test_seed_schema_is_enforced() -> None:
    ok = BehaviorSignal(ts="2026-02-12T14:32:01", type="preference", summary="User prefers bullet points",
                        intensity=4)
    assert ok.model_dump(exclude_none=True) == {"ts": "2026-02-12T14:32:01", "type": "preference",
                                                "summary": "User prefers bullet points", "intensity": 4}
    for bad in ({"type": "mood"}, {"intensity": 0}, {"intensity": 6}, {"summary": "x" * 101},
                {"context": "x" * 151}, {"ts": "yesterday"}, {"summary": ""}):
        with pytest.raises(ValidationError):
            BehaviorSignal.model_validate({**ok.model_dump(), **bad})


# ------------------------------------------------------------------ false positives are worse than misses


@pytest.mark.parametrize(("message", "agent"), [
    ("hmm, not really good, but let's move on", "Here's the new logo layout."),
    ("Not bad, but the header is still off", "Updated the header."),
    ("不是很好，不过先这样吧", "这是新的布局。"),
    ("あまり良くないですね", "新しいレイアウトです。"),
    ("No, that's fine.", "Should I also bump the version?"),
    ("No, let's leave the version as it is.", "Should I also bump the version?"),
    ("no thanks, I'll do it myself", "Want me to update the changelog?"),
    ("不对称加密是什么？", "我用了 RSA。"),
    ("違うブランチで作業してもいいですか？", "main で作業します。"),
    ("Thanks to the new cache the page is fast. Next: the search page.", ""),
    ("Can you add logging to the worker? thanks", DONE),
    ("Please fix the failing test in test_api.py", DONE),
    ("fix the annoying warning in the build log", DONE),
    ("The docs say you should never call this in a loop.", "Where did you read that?"),
    ("Never seen this error before, what is it?", DONE),
    ("I'd love it if you added a test for this", DONE),
])
def test_negations_and_lookalikes_give_nothing(message: str, agent: str) -> None:
    assert types(message, agent) == []


def test_a_correction_needs_an_agent_turn_before_it() -> None:
    assert types("No, that's wrong, it's read from gep.toml.", agent="") == []
    assert types("No, that's wrong, it's read from gep.toml.", agent="The config comes from app.yaml.") == \
        ["correction"]


def test_code_urls_and_quotes_are_not_the_person_talking() -> None:
    pasted = "why does this fail?\n```\nAssertionError: wrong value, I'm so frustrated\n```\n> no, stop"
    assert types(pasted) == []


# ------------------------------------------------------------------ languages


@pytest.mark.parametrize(("message", "agent", "expected"), [
    ("不对，我说的是30秒，不是30分钟", "我把超时设置成了30分钟。", "correction"),
    ("不對，我說的是30秒，不是30分鐘", "我把逾時設定為30分鐘。", "correction"),
    ("違います、30秒と言いました", "タイムアウトを30分に設定しました。", "correction"),
    ("以后直接给我链接就行，不用解释", "这是链接和一段说明……", "preference"),
    ("以後直接給我連結就好，不用解釋", "這是連結和一段說明……", "preference"),
    ("次からはリンクだけ送ってください", "リンクと説明です……", "preference"),
    ("烦死了！！！怎么又错了", "抱歉，我又理解错了。", "emotion"),
    ("もう本当にイライラする！！", "同じエラーで失敗します。", "emotion"),
    ("完美，谢谢！", DONE, "approval"),
    ("完美，謝謝！", DONE, "approval"),
    ("完璧です、ありがとう！", DONE, "approval"),
])
def test_chinese_and_japanese(message: str, agent: str, expected: str) -> None:
    assert expected in types(message, agent)


# ------------------------------------------------------------------ style over several messages


def test_style_burst_of_short_messages_is_reported_once_when_it_forms() -> None:
    assert types("run them", history=["fix it", "now the tests"]) == []
    assert types("push", history=["fix it", "now the tests", "run them"]) == ["style"]
    assert types("next", history=["fix it", "now the tests", "run them", "push"]) == []  # already reported


def test_style_emoji_formality_and_length() -> None:
    emoji = ["hey 😊 can you check the logs?", "cool 😎 what was it?", "ahh makes sense 🙏"]
    sig = detect(ex("let's do the readme next 😄", agent="Done ✅"), [ex(h, agent="") for h in emoji], now=NOW)
    assert [s.summary for s in sig] == ["User mirrors the agent's emoji use (comfortable with emoji)"]
    formal = ["请您帮我检查一下这个配置是否合适。", "麻烦您再确认一下日志的设置。", "劳驾您完成后告知我一声。"]
    assert types("烦请您把结论整理成一份简短的报告。", history=formal) == ["style"]
    long = ["word " * 90] * 3
    assert types("more " * 90, history=long) == ["style"]


# ------------------------------------------------------------------ caps and privacy


def test_at_most_three_signals_per_exchange_corrections_first() -> None:
    message = "No, I said bullet points!! Please always use bullet points from now on. Thanks, the rest is great 😡"
    history = [ex(m, agent="") for m in ("a 😊", "b 😊", "c 😊")]
    everything = detect(ex(message, agent="Here is a paragraph."), history, now=NOW)
    assert len(everything) == MAX_PER_EXCHANGE
    assert [s.type for s in everything] == ["correction", "preference", "emotion"]


PRIVATE = ("dana.k@example.com", "sk-ant-api03-" + "z" * 30, "Alice", "Wonderland", "4417 1234 5678 9113")


@pytest.mark.parametrize("message", [
    "From now on, always cc Alice from Wonderland at dana.k@example.com when you send the weekly report",
    "Please just use sk-ant-api03-" + "z" * 30 + " as the key next time, I told you Alice said so",
    "I'd prefer you to email Alice at dana.k@example.com with the card 4417 1234 5678 9113 details",
    "No, Alice lives in Wonderland, not in London, and her email is dana.k@example.com!!",
])
def test_summaries_never_carry_names_addresses_keys_or_long_quotes(message: str) -> None:
    found = detect(ex(message, agent="I emailed Bob."), now=NOW)
    assert found
    for sig in found:
        stored = json.dumps(sig.model_dump(), ensure_ascii=False).lower()
        assert not any(p.lower() in stored for p in PRIVATE), stored
        words = re.findall(r"[a-z']+", message.lower())
        runs = {" ".join(words[i:i + 6]) for i in range(len(words) - 5)}
        assert not any(r in sig.summary.lower() for r in runs), sig.summary  # never six words of the message


def test_summary_and_context_are_redacted_even_when_built_elsewhere() -> None:
    sig = BehaviorSignal(ts="2026-03-14T10:00:00Z", type="preference", intensity=3,
                         summary="User prefers mail to dana.k@example.com", context="key sk-ant-api03-" + "q" * 30)
    assert "dana.k@" not in sig.summary and "qqqq" not in (sig.context or "")
    assert sig.summary == redact("User prefers mail to dana.k@example.com")


def test_context_describes_the_agent_turn_without_quoting_it() -> None:
    sig = one("I didn't ask you to push to main!", agent="I've pushed the secret launch plan to main.\n- a\n- b")
    assert sig.context is not None and "launch" not in sig.context and "list" in sig.context


# ------------------------------------------------------------------ real transcripts, both agents


def session(name: str) -> list[tuple[str, list[str]]]:
    parsed = transcript_exchanges((FIXTURES / name).read_text(encoding="utf-8"))
    return [(ex.user, [s.type for s in d.signals]) for ex, d in zip(parsed.exchanges,
                                                                     detect_session(parsed, now=NOW), strict=True)]


def test_every_type_from_a_claude_code_session() -> None:
    got = session("behavior_claude_code.jsonl")
    assert [t for _u, ts in got for t in ts] == ["correction", "preference", "approval", "emotion", "style"]
    users = [u for u, _ in got]
    # slash-command records, meta caveats, tool results and subagent turns are not the person talking
    assert not any(u.startswith(("<command", "<local", "Caveat")) for u in users)
    assert "Search the codebase for CSV writers" not in users and len(users) == 10


def test_every_type_from_an_openclaw_session() -> None:
    got = dict(session("behavior_openclaw.jsonl"))
    assert got["Please just send me the link directly next time"] == ["preference"]
    assert got["No, tomorrow is Tuesday, not Monday."] == ["correction"]
    assert got["lol"] == ["emotion"]
    assert "approval" in got["thanks so much 😊 that's exactly what I needed"]
    assert got["one more: book a table for 2 at 7pm 🍝"] == ["style"]


def test_exchange_key_is_stable_and_ignores_time_and_a_cut_agent_turn() -> None:
    a = ex("No, use the csv module", agent="x" * 3000 + "I'll use pandas.")
    b = a.model_copy(update={"ts": None, "agent": "x" * 300 + "I'll use pandas."})  # a tail cut its start
    assert exchange_key(a) == exchange_key(b)
    assert exchange_key(a) != exchange_key(a.model_copy(update={"session_id": "other"}))
    assert exchange_key(a) != exchange_key(a.model_copy(update={"user": "No, use the json module"}))


# ------------------------------------------------------------------ into evolution


def sig(kind: str, summary: str, intensity: int = 4) -> BehaviorSignal:
    return BehaviorSignal(ts="2026-03-14T10:00:00Z", type=kind, summary=summary, intensity=intensity)


def test_gep_signals_mapping() -> None:
    got = gep_signals([
        sig("correction", "User said the agent misunderstood the request"),
        sig("correction", "User said the agent misunderstood the request"),
        sig("emotion", "User frustrated (repeated corrections)", 5),
        sig("emotion", "User annoyed", 3),  # below 4: not frustration
        sig("emotion", "User delighted", 5),  # positive: not frustration
        sig("preference", "User prefers links sent directly"),
        sig("approval", "User praised the agent's reply"),
        sig("style", "User sent 4 short messages in a row (prefers brevity)", 3),
    ])
    assert got == ["user_correction:User said the agent misunderstood the request", "user_frustration",
                   "user_preference:User prefers links sent directly", "user_approval",
                   "user_style:User sent 4 short messages in a row (prefers brevity)", "user_correction_repeated"]
    assert gep_signals([sig("emotion", "User annoyed", 3), sig("emotion", "User delighted", 5)]) == []
    assert gep_signals([sig("correction", "User restated what they had asked for")]) == \
        ["user_correction:User restated what they had asked for"]  # one correction is not a repeated one


def test_labelled_set_precision_stays_high() -> None:
    """The bench's measure on the labelled set (docs/behavior.md): precision first."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import behavior as bench  # bench/behavior.py

    items = bench.load()
    assert len(items) >= 200 and {it.lang for it in items} == {"en", "zh", "zh-TW", "ja"}
    tp, fp, fn = (sum(v[i] for v in bench.scores(items).values()) for i in range(3))
    assert tp / (tp + fp) >= 0.95 and tp / (tp + fn) >= 0.9
