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
from signals_cases import case, extract, history_case, mismatches, stress_case

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
    # every word the native word search looks for, its whitespace markers as nothing, a space or a newline
    + [w.decode().replace("\0", ws).replace("\1", ws) for words, _ in S._GROUPS for w in words for ws in ("", " ", "\n")]
    + ["9", "z", "@", "[", "`", "{", "/", "\x7f", "\x80"]  # word characters' range ends, and next to them
    + [":", "：", "error", "exception", "[error", "[ERROR]", "ERROR", "错误", "失败", "missing", "Missing"]
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


DUALS = {
    "error hit": S._ERROR_HIT2, "error line": S._ERR_LINE2, "want": S._WANT2, "improvement": S._IMP2,
    "capability gap": S._CAP_GAP2, "perf": S._PERF2,
}  # fmt: skip


def test_every_group_is_checked_below() -> None:
    groups = {d.group for d in DUALS.values()} | {S._VERB_GROUP}
    assert groups == set(range(len(S._GROUPS)))


@settings(max_examples=500, deadline=None)
@given(CORPUS)
def test_word_group_searches_agree(raw: str) -> None:
    bl = lowered(raw)

    def hit(group: int) -> tuple[int, int, int] | None:
        words, bounded = S._GROUPS[group]
        return NATIVE.first_word(bl, words, 0, bounded)

    for name, dual in DUALS.items():
        hit_, m = hit(dual.group), dual.b.search(bl)
        if dual is S._PERF2:  # its byte form starts at a word's rarest letter: compare whether it matches
            assert (hit_ is None) == (m is None), name
        else:
            assert (None if hit_ is None else hit_[0]) == (None if m is None else m.start()), name
    verb = S._VERB_ANCHORED_B.search(bl)
    expected = None if verb is None else (verb.end() - S._VERB_LEN[verb.group().decode()], verb.end())
    verb_hit = hit(S._VERB_GROUP)
    assert (None if verb_hit is None else verb_hit[:2]) == expected


def test_word_boundaries_next_to_every_byte() -> None:
    # each byte value before and after a word, at every offset of a 16-byte block
    for c in range(256):
        for lead in range(0, 34):
            for word in (bytes([c]) + b"add.", b".add" + bytes([c])):
                bl = (b"." * lead + word + b"." * 20).lower()
                m = S._VERB_ANCHORED_B.search(bl)
                hit = NATIVE.first_word(bl, S._VERB_WORDS)
                assert (None if hit is None else hit[0]) == (None if m is None else m.end() - 3), (word, lead)


@settings(max_examples=300, deadline=None)
@given(CORPUS, st.sampled_from(["missing", "key missing", "no jsonl files", "", "😀", "a"]))
def test_contains_is_bytes_in(raw: str, needle: str) -> None:
    b, n = lowered(raw), needle.encode()
    assert NATIVE.contains(b, n) is (n in b)


@settings(max_examples=300, deadline=None)
@given(CORPUS)
def test_verb_search_agrees(raw: str) -> None:
    # first_en walks the verbs from one's end to the next
    bl = lowered(raw)
    expected = [(m.end() - S._VERB_LEN[m.group().decode()], m.end()) for m in S._VERB_ANCHORED_B.finditer(bl)]
    found, pos = [], 0
    while (hit := NATIVE.first_word(bl, S._VERB_WORDS, pos)) is not None:
        found.append(hit[:2])
        pos = hit[1]
    assert found == expected


def test_whole_extractions_agree_on_the_generated_cases() -> None:
    r = random.Random(20261122)
    cases = [case(r) for _ in range(1500)] + [stress_case(r) for _ in range(300)]
    cases += [history_case(r) for _ in range(100)]
    with pure():
        expected = [extract(c) for c in cases]
    bad = mismatches(cases, expected)
    assert not bad, f"{len(bad)} of {len(cases)} differ; first: {bad[0]}"


def test_the_native_scans_are_in_use() -> None:
    # A corpus whose result comes from all of them: if extract_signals stopped calling one, the
    # spy below would not see it.
    calls: list[str] = []

    class Spy:
        def __getattr__(self, name: str) -> object:
            calls.append(name)
            return getattr(NATIVE, name)

    text = "\n".join(['"error" x}'] * 3 + ["[TOOL: exec]"] * 12 + ["make it", "please add a tool", "slow", "missing"])
    saved, S._native = S._native, Spy()
    try:
        out = S.extract_signals(recent_session_transcript=text)
    finally:
        S._native = saved
    assert {"recurring_error", "tool_counts", "benign_exec_count", "contains", "first_word"} <= set(calls)
    with pure():
        assert out == S.extract_signals(recent_session_transcript=text)
    assert "recurring_error" in out and "high_tool_usage:exec" in out and "perf_bottleneck" in out
