"""Throughput of ``gep.signals.rules.extract_signals`` on 10 KB, 200 KB, 1 MB and 10 MB corpora (MB/s).

200 KB is about the most one cycle reads: the four source tails (64 + 64 + 50 + 20 KB by default).

The corpora are agent-log-like text in English, Simplified and Traditional Chinese and Japanese
(log lines, tool calls, JSON errors, requests, an emoji), generated from a fixed seed. When
``node`` is on the PATH and ``GEP_REFERENCE_SIGNALS_JS`` points to a copy of the reference's
``src/gep/signals.js``, the reference runs on the same corpora in the same run and each table
shows the ratio (ours / reference; above 1 means we are faster) and whether the outputs agree.

Each side runs in a fresh process per corpus (Python: this script in ``--child`` mode; node: a
small driver written to a temp dir), and only the call is timed, in three regimes, because
they rank the two differently:

- ``first call``: the first call after loading, what a cycle pays (one extraction per cycle);
  shown in milliseconds, as it is latency more than throughput. Node compiles its regular
  expressions lazily here; Python compiled them at import, so the loading times are printed too.
- ``best of N`` (``--repeat``): the fastest of the first N calls.
- ``warm``: the fastest call of a loop that runs for ``--warm-seconds`` (at least 3 calls), after
  V8's JIT has tiered the reference up; the steady state of a long-lived process.

Run: ``.venv/bin/python bench/signals.py [--repeat 3] [--warm-seconds 1] [--sizes 10000,200000,1000000,10000000]``
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
REGIMES = ("first", "best", "warm")
HOST_SIGNALS = {"protocol_drift", "path_outside_workspace"}  # left out by gep.signals.rules


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


def child(inputs_path: str, repeat: int, warm_seconds: float) -> None:
    """``--child`` mode: time loading and the three regimes in this fresh process, print JSON."""
    t0 = time.perf_counter()
    from gep.signals.rules import extract_signals

    load = time.perf_counter() - t0

    inputs = json.loads(Path(inputs_path).read_text(encoding="utf-8"))
    times: list[float] = []
    out: list[str] = []
    began = time.perf_counter()
    while len(times) < max(3, repeat) or time.perf_counter() - began < warm_seconds:
        t0 = time.perf_counter()
        out = extract_signals(**inputs)
        times.append(time.perf_counter() - t0)
    result = {
        "load": load,
        "first": times[0],
        "best": min(times[:repeat]),
        "warm": min(times),
        "signals": out,
    }
    sys.stdout.write(json.dumps(result))


NODE_DRIVER = r"""
const fs = require('fs');
const t00 = process.hrtime.bigint();
const ref = require(process.argv[2]);
const load = Number(process.hrtime.bigint() - t00) / 1e9;
const inputs = JSON.parse(fs.readFileSync(process.argv[3], 'utf8'));
const repeat = Number(process.argv[4]), warmSeconds = Number(process.argv[5]);
const times = [];
let out = null;
const began = process.hrtime.bigint();
const elapsed = () => Number(process.hrtime.bigint() - began) / 1e9;
while (times.length < Math.max(3, repeat) || elapsed() < warmSeconds) {
  const t0 = process.hrtime.bigint();
  out = ref.extractSignals({
    recentSessionTranscript: inputs.recent_session_transcript, todayLog: inputs.today_log,
    memorySnippet: inputs.memory_snippet, userSnippet: inputs.user_snippet, recentEvents: [],
  });
  times.push(Number(process.hrtime.bigint() - t0) / 1e9);
}
process.stdout.write(JSON.stringify({
  load, first: times[0], best: Math.min(...times.slice(0, repeat)), warm: Math.min(...times), signals: out,
}));
"""


def run_json(cmd: list[str]) -> dict:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        sys.exit(f"bench: {cmd[0]} failed: {proc.stderr.strip().splitlines()[-1:] or proc.returncode}")
    return json.loads(proc.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="N of the 'best of N' regime (default 3)")
    parser.add_argument(
        "--warm-seconds", type=float, default=1.0, help="length of the warm loop (default 1 s)"
    )
    parser.add_argument("--sizes", default="10000,200000,1000000,10000000", help="corpus sizes in bytes")
    parser.add_argument("--child", metavar="INPUTS_JSON", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.repeat < 1 or args.warm_seconds < 0:
        sys.exit("bench: --repeat must be >= 1 and --warm-seconds >= 0")
    if args.child:
        child(args.child, args.repeat, args.warm_seconds)
        return

    reference = os.environ.get("GEP_REFERENCE_SIGNALS_JS", "")
    with_node = bool(reference and Path(reference).is_file() and shutil.which("node"))
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
    except ValueError:
        sys.exit(f"bench: --sizes must be comma-separated byte counts, got {args.sizes!r}")

    rows: dict[str, list[str]] = {regime: [] for regime in REGIMES}
    agree: list[str] = []
    loads: list[tuple[float, float | None]] = []
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        (tmp / "driver.js").write_text(NODE_DRIVER, encoding="utf-8")
        for size in sizes:
            inputs = split4(make_corpus(size))
            data = tmp / "inputs.json"
            data.write_text(json.dumps(inputs), encoding="utf-8")
            mb = sum(len(v.encode("utf-8")) for v in inputs.values()) / 1e6
            rep, warm = str(args.repeat), str(args.warm_seconds)
            ours = run_json(
                [sys.executable, __file__, "--child", str(data), "--repeat", rep, "--warm-seconds", warm]
            )
            theirs = None
            if with_node:
                driver = str(tmp / "driver.js")
                theirs = run_json(["node", driver, os.path.abspath(reference), str(data), rep, warm])
                same = [s for s in theirs["signals"] if s not in HOST_SIGNALS] == ours["signals"]
                agree.append(f"{_label(size)}: {'same output' if same else 'OUTPUTS DIFFER'}")
            loads.append((ours["load"], theirs["load"] if theirs else None))
            for regime in REGIMES:
                rows[regime].append(_row(size, mb, regime, ours, theirs))

    titles = {
        "first": "first call after loading (one cycle's extraction), milliseconds",
        "best": f"best of the first {args.repeat} calls, MB/s",
        "warm": f"warm: best call of a {args.warm_seconds:g} s loop, MB/s",
    }
    for regime in REGIMES:
        unit = "ms" if regime == "first" else "MB/s"
        head = f"{'corpus':>10} {'gep ' + unit:>10}" + (
            f" {'ref ' + unit:>10} {'ratio':>7}" if with_node else ""
        )
        print(f"\n{titles[regime]}\n{head}")
        print("\n".join(rows[regime]))
    ours_load = min(load for load, _ in loads) * 1e3
    line = f"\nloading (not in the figures above): import gep.signals.rules {ours_load:.0f} ms (pydantic included)"
    if with_node:
        line += f", require the reference {min(t for _, t in loads if t is not None) * 1e3:.1f} ms"
        print(line + "\n" + "; ".join(agree))
    else:
        print(line)
        print(
            "(set GEP_REFERENCE_SIGNALS_JS to a copy of the reference signals.js and install node for the ratio)"
        )
    print("ratio: reference time / our time (above 1: we are faster)")


def _row(size: int, mb: float, regime: str, ours: dict, theirs: dict | None) -> str:
    def fig(seconds: float) -> float:
        return seconds * 1e3 if regime == "first" else mb / seconds

    row = f"{_label(size):>10} {fig(ours[regime]):>10.2f}"
    if theirs is not None:
        row += f" {fig(theirs[regime]):>10.2f} {theirs[regime] / ours[regime]:>7.2f}"
    return row


def _label(size: int) -> str:
    return f"{size // 1_000_000} MB" if size >= 1_000_000 else f"{size // 1000} KB"


if __name__ == "__main__":
    main()
