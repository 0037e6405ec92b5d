"""Differential check against the reference's signals.js (runs only when node and a copy exist).

Set ``GEP_REFERENCE_SIGNALS_JS`` to a copy of EvoMap/evolver ``src/gep/signals.js``. The
host-specific ``protocol_drift`` and ``path_outside_workspace`` pushes are removed from the copy
at load time, as ``gep.signals`` leaves them out.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gep.signals import extract_signals

REFERENCE = os.environ.get("GEP_REFERENCE_SIGNALS_JS", "")
# Extra rounds while changing gep/signals.py: more cases and other seeds than the default run.
CASES = int(os.environ.get("GEP_SIGNALS_DIFF_CASES", "3000"))
SEED = int(os.environ.get("GEP_SIGNALS_DIFF_SEED", "20240501"))
NODE = shutil.which("node")

pytestmark = pytest.mark.skipif(
    not (REFERENCE and Path(REFERENCE).is_file() and NODE),
    reason="set GEP_REFERENCE_SIGNALS_JS to a copy of the reference signals.js (and install node)",
)

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


def test_matches_the_reference_on_generated_inputs(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    cases = [case(rng) for _ in range(CASES)]
    (tmp_path / "driver.js").write_text(DRIVER, encoding="utf-8")
    (tmp_path / "cases.json").write_text(json.dumps(cases), encoding="utf-8")
    subprocess.run(
        [
            NODE,
            str(tmp_path / "driver.js"),
            REFERENCE,
            str(tmp_path / "cases.json"),
            str(tmp_path / "out.json"),
        ],
        check=True,
        timeout=max(120, CASES // 25),
    )
    expected = json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))
    mismatches = []
    for c, exp in zip(cases, expected, strict=True):
        got = extract_signals(
            recent_session_transcript=c["t"],
            today_log=c["l"],
            memory_snippet=c["m"],
            user_snippet=c["u"],
            recent_events=c["e"],
        )
        if got != exp:
            mismatches.append((c, exp, got))
    assert not mismatches, f"{len(mismatches)} of {len(cases)} differ; first: {mismatches[0]}"
