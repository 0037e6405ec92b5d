"""A fleet of workspaces on Prefect workers and one PostgreSQL store, as figures.

  workers       --workspaces (50) prompt-mode cycles on as many fresh workspaces (copies of the example, real
                git repositories), started by `gep fleet --watch` and run by 1, then 2, process workers
                (`prefect worker start --limit`, the fleet's own run counts as one) of one Prefect server; every
                cycle's store is one PostgreSQL database. Total wall time, per-cycle p50/p95 (the flow run's own
                time, and from its creation to its end), and the ratio to the same number of cycles run one
                after another with `gep cycle` against the same server.
  history       one workspace's history read (what `gep history` reads from the store: its newest 20 events and
                their count; and the loop rules' reads) where it has 1 neighbour and where it has --others
                (999), each workspace with --per-workspace events (bench/store.py's helpers). Target < 1.2.
                Then the same number of cycles run by `gep fleet --here` (the fleet's flow in the command's own
                process, its cycles as concurrent subflows, --concurrency 4): no process per cycle.
  slow agent    (issue 30) --slow (40) cycles whose agent (the command mutator) takes --slow-s (5) s and fixes
                the example's bug, by `gep fleet --here --concurrency 8`; against the same cycles one after
                another, measured as `gep fleet --here --concurrency 1` on --slow-sequential (4) of them and
                scaled to all (its wall time per cycle times --slow). Target: at most 0.25x. Each run also
                prints its CPU seconds per cycle (`gep fleet` with its children, and the Prefect server;
                PostgreSQL not counted): unlike wall time, a figure the machine's load hardly changes.
  fleet of 100  (issue 19) --fleet (100) cycles on as many workspaces by `gep fleet --here`, one server.
                Target < 100 s. (Dispatched to 2 process workers on this 2-core machine it took 340 s: each
                flow run of a process worker is a new Python process, ~2 s of imports before a 0.5 s cycle.)

PostgreSQL: GEP_TEST_POSTGRES_URL, else a throwaway server started here with .ci/postgres.sh. The Prefect
server keeps its own runs in a database of that PostgreSQL server too (--prefect-sqlite: in SQLite, as
`gep server start` does; it takes one writer at a time and answered 503 to a fleet on 2 workers here). The
Prefect server, the workers, PostgreSQL (when started here), the databases and the temp dirs are gone when
this exits.

Run: ``.venv/bin/python bench/fleet.py [--workspaces 50] [--slow 40] [--fleet 100] [--others 999] [--limit 4]``

Just issue 30's two rows (the slow-agent ratio and the fleet of 100; about 4 minutes idle), ending with one
line of both verdicts (exit 1 when either is over):

    nice -n 10 .venv/bin/python bench/fleet.py --workspaces 0 --others 0
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))  # bench/cli.py and bench/store.py's helpers (they add the tests' and the root)

from cli import BIN, GEP, bytecode_as_installed, fresh_workspace  # noqa: E402
from live_prefect import LiveServer, kill_group  # noqa: E402
from store import bench_fleet, database, loop_reads  # noqa: E402

POOL = "gep-pool"
TARGET_FLEET_S = 100.0  # issue 19; the history read's target is bench/store.py's
TARGET_SLOW_RATIO = 0.25  # issue 30: a fleet of slow agents, to the same cycles one after another
SLOW_CONCURRENCY = 8
# The slow agent: reads its prompt, sleeps, fixes the example's bug (so each cycle validates and commits).
SLOW_AGENT = """import pathlib, sys, time
sys.stdin.read()
time.sleep(float(sys.argv[1]))
p = pathlib.Path("stats.py")
p.write_text(p.read_text().replace("(len(values) - 1)", "len(values)"))
"""
HERE_CONCURRENCY = 4  # gep fleet --here's default
RUN_LINK = re.compile(r"flow run: \S+/runs/flow-run/([0-9a-f-]{36})")


class Cpu:
    """CPU seconds of the last `gep fleet --here` run: its process and every child it waited for (git, the
    agent), and the Prefect server's processes meanwhile. Unlike wall time, this hardly depends on what else
    the machine runs. The sandboxed checks are not among the children counted (bubblewrap's own children
    in their PID namespace are reaped inside it), nor is PostgreSQL: ``machine_s``, every core's busy time
    while the run lasted, counts them (on an idle machine, it is the run's)."""

    gep_s = 0.0
    server_s = 0.0
    machine_s = 0.0
    wall_s = 0.0


def machine_busy_s() -> float:
    """Busy CPU seconds of the whole machine since boot (/proc/stat: all but idle and iowait)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    ticks = [int(f) for f in fields]
    return (sum(ticks[:8]) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def group_cpu_s(pgid: int | None) -> float:
    """CPU seconds (own and reaped children) of the live processes in process group ``pgid``."""
    if pgid is None:
        return 0.0
    total, tick = 0.0, os.sysconf("SC_CLK_TCK")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:
            total += sum(int(f) for f in fields[11:15]) / tick
    return total


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@contextmanager
def postgres() -> Iterator[str]:
    """GEP_TEST_POSTGRES_URL, or a server started with .ci/postgres.sh and stopped (its folder removed) after."""
    url = os.environ.get("GEP_TEST_POSTGRES_URL")
    if url:
        yield url
        return
    started = subprocess.run(["bash", "-c", "source .ci/postgres.sh >&2 || exit 1; "
                              "declare -p PG_DIR PG_CTL_CMD GEP_TEST_POSTGRES_URL"],
                             cwd=ROOT, capture_output=True, text=True)
    state = started.stdout
    try:
        url_line = re.search(r'GEP_TEST_POSTGRES_URL="([^"]+)"', state)
        if started.returncode != 0 or url_line is None:
            raise SystemExit(f"could not start PostgreSQL with .ci/postgres.sh:\n{started.stderr[-2000:]}")
        yield url_line.group(1)
    finally:
        if state:  # what stop_postgres does, with the variables the start left
            subprocess.run(["bash", "-c", state + '\n"${PG_CTL_CMD[@]}" >/dev/null 2>&1; rm -rf "$PG_DIR"'],
                           capture_output=True)


@contextmanager
def prefect_database(pg: str | None) -> Iterator[dict[str, str]]:
    """The Prefect server's settings for a fresh database on the PostgreSQL server at ``pg`` (dropped after);
    none (SQLite in its PREFECT_HOME) when ``pg`` is None."""
    if pg is None:
        yield {}
        return
    from sqlalchemy import create_engine, text

    name = f"gep_bench_prefect_{uuid.uuid4().hex[:8]}"
    admin = create_engine(pg, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    base = pg.split("?", 1)[0].rsplit("/", 1)[0].replace("+psycopg2", "+asyncpg")
    try:
        yield {"PREFECT_API_DATABASE_CONNECTION_URL": f"{base}/{name}"}
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def workspaces(parent: Path, label: str, n: int) -> list[str]:
    folder = parent / label
    folder.mkdir()
    return [str(fresh_workspace(folder, f"ws-{i:03d}")) for i in range(n)]


def deploy(server: LiveServer, env: dict[str, str]) -> None:
    """The work pool and `prefect deploy --all`, as docs/deploy.md does it."""
    for args in (["work-pool", "create", POOL, "--type", "process"], ["deploy", "--all"]):
        r = server.run([str(BIN / "prefect"), *args], cwd=ROOT, timeout_s=300,
                       env={**env, "PWD": str(ROOT), "GEP_WORKSPACE": "/nonexistent"})
        if r.returncode != 0:
            raise SystemExit(f"prefect {' '.join(args)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")


def run_here(server: LiveServer, env: dict[str, str], paths: list[str], concurrency: int,
             agent_cmd: str | None = None) -> tuple[float, list[float], list[float]]:
    """`gep fleet --here` (prompt mode, or the command mutator running ``agent_cmd``): its wall time, each
    cycle's run time and its time from creation to end."""
    args = [a for p in paths for a in ("--workspace", p)]
    mutator = ["--mutator", "prompt"] if agent_cmd is None else ["--mutator", "command", "--agent-cmd", agent_cmd]
    started, cpu, server_cpu, busy = time.perf_counter(), children_cpu_s(), group_cpu_s(server.pid), machine_busy_s()
    r = server.run([GEP, "fleet", *args, *mutator, "--here", "--concurrency", str(concurrency)],
                   env=env, timeout_s=3600)
    wall = time.perf_counter() - started
    Cpu.gep_s, Cpu.server_s = children_cpu_s() - cpu, group_cpu_s(server.pid) - server_cpu
    Cpu.machine_s, Cpu.wall_s = machine_busy_s() - busy, wall
    link = RUN_LINK.search(r.stdout)
    if r.returncode != 0 or link is None:
        raise SystemExit(f"gep fleet --here exited {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    run_s, total_s = cycle_times(server, link.group(1), len(paths),
                                 "Awaiting changes" if agent_cmd is None else "Success")
    return wall, run_s, total_s


def run_fleet(server: LiveServer, env: dict[str, str], paths: list[str], n_workers: int, limit: int,
              scratch: Path) -> tuple[float, list[float], list[float]]:
    """`gep fleet --watch` with ``n_workers`` workers: its wall time, each cycle's run time and its time from
    creation to end."""
    workers = [server.spawn([str(BIN / "prefect"), "worker", "start", "--pool", POOL, "--limit", str(limit)],
                            env={**env, "PREFECT_WORKER_QUERY_SECONDS": "1"}, log=scratch / f"worker-{i}.log")
               for i in range(n_workers)]
    try:
        time.sleep(3)  # the workers are polling (a user starts them before asking for a fleet)
        args = [a for p in paths for a in ("--workspace", p)]
        started = time.perf_counter()
        r = server.run([GEP, "fleet", *args, "--mutator", "prompt", "--watch"], env=env, timeout_s=3600)
        wall = time.perf_counter() - started
    finally:
        for w in workers:
            kill_group(w, signal.SIGINT, grace_s=15)
            server.procs.remove(w)
    link = RUN_LINK.search(r.stdout)
    if r.returncode != 0 or link is None:
        raise SystemExit(f"gep fleet exited {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    run_s, total_s = cycle_times(server, link.group(1), len(paths))
    return wall, run_s, total_s


def cycle_times(server: LiveServer, fleet_run_id: str, n: int, state: str = "Awaiting changes"
                ) -> tuple[list[float], list[float]]:
    """Each cycle run of the fleet (every one ended in ``state``): its own run time, and the time from its
    creation to its end."""
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId, FlowRunFilterParentTaskRunId

    with server.client() as client:
        tasks = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[fleet_run_id])),
                                      limit=200)
        runs = []
        for i in range(0, len(tasks), 200):
            runs += client.read_flow_runs(flow_run_filter=FlowRunFilter(parent_task_run_id=FlowRunFilterParentTaskRunId(
                any_=[t.id for t in tasks[i:i + 200]])), limit=200)
    done = [r for r in runs if r.state_name == state and r.end_time and r.start_time]
    if len(done) != n:
        raise SystemExit(f"{len(done)} of {n} cycles ended {state}: {[r.state_name for r in runs]}")
    return ([r.total_run_time.total_seconds() for r in done],
            [(r.end_time - r.created).total_seconds() for r in done if r.created and r.end_time])


def sequential(server: LiveServer, env: dict[str, str], paths: list[str]) -> float:
    """The same cycles one after another, as `gep cycle` runs them against the server."""
    started = time.perf_counter()
    for p in paths:
        r = server.run([GEP, "cycle", "--workspace", p, "--mutator", "prompt"], env=env, timeout_s=300)
        if r.returncode != 0:
            raise SystemExit(f"gep cycle exited {r.returncode}:\n{r.stderr[-2000:]}")
    return time.perf_counter() - started


def bench_workers(server: LiveServer, env: dict[str, str], scratch: Path, n: int, limit: int) -> None:
    seq = sequential(server, env, workspaces(scratch, "sequential", n))
    print(f"{n} cycles one after another (`gep cycle`): {seq:.1f} s ({seq / n:.2f} s a cycle)", flush=True)
    for n_workers in (1, 2):
        wall, run_s, total_s = run_fleet(server, env, workspaces(scratch, f"workers-{n_workers}", n), n_workers,
                                         limit, scratch)
        print(f"{n} cycles, {n_workers} worker{'s' if n_workers > 1 else ''} (--limit {limit}): "
              + figures(wall, seq, run_s, total_s), flush=True)
    wall, run_s, total_s = run_here(server, env, workspaces(scratch, "here", n), HERE_CONCURRENCY)
    print(f"{n} cycles, `gep fleet --here` (--concurrency {HERE_CONCURRENCY}): " + figures(wall, seq, run_s, total_s),
          flush=True)


def figures(wall: float, seq: float, run_s: list[float], total_s: list[float]) -> str:
    return (f"{wall:.1f} s (ratio to one after another {wall / seq:.2f}); per cycle: run p50 "
            f"{statistics.median(run_s):.1f} s, p95 {pct(run_s, 0.95):.1f} s; creation to end p50 "
            f"{statistics.median(total_s):.1f} s, p95 {pct(total_s, 0.95):.1f} s")


def history_read(store: Any) -> None:
    store.list_events(limit=20)
    store.count_events()


def bench_history(url: str, others: int, per: int, rounds: int) -> bool:
    with database(url, Path("."), "fleet_small") as small, database(url, Path("."), "fleet_large") as large:
        return bench_fleet(small, large, others + 1, per, rounds,
                           reads=(("history read (newest 20 + count)", history_read), ("loop-rule reads", loop_reads)))


def bench_100(server: LiveServer, env: dict[str, str], scratch: Path, n: int) -> bool:
    wall, run_s, _ = run_here(server, env, workspaces(scratch, f"fleet-{n}", n), HERE_CONCURRENCY)
    target = TARGET_FLEET_S * n / 100
    print(f"fleet of {n} (issue 19): {n} cycles on {n} workspaces, `gep fleet --here --concurrency "
          f"{HERE_CONCURRENCY}`, one server: {wall:.1f} s (target < {target:g} s) {'OK' if wall < target else 'OVER'}; "
          f"per cycle run p50 {statistics.median(run_s):.1f} s, p95 {pct(run_s, 0.95):.1f} s", flush=True)
    return wall < target


def bench_slow(server: LiveServer, env: dict[str, str], scratch: Path, n: int, agent_s: float, sample: int) -> bool:
    """A fleet whose agent takes ``agent_s``: at once (concurrency 8) against one after another (concurrency 1
    on ``sample`` of the cycles, scaled to ``n``)."""
    tests_run_once(scratch)
    script = scratch / "slow_agent.py"
    script.write_text(SLOW_AGENT)
    cmd = f"{sys.executable} {script} {agent_s:g}"
    seq_wall, seq_run, _ = run_here(server, env, workspaces(scratch, "slow-sequential", sample), 1, cmd)
    seq = seq_wall / sample * n
    print(f"slow agent ({agent_s:g} s), one after another (--concurrency 1): {sample} cycles in {seq_wall:.1f} s, "
          f"{seq_wall / sample:.2f} s a cycle (run p50 {statistics.median(seq_run):.1f} s); {n} cycles: {seq:.1f} s "
          f"(scaled); {cpu_per_cycle(sample)}", flush=True)
    wall, run_s, total_s = run_here(server, env, workspaces(scratch, "slow", n), SLOW_CONCURRENCY, cmd)
    print(f"slow agent, --concurrency {SLOW_CONCURRENCY}: {cpu_per_cycle(n)}", flush=True)
    ratio = wall / seq
    ok = ratio <= TARGET_SLOW_RATIO
    print(f"slow agent: {n} cycles, `gep fleet --here --concurrency {SLOW_CONCURRENCY}`: {wall:.1f} s, ratio to one "
          f"after another {ratio:.2f} (target <= {TARGET_SLOW_RATIO}) {'OK' if ok else 'OVER'}; per cycle: run p50 "
          f"{statistics.median(run_s):.1f} s, p95 {pct(run_s, 0.95):.1f} s; creation to end p50 "
          f"{statistics.median(total_s):.1f} s", flush=True)
    return ok


def tests_run_once(scratch: Path) -> None:
    """The example's tests run once outside the sandbox, as the workspace's owner runs them: pytest then keeps
    its assertion-rewritten bytecode of the plugins' packages (hypothesis, anyio, xdist here) in the venv.
    The sandbox shows the venv read-only, so validation reads that cache and never writes it: without it each
    validation rewrites ~110 modules again (1.4 s of CPU here). Done here so the figures do not depend on
    whether someone ran a test suite with this venv before."""
    ws = fresh_workspace(scratch, "tests-run-once")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([str(BIN / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=ws, env=env,
                   capture_output=True, timeout=300)
    print("the example's tests run once with this venv outside the sandbox (its owner's usual state)", flush=True)


def cpu_per_cycle(n: int) -> str:
    """The last run's CPU per cycle (what a cycle costs, whatever else the machine runs)."""
    from gep.validation.slots import cpus  # the count the validation slots use

    cores = cpus()
    return (f"CPU per cycle {(Cpu.gep_s + Cpu.server_s) / n:.2f} s (gep and its children {Cpu.gep_s / n:.2f} s, "
            f"Prefect server {Cpu.server_s / n:.2f} s; the fleet's start-up included); the machine's cores busy "
            f"{Cpu.machine_s / n:.2f} s a cycle, {Cpu.machine_s / (Cpu.wall_s * cores):.0%} of {cores} cores "
            f"(the sandboxed checks and PostgreSQL included)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workspaces", type=int, default=50, help="cycles in the 1- and 2-worker runs (0: skip)")
    ap.add_argument("--limit", type=int, default=4, help="flow runs at once per worker (prefect worker --limit)")
    ap.add_argument("--slow", type=int, default=40, help="cycles in the slow-agent fleet (0: skip)")
    ap.add_argument("--slow-s", type=float, default=5.0, help="seconds the slow agent takes")
    ap.add_argument("--slow-sequential", type=int, default=4, help="slow cycles run one after another, scaled")
    ap.add_argument("--fleet", type=int, default=100, help="cycles in the issue-19 fleet (0: skip)")
    ap.add_argument("--others", type=int, default=999, help="other workspaces in the history read (0: skip)")
    ap.add_argument("--per-workspace", type=int, default=200, help="events of each workspace in the history read")
    ap.add_argument("--rounds", type=int, default=200, help="timed reads per database (median is reported)")
    ap.add_argument("--prefect-sqlite", action="store_true", help="the Prefect server on SQLite, not PostgreSQL")
    args = ap.parse_args()

    ok = True
    verdicts: dict[str, bool] = {}
    bytecode_as_installed()
    scratch = Path(tempfile.mkdtemp(prefix="gep-bench-fleet-"))
    try:
        with ExitStack() as stack:
            pg = stack.enter_context(postgres())
            print(f"PostgreSQL at {pg.split('@')[-1]}", flush=True)
            if args.others:
                ok &= bench_history(pg, args.others, args.per_workspace, args.rounds)
            if args.workspaces or args.fleet or args.slow:
                url = stack.enter_context(database(pg, scratch, "fleet_cycles"))
                prefect_db = stack.enter_context(prefect_database(None if args.prefect_sqlite else pg))
                server = stack.enter_context(LiveServer(scratch / "prefect-home", server_env=prefect_db))
                env = {"GEP_DATABASE_URL": url, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
                       "PREFECT_LOGGING_LEVEL": "WARNING"}
                deploy(server, env)
                print(f"Prefect server {server.url} ({'SQLite' if args.prefect_sqlite else 'PostgreSQL'}), "
                      f"deployments on {POOL}; the cycles' stores in one PostgreSQL schema", flush=True)
                if args.workspaces:
                    bench_workers(server, env, scratch, args.workspaces, args.limit)
                if args.slow:
                    verdicts["slow-agent ratio <= 0.25"] = bench_slow(server, env, scratch, args.slow, args.slow_s,
                                                                      args.slow_sequential)
                if args.fleet:
                    verdicts[f"fleet of {args.fleet} < {TARGET_FLEET_S * args.fleet / 100:g} s"] = bench_100(
                        server, env, scratch, args.fleet)
                ok &= all(verdicts.values())
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if verdicts:
        print("verdicts: " + "; ".join(f"{k} {'OK' if v else 'OVER'}" for k, v in verdicts.items()), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
