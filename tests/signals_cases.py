"""Generated inputs for comparing ``gep.signals.rules`` with the reference's ``signals.js`` under node.

Used by ``test_signals_differential.py`` (live, when a reference copy is available) and to write
``fixtures/signals_golden.json.gz`` (the reference's outputs on a fixed set of these inputs, which
``test_signals_golden.py`` checks on every run, without node). See docs/signals.md.

Regenerate the golden file (needs node and a copy of the reference):
``GEP_REFERENCE_SIGNALS_JS=/tmp/ref/signals.js .venv/bin/python tests/signals_cases.py``
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from gep.signals.rules import extract_signals

GOLDEN = Path(__file__).parent / "fixtures" / "signals_golden.json.gz"
GOLDEN_SEED = 77
GOLDEN_CASES = 600
GOLDEN_STRESS = 60
GOLDEN_HISTORY = 150

DRIVER = r"""
const fs = require('fs');
const Module = require('module');
const [src, casesPath, outPath] = process.argv.slice(2);
// 'void 0;' keeps each `if (...)` with a body (an empty replacement would capture the next statement).
let code = fs.readFileSync(src, 'utf8')
  .replace(/signals\.push\('protocol_drift'\);?/g, 'void 0;')
  .replace(/signals\.push\('path_outside_workspace'\);?/g, 'void 0;');
const m = new Module(src, null);
m.filename = src;
m.paths = Module._nodeModulePaths(require('path').dirname(src));
m._compile(code, src);
const cases = JSON.parse(fs.readFileSync(casesPath, 'utf8'));
const out = cases.map(c => m.exports.extractSignals({
  recentSessionTranscript: c.t, todayLog: c.l, memorySnippet: c.m, userSnippet: c.u, recentEvents: c.e,
}));
fs.writeFileSync(outPath, JSON.stringify(out));
"""
EN = [
    "add",
    "implement",
    "create",
    "build",
    "make",
    "develop",
    "write",
    "design",
    "Add",
    "BUILD",
    "feature",
    "function",
    "module",
    "capability",
    "tool",
    "support",
    "endpoint",
    "command",
    "option",
    "mode",
    "i want",
    "I need",
    "we need",
    "please add",
    "can you add",
    "could you add",
    "let's add",
    "lets add",
    "should be",
    "could be better",
    "improve",
    "enhance",
    "upgrade",
    "refactor",
    "clean up",
    "simplify",
    "streamline",
    "slow",
    "timeout",
    "timed out",
    "time out",
    "timedout",
    "latency",
    "bottleneck",
    "took too long",
    "performance issue",
    "high cpu",
    "high memory",
    "oom",
    "out of memory",
    "not supported",
    "cannot",
    "doesn't support",
    "doesnt support",
    "no way to",
    "missing feature",
    "unsupported",
    "not available",
    "not implemented",
    "no support for",
    "unsupported mime",
    "unsupported file type",
    "invalid image mime",
    "TypeError:",
    "ReferenceError :",
    "SyntaxError\t:",
    "error:",
    "Error :",
    "[error]",
    "[ERROR]",
    "[Error",
    "exception:",
    "Exception :",
    '"isError":true',
    'iserror":true',
    '"status": "error"',
    '"status":"failed"',
    "LLM error",
    '"error"',
    '{"error": "rate limit"}',
    "fail",
    "failed",
    "MEMORY.md missing",
    "user.md missing",
    "API key missing",
    "no session logs found",
    "No JSONL files",
    "[TOOL: exec]",
    "[TOOL:exec]",
    "[TOOL: read]",
    "[TOOL:  web-search]",
    "[TOOL: 123]",
    "[TOOL: 7]",
    "[TOOL: constructor]",
    "[TOOL: __proto__]",
    "[TOOL: toString]",
    "exec: node scripts/x.js ensure",
    "exec: node  a/b-c.js ensure",
    "prompt",
    "evolutionEvent",
    "the",
    "a",
    "user",
    "said",
    "we",
    "this",
    "export",
    "csv",
    "thing",
    "it",
    "retry",
    "additional",
    "maker",
    "modes",
    "toolkit",
    "sloww",
    "oomph",
    "x_add",
    "add_",
    "9add",
]
ZH = [
    "加个",
    "实现一下",
    "做个",
    "想要一个",
    "想要 一个",
    "想要\u3000一个",
    "需要一个",
    "需要  一个",
    "帮我加",
    "帮我开发",
    "加一下",
    "新增一个",
    "加个功能",
    "做个功能",
    "我想",
    "我想，",
    "我想 。",
    "改进一下",
    "优化一下",
    "简化",
    "重构",
    "整理一下",
    "弄得更好",
    "太慢",
    "超时",
    "错误：",
    "错误 :",
    "异常：",
    "报错:",
    "失败：",
    "失败",
    "错误",
    "导出",
    "功能",
    "用户",
    "希望",
    "这个",
    "页面",
]
TW = [
    "加個",
    "實現一下",
    "做個",
    "想要一個",
    "請加",
    "新增一個",
    "加個功能",
    "做個功能",
    "幫我加",
    "改進一下",
    "優化一下",
    "簡化",
    "重構",
    "匯出",
    "功能",
    "使用者",
    "這個",
]
JA = [
    "追加",
    "実装",
    "作って",
    "機能を",
    "追加して",
    "が欲しい",
    "を追加",
    "してほしい",
    "改善",
    "最適化",
    "簡素化",
    "リファクタ",
    "良くして",
    "改良",
    "エクスポート",
    "ユーザー",
    "これ",
    "ください",
    "。",
]
WS = [
    " ",
    " ",
    " ",
    "  ",
    "\t",
    "\n",
    "\n",
    "\r\n",
    "\r",
    "\u00a0",
    "\u2028",
    "\u2029",
    "\u3000",
    "\ufeff",
    "\x1c",
    "\x85",
    "\u200b",
    "\x0b",
    "\x0c",
    "\u1680",
    "\u202f",
    "\u205f",
    "\u2000",
]
ODD = [
    ".",
    "?",
    "!",
    "}",
    "{",
    ":",
    "：",
    "，",
    "、",
    "'",
    '"',
    "😀",
    "𝒜",
    "İ",
    "\u212a",
    "ſ",
    "Σ",
    "ß",
    "ﬀ",
    "é",
    "-",
    "_",
    "0",
    "123",
    "\\",
    "/",
    "[",
    "]",
    "…",
    "\ud83d",
]
SIGS = [
    "log_error",
    "errsig:x",
    "errsig:TypeError: y",
    "recurring_error",
    "recurring_errsig(3x):a",
    "user_feature_request:a",
    "user_feature_request:b",
    "user_improvement_suggestion:c",
    "user_feature_request",
    "perf_bottleneck",
    "capability_gap",
    "stable_success_plateau",
    "constructor",
    "toString",
    "__proto__",
    "1",
    "01",
    "high_tool_usage:exec",
]
GENES = ["gene_gep_repair_from_errors", "gene_b", "gene_c", "10", "2", "constructor", "__proto__", "0"]


def token(r: random.Random) -> str:
    k = r.random()
    if k < 0.45:
        return r.choice(EN)
    if k < 0.62:
        return r.choice(ZH)
    if k < 0.74:
        return r.choice(TW)
    if k < 0.86:
        return r.choice(JA)
    if k < 0.95:
        return r.choice(ODD)
    return "".join(r.choice("abcdefghij klmn") for _ in range(r.randint(20, 140)))


def text(r: random.Random, n: int) -> str:
    parts = []
    for _ in range(n):
        parts.append(token(r))
        parts.append(r.choice(WS) if r.random() < 0.8 else "")
    return "".join(parts)


def event(r: random.Random) -> dict[str, Any]:
    ev: dict[str, Any] = {}
    if r.random() < 0.9:
        ev["intent"] = r.choice(["repair", "repair", "innovate", "optimize", "", None, "Repair"])
    if r.random() < 0.9:
        ev["signals"] = r.sample(SIGS, r.randint(0, 4))
    if r.random() < 0.8:
        ev["genes_used"] = r.sample(GENES, r.randint(0, 2))
    k = r.random()
    if k < 0.35:
        ev["blast_radius"] = {"files": 0, "lines": 0}
    elif k < 0.6:
        ev["blast_radius"] = {"files": r.randint(0, 3), "lines": r.randint(0, 50)}
    elif k < 0.7:
        ev["blast_radius"] = r.choice(
            [
                {"files": "0", "lines": 0},
                {"files": False, "lines": 0},
                None,
                {"files": 0.0, "lines": -0.0},
                {},
            ]
        )
    k = r.random()
    if k < 0.2:
        ev["meta"] = {"empty_cycle": r.choice([True, False, 1, 0, "yes", "", None, [], {}])}
    elif k < 0.3:
        ev["meta"] = r.choice([{}, None, "x"])
    if r.random() < 0.85:
        ev["outcome"] = r.choice(
            [{"status": "failed"}, {"status": "failed"}, {"status": "success"}, {"status": "empty"}, {}, None]
        )
    return ev


TOOLS = [
    "[TOOL: exec]",
    "[TOOL:exec]",
    "[TOOL: read]",
    "[TOOL: 123]",
    "[TOOL: 7]",
    "[TOOL: constructor]",
    "[TOOL: __proto__]",
    "[TOOL: a-b]",
    "exec: node scripts/x.js ensure",
]
ERRS = [
    "LLM error: rate limit",
    '"error": "boom"}',
    '"status": "error", "x": 1}',
    "LLM Error  timeout\n",
    '"ERROR"',
]
FILL = [
    "ok",
    "done",
    "hello",
    "the build",
    "merged",
    "好的",
    "完成",
    "了解",
    "はい",
    "\n",
    " ",
    "status",
    "{}",
]


def sparse(r: random.Random, n: int) -> str:
    parts = []
    for _ in range(n):
        k = r.random()
        parts.append(r.choice(EN + ZH + TW + JA) if k < 0.05 else r.choice(FILL))
        parts.append(r.choice(WS))
    return "".join(parts)


def biased(r: random.Random, pool: list[str], n: int) -> str:
    parts = []
    for _ in range(n):
        parts.append(r.choice(pool) if r.random() < 0.6 else token(r))
        parts.append(r.choice(WS))
    return "".join(parts)


def case(r: random.Random) -> dict[str, Any]:
    c: dict[str, Any] = {}
    mode = r.choice(["mixed", "mixed", "sparse", "tools", "errors"])
    for key in "tlmu":
        n = r.choice([0, 0, 1, 3, 8, 20, 60])
        if mode == "sparse":
            c[key] = sparse(r, n)
        elif mode == "tools":
            c[key] = biased(r, TOOLS, n)
        elif mode == "errors":
            c[key] = biased(r, ERRS, n)
        else:
            c[key] = text(r, n) if r.random() < 0.85 else r.choice(["", None])
    c["e"] = (
        [event(r) for _ in range(r.choice([0, 0, 1, 3, 5, 8, 10, 12]))]
        if r.random() < 0.7
        else r.choice([None, []])
    )
    if c["e"] and r.random() < 0.3:
        for ev in c["e"][r.randint(0, len(c["e"]) - 1) :]:
            ev["outcome"] = {"status": "failed"}
            if r.random() < 0.5:
                ev["intent"] = "repair"
    return c


# --- long inputs dense in astral characters, CJK text and odd whitespace, with matches placed
# near the 120/200/260-unit limits (where UTF-16 counting matters most)
S_FILL = ["a", "b", " ", "x", "😀", "𝒜", "中", "文", "é", "\u3000", "\u00a0", "_", "0", "-", "\t", "A"]
S_RARE = ["\n", "\r", "\u2028", ".", "}", "?", "!", "\ud83d"]
S_DENSE = ["😀", "𝒜", "中", "文", "\u3000", "中", " ", "😀"]
S_VERBS = ["add", "Add", "implement", "BUILD", "make", "xadd", "add_", "write"]
S_NOUNS = ["feature", "Feature", "tool", "mode", "capability", "toolkit", "modes"]
S_WANT = ["i want", "I Need", "we need", "please add", "let's add", "lets add", "could you add"]
S_IMP = ["should be", "improve", "Refactor", "clean up", "streamline"]
S_ERRH = ["LLM error", "llm ERROR", '"error"', '"status": "error"', '"status":\u3000"Error"']
S_TOOLS = [
    "[TOOL: exec]",
    "[TOOL:\u3000exec]",
    "[TOOL:\u00a0read]",
    "exec: node\u3000a.js\u2028ensure",
    "exec: node a.js ensure",
]
S_REACH = [1, 2, 3, 40, 55, 58, 60, 61, 62, 100, 115, 118, 119, 120, 121, 122, 130, 200]
S_BODY = [5, 100, 150, 190, 195, 198, 199, 200, 201, 205, 250]


def stress_fill(r: random.Random, k: int) -> str:
    pool = S_DENSE if r.random() < 0.5 else S_FILL
    return "".join(r.choice(S_RARE) if r.random() < 0.01 else r.choice(pool) for _ in range(k))


def stress_piece(r: random.Random) -> str:
    k = r.random()
    if k < 0.25:
        return r.choice(S_VERBS) + stress_fill(r, r.choice(S_REACH)) + r.choice(S_NOUNS)
    if k < 0.45:
        return (
            stress_fill(r, r.randint(0, 120)) + r.choice(S_WANT + S_IMP) + stress_fill(r, r.randint(0, 120))
        )
    if k < 0.7:
        body = stress_fill(r, r.choice(S_BODY))
        return (r.choice(S_ERRH) + body + r.choice(["", "}", "\n"])) * r.choice([1, 3, 4])
    if k < 0.8:
        return r.choice(["error:", "Error :", "[ERROR]", "exception:"]) + stress_fill(r, r.randint(0, 300))
    if k < 0.9:
        return r.choice(S_TOOLS) * r.randint(1, 6)
    return stress_fill(r, r.randint(0, 400))


def stress_text(r: random.Random) -> str:
    n = r.choice([0, 1, 2, 4, 8])
    return "".join(stress_piece(r) + r.choice([" ", "\n", "", "😀", "\u2028"]) for _ in range(n))


def stress_case(r: random.Random) -> dict[str, Any]:
    return {"t": stress_text(r), "l": stress_text(r), "m": stress_text(r), "u": stress_text(r), "e": []}


# --- event histories whose fields hold any JSON value: JavaScript's String(), ===, truthiness and
# plain-object keys (integer-like first, inherited names such as "constructor") decide the rules
H_NAMES = [
    "constructor", "__proto__", "toString", "valueOf", "hasOwnProperty", "isPrototypeOf", "__defineGetter__",
    "0", "01", "1", "10", "2", "-1", "4294967294", "4294967295", "1.5", "gene_a", "gene_b", "repair", "Repair",
    "errsig:x", "errsig", "recurring_errsig(3x):y", "user_feature_request:z", "user_improvement_suggestion:w",
    "log_error", "perf_bottleneck", "", " ", "null", "undefined", "NaN", "Infinity",
]  # fmt: skip
H_NUMBERS = [0, 1, 2, 7, -0.0, 0.5, 1e21, 2**53 + 1, 2**69, 1.5e-7, 10**30, -3, 4294967295]
H_TEXTS = ["", "error: boom", "please add a csv export option", "the job is slow", "[TOOL: exec]" * 6]


def h_scalar(r: random.Random) -> Any:
    k = r.random()
    if k < 0.45:
        return r.choice(H_NAMES + SIGS)
    if k < 0.6:
        return r.choice(H_NUMBERS)
    return r.choice([True, False]) if k < 0.7 else None


def h_value(r: random.Random, depth: int = 0) -> Any:
    k = r.random()
    if depth < 2 and k < 0.15:
        return [h_value(r, depth + 1) for _ in range(r.randint(0, 3))]
    if depth < 2 and k < 0.22:
        keys = ["files", "lines", "status", "empty_cycle", "x"]
        return {r.choice(keys): h_value(r, depth + 1) for _ in range(r.randint(0, 3))}
    return h_scalar(r)


def h_list(r: random.Random, pool: list[str]) -> Any:
    if r.random() < 0.7:
        return [r.choice(pool) if r.random() < 0.7 else h_value(r) for _ in range(r.randint(0, 5))]
    return h_value(r)


def h_event(r: random.Random) -> Any:
    if r.random() < 0.03:
        return r.choice(["str", 5, [], [1, 2], True])  # not an object: every field reads undefined
    ev: dict[str, Any] = {}
    if r.random() < 0.85:
        ev["intent"] = r.choice(["repair", "repair", "repair", "innovate", h_value(r)])
    if r.random() < 0.85:
        ev["signals"] = h_list(r, H_NAMES + SIGS)
    if r.random() < 0.85:
        ev["genes_used"] = h_list(r, H_NAMES)
    k = r.random()
    if k < 0.3:
        ev["blast_radius"] = {
            "files": r.choice([0, 0, -0.0, 0.0, 1, "0", False, None]),
            "lines": r.choice([0, 0, -0.0, 3, "0", None]),
        }
    elif k < 0.4:
        ev["blast_radius"] = h_value(r)
    k = r.random()
    if k < 0.3:
        ev["meta"] = {"empty_cycle": h_value(r)}
    elif k < 0.4:
        ev["meta"] = h_value(r)
    k = r.random()
    if k < 0.6:
        ev["outcome"] = {"status": r.choice(["failed", "failed", "success", "Failed", h_value(r)])}
    elif k < 0.7:
        ev["outcome"] = h_value(r)
    return ev


def history_case(r: random.Random) -> dict[str, Any]:
    events = [h_event(r) for _ in range(r.choice([0, 1, 3, 5, 8, 9, 10, 12]))]
    if events and r.random() < 0.4:  # failing, empty repair streaks at the tail
        for ev in events[r.randint(0, len(events) - 1) :]:
            if isinstance(ev, dict):
                ev["outcome"], ev["intent"] = {"status": "failed"}, "repair"
                if r.random() < 0.5:
                    ev["blast_radius"] = {"files": 0, "lines": 0}
    return {"t": r.choice(H_TEXTS), "l": "", "m": "", "u": "", "e": events}


def run_reference(reference: str, cases: list[dict[str, Any]], tmp: Path) -> list[list[str]]:
    """The reference's output for each case, under node (host signals stripped)."""
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("node is not on the PATH")
    (tmp / "driver.js").write_text(DRIVER, encoding="utf-8")
    (tmp / "cases.json").write_text(json.dumps(cases), encoding="utf-8")
    subprocess.run(
        [node, str(tmp / "driver.js"), reference, str(tmp / "cases.json"), str(tmp / "out.json")],
        check=True,
        timeout=max(120, len(cases) // 25),
    )
    return json.loads((tmp / "out.json").read_text(encoding="utf-8"))


# Hand-picked inputs where JavaScript and Python differ or a rule sits at its edge.
EDGE_TEXTS = [
    "MEMORY.md missing",
    "USER.md missing",
    "memory.md missing and user.md missing, no session logs found",
    "İmplement a new export feature",  # toLowerCase turns İ into two characters
    "add a \u212aelvin tool to the toolbox",  # /i does not fold the Kelvin sign to k
    "\u212aey missing",
    "please add\u2028a csv export option",  # U+2028 ends a line for "." but not for split("\n")
    "error:\ufeffboom\u0085x  \u001c y",  # whitespace JavaScript and Python disagree on
    "[TOOL: __proto__] " * 12 + "[TOOL: constructor] " * 12 + "[TOOL: 10] " * 12,
    "[TOOL: exec]" * 6 + "exec: node a.js ensure",
    "LLM error: " + "😀" * 120 + "}" * 1 + ("LLM error: " + "😀" * 120) * 3,
    "errsig line: " + "😀" * 140,
    "错误：连接失败\n需要一个导出按钮",
    "報錯：超時，請加一個功能",
    "エラー：失敗しました。エクスポート機能を追加してほしい",
    "the build is slow; cannot export; not supported",
]


# Gene ids and signals that are JSON numbers: JavaScript reads them as doubles and String() writes
# them its way (2**69 -> 590295810358705700000, 1e21 -> 1e+21, 10**400 -> Infinity, -0 -> 0).
EDGE_NUMBERS: list[Any] = [2**69, 1.5e-7, 1e21, 10**400, -0.0, 123456789, 0.1, 7, "7"]


def _failing(gene: Any, n: int = 5) -> list[dict[str, Any]]:
    event = {
        "intent": "repair",
        "signals": [gene, "log_error"],
        "genes_used": [gene],
        "outcome": {"status": "failed"},
    }
    return [dict(event) for _ in range(n)]


def edge_cases() -> list[dict[str, Any]]:
    texts = [{"t": t, "l": "", "m": "", "u": "", "e": []} for t in EDGE_TEXTS]
    numbers = [{"t": "error: x", "l": "", "m": "", "u": "", "e": _failing(g)} for g in EDGE_NUMBERS]
    mixed = [{"t": "", "l": "", "m": "", "u": "", "e": _failing(7, 2) + _failing("7", 3)}]
    return texts + numbers + mixed


def extract(c: dict[str, Any]) -> list[str]:
    """``extract_signals`` on a case."""
    return extract_signals(
        recent_session_transcript=c["t"], today_log=c["l"], memory_snippet=c["m"], user_snippet=c["u"],
        recent_events=c["e"],
    )  # fmt: skip


def mismatches(cases: list[dict[str, Any]], expected: list[list[str]]) -> list[tuple[Any, ...]]:
    """(case, reference output, ours) for every case where ``extract_signals`` differs."""
    out = []
    for c, exp in zip(cases, expected, strict=True):
        got = extract(c)
        if got != exp:
            out.append((c, exp, got))
    return out


def golden_cases() -> list[dict[str, Any]]:
    r = random.Random(GOLDEN_SEED)
    generated = [case(r) for _ in range(GOLDEN_CASES)] + [stress_case(r) for _ in range(GOLDEN_STRESS)]
    return edge_cases() + generated + [history_case(r) for _ in range(GOLDEN_HISTORY)]


def main() -> None:
    parser = argparse.ArgumentParser(description="Write the golden file from the reference's outputs.")
    parser.add_argument("--out", type=Path, default=GOLDEN)
    args = parser.parse_args()
    reference = os.environ.get("GEP_REFERENCE_SIGNALS_JS", "")
    if not (reference and Path(reference).is_file()):
        sys.exit("signals_cases: set GEP_REFERENCE_SIGNALS_JS to a copy of the reference signals.js")
    cases = golden_cases()
    with tempfile.TemporaryDirectory() as tmp:
        expected = run_reference(os.path.abspath(reference), cases, Path(tmp))
    data = json.dumps({"cases": cases, "expected": expected}, ensure_ascii=True, sort_keys=True)
    # mtime=0: the same outputs give the same bytes (no churn in git)
    args.out.write_bytes(gzip.compress(data.encode("ascii"), compresslevel=9, mtime=0))
    print(f"wrote {args.out} ({len(cases)} cases, {args.out.stat().st_size // 1024} KB)")


if __name__ == "__main__":
    main()
