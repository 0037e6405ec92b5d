"""Corpus signal families of seed 002, per language, and properties of extract_signals."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gep.signals.rules import extract_signals


def sig(text: str = "", **kw: object) -> list[str]:
    return extract_signals(recent_session_transcript=text, **kw)  # type: ignore[arg-type]


def utf16_len(s: str) -> int:
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


# ---------------------------------------------------------------- defensive signals


def test_empty_inputs_give_the_plateau_fallback() -> None:
    assert extract_signals() == ["stable_success_plateau"]
    assert sig("all good, nothing to report") == ["stable_success_plateau"]


@pytest.mark.parametrize(
    "line",
    [
        "[ERROR] db down",
        "something error: broke",
        "exception: boom",
        '{"isError":true}',
        '{"status": "error"}',
        '{"status":"failed"}',
        "构建错误：找不到模块",
        "运行异常: 空指针",
        "报错：超时",
        "任务失败 ：重试",
    ],
)
def test_log_error_markers(line: str) -> None:
    assert sig(line)[0] == "log_error"


@pytest.mark.parametrize(
    "text", ["the test failed twice", "fail fast", "Errors are logged", "no exception here"]
)
def test_plain_words_are_not_errors(text: str) -> None:
    assert "log_error" not in sig(text)


def test_errsig_is_the_first_matching_line_trimmed_and_collapsed() -> None:
    text = "ok line\n   TypeError  :\tcannot read 'x'   of undefined  \nError: second"
    assert sig(text)[:2] == ["log_error", "errsig:TypeError : cannot read 'x' of undefined"]


def test_errsig_is_clipped_to_260_utf16_units() -> None:
    out = sig("Error: " + "x" * 400)
    errsig = next(s for s in out if s.startswith("errsig:"))
    assert len(errsig) == len("errsig:") + 260
    # Emoji count as two units, as in JavaScript.
    out = sig("Error: " + "😀" * 300)
    errsig = next(s for s in out if s.startswith("errsig:"))
    assert utf16_len(errsig) == len("errsig:") + 260


def test_errsig_does_not_join_lines() -> None:
    # "error" on one line and ":" on the next is not an error signature (per-line test).
    assert not any(s.startswith("errsig:") for s in sig("an error\n: follows"))


def test_missing_resources_are_cosmetic_unless_alone() -> None:
    assert sig("[MEMORY.md MISSING]\n[USER.md MISSING]\n[NO SESSION LOGS FOUND]") == [
        "memory_missing",
        "user_missing",
        "session_logs_missing",
    ]
    assert sig("[NO JSONL FILES]") == ["session_logs_missing"]
    # Any actionable signal drops them.
    assert sig("[MEMORY.md MISSING]\nError: db") == ["log_error", "errsig:Error: db"]
    assert sig("GEMINI key missing\n[USER.md MISSING]") == ["integration_key_missing"]


def test_capability_gap_is_withheld_when_a_resource_is_missing() -> None:
    assert sig("this is not supported") == ["capability_gap"]
    assert sig("this is not supported\n[MEMORY.md MISSING]") == ["memory_missing"]


def test_recurring_error_counts_identical_normalised_errors() -> None:
    line = "LLM error: 429   rate limited}"
    out = sig("\n".join([line] * 3 + ['"error" other}'] * 2))
    assert "recurring_error" in out
    assert "recurring_errsig(3x):LLM error: 429 rate limited" in out
    assert "recurring_error" not in sig("\n".join([line] * 2))


def test_unsupported_input_type() -> None:
    assert "unsupported_input_type" in sig("Unsupported MIME type: image/gif")
    assert "unsupported_input_type" in sig("invalid image mime")


# ---------------------------------------------------------------- opportunity signals, four languages


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Please build an export feature for reports.", "user_feature_request:build an export feature"),
        ("could we add csv export support?", "user_feature_request:add csv export support"),
        ("Honestly I need the numbers sooner", "user_feature_request:Honestly I need the numbers sooner"),
        ("老板说：帮我加一个导出按钮吧", "user_feature_request:老板说：帮我加一个导出按钮吧"),
        ("我想，把报表导出成 CSV", "user_feature_request:把报表导出成 CSV"),
        ("請加一個匯出按鈕", "user_feature_request:請加一個匯出按鈕"),
        ("エクスポート機能を追加してください", "user_feature_request:エクスポート機能を追加してください"),
    ],
)
def test_feature_requests_per_language(text: str, expected: str) -> None:
    assert expected in sig(text)


def test_feature_request_english_has_priority_over_other_languages() -> None:
    # "add ... mode" (verb, 3-120 chars, noun) is tried first, before the Chinese keywords.
    out = sig("请帮我加个按钮\nplease add dark mode")
    assert [s for s in out if s.startswith("user_feature_request")] == ["user_feature_request:add dark mode"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "the report should be faster to read",
            "user_improvement_suggestion:the report should be faster to read",
        ),
        ("这段代码可以重构", "user_improvement_suggestion:这段代码可以重构"),
        ("這段程式碼可以重構", "user_improvement_suggestion:這段程式碼可以重構"),
        ("このコードを改善したい", "user_improvement_suggestion:このコードを改善したい"),
    ],
)
def test_improvement_suggestions_per_language(text: str, expected: str) -> None:
    assert expected in sig(text)


def test_improvement_is_not_reported_next_to_an_error() -> None:
    out = sig("Error: boom\nwe should be refactoring this")
    assert not any(s.startswith("user_improvement_suggestion") for s in out)


def test_snippets_are_clipped_to_200_utf16_units() -> None:
    out = sig("I need " + "a" * 500)
    snippet = next(s for s in out if s.startswith("user_feature_request:"))
    # The leading context window is 80 units and the trailing one 80: "I need" + 80 chars.
    assert snippet == "user_feature_request:I need " + "a" * 79
    out = sig("加个" + "字" * 300)
    snippet = next(s for s in out if s.startswith("user_feature_request:"))
    assert utf16_len(snippet) - len("user_feature_request:") <= 200


def test_perf_and_capability() -> None:
    assert sig("the request timed out after 30s") == ["perf_bottleneck"]
    assert sig("process was killed: OOM") == ["perf_bottleneck"]
    assert sig("we cannot parse that") == ["capability_gap"]
    assert "perf_bottleneck" not in sig("slowly but surely")  # ASCII word boundary


@pytest.mark.parametrize(
    ("text", "fires"),
    [
        ("slow", True),  # the word is the whole text: nothing to look behind at
        ("a-slow.", True),
        ("xslow", False),  # the branch starts at "w"; the word start is checked behind it
        ("_slow", False),
        ("9bottleneck", False),
        ("thigh cpu", False),
        ("High CPU", True),
        ("timed \u3000\t out", True),
        ("time out", True),
        ("timeouts", False),
        ("é-oom", True),
        ("out of memoryx", False),
    ],
)
def test_perf_words_at_word_boundaries(text: str, fires: bool) -> None:
    assert ("perf_bottleneck" in sig(text)) is fires


def test_tool_usage() -> None:
    text = "\n".join(["[TOOL: exec]"] * 10 + ["[TOOL: read]"] * 9)
    assert sig(text) == ["high_tool_usage:exec", "repeated_tool_usage:exec"]
    # Benign watchdog execs are discounted.
    text = "\n".join(["[TOOL: exec]"] * 6 + ["exec: node scripts/watch.js ensure"] * 2)
    assert sig(text) == ["stable_success_plateau"]
    # Integer-like tool names come first, as JavaScript object keys do.
    text = "\n".join(["[TOOL: web-search]"] * 10 + ["[TOOL: 42]"] * 10)
    assert sig(text) == ["high_tool_usage:42", "high_tool_usage:web-search"]
    # Names inherited from Object.prototype never count.
    assert sig("\n".join(["[TOOL: constructor]"] * 12)) == ["stable_success_plateau"]


def test_order_follows_the_reference_push_order() -> None:
    text = (
        "Error: x\nmemory.md missing\nAPI key missing\nunsupported mime\n"
        "please add an export command\nit is slow\nnot supported"
    )
    assert sig(text) == [
        "log_error",
        "errsig:Error: x",
        "integration_key_missing",
        "unsupported_input_type",
        "user_feature_request:add an export command",
        "perf_bottleneck",
    ]


def test_js_case_folding_and_whitespace() -> None:
    # Kelvin sign lower-cases to "k" in both languages: "key missing".
    assert "integration_key_missing" in sig("API \u212aey missing")
    # /i in JavaScript (no u flag) does not fold the long s onto "s".
    assert "perf_bottleneck" not in sig("ſlow")
    # \ufeff is whitespace in JavaScript (not in Python's \s).
    assert "errsig:Error : y" in sig("Error\ufeff: y")


# ---------------------------------------------------------------- properties

PIECES = ["Error:", "加个", "我想", "改善", "[TOOL: exec]", "\n", " ", "I need", "😀", "}", "should be"]
TEXT = st.lists(st.one_of(st.text(max_size=30), st.sampled_from(PIECES)), max_size=40).map("".join)


@settings(max_examples=300, deadline=None)
@given(TEXT, TEXT, TEXT, TEXT)
def test_never_raises_no_duplicates_and_bounded_snippets(t: str, log: str, mem: str, user: str) -> None:
    out = extract_signals(recent_session_transcript=t, today_log=log, memory_snippet=mem, user_snippet=user)
    assert out
    assert len(out) == len(set(out))
    for s in out:
        if s.startswith("errsig:"):
            assert utf16_len(s) - len("errsig:") <= 260
        for prefix in ("user_feature_request:", "user_improvement_suggestion:"):
            if s.startswith(prefix):
                assert utf16_len(s) - len(prefix) <= 200


def test_units_counted_across_astral_and_cjk_text() -> None:
    # The English request pattern allows 120 UTF-16 units between verb and noun: an emoji is two.
    assert sig("add " + "中" * 118 + " feature") == ["user_feature_request:add " + "中" * 118 + " feature"]
    assert sig("add " + "😀" * 59 + " feature")[0].endswith("😀 feature")
    assert sig("add " + "😀" * 60 + " feature") == ["stable_success_plateau"]
    # The context window reaches a second core within 80 units and keeps 80 units after it.
    text = "i want " + "中" * 60 + " i want " + "中" * 100
    assert sig(text) == ["user_feature_request:i want " + "中" * 60 + " i want " + "中" * 79]
    # A recurring error cut inside an emoji keeps its high surrogate, as JavaScript does.
    out = sig(("LLM error" + "😀" * 100 + "}") * 3)
    assert "recurring_errsig(3x):LLM error" + "😀" * 45 + "\ud83d" in out


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Outputs of the reference for these texts.
        ("we should build_ a tool", ["stable_success_plateau"]),
        ("rebuild the export tool", ["stable_success_plateau"]),
        ("Build the export tool", ["user_feature_request:Build the export tool"]),
        ("makes a tool; make a csv export command", ["user_feature_request:make a csv export command"]),
        ("design: a new mode", ["user_feature_request:design: a new mode"]),
        ("xdesign a new mode", ["stable_success_plateau"]),
    ],
)
def test_feature_request_verbs_are_whole_words(text: str, expected: list[str]) -> None:
    assert sig(text) == expected
