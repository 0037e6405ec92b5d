"""The real world of bench/evolution.py: bug-fix tasks from public Python repositories (bench/real/tasks.json),
each a workspace whose nightly job runs the fix commit's failing test and logs its real output.

A task's workspace is a git repository with the code before the fix, the tests the project had then (the
workspace's validation, run by bench/real/runtests.py) and ``logs/job.log``. Before every cycle the nightly job
runs the fix commit's failing tests (kept outside the workspace) on the workspace's code and appends what they
printed (``FAILED <test> - <error>``) or that they passed. The scripted agent of bench/real_agent.py applies
the real fix, a part of it, a change elsewhere, a breaking change or nothing, with odds set by the gene and by
what the prompt says about the task. Ground truth: the failing tests pass on the workspace's code at the end.

Run: ``.venv/bin/python bench/evolution.py --world real [--tasks N|ID,...] [--seeds 2] [--cycles 6]
[--arms full,off] [--jobs 2] [--json FILE] [--keep DIR]`` (or ``bench/real_world.py`` with the same options).
The tasks' files come from clones of their repositories (bench/real/taskfiles.py).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "real"))

from evolution import LABEL_DELAY, _agent_did, _clock, finish_run, give_labels  # noqa: E402 - imports us lazily
from taskfiles import (  # noqa: E402 - beside this file
    RUNNER,
    SourceMissing,
    Task,
    apply_patch,
    load_tasks,
    materialize,
    old_tests_args,
    run_tests,
)

AGENT = HERE / "real_agent.py"
ARMS = {"full": {}, "off": {"GEP_LEARNING": "off"}}
START = datetime(2026, 1, 1, tzinfo=UTC)
GENERIC = ("INFO nightly: job started", "WARNING nightly: retrying after connection reset")


@dataclass
class TaskRun:
    arm: str
    task: str
    repo: str
    seed: int
    cycles: int
    fixed: bool  # the failing tests pass at the end (the world's truth)
    first_fixed: int | None
    regressions: int
    statuses: dict[str, int] = field(default_factory=dict)
    approaches: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0


# ------------------------------------------------------------------ the task's workspace


def _hunks(patch: str) -> list[tuple[str, list[str]]]:
    """(file header, hunks) of the patch's first file."""
    files = re.split(r"(?m)^(?=diff --git )", patch)
    first = next(f for f in files if f.strip())
    parts = re.split(r"(?m)^(?=@@ )", first)
    return [(parts[0], parts[1:])]


def touched_lines(patch: str) -> list[int]:
    """Lines of the first file, before the fix, that its hunks span."""
    out: list[int] = []
    for m in re.finditer(r"(?m)^@@ -(\d+)(?:,(\d+))? ", _hunks(patch)[0][0] + "".join(_hunks(patch)[0][1])):
        start, n = int(m.group(1)), int(m.group(2) or 1)
        out += list(range(start, start + max(n, 1)))
    return out


def partial_patch(task: Task, folder: Path) -> str:
    """The fix's first hunk alone, when the fix has more than one and that hunk does not pass the failing
    tests by itself (measured once, kept in the task's cache folder); else ""."""
    kept = folder / "partial.patch"
    if kept.exists():
        return kept.read_text()
    head, hunks = _hunks((folder / "fix.patch").read_text())[0]
    text = ""
    if len(hunks) > 1 or len(task.source) > 1:
        candidate = head + hunks[0]
        with tempfile.TemporaryDirectory(prefix="gep-real-") as tmp:
            work = Path(tmp) / "w"
            shutil.copytree(folder / "pre", work)
            (work.parent / "p.patch").write_text(candidate)
            if apply_patch(work, work.parent / "p.patch") and not run_tests(work, task, task.failing_tests)[0]:
                text = candidate
    kept.write_text(text)
    return text


GEP_TOML = """[gep]
validation = [{validation}]
transcript_max_age_hours = 0
log_globs = ["logs/*.log"]
"""


def build(task: Task, ws: Path, side: Path) -> dict[str, Any]:
    """The workspace at cycle 0 (committed) and the side folder with the failing tests; the agent's task file."""
    folder = materialize(task)
    shutil.rmtree(ws, ignore_errors=True)
    shutil.copytree(folder / "pre", ws)
    old = folder / "before" / task.test_file
    if old.exists():
        shutil.copytree(folder / "before", ws, dirs_exist_ok=True)
        check = ["python", "run_tests.py", "--pythonpath", task.pythonpath, *old_tests_args(task)]
    else:  # the fix commit brought the test file: the code must at least compile
        (ws / task.test_file).unlink()
        check = ["python", "-m", "compileall", "-q", *task.package]
    shutil.copy(RUNNER, ws / "run_tests.py")
    (ws / "logs").mkdir()
    (ws / "gep.toml").write_text(GEP_TOML.format(validation=json.dumps(" ".join(check))))
    (ws / "AGENTS.md").write_text(f"# {task.repo} at {task.parent[:12]}\nIts nightly job logs to logs/job.log.\n")
    (ws / ".gitignore").write_text("logs/\n__pycache__/\n.gep/\n")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"],
                 ["-c", "user.name=bench", "-c", "user.email=b@x", "commit", "-qm", "before the fix"]):
        subprocess.run(["git", *args], cwd=ws, check=True, capture_output=True)
    nightly = side / "nightly"
    shutil.rmtree(nightly, ignore_errors=True)
    nightly.mkdir(parents=True)
    for rel in (task.test_file, *task.helpers):
        if (folder / "pre" / rel).exists():
            (nightly / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(folder / "pre" / rel, nightly / rel)
    fix = (folder / "fix.patch").read_text()
    return {"id": task.id, "failing_tests": task.failing_tests, "test_file": task.test_file,
            "source": task.source, "fix_patch": fix, "partial_patch": partial_patch(task, folder),
            "touched_lines": touched_lines(fix)}


def nightly(task: Task, ws: Path, side: Path) -> tuple[bool, str]:
    """The nightly job: the fix commit's failing tests on the workspace's code (in a scratch copy)."""
    with tempfile.TemporaryDirectory(prefix="gep-real-") as tmp:
        work = Path(tmp) / "w"
        shutil.copytree(ws, work, ignore=shutil.ignore_patterns(".git", ".gep", "logs"))
        shutil.copytree(side / "nightly", work, dirs_exist_ok=True)
        return run_tests(work, task, task.failing_tests)


def tick(task: Task, ws: Path, side: Path, at: datetime, rng: random.Random) -> bool:
    """The job runs before a cycle and logs what the failing tests printed; True when they passed."""
    ok, out = nightly(task, ws, side)
    stamp = at.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    lines = [f"{stamp} {rng.choice(GENERIC)}"]
    if ok:
        lines.append(f"{stamp} INFO nightly: {len(task.failing_tests)} passed")
    else:
        lines += [f"{stamp} ERROR nightly: {line}" for line in out.splitlines() if line.startswith("FAILED ")]
        tb = [line for line in out.splitlines() if line.startswith("  File ")][-2:]
        lines += [f"{stamp} ERROR nightly: {line.strip()}" for line in tb]
    with (ws / "logs" / "job.log").open("a") as fh:
        fh.write("".join(line + "\n" for line in lines))
    return ok


# ------------------------------------------------------------------ one task under one arm


def _env(arm: str, task_json: Path, state: Path, seed: int, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEP_", "ANTHROPIC"))}
    env.update(ARMS[arm], GEP_BENCH_WORLD=str(task_json), GEP_BENCH_STATE=str(state), GEP_BENCH_SEED=str(seed),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}", HOME=str(home))
    if "GEP_REAL_SOURCES" in os.environ:
        env["GEP_REAL_SOURCES"] = os.environ["GEP_REAL_SOURCES"]
    return env


def _label(ws: Path, committed: list[tuple[int, str]], cycle: int, fixed: bool, at: datetime,
           rng: random.Random) -> None:
    """The person: labels changes committed LABEL_DELAY cycles ago, some of them, sometimes wrongly."""
    give_labels(ws, [(eid, fixed) for c, eid in committed if c == cycle - LABEL_DELAY], at, rng)


def run_task(arm: str, task: Task, seed: int, cycles: int, root: Path, t0: datetime = START) -> TaskRun:
    """One task and seed under one arm: ``cycles`` cycles an hour apart on a simulated clock."""
    from gep import CycleRequest, run_cycle

    started = time.perf_counter()
    base = root / arm / f"{task.id}-s{seed}"
    ws, side = base / "ws", base / "side"
    side.mkdir(parents=True, exist_ok=True)
    task_json = side / "task.json"
    task_json.write_text(json.dumps(build(task, ws, side)))
    state = side / "agent.jsonl"
    env = _env(arm, task_json, state, seed, side)
    cmd = f"{sys.executable} {AGENT} solve"
    run = TaskRun(arm=arm, task=task.id, repo=task.repo, seed=seed, cycles=cycles, fixed=False, first_fixed=None,
                  regressions=0)
    committed: list[tuple[int, str]] = []
    history: list[bool] = []
    fixed = False
    for c in range(cycles):
        at = t0 + timedelta(hours=c)
        rng = random.Random(f"tick:{task.id}:{seed}:{c}")  # the same draws in every arm
        fixed = tick(task, ws, side, at - timedelta(minutes=40), rng)
        _label(ws, committed, c, fixed, at - timedelta(minutes=30), rng)
        env["GEP_BENCH_TICK"] = str(c)
        event = run_cycle(CycleRequest(workspace=ws, seed=seed * 1000 + c, mutator="command", agent_cmd=cmd),
                          env=env, clock=_clock(at))
        status = event.outcome.status if event is not None else "skipped"
        run.statuses[status] = run.statuses.get(status, 0) + 1
        did = _agent_did(state, event.id if event else "")
        run.approaches[did["approach"]] = run.approaches.get(did["approach"], 0) + 1
        if event is not None and event.meta.commit:
            committed.append((c, event.id))
        fixed = nightly(task, ws, side)[0]
        history.append(fixed)
    run.fixed = fixed
    run.first_fixed = next((i for i, v in enumerate(history) if v), None)
    run.regressions = sum(1 for a, b in zip(history, history[1:], strict=False) if a and not b)
    run.seconds = time.perf_counter() - started
    return run


Job = tuple[str, str, int, int, str]


def _run_job(job: Job) -> TaskRun:
    arm, task_id, seed, cycles, root = job
    os.environ.setdefault("PREFECT_HOME", str(Path(root) / "prefect-home"))
    task = next(t for t in load_tasks() if t.id == task_id)
    try:
        return run_task(arm, task, seed, cycles, Path(root))
    except Exception as exc:  # noqa: BLE001 - one task's failure is reported, the run goes on
        print(f"real_world.py: {task_id} seed {seed} under {arm}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return TaskRun(arm=arm, task=task_id, repo=task.repo, seed=seed, cycles=cycles, fixed=False,
                       first_fixed=None, regressions=0, statuses={"bench_error": 1})


# ------------------------------------------------------------------ the analysis: paired by task and seed


def binom_two_sided(k: int, n: int) -> float:
    """Exact two-sided p of k or fewer successes (or as extreme the other way) in n fair coin flips."""
    if n == 0:
        return 1.0
    k = min(k, n - k)
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n)


def paired(runs: dict[str, list[TaskRun]], arm: str, base: str = "full") -> dict[str, Any]:
    """``base`` against ``arm``: an exact McNemar test over (task, seed) pairs, a sign test over tasks (each
    task's seeds fixed, compared), and a bootstrap 95% interval of the rate ratio resampling whole tasks."""
    a = {(r.task, r.seed): r.fixed for r in runs[base]}
    b = {(r.task, r.seed): r.fixed for r in runs[arm]}
    keys = sorted(a.keys() & b.keys())
    only_a = sum(1 for k in keys if a[k] and not b[k])
    only_b = sum(1 for k in keys if b[k] and not a[k])
    tasks = sorted({k[0] for k in keys})
    per = {t: (sum(a[k] for k in keys if k[0] == t), sum(b[k] for k in keys if k[0] == t)) for t in tasks}
    better = sum(1 for x, y in per.values() if x > y)
    worse = sum(1 for x, y in per.values() if y > x)
    rng = random.Random(7)
    ratios = []
    for _ in range(2000):
        pick = [tasks[rng.randrange(len(tasks))] for _ in tasks]
        sa, sb = sum(per[t][0] for t in pick), sum(per[t][1] for t in pick)
        ratios.append(sa / sb if sb else math.inf)
    ratios.sort()
    ra, rb = sum(a[k] for k in keys) / len(keys), sum(b[k] for k in keys) / len(keys)
    return {"arm": arm, "pairs": len(keys), "rate_base": ra, "rate_arm": rb,
            "ratio": ra / rb if rb else (math.inf if ra else math.nan), "only_base": only_a, "only_arm": only_b,
            "p_mcnemar": binom_two_sided(min(only_a, only_b), only_a + only_b), "tasks": len(tasks),
            "tasks_better": better, "tasks_worse": worse, "p_sign": binom_two_sided(min(better, worse), better + worse),
            "ci": (ratios[50], ratios[1949])}


def report(runs: dict[str, list[TaskRun]], out: Any = None) -> dict[str, Any]:
    w = (out or sys.stdout).write
    figures = {}
    w(f"{'arm':<8}{'pairs':>6}{'fixed':>6}{'rate':>7}{'cyc to fix':>11}{'regr':>5}  statuses\n")
    for arm, rs in runs.items():
        fixed = [r for r in rs if r.fixed]
        firsts = [r.first_fixed + 1 for r in fixed if r.first_fixed is not None]
        statuses: dict[str, int] = {}
        for r in rs:
            for k, v in r.statuses.items():
                statuses[k] = statuses.get(k, 0) + v
        figures[arm] = {"pairs": len(rs), "fixed": len(fixed), "rate": len(fixed) / max(1, len(rs)),
                        "cycles_to_fix": sum(firsts) / len(firsts) if firsts else None,
                        "regressions": sum(r.regressions for r in rs), "statuses": statuses}
        f = figures[arm]
        ctf = f"{f['cycles_to_fix']:.1f}" if f["cycles_to_fix"] else "-"
        w(f"{arm:<8}{f['pairs']:>6}{f['fixed']:>6}{f['rate']:>7.3f}{ctf:>11}{f['regressions']:>5}  "
          + ", ".join(f"{k} {v}" for k, v in sorted(statuses.items())) + "\n")
    comps = [paired(runs, arm) for arm in runs if arm != "full" and "full" in runs]
    for c in comps:
        w(f"\nfull against {c['arm']}: {c['rate_base']:.3f} vs {c['rate_arm']:.3f} (ratio {c['ratio']:.2f}, "
          f"task-bootstrap 95% CI {c['ci'][0]:.2f}-{c['ci'][1]:.2f})\n"
          f"  McNemar over {c['pairs']} task-seed pairs: full only {c['only_base']}, {c['arm']} only "
          f"{c['only_arm']}, p = {c['p_mcnemar']:.4f}\n"
          f"  sign test over {c['tasks']} tasks: full better on {c['tasks_better']}, worse on {c['tasks_worse']}, "
          f"p = {c['p_sign']:.4f}\n")
    by_task: dict[str, dict[str, int]] = {}
    for arm, rs in runs.items():
        for r in rs:
            by_task.setdefault(r.task, {}).setdefault(arm, 0)
            by_task[r.task][arm] += r.fixed
    w("\nseeds fixed per task: " + "; ".join(
        f"{t} " + "/".join(str(v.get(a, 0)) for a in runs) for t, v in sorted(by_task.items())) + "\n")
    return {"figures": figures, "comparisons": comps, "by_task": by_task}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default="all", help="all, a count (the first N) or comma-separated task ids")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1, help="first seed")
    ap.add_argument("--cycles", type=int, default=6)
    ap.add_argument("--arms", default="full,off", help=f"comma-separated: {', '.join(ARMS)}")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", type=Path, help="write the figures here")
    ap.add_argument("--keep", type=Path, help="keep the workspaces here (default: a temporary folder)")
    args = ap.parse_args(argv)
    tasks = load_tasks()
    if args.tasks.isdigit():
        tasks = tasks[:int(args.tasks)]
    elif args.tasks != "all":
        wanted = [t.strip() for t in args.tasks.split(",") if t.strip()]
        unknown = [t for t in wanted if t not in {x.id for x in tasks}]
        if unknown:
            print(f"real_world.py: unknown task {unknown[0]!r}", file=sys.stderr)
            return 2
        tasks = [t for t in tasks if t.id in wanted]
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    if [a for a in arms if a not in ARMS] or not tasks:
        print(f"real_world.py: arms are {', '.join(ARMS)}; tasks: {args.tasks!r}", file=sys.stderr)
        return 2
    try:
        for t in tasks:
            materialize(t)
    except SourceMissing as exc:
        print(f"real_world.py: {exc}", file=sys.stderr)
        return 2
    root = args.keep or Path(tempfile.mkdtemp(prefix="gep-real-world-"))
    jobs: list[Job] = [(arm, t.id, s, args.cycles, str(root)) for s in range(args.seed, args.seed + args.seeds)
                       for t in tasks for arm in arms]
    print(f"{len(tasks)} real tasks from {len({t.repo for t in tasks})} repositories x {args.seeds} seeds x "
          f"{args.cycles} cycles, arms {', '.join(arms)}: {len(jobs) * args.cycles} cycles on {args.jobs} processes")
    t0 = time.perf_counter()
    runs: dict[str, list[TaskRun]] = {a: [] for a in arms}
    try:
        if args.jobs > 1:
            with ProcessPoolExecutor(args.jobs) as pool:
                for r in pool.map(_run_job, jobs):
                    runs[r.arm].append(r)
        else:
            for job in jobs:
                r = _run_job(job)
                runs[r.arm].append(r)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    wall = time.perf_counter() - t0
    finish_run(report(runs), runs, args, wall, len(jobs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
