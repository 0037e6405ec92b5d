"""Throughput of ``gep.signals.extract_signals`` on 10 KB, 1 MB and 10 MB corpora (MB/s).

The corpora are agent-log-like text in English, Simplified and Traditional Chinese and Japanese
(log lines, tool calls, JSON errors, requests), generated from a fixed seed. When ``node`` is on the
PATH and ``GEP_REFERENCE_SIGNALS_JS`` points to a copy of the reference's ``src/gep/signals.js``,
the reference runs on the same corpora in the same run (a small node driver written to a temp
dir) and the table shows the ratio (ours / reference; above 1 means faster). Only the call is
timed on both sides (best of ``--repeat`` runs), not reading the corpus.

Run: ``.venv/bin/python bench/signals.py [--repeat 3] [--sizes 10000,1000000,10000000]``
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gep.signals import extract_signals  # noqa: E402

LINES = [
    "2026-03-14T09:14:02Z INFO worker: processed batch {n} in {ms}ms",
    "2026-03-14T09:14:03Z [ERROR] worker: TypeError: cannot read properties of undefined (reading 'id')",
    '{{"status": "error", "code": {n}, "message": "upstream unavailable"}}',
    "LLM error: 429 rate limited, retrying in {ms}ms",
    "**USER**: please add a csv export option to the report command",
    "**ASSISTANT**: I will look at the report module first [TOOL: exec]",
    "[TOOL: read] src/report.py",
    "[TOOL RESULT] exit code 0, {n} tests passed",
    "the nightly job timed out after {ms}ms on the large tenant",
    "**USER**: 帮我加一个导出功能，最好支持 CSV",
    "**ASSISTANT**: 好的，我先看一下报表模块。运行测试时报错：找不到模块",
    "**USER**: 請加一個匯出按鈕，這個頁面太慢了",
    "**USER**: エクスポート機能を追加してほしいです。処理を最適化してください",
    "- 2026-03-13: refactored the cache layer; memory usage should be lower",
    "exec: node scripts/watchdog.js ensure",
    "DEBUG http: GET /api/v1/items?page={n} 200 {ms}ms 😀",
]


def make_corpus(size: int, seed: int = 7) -> str:
    rng = random.Random(seed)
    parts: list[str] = []
    total = 0
    while total < size:
        line = rng.choice(LINES).format(n=rng.randint(1, 9999), ms=rng.randint(5, 90000))
        parts.append(line)
        total += len(line.encode("utf-8")) + 1
    return "\n".join(parts)[:size]


def split4(corpus: str) -> dict[str, str]:
    """The corpus spread over the four inputs (transcript, today's log, memory, user)."""
    q = len(corpus) // 4
    return {
        "recent_session_transcript": corpus[:q],
        "today_log": corpus[q : 2 * q],
        "memory_snippet": corpus[2 * q : 3 * q],
        "user_snippet": corpus[3 * q :],
    }


def time_python(inputs: dict[str, str], repeat: int) -> tuple[float, list[str]]:
    best = float("inf")
    out: list[str] = []
    for _ in range(repeat):
        start = time.perf_counter()
        out = extract_signals(**inputs)  # type: ignore[arg-type]
        best = min(best, time.perf_counter() - start)
    return best, out


NODE_DRIVER = r"""
const fs = require('fs');
const ref = require(process.argv[2]);
const inputs = JSON.parse(fs.readFileSync(process.argv[3], 'utf8'));
const repeat = Number(process.argv[4]);
let best = Infinity, out = null;
for (let i = 0; i < repeat; i++) {
  const t0 = process.hrtime.bigint();
  out = ref.extractSignals({
    recentSessionTranscript: inputs.recent_session_transcript, todayLog: inputs.today_log,
    memorySnippet: inputs.memory_snippet, userSnippet: inputs.user_snippet, recentEvents: [],
  });
  const dt = Number(process.hrtime.bigint() - t0) / 1e9;
  if (dt < best) best = dt;
}
process.stdout.write(JSON.stringify({ seconds: best, signals: out }));
"""


def time_node(reference: str, inputs: dict[str, str], repeat: int, tmp: Path) -> tuple[float, list[str]]:
    driver = tmp / "driver.js"
    driver.write_text(NODE_DRIVER, encoding="utf-8")
    data = tmp / "inputs.json"
    data.write_text(json.dumps(inputs), encoding="utf-8")
    proc = subprocess.run(
        ["node", str(driver), os.path.abspath(reference), str(data), str(repeat)],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    result = json.loads(proc.stdout)
    return result["seconds"], result["signals"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sizes", default="10000,1000000,10000000")
    args = parser.parse_args()

    reference = os.environ.get("GEP_REFERENCE_SIGNALS_JS", "")
    with_node = bool(reference and Path(reference).is_file() and shutil.which("node"))
    sizes = [int(s) for s in args.sizes.split(",")]

    head = f"{'corpus':>10} {'gep MB/s':>10}"
    if with_node:
        head += f" {'ref MB/s':>10} {'ratio':>7} {'same':>5}"
    print(head)
    with tempfile.TemporaryDirectory() as tmpdir:
        for size in sizes:
            inputs = split4(make_corpus(size))
            mb = sum(len(v.encode("utf-8")) for v in inputs.values()) / 1e6
            secs, ours = time_python(inputs, args.repeat)
            row = f"{_label(size):>10} {mb / secs:>10.1f}"
            if with_node:
                ref_secs, theirs = time_node(reference, inputs, args.repeat, Path(tmpdir))
                host = {"protocol_drift", "path_outside_workspace"}
                same = [s for s in theirs if s not in host] == ours
                row += f" {mb / ref_secs:>10.1f} {ref_secs / secs:>7.2f} {'yes' if same else 'NO':>5}"
            print(row)
    if not with_node:
        print(
            "(set GEP_REFERENCE_SIGNALS_JS to a copy of the reference signals.js and install node for the ratio)"
        )


def _label(size: int) -> str:
    return f"{size // 1_000_000} MB" if size >= 1_000_000 else f"{size // 1000} KB"


if __name__ == "__main__":
    main()
