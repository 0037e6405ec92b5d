"""Wall time of a prompt-mode cycle on a fresh copy of the example workspace, and where it goes.

Measured:
  engine      pipeline stages without Prefect (per stage and in total), in process;
  server      the `evolution-cycle` flow against an already running server (`gep server start`): in a warm
              process (flow imported, client connected) and as a user runs it, `gep cycle` in a new process;
  first run   no server configured or running: the first `gep cycle` with a fresh PREFECT_HOME starts the
              background server (Prefect creates its database), the second uses it (--no-first-run skips).
Then the Prefect overhead of a warm flow run split into flow engine, task engine, the run's report (name,
tags, artifacts) and the workspace concurrency slot, with a cProfile of one run (--profile).
With --reference DIR (a checkout of EvoMap/evolver) and node installed, the reference's prompt-only cycle
(`node index.js run`) is timed in the same run; nothing is said about the reference otherwise.

Targets: engine stages < 0.5 s; Prefect's overhead on a warm flow run <= 0.5 s; `gep cycle` against a
running server <= 2.5 s.

Run: ``.venv/bin/python bench/cycle.py [--runs 9] [--no-first-run] [--profile] [--reference DIR]``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "workspace"
BIN = Path(sys.executable).parent
sys.path.insert(0, str(ROOT / "tests"))  # live_prefect: the same real-server helper the e2e test uses

from cli import bytecode_as_installed, fresh_workspace, reference_cycle_s  # noqa: E402 - bench/cli.py, beside this file
from live_prefect import LiveServer, clean_env, free_port  # noqa: E402

TARGET_ENGINE_S = 0.5
TARGET_OVERHEAD_S = 0.5
TARGET_SERVER_CYCLE_S = 2.5


# ------------------------------------------------------------------ workspaces


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


# ------------------------------------------------------------------ (c) the engine alone


def engine_runs(parent: Path, runs: int) -> tuple[list[float], dict[str, list[float]]]:
    """Each prompt-mode stage of the pipeline timed on its own, in the order gep/cycle/pipeline.py runs them."""
    from gep.cycle import pipeline
    from gep.cycle.context import CycleRequest, open_cycle

    totals: list[float] = []
    stages: dict[str, list[float]] = defaultdict(list)

    class Timed(pipeline.Hooks):
        def run(self, stage: pipeline.Stage, ctx: Any, state: Any) -> Any:
            t = time.perf_counter()
            try:
                return stage.fn(ctx, state)
            finally:
                stages[stage.name].append(time.perf_counter() - t)

    for i in range(runs):
        ws = fresh_workspace(parent, f"engine-{i}")
        t0 = time.perf_counter()
        ctx, opened = open_cycle(CycleRequest(workspace=ws, mutator="prompt"))
        stages["open (store, lock, recover)"].append(time.perf_counter() - t0)
        try:
            state = pipeline.run_pipeline(ctx, opened, hooks=Timed())
            assert state.event is not None and state.event.outcome.status == "awaiting_changes", state.event
        finally:
            t = time.perf_counter()
            ctx.close()
            stages["close"].append(time.perf_counter() - t)
        totals.append(time.perf_counter() - t0)
    return totals, stages


# ------------------------------------------------------------------ child: flow runs in one process


def instrument() -> dict[str, list[float]]:
    """Wrap the flow's stages, reporting calls and engine helpers with timers (names looked up at call time)."""
    from flows import cycle, reporting
    from gep.cycle import context, pipeline

    spent: dict[str, list[float]] = defaultdict(list)

    def timer(key: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*a: Any, **k: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent[key].append(time.perf_counter() - t)

        return wrapper

    def atimer(key: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        async def wrapper(*a: Any, **k: Any) -> Any:
            t = time.perf_counter()
            try:
                return await fn(*a, **k)
            finally:
                spent[key].append(time.perf_counter() - t)

        return wrapper

    pipeline.STAGES[:] = [pipeline.Stage(st.name, timer("engine: stage bodies", st.fn)) for st in pipeline.STAGES]
    task_run = cycle.FlowHooks.run
    cycle.FlowHooks.run = timer("task calls (body + task engine)", task_run)  # type: ignore[method-assign]
    cycle.open_cycle = timer("engine: outside tasks", context.open_cycle)
    reporting.publish = atimer("report (name, tags, artifacts)", reporting.publish)
    slot = cycle.workspace_slot

    @contextlib.asynccontextmanager
    async def timed_slot(*a: Any, **k: Any) -> AsyncIterator[None]:
        t = time.perf_counter()
        async with slot(*a, **k):
            spent["slot acquire"].append(time.perf_counter() - t)
            yield
            t = time.perf_counter()
        spent["slot release (report sent meanwhile)"].append(time.perf_counter() - t)

    cycle.workspace_slot = timed_slot
    cycle.run_in_slot = atimer("flow body", cycle.run_in_slot)
    return spent


def counters() -> dict[str, int]:
    """Count the git processes and the API's HTTP requests of this process (figures that do not move with
    the machine's load; Prefect's events go over one websocket and are not counted)."""
    import subprocess as sp

    import httpx

    seen = {"git processes": 0, "API requests": 0, "503 answers (SQLite busy: Prefect's client waits ~2 s)": 0}
    popen, asend, send = sp.Popen.__init__, httpx.AsyncClient.send, httpx.Client.send

    def counted_popen(self: Any, args: Any, *a: Any, **k: Any) -> None:
        if not isinstance(args, str | bytes) and args and Path(str(args[0])).name == "git":
            seen["git processes"] += 1
        popen(self, args, *a, **k)

    busy = "503 answers (SQLite busy: Prefect's client waits ~2 s)"

    async def counted_asend(self: Any, *a: Any, **k: Any) -> Any:
        seen["API requests"] += 1
        response = await asend(self, *a, **k)
        seen[busy] += response.status_code == 503
        return response

    def counted_send(self: Any, *a: Any, **k: Any) -> Any:
        seen["API requests"] += 1
        response = send(self, *a, **k)
        seen[busy] += response.status_code == 503
        return response

    sp.Popen.__init__ = counted_popen  # type: ignore[method-assign]
    httpx.AsyncClient.send = counted_asend  # type: ignore[method-assign]
    httpx.Client.send = counted_send  # type: ignore[method-assign]
    return seen


def child(runs: int, profile: bool) -> None:
    """Run ``runs`` flow runs in this process (settings from the environment); print JSON on stdout."""
    t = time.perf_counter()
    from flows.cycle import evolution_cycle
    from flows.runtime import api_url_in_process, foreground_run
    from gep.core.models import EvolutionEvent
    from gep.core.request import CycleRequest

    import_s = time.perf_counter() - t
    spent = instrument()
    seen = counters()
    counts: list[dict[str, int]] = []
    parent = Path(tempfile.mkdtemp(prefix="gep-bench-"))
    walls: list[float] = []
    per_run: list[dict[str, float]] = []
    profile_text = ""
    try:
        for i in range(runs):
            ws = fresh_workspace(parent, f"flow-{i}")
            before = {k: len(v) for k, v in spent.items()}
            prof = None
            if profile and i == runs - 1:
                import cProfile

                prof = cProfile.Profile()
                prof.enable()
            start = dict(seen)
            t = time.perf_counter()
            with foreground_run(api_url_in_process()):  # the settings `gep cycle` and `gep fleet --here` run with
                # a flow whose function returns a State gives its result to a direct caller: the event
                request = CycleRequest(workspace=ws, mutator="prompt")
                event = cast(EvolutionEvent, asyncio.run(evolution_cycle(request=request)))
            walls.append(time.perf_counter() - t)
            counts.append({k: seen[k] - start[k] for k in seen})
            if prof is not None:
                prof.disable()
                profile_text = top_functions(prof)
            assert event.outcome.status == "awaiting_changes", event.outcome
            per_run.append({k: sum(v[before.get(k, 0):]) for k, v in spent.items()})
    finally:
        shutil.rmtree(parent, ignore_errors=True)
    sync_s, async_s = bare_flows()
    json.dump({"import_s": import_s, "walls": walls, "per_run": per_run, "counts": counts, "profile": profile_text,
               "bare_sync": sync_s, "bare_async": async_s}, sys.stdout)


def bare_flows(runs: int = 3) -> tuple[float, float]:
    """A one-task flow, sync and async: the fixed cost of a sync flow run (its heartbeat thread's join)."""
    import asyncio

    from prefect import flow, task

    @task
    def one(x: int) -> int:
        return x + 1

    @flow
    def sync_flow() -> int:
        return one(1)

    @flow
    async def async_flow() -> int:
        return one(1)

    sync_flow()
    asyncio.run(async_flow())
    s, a = [], []
    for _ in range(runs):
        t = time.perf_counter()
        sync_flow()
        s.append(time.perf_counter() - t)
        t = time.perf_counter()
        asyncio.run(async_flow())
        a.append(time.perf_counter() - t)
    return median(s), median(a)


def top_functions(prof: Any, n: int = 18) -> str:
    """The slowest functions by cumulative time, without the call-through noise of wrappers and the loop."""
    import io
    import pstats

    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf)
    stats.sort_stats("cumulative").print_stats(
        r"(prefect/(flow_engine|task_engine|concurrency|artifacts|client/orchestration|_internal)|"
        r"flows/|gep/|httpx/_client|threading.py:.*\(join\)|time.sleep)", n)
    lines = [ln for ln in buf.getvalue().splitlines() if ln.strip()]
    start = next((i for i, ln in enumerate(lines) if "ncalls" in ln), 0)
    return "\n".join(lines[start:])


def run_child(env: dict[str, str], runs: int, profile: bool = False) -> dict[str, Any]:
    args = [sys.executable, str(Path(__file__).resolve()), "--child", "--runs", str(runs)]
    if profile:
        args.append("--profile")
    env = {**env, "PREFECT_LOGGING_LEVEL": "WARNING"}
    r = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600, cwd=ROOT)
    if r.returncode != 0:
        raise SystemExit(f"bench child failed ({r.returncode}):\n{r.stderr[-4000:]}")
    return json.loads(r.stdout)


def gep_cycle(env: dict[str, str], ws: Path) -> float:
    """`gep cycle --workspace WS --mutator prompt --json` as a user runs it: a new process, wall time."""
    t = time.perf_counter()
    r = subprocess.run([str(BIN / "gep"), "cycle", "--workspace", str(ws), "--mutator", "prompt", "--json"],
                       env=env, capture_output=True, text=True, timeout=600)
    wall = time.perf_counter() - t
    if r.returncode != 0 or json.loads(r.stdout)["outcome"]["status"] != "awaiting_changes":
        raise SystemExit(f"gep cycle failed ({r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}")
    return wall


# ------------------------------------------------------------------ report


def row(label: str, seconds: float, target: float | None = None, note: str = "") -> str:
    verdict = ""
    if target is not None:
        verdict = f"{seconds / target:5.2f}x target {target:g}s {'OK' if seconds <= target else 'OVER'}"
    return f"  {label:<54} {seconds:8.3f} s  {verdict:<28} {note}"


def breakdown(result: dict[str, Any], walls_from: int = 1) -> list[str]:
    """Median of each instrumented part over the warm runs, and the unexplained rest (flow engine)."""
    runs = result["per_run"][walls_from:] or result["per_run"]
    walls = result["walls"][walls_from:] or result["walls"]
    keys = sorted({k for r in runs for k in r})
    med = {k: median([r.get(k, 0.0) for r in runs]) for k in keys}
    total = median(walls)
    lines = [row("whole flow run (median, warm)", total)]
    engine = med.get("engine: stage bodies", 0.0) + med.get("engine: outside tasks", 0.0)
    task_engine = med.get("task calls (body + task engine)", 0.0) - med.get("engine: stage bodies", 0.0)
    lines.append(row("  engine stages (stage bodies + open_cycle)", engine))
    lines.append(row("  task engine (task runs: states, records)", task_engine))
    parts = ("slot acquire", "slot release (report sent meanwhile)", "report (name, tags, artifacts)")
    for k in parts:
        if k in med:
            lines.append(row(f"  {k}", med[k], note="(overlaps the release)" if k.startswith("report") else ""))
    flow_body = med.get("flow body", 0.0)
    lines.append(row("  flow engine outside the body (create, states)", total - flow_body))
    known = engine + task_engine + med.get("slot acquire", 0.0) + med.get("slot release (report sent meanwhile)", 0.0)
    lines.append(row("  rest of the body (ctx close, logging)", max(flow_body - known, 0.0)))
    lines.append(row("Prefect's overhead beyond the engine's stages", total - engine, TARGET_OVERHEAD_S))
    for key in result.get("counts", [{}])[0]:  # git and API the same in every run on a fresh workspace
        lines.append(f"  {key} per flow run: {' '.join(str(c[key]) for c in result.get('counts', []))}")
    return lines


def server_part(lines: list[str], scratch: Path, runs: int, profile: bool) -> dict[str, Any]:
    print("starting the server (gep server start) ...", flush=True)
    with LiveServer(scratch / "prefect-home") as server:
        t = time.perf_counter()
        result = run_child(server.env, runs, profile=profile)
        server_child_s = time.perf_counter() - t
        warm = result["walls"][1:] or result["walls"]
        cli = [gep_cycle(server.home_env, fresh_workspace(scratch, f"cli-{i}")) for i in range(3)]
    lines.append("")
    lines.append(f"against a running server ({server.url})")
    lines.append(row("flow run, first in a new process", result["walls"][0]))
    lines.append(row("flow run, warm process (median)", median(warm)))
    lines.append(row("`gep cycle` as a user runs it (median of 3)", median(cli), TARGET_SERVER_CYCLE_S))
    lines.append(row("  of which: import flows + prefect", result["import_s"]))
    lines.append(row(f"bench child process, {runs} runs", server_child_s))
    lines.append("")
    lines.append("prefect overhead of a warm flow run against the server (median)")
    lines += breakdown(result)
    lines.append(row("one-task flow, sync (median)", result["bare_sync"]))
    lines.append(row("one-task flow, async (median)", result["bare_async"],
                     note="sync - async = the heartbeat thread join of a sync flow"))
    return result


def first_run_part(lines: list[str], scratch: Path) -> None:
    """No server configured or running: the first `gep cycle` starts gep's background server."""
    print("first run on a fresh PREFECT_HOME ...", flush=True)
    home = scratch / "first-home"
    env = clean_env(PREFECT_HOME=str(home), PREFECT_LOGGING_LEVEL="WARNING",
                    PREFECT_SERVER_API_PORT=str(free_port()))
    try:
        cold = gep_cycle(env, fresh_workspace(scratch, "first-cold"))
        second = gep_cycle(env, fresh_workspace(scratch, "first-second"))
    finally:
        subprocess.run([str(BIN / "gep"), "server", "stop"], env=env, capture_output=True, timeout=60)
    lines.append("")
    lines.append("no server running (no PREFECT_API_URL): the first `gep cycle` starts the background server")
    lines.append(row("`gep cycle`, fresh PREFECT_HOME", cold, note="server start + Prefect's database"))
    lines.append(row("`gep cycle`, the second of the session", second, TARGET_SERVER_CYCLE_S))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=9, help="cycles per in-process measurement (first one is cold)")
    ap.add_argument("--no-first-run", action="store_true", help="skip the first run on a fresh machine (~1 min)")
    ap.add_argument("--profile", action="store_true", help="cProfile one warm flow run against the server")
    ap.add_argument("--reference", type=Path, help="a checkout of EvoMap/evolver, to time its cycle here")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.runs, args.profile)
        return 0

    bytecode_as_installed()
    scratch = Path(tempfile.mkdtemp(prefix="gep-bench-"))
    lines: list[str] = []
    try:
        print(f"prompt-mode cycle on a fresh copy of {EXAMPLE.relative_to(ROOT)}; {args.runs} runs each",
              flush=True)
        totals, stages = engine_runs(scratch, args.runs)
        engine_s = median(totals)
        lines.append("engine (pipeline stages, no Prefect; median)")
        for name, xs in stages.items():
            lines.append(row(f"  {name}", median(xs)))
        lines.append(row("all stages", engine_s, TARGET_ENGINE_S))
        result = server_part(lines, scratch, args.runs, args.profile)
        if not args.no_first_run:
            first_run_part(lines, scratch)
        if args.reference:
            ref = reference_cycle_s(args.reference.resolve(), scratch, args.runs)
            if ref is not None:  # measured here, or not mentioned at all
                lines.append("")
                lines.append(row("reference: `node index.js run` (prompt only, median)", ref))
        print("\n".join(lines))
        if result.get("profile"):
            print("\ncProfile of one warm flow run against the server (cumulative, filtered):")
            print(result["profile"])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
