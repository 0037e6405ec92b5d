"""Property tests of ``extract_signals`` on texts built to reach its snippet limits, with random histories.

The generic property test in test_signals.py draws short random pieces, which rarely produce a snippet
long enough to reach a limit. Here the texts put a trigger (feature verb, improvement word, error
keyword, repeated error) in front of long runs of text in the four languages, so every bound is
reached often, and the histories are arbitrary GEP-shaped dicts (None, wrong types, strings as numbers).
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gep.core.models import BlastRadius, EvolutionEvent, Outcome
from gep.signals.rules import analyze_recent_history, extract_signals


def units(s: str) -> int:
    """Length in UTF-16 code units (the reference's string length)."""
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


# Keywords of each family in the four languages (snippets are cut from the text around them).
TRIGGERS = [
    "please add ", "I want ", "we need ", "build a ", "implement ", "should be ", "could be better ", "refactor ",
    "Error: ", "TypeError: ", "[ERROR] ", "LLM error ", '"error"', "加个", "我想", "做个功能", "简化", "重构",
    "請加", "幫我加", "重構", "改進一下", "追加", "改善", "リファクタ", "timeout ", "not supported ",
]
# A short random chunk repeated up to 60 times: lengths spread evenly up to ~700 characters (hypothesis
# alone keeps lists short), so the snippet windows are filled to their limits often.
CHUNK = st.lists(st.sampled_from(list("abcde xyz_.-:中文字語😀\t\u3000\n") + ["export ", "feature ", "tool ", "}"]),
                 min_size=1, max_size=12).map("".join)
FILLER = st.builds(lambda chunk, n: chunk * n, CHUNK, st.integers(0, 60))
PIECE = st.one_of(st.builds(lambda t, f: t + f, st.sampled_from(TRIGGERS), FILLER), st.text(max_size=40))
TEXT = st.lists(PIECE, max_size=6).map(" ".join)
# The same error three or more times: a recurring error with a long key.
RECURRING = st.builds(lambda body, n: ("LLM error " + body.replace("}", "") + "}\n") * n, FILLER, st.integers(3, 5))

SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-2, 3), st.text(max_size=8), st.just("0"))
EVENT_DICT = st.fixed_dictionaries(
    {},
    optional={
        "intent": st.one_of(st.sampled_from(["repair", "optimize", "innovate"]), SCALAR),
        "signals": st.one_of(st.lists(st.sampled_from(["log_error", "errsig:x", "perf_bottleneck",
                                                        "user_feature_request:a", "constructor"]), max_size=4),
                             SCALAR),
        "genes_used": st.one_of(st.lists(st.sampled_from(["gene_a", "gene_b", "toString"]), max_size=2), SCALAR),
        "blast_radius": st.one_of(st.fixed_dictionaries({"files": SCALAR, "lines": SCALAR}), SCALAR),
        "outcome": st.one_of(st.fixed_dictionaries({"status": st.sampled_from(["success", "failed", "empty"])}),
                             SCALAR),
        "meta": st.one_of(st.fixed_dictionaries({}, optional={"empty_cycle": SCALAR}), SCALAR),
    },
)
EVENT_MODEL = st.builds(
    lambda i, files, status, empty: EvolutionEvent(
        id=f"evt_{i}", intent="repair", signals=["log_error"], genes_used=["gene_a"],
        blast_radius=BlastRadius(files=files, lines=files), outcome=Outcome(status=status),
        meta={"empty_cycle": empty}),
    st.integers(0, 10**6), st.integers(0, 2), st.sampled_from(["success", "failed"]), st.booleans(),
)
EVENTS = st.lists(st.one_of(EVENT_DICT, EVENT_MODEL), max_size=12)


def check(out: list[str]) -> None:
    assert out, "there is always at least one signal"
    assert len(out) == len(set(out)), out
    for s in out:
        if s.startswith("errsig:"):
            assert units(s) - len("errsig:") <= 260, s
        if s.startswith("recurring_errsig("):
            assert units(s.split("):", 1)[1]) <= 150, s
        for prefix in ("user_feature_request:", "user_improvement_suggestion:"):
            if s.startswith(prefix):
                assert units(s) - len(prefix) <= 200, s


@settings(max_examples=400, deadline=None)
@given(TEXT, TEXT, st.one_of(st.just(""), RECURRING), EVENTS)
def test_snippet_bounds_hold_on_long_snippets(transcript: str, log: str, recurring: str, events: list[Any]) -> None:
    out = extract_signals(recent_session_transcript=transcript, today_log=log + recurring,
                          memory_snippet=None, user_snippet="", recent_events=events)
    check(out)


@settings(max_examples=200, deadline=None)
@given(EVENTS)
def test_history_never_raises_on_arbitrary_events(events: list[Any]) -> None:
    h = analyze_recent_history(events)
    assert 0 <= h.empty_cycle_count <= 8 and 0 <= h.consecutive_empty_cycles <= 10
    assert 0.0 <= h.recent_failure_ratio <= 1.0
    check(extract_signals(today_log="Error: boom", recent_events=events))


def test_the_generators_reach_every_limit() -> None:
    """Each kind of snippet reaches its limit on inputs of the kind drawn above (values checked under node
    against the reference: 200, 260 and 100 units)."""
    out = extract_signals(user_snippet="我想" + "中文字" * 120,
                          today_log="Error: " + "x" * 400 + "\n" + ("LLM error " + "y" * 300 + "}\n") * 3)
    assert [units(s) for s in out] == [9, 7 + 260, 15, 21 + 100, 21 + 200], out
    out = extract_signals(memory_snippet="中" * 150 + "重构" + "中" * 150)
    assert [units(s) for s in out] == [28 + 200], out
