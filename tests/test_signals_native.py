"""The native scans (gep/_scan.c) against the pure-Python path they replace.

The Python path is the one checked against the reference (golden file, node differential); here
each native function must agree with it on arbitrary text built from the characters and words
that decide its result (heads, braces, JavaScript whitespace, astral characters, lone surrogates,
word boundaries), and whole extractions must agree on the generated cases of signals_cases.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from signals_cases import case, history_case, mismatches, stress_case

from gep import constants as C
from gep import signals as S

if S._native is None:
    if os.environ.get("GEP_SIGNALS_PURE"):
        pytest.skip("GEP_SIGNALS_PURE is set: gep.signals runs its Python path", allow_module_level=True)
    if os.environ.get("GEP_REQUIRE_NATIVE"):
        pytest.fail("gep._scan is not built (GEP_REQUIRE_NATIVE is set): see setup.py", pytrace=False)
    pytest.skip("gep._scan is not built (no C compiler at install)", allow_module_level=True)
NATIVE = S._native


@contextmanager
def pure() -> Iterator[None]:
    saved, S._native = S._native, None
    try:
        yield
    finally:
        S._native = saved


WORDS = (
    S._VERB_LIST + S._WANT_LIST + S._IMP_LIST.split("|") + S._PERF_LIST + S._CAP_GAP_LIST
    + ["time out", "timed\u3000out", "timeout", "let's add", "ADD", "Build", "xadd", "add_", "addx", "1add"]
)  # fmt: skip
PIECES = (
    WORDS
    + ["LLM error", "llm ERROR", "LlM eRrOr", '"error"', '"ERROR"', '"status":', '"status": "error"',
       '"status":\u3000\n"Error"', '"status"', '"err', "[TOOL:", "[TOOL: ", "]", "exec: node", "exec: node ",
       "scripts/x.js", ".js", "ensure", " ensure", "exec", "read", "__proto__", "constructor", "a-b"]
    + list(S._WS_CHARS)
    + ["}", "😀", "𝒜", "\ud83d", "\ude00", "中", "文", "é", "İ", "\u212a", "a", "Z", "_", "0", "-", "'", ".", "x"]
)  # fmt: skip
TEXT = st.lists(st.sampled_from(PIECES), max_size=80).map("".join)
# Long runs without a "}" carry error matches to their 200-unit limit and keys to their 100.
LONG = st.builds(
    lambda head, fill, n, tail: head + fill * n + tail,
    st.sampled_from(["LLM error", '"error"', '"status":  "error"']),
    st.sampled_from(["a", " ", "😀", "a😀", "中", "\u3000", "ab ", "\ud83d", "\t\n"]),
    st.integers(0, 230),
    TEXT,
)
CORPUS = st.one_of(TEXT, st.lists(st.one_of(LONG, TEXT), max_size=6).map("".join))


def lowered(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass").lower()


@settings(max_examples=600, deadline=None)
@given(CORPUS, st.integers(1, 3))
def test_recurring_error_agrees(raw: str, least: int) -> None:
    # least=1 makes every corpus with a match compare its most frequent key
    saved, C.RECURRING_ERROR_MIN = C.RECURRING_ERROR_MIN, least
    try:
        with pure():
            expected = S._recurring_error(S._Texts(raw))
    finally:
        C.RECURRING_ERROR_MIN = saved
    assert NATIVE.recurring_error(raw, least) == expected


@settings(max_examples=400, deadline=None)
@given(CORPUS)
def test_tool_and_benign_exec_counts_agree(raw: str) -> None:
    b = raw.encode("utf-8", "surrogatepass")
    names = {k.decode(): n for k, n in S._tally(S._TOOL_B.findall(b)).items()}
    assert NATIVE.tool_counts(b) == names
    assert list(NATIVE.tool_counts(b)) == list(names)  # first-seen order
    assert NATIVE.benign_exec_count(b) == len(S._BENIGN_EXEC_B.findall(b))


@settings(max_examples=400, deadline=None)
@given(CORPUS, st.integers(0, 30))
def test_word_searches_agree(raw: str, pos: int) -> None:
    bl = lowered(raw)
    for dual in (S._WANT2, S._IMP2, S._CAP_GAP2):  # patterns whose matches start at the word
        m = dual.b.search(bl, pos)
        hit = NATIVE.first_word(bl, dual.words, pos)
        assert (None if hit is None else hit[0]) == (None if m is None else m.start()), dual.s.pattern
    # the perf pattern's byte form starts at a word's rarest letter: compare whether it matches
    # (it is only searched from the start: from elsewhere it could begin inside a word)
    assert (NATIVE.first_word(bl, S._PERF2.words) is None) == (S._PERF2.b.search(bl) is None)


@settings(max_examples=300, deadline=None)
@given(CORPUS)
def test_verb_search_agrees(raw: str) -> None:
    bl = lowered(raw)
    expected = [
        (m.end() - S._VERB_LEN[m.group().decode()], m.end()) for m in S._VERB_ANCHORED_B.finditer(bl)
    ]
    found, pos = [], 0
    while (hit := NATIVE.first_word(bl, S._VERB_WORDS, pos)) is not None:
        found.append(hit[:2])
        pos = hit[1]
    assert found == expected


@settings(max_examples=300, deadline=None)
@given(CORPUS, st.sampled_from(["missing", "key missing", "no jsonl files", "", "😀", "a"]))
def test_contains_is_bytes_in(raw: str, needle: str) -> None:
    b, n = lowered(raw), needle.encode()
    assert NATIVE.contains(b, n) is (n in b)


def test_whole_extractions_agree_on_the_generated_cases() -> None:
    r = random.Random(20261122)
    cases = [case(r) for _ in range(1500)] + [stress_case(r) for _ in range(300)]
    cases += [history_case(r) for _ in range(100)]
    with pure():
        expected = [[] for _ in cases]
        expected = [got for _, _, got in mismatches(cases, expected)]  # every case "differs" from []
    bad = mismatches(cases, expected)
    assert not bad, f"{len(bad)} of {len(cases)} differ; first: {bad[0]}"


def test_the_native_scans_are_in_use() -> None:
    # A corpus whose result comes from all of them: if extract_signals stopped calling one, the
    # spy below would not see it.
    calls: list[str] = []

    class Spy:
        def __getattr__(self, name: str):  # noqa: ANN204
            calls.append(name)
            return getattr(NATIVE, name)

    text = "\n".join(['"error" x}'] * 3 + ["[TOOL: exec]"] * 12 + ["please add a tool", "slow", "missing"])
    saved, S._native = S._native, Spy()
    try:
        out = S.extract_signals(recent_session_transcript=text)
    finally:
        S._native = saved
    assert {"recurring_error", "tool_counts", "benign_exec_count", "first_word", "contains"} <= set(calls)
    with pure():
        assert out == S.extract_signals(recent_session_transcript=text)
    assert "recurring_error" in out and "high_tool_usage:exec" in out and "perf_bottleneck" in out
