"""Edge cases at the limits of the signal rules; every expected list is the reference's output (node).

Error records and keys cut near an emoji (200 and 100 UTF-16 units; a cut pair leaves its high
surrogate), whitespace runs squeezed in keys and snippets, "İ" and the Kelvin sign, lone surrogates,
tool counts near the thresholds with benign exec commands, and tool names JavaScript treats specially.
"""

from __future__ import annotations

import pytest

from gep.signals.rules import extract_signals

E = "\U0001f600"  # an astral character: two UTF-16 units


def three(unit: str) -> str:
    return "\n".join([unit] * 3)


CASES = [
    pytest.param(
        three("LLM error: " + "a" * 69 + E + " tail}"),
        [
            "log_error",
            "errsig:LLM error: " + "a" * 69 + "😀 tail}",
            "recurring_error",
            "recurring_errsig(3x):LLM error: " + "a" * 69 + "😀 tail",
        ],
        id="carried-head-of-80-chars",
    ),
    pytest.param(
        three("LLM error: " + "a" * 79 + E + " tail}"),
        [
            "log_error",
            "errsig:LLM error: " + "a" * 79 + "😀 tail}",
            "recurring_error",
            "recurring_errsig(3x):LLM error: " + "a" * 79 + "😀 tail",
        ],
        id="carried-head-of-90-chars",
    ),
    pytest.param(
        three("LLM error: " + "a" * 85 + E + " tail}"),
        [
            "log_error",
            "errsig:LLM error: " + "a" * 85 + "😀 tail}",
            "recurring_error",
            "recurring_errsig(3x):LLM error: " + "a" * 85 + "😀 t",
        ],
        id="carried-head-of-96-chars",
    ),
    pytest.param(
        three("LLM error: " + "a" * 88 + E + " tail}"),
        [
            "log_error",
            "errsig:LLM error: " + "a" * 88 + "😀 tail}",
            "recurring_error",
            "recurring_errsig(3x):LLM error: " + "a" * 88 + "\ud83d",
        ],
        id="carried-head-of-99-chars",
    ),
    pytest.param(
        three("LLM error: " + "a" * 89 + E + " tail}"),
        [
            "log_error",
            "errsig:LLM error: " + "a" * 89 + "😀 tail}",
            "recurring_error",
            "recurring_errsig(3x):LLM error: " + "a" * 89,
        ],
        id="carried-head-of-100-chars",
    ),
    pytest.param(
        three("LLM error: " + "a" * 90 + E + " tail}"),
        [
            "log_error",
            "errsig:LLM error: " + "a" * 90 + "😀 tail}",
            "recurring_error",
            "recurring_errsig(3x):LLM error: " + "a" * 89,
        ],
        id="carried-head-of-101-chars",
    ),
    pytest.param(
        three("LLM error: " + "a" * 139 + E + " tail}"),
        [
            "log_error",
            "errsig:LLM error: " + "a" * 139 + "😀 tail}",
            "recurring_error",
            "recurring_errsig(3x):LLM error: " + "a" * 89,
        ],
        id="carried-head-of-150-chars",
    ),
    pytest.param(
        three("LLM error:" + " " * 50 + "a" * 45 + E + " tail}"),
        [
            "log_error",
            "errsig:LLM error: " + "a" * 45 + "😀 tail}",
            "recurring_error",
            "recurring_errsig(3x):LLM error: " + "a" * 45 + "😀 tail",
        ],
        id="carried-head-collapses-short",
    ),
    pytest.param(
        three("LLM error:" + " " * 5 + "a" * 90 + E + " tail}"),
        [
            "log_error",
            "errsig:LLM error: " + "a" * 90 + "😀 tail}",
            "recurring_error",
            "recurring_errsig(3x):LLM error: " + "a" * 89,
        ],
        id="carried-head-collapses-to-100",
    ),
    pytest.param(
        three("LLM error:  x   \n  y   " + E + "  z\t\tw}"),
        ["log_error", "errsig:LLM error: x", "recurring_error", "recurring_errsig(3x):LLM error: x y 😀 z w"],
        id="carried-head-whitespace-runs",
    ),
    pytest.param(
        three('"error"\n\n' + "b" * 95 + " \n" + E + E + "\n c}"),
        ["recurring_error", 'recurring_errsig(3x):"error" ' + "b" * 92],
        id="carried-head-newline-runs",
    ),
    pytest.param(
        three("LLM error: " + "c" * 88 + E + "d}"),
        [
            "log_error",
            "errsig:LLM error: " + "c" * 88 + "😀d}",
            "recurring_error",
            "recurring_errsig(3x):LLM error: " + "c" * 88 + "\ud83d",
        ],
        id="emoji-at-the-key-cut",
    ),
    pytest.param(
        three('"error"' + "e" * 199 + E + "f}"),
        ["recurring_error", 'recurring_errsig(3x):"error"' + "e" * 93],
        id="emoji-at-the-200-unit-reach",
    ),
    pytest.param(
        three('"error"' + "e" * 198 + E + "f}"),
        ["recurring_error", 'recurring_errsig(3x):"error"' + "e" * 93],
        id="emoji-one-unit-before-the-reach",
    ),
    pytest.param(
        three('"status": "error"' + "g" * 90 + E + "h" * 5 + E + "i}"),
        ["log_error", "recurring_error", 'recurring_errsig(3x):"status": "error"' + "g" * 83],
        id="two-emoji-in-reach",
    ),
    pytest.param(
        three("LLM error " + "j" * 40 + E + ' "error" k}'),
        ["recurring_error", "recurring_errsig(3x):LLM error " + "j" * 40 + '😀 "error" k'],
        id="carried-match-hides-the-next",
    ),
    pytest.param(
        three('"error"   a    b \n\n c}'),
        ["recurring_error", 'recurring_errsig(3x):"error" a b c'],
        id="space-runs-in-keys",
    ),
    pytest.param(
        three('"error" \t a\u3000\u3000b}'),
        ["recurring_error", 'recurring_errsig(3x):"error" a b'],
        id="other-whitespace-in-keys",
    ),
    pytest.param(
        "please add  a   csv \t export    option  to the report",
        ["user_feature_request:add a csv export option"],
        id="space-runs-in-a-snippet",
    ),
    pytest.param(
        "\n".join(["[TOOL: web-search]"] * 10 + ["[TOOL:\tweb-fetch]"] * 9),
        ["high_tool_usage:web-search"],
        id="tool-names-with-dashes",
    ),
    pytest.param(
        "\n".join(["[TOOL: exec]"] * 4 + ["exec: node scripts/w.js ensure"] * 0),
        ["stable_success_plateau"],
        id="exec-4-benign-0",
    ),
    pytest.param(
        "\n".join(["[TOOL: exec]"] * 4 + ["exec: node scripts/w.js ensure"] * 1),
        ["stable_success_plateau"],
        id="exec-4-benign-1",
    ),
    pytest.param(
        "\n".join(["[TOOL: exec]"] * 4 + ["exec: node scripts/w.js ensure"] * 2),
        ["stable_success_plateau"],
        id="exec-4-benign-2",
    ),
    pytest.param(
        "\n".join(["[TOOL: exec]"] * 4 + ["exec: node scripts/w.js ensure"] * 5),
        ["stable_success_plateau"],
        id="exec-4-benign-5",
    ),
    pytest.param(
        "\n".join(["[TOOL: exec]"] * 4 + ["exec: node scripts/w.js ensure"] * 6),
        ["stable_success_plateau"],
        id="exec-4-benign-6",
    ),
    pytest.param(
        "\n".join(["[TOOL: exec]"] * 5 + ["exec: node scripts/w.js ensure"] * 0),
        ["repeated_tool_usage:exec"],
        id="exec-5-benign-0",
    ),
    pytest.param(
        "\n".join(["[TOOL: exec]"] * 5 + ["exec: node scripts/w.js ensure"] * 1),
        ["stable_success_plateau"],
        id="exec-5-benign-1",
    ),
    pytest.param(
        "\n".join(["[TOOL: exec]"] * 5 + ["exec: node scripts/w.js ensure"] * 2),
        ["stable_success_plateau"],
        id="exec-5-benign-2",
    ),
    pytest.param(
        "\n".join(["[TOOL: exec]"] * 5 + ["exec: node scripts/w.js ensure"] * 5),
        ["stable_success_plateau"],
        id="exec-5-benign-5",
    ),
    pytest.param(
        "\n".join(["[TOOL: exec]"] * 5 + ["exec: node scripts/w.js ensure"] * 6),
        ["stable_success_plateau"],
        id="exec-5-benign-6",
    ),
    pytest.param(
        "\n".join(["[TOOL: exec]"] * 9 + ["exec: node scripts/w.js ensure"] * 0),
        ["repeated_tool_usage:exec"],
        id="exec-9-benign-0",
    ),
    pytest.param(
        "\n".join(["[TOOL: exec]"] * 9 + ["exec: node scripts/w.js ensure"] * 1),
        ["repeated_tool_usage:exec"],
        id="exec-9-benign-1",
    ),
    pytest.param(
        "\n".join(["[TOOL: exec]"] * 9 + ["exec: node scripts/w.js ensure"] * 2),
        ["repeated_tool_usage:exec"],
        id="exec-9-benign-2",
    ),
    pytest.param(
        "\n".join(["[TOOL: exec]"] * 9 + ["exec: node scripts/w.js ensure"] * 5),
        ["stable_success_plateau"],
        id="exec-9-benign-5",
    ),
    pytest.param(
        "\n".join(["[TOOL: exec]"] * 9 + ["exec: node scripts/w.js ensure"] * 6),
        ["stable_success_plateau"],
        id="exec-9-benign-6",
    ),
    pytest.param(
        "\n".join(["[TOOL: exec]"] * 10 + ["exec: node scripts/w.js ensure"] * 0),
        ["high_tool_usage:exec", "repeated_tool_usage:exec"],
        id="exec-10-benign-0",
    ),
    pytest.param(
        "\n".join(["[TOOL: exec]"] * 10 + ["exec: node scripts/w.js ensure"] * 1),
        ["repeated_tool_usage:exec"],
        id="exec-10-benign-1",
    ),
    pytest.param(
        "\n".join(["[TOOL: exec]"] * 10 + ["exec: node scripts/w.js ensure"] * 2),
        ["repeated_tool_usage:exec"],
        id="exec-10-benign-2",
    ),
    pytest.param(
        "\n".join(["[TOOL: exec]"] * 10 + ["exec: node scripts/w.js ensure"] * 5),
        ["repeated_tool_usage:exec"],
        id="exec-10-benign-5",
    ),
    pytest.param(
        "\n".join(["[TOOL: exec]"] * 10 + ["exec: node scripts/w.js ensure"] * 6),
        ["stable_success_plateau"],
        id="exec-10-benign-6",
    ),
    pytest.param(
        "\n".join(["[TOOL: exec]"] * 11 + ["exec: node scripts/w.js ensure"] * 0),
        ["high_tool_usage:exec", "repeated_tool_usage:exec"],
        id="exec-11-benign-0",
    ),
    pytest.param(
        "\n".join(["[TOOL: exec]"] * 11 + ["exec: node scripts/w.js ensure"] * 1),
        ["high_tool_usage:exec", "repeated_tool_usage:exec"],
        id="exec-11-benign-1",
    ),
    pytest.param(
        "\n".join(["[TOOL: exec]"] * 11 + ["exec: node scripts/w.js ensure"] * 2),
        ["repeated_tool_usage:exec"],
        id="exec-11-benign-2",
    ),
    pytest.param(
        "\n".join(["[TOOL: exec]"] * 11 + ["exec: node scripts/w.js ensure"] * 5),
        ["repeated_tool_usage:exec"],
        id="exec-11-benign-5",
    ),
    pytest.param(
        "\n".join(["[TOOL: exec]"] * 11 + ["exec: node scripts/w.js ensure"] * 6),
        ["repeated_tool_usage:exec"],
        id="exec-11-benign-6",
    ),
    pytest.param(
        "\n".join(["[TOOL: exec]"] * 15 + ["exec: node scripts/w.js ensure"] * 0),
        ["high_tool_usage:exec", "repeated_tool_usage:exec"],
        id="exec-15-benign-0",
    ),
    pytest.param(
        "\n".join(["[TOOL: exec]"] * 15 + ["exec: node scripts/w.js ensure"] * 1),
        ["high_tool_usage:exec", "repeated_tool_usage:exec"],
        id="exec-15-benign-1",
    ),
    pytest.param(
        "\n".join(["[TOOL: exec]"] * 15 + ["exec: node scripts/w.js ensure"] * 2),
        ["high_tool_usage:exec", "repeated_tool_usage:exec"],
        id="exec-15-benign-2",
    ),
    pytest.param(
        "\n".join(["[TOOL: exec]"] * 15 + ["exec: node scripts/w.js ensure"] * 5),
        ["high_tool_usage:exec", "repeated_tool_usage:exec"],
        id="exec-15-benign-5",
    ),
    pytest.param(
        "\n".join(["[TOOL: exec]"] * 15 + ["exec: node scripts/w.js ensure"] * 6),
        ["repeated_tool_usage:exec"],
        id="exec-15-benign-6",
    ),
    pytest.param(
        "\n".join(
            ["[TOOL: exec]"] * 6 + ["exec: node\tscripts/w.js \t ensure", "exec: node  a.js\u00a0ensure"]
        ),
        ["stable_success_plateau"],
        id="benign-exec-with-tabs-and-nbsp",
    ),
    pytest.param(
        "\n".join(
            ["[TOOL: exec]"] * 6
            + ["exec: node scripts/w.ts ensure", "exec:  node a.js ensure", "exec: nodex.js ensure"]
        ),
        ["repeated_tool_usage:exec"],
        id="not-benign-exec",
    ),
    pytest.param(
        "\n".join(
            ["[TOOL: constructor]"] * 10
            + ["[TOOL: __proto__]"] * 10
            + ["[TOOL: toString]"] * 12
            + ["[TOOL: read]"] * 10
        ),
        ["high_tool_usage:read"],
        id="inherited-tool-names",
    ),
    pytest.param(
        "\n".join(["[TOOL: read]"] * 10 + ["[TOOL: 12]"] * 10 + ["[TOOL: 3]"] * 11 + ["[TOOL: exec]"] * 10),
        [
            "high_tool_usage:3",
            "high_tool_usage:12",
            "high_tool_usage:read",
            "high_tool_usage:exec",
            "repeated_tool_usage:exec",
        ],
        id="integer-tool-names-first",
    ),
    pytest.param(
        three("LLM error: x" + E + "\ud800y}"),
        [
            "log_error",
            "errsig:LLM error: x😀\ud800y}",
            "recurring_error",
            "recurring_errsig(3x):LLM error: x😀\ud800y",
        ],
        id="lone-surrogate-in-a-carried-tail",
    ),
    pytest.param(
        three('"error"' + "e" * 190 + E + "\udc00" * 8 + E + "z}"),
        ["recurring_error", 'recurring_errsig(3x):"error"' + "e" * 93],
        id="lone-surrogates-at-the-reach",
    ),
    pytest.param(
        "Zażółć ąę: unsupported MIME type; memory.md missing, slow",
        ["unsupported_input_type", "perf_bottleneck"],
        id="latin-extended-a-without-dotted-i",
    ),
    pytest.param(
        "İstanbul: unsupported MIME type; Key missing, İnvalid, TİMEOUT",
        ["integration_key_missing", "unsupported_input_type", "capability_gap"],
        id="dotted-capital-i",
    ),
    pytest.param(
        "İ" * 30 + " please ADD a csv export option to the report",
        ["user_feature_request:ADD a csv export option"],
        id="dotted-capital-i-in-a-feature-request",
    ),
    pytest.param(
        "API \u212aey missing; \u2018quoted\u2019 \u2014 slow",
        ["integration_key_missing", "perf_bottleneck"],
        id="kelvin-sign",
    ),
    pytest.param(
        "API key missing \u2014 \u201cunsupported mime\u201d \u2026",
        ["integration_key_missing", "unsupported_input_type", "capability_gap"],
        id="u2000-block-without-kelvin",
    ),
    pytest.param(
        "\n".join(
            ["[TOOL: exec]"] * 20
            + ["exexec: node x.js ensure", "exec: node  ex/exec.js\tensure", "xexec: node a.js ensure"] * 3
            + ["exec: node b.js ensur"] * 4
        ),
        ["high_tool_usage:exec", "repeated_tool_usage:exec"],
        id="benign-exec-counted-in-full",
    ),
    pytest.param(
        "\n".join(["[TOOL: exec]"] * 19 + ["exec: node x.js ensure exec: node y.js ensure"] * 5),
        ["repeated_tool_usage:exec"],
        id="benign-exec-counted-in-full-2",
    ),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_matches_the_reference(text: str, expected: list[str]) -> None:
    assert extract_signals(recent_session_transcript=text) == expected
