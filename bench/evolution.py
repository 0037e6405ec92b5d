"""The whole loop, with and without learning: does running the engine make a workspace better?

Each task is one problem of one seeded world (bench/evolution_world.py: small Python projects whose nightly job
keeps logging the problems it hits, in ISO, Python logging, syslog or JSON-lines format, with generic warnings
beside the errors, problems arriving later, fixes that do not hold and people who correct the agent). Every arm
runs the same worlds and seeds, cycle after cycle, through the real engine (``gep.run_cycle`` in command mode:
real git clone, the agent as a subprocess, validation in the sandbox, commit), with the scripted solver of
bench/evolution_agent.py as the agent (or ``--replay DIR`` of a real agent's recorded diffs, or ``--agent-cmd
CMD --record DIR`` to record one). Between cycles the job runs again (new log lines), and a person labels
committed changes two cycles late, 60% of them, wrongly one time in five.

Ground truth comes from the world (the problem's code run on the job's input and a rare one), never from the
engine's verdicts. A task counts as a verified fix when its problem's code is really fixed at the end of the run.

Arms: ``full`` (the engine as it ships); ``off`` (``learning = "off"``: the plain engine); ``fresh`` (the full
engine with an empty store before every cycle); ``no_<mechanism>`` (``learning_off = [mechanism]``) for each
mechanism of gep/core/learning_switch.py but ``context`` (agent sessions only); ``reference_prompt`` (no lessons,
recent outcomes, capsule, avoid lines or session context: the prompt the reference builds).
Tasks are paired across arms; each arm is compared with ``full`` by an exact McNemar test over the tasks whose
outcome differs, with a bootstrap 95% confidence interval of the ratio of verified-fix rates.

Run: ``.venv/bin/python bench/evolution.py [--quick] [--worlds 8] [--seeds 2] [--cycles 16] [--arms full,off|all]
[--jobs 2] [--json FILE]``; ``make bench`` runs the default configuration.
``--world real [--tasks N] ...`` runs bench/real_world.py instead: bug-fix tasks of public repositories.
Target (issue 29): full beats off by >= 1.3x verified-fix rate with p < 0.01.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from evolution_world import World, build, make_world, tick, truth  # noqa: E402 - beside this file

AGENT = Path(__file__).resolve().parent / "evolution_agent.py"
# every mechanism of gep/core/learning_switch.py that reaches a cycle; "context" only reaches agent sessions (the
# SessionStart hook), which the scripted agent does not have, so its arm would equal full and is not run
MECHANISMS = ("memory_graph", "feedback", "bans", "verdicts", "lessons", "capsules", "recent_outcomes", "drift",
              "dominance_cap", "avoid", "problem_memory")
ARMS: dict[str, dict[str, str]] = {
    "full": {}, "off": {"GEP_LEARNING": "off"}, "fresh": {},
    **{f"no_{m}": {"GEP_LEARNING_OFF": m} for m in MECHANISMS},
    "reference_prompt": {"GEP_LEARNING_OFF": "lessons,recent_outcomes,capsules,avoid,context"},
}
TARGET_RATIO, TARGET_P = 1.3, 0.01
START = datetime(2026, 1, 1, tzinfo=UTC)  # run_world's default clock start (main passes today's)
LABEL_SHARE, LABEL_WRONG, LABEL_DELAY = 0.6, 0.2, 2  # the person: who labels, how wrongly, how late


@dataclass
class TaskResult:
    world: str
    seed: int
    problem: str
    arrives: int
    fixed: bool  # really fixed at the end (the world's truth)
    first_fixed: int | None  # the cycle after which it first was
    regressions: int  # times its code went from fixed to not fixed
    did_not_hold: int  # partial fixes committed (the error came back, or would)


@dataclass
class RunResult:
    arm: str
    world: str
    seed: int
    cycles: int
    tasks: list[TaskResult] = field(default_factory=list)
    open_per_cycle: list[int] = field(default_factory=list)
    statuses: dict[str, int] = field(default_factory=dict)
    approaches: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    tokens: int = 0  # what a real agent reported it used (Claude Code's usage block); 0 for the scripted one


# ------------------------------------------------------------------ one world under one arm


def _env(arm: str, world_json: Path, state: Path, seed: int, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEP_", "ANTHROPIC"))}
    env.update(ARMS[arm], GEP_BENCH_WORLD=str(world_json), GEP_BENCH_STATE=str(state), GEP_BENCH_SEED=str(seed),
               GEP_BENCH_CAREFUL=os.environ.get("GEP_BENCH_CAREFUL", "0"),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}", HOME=str(home))
    return env


def _label(ws: Path, world: World, committed: list[tuple[int, str, str]], cycle: int, at: datetime,
           rng: random.Random) -> None:
    """The person: labels changes committed LABEL_DELAY cycles ago, some of them, sometimes wrongly."""
    from gep.learning.feedback import FeedbackError
    from gep.learning.human_verdicts import give_feedback
    from gep.store import Store

    due = [(c, eid, target) for c, eid, target in committed if c == cycle - LABEL_DELAY]
    if not due:
        return
    now = truth(world, ws, cycle)
    with Store.for_workspace(ws) as store:
        for _, eid, target in due:
            if rng.random() >= LABEL_SHARE:
                continue
            good = now.get(target) == "fix"
            if rng.random() < LABEL_WRONG:
                good = not good
            try:
                give_feedback(store, eid, "helpful" if good else "not_helpful", now=at, author="bench-person")
            except FeedbackError:  # the fresh arm's store forgot the event: the label has nowhere to land
                continue


def run_world(arm: str, index: int, seed: int, cycles: int, root: Path, agent_cmd: str | None = None,
              t0: datetime | None = None) -> RunResult:
    """One world and seed under one arm: ``cycles`` cycles an hour apart (simulated clock from ``t0``)."""
    from gep import CycleRequest, run_cycle

    started = time.perf_counter()
    world = make_world(index, seed, cycles)
    base = root / arm / f"{world.name}-s{seed}"
    ws, side = base / "ws", base / "side"
    side.mkdir(parents=True, exist_ok=True)
    build(world, ws)
    world_json = side / "world.json"
    world_json.write_text(json.dumps(world.to_json()))
    state = side / "agent.jsonl"
    env = _env(arm, world_json, state, seed, side)
    cmd = agent_cmd or f"{sys.executable} {AGENT} solve"
    result = RunResult(arm=arm, world=world.name, seed=seed, cycles=cycles)
    before = truth(world, ws, 0)
    history: dict[str, list[str]] = {p.name: [] for p in world.problems}
    committed: list[tuple[int, str, str]] = []
    for c in range(cycles):
        at = (t0 or START) + timedelta(hours=c)
        rng = random.Random(f"tick:{index}:{seed}:{c}")  # the same draws in every arm
        tick(world, ws, c, at - timedelta(minutes=40), rng)
        _label(ws, world, committed, c, at - timedelta(minutes=30), rng)
        if arm == "fresh":
            shutil.rmtree(ws / ".gep", ignore_errors=True)
        env["GEP_BENCH_TICK"] = str(c)  # the agent's draws are keyed by it (bench/evolution_agent.py, rule 4)
        event = run_cycle(CycleRequest(workspace=ws, seed=seed * 1000 + c, mutator="command", agent_cmd=cmd),
                          env=env, clock=_clock(at))
        status = event.outcome.status if event is not None else "skipped"
        result.statuses[status] = result.statuses.get(status, 0) + 1
        did = _agent_did(state, event.id if event else "")
        result.approaches[did["approach"]] = result.approaches.get(did["approach"], 0) + 1
        result.tokens += int(did.get("tokens") or 0)
        if event is not None and event.meta.commit and did.get("target"):
            committed.append((c, event.id, did["target"]))
        now = truth(world, ws, c)
        for p in world.problems:
            if p.arrives <= c:
                history[p.name].append(now[p.name])
        result.open_per_cycle.append(sum(1 for v in now.values() if v != "fix"))
    del before
    for p in world.problems:
        seq = history[p.name]
        first = next((i for i, v in enumerate(seq) if v == "fix"), None)
        regress = sum(1 for a, b in zip(seq, seq[1:], strict=False) if a == "fix" and b != "fix")
        unheld = sum(1 for a, b in zip(seq, seq[1:], strict=False) if b == "partial" and a != "partial")
        result.tasks.append(TaskResult(world=world.name, seed=seed, problem=p.name, arrives=p.arrives,
                                       fixed=bool(seq) and seq[-1] == "fix",
                                       first_fixed=None if first is None else first + p.arrives,
                                       regressions=regress, did_not_hold=unheld))
    result.seconds = time.perf_counter() - started
    return result


def _clock(at: datetime) -> Callable[[], datetime]:
    return lambda: at


def _agent_did(state: Path, cycle_id: str) -> dict[str, Any]:  # JSON edge: the agent's own line
    if state.exists():
        for line in reversed(state.read_text().splitlines()):
            rec = json.loads(line)
            if rec.get("cycle") == cycle_id:
                return dict(rec)
    return {"approach": "not_run", "target": ""}


Job = tuple[str, int, int, int, str, str | None, datetime]


def _run_job(job: Job) -> RunResult:
    arm, index, seed, cycles, root, agent_cmd, t0 = job
    os.environ.setdefault("PREFECT_HOME", str(Path(root) / "prefect-home"))
    return run_world(arm, index, seed, cycles, Path(root), agent_cmd, t0)


# ------------------------------------------------------------------ statistics (stdlib only)


def binom_two_sided(k: int, n: int) -> float:
    """Exact two-sided p of k or fewer (or as extreme the other way) successes in n fair coin flips."""
    if n == 0:
        return 1.0
    k = min(k, n - k)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def mcnemar(a: Sequence[bool], b: Sequence[bool]) -> tuple[int, int, float]:
    """Over paired tasks: (a fixed and b not, b fixed and a not, exact two-sided p)."""
    ab = sum(1 for x, y in zip(a, b, strict=True) if x and not y)
    ba = sum(1 for x, y in zip(a, b, strict=True) if y and not x)
    return ab, ba, binom_two_sided(min(ab, ba), ab + ba)


def ratio_ci(a: Sequence[bool], b: Sequence[bool], reps: int = 2000, seed: int = 7) -> tuple[float, float]:
    """Bootstrap 95% interval of rate(a) / rate(b) over paired tasks (resampled together)."""
    rng = random.Random(seed)
    n = len(a)
    ratios = []
    for _ in range(reps):
        idx = [rng.randrange(n) for _ in range(n)]
        sa, sb = sum(a[i] for i in idx), sum(b[i] for i in idx)
        ratios.append(sa / sb if sb else math.inf)
    ratios.sort()
    return ratios[int(0.025 * reps)], ratios[int(0.975 * reps) - 1]


def tasks_needed(p_base: float, ratio: float, discordant: float, alpha: float = TARGET_P,
                 power: float = 0.8) -> int:
    """Paired tasks for an exact McNemar at ``alpha`` (two-sided) to detect rate ``p_base * ratio`` against
    ``p_base`` with ``power``, given the share of discordant tasks (Connor 1987's normal approximation)."""
    from statistics import NormalDist

    z = NormalDist()
    delta = p_base * (ratio - 1)
    psi = max(discordant, delta + 1e-9)
    za, zb = z.inv_cdf(1 - alpha / 2), z.inv_cdf(power)
    return math.ceil((za * math.sqrt(psi) + zb * math.sqrt(psi - delta ** 2)) ** 2 / delta ** 2)


# ------------------------------------------------------------------ the run and its table


def arm_figures(runs: Sequence[RunResult]) -> dict[str, Any]:  # JSON edge: one arm's figures
    tasks = [t for r in runs for t in r.tasks]
    fixed = sum(t.fixed for t in tasks)
    cycles = sum(r.cycles for r in runs)
    tokens = sum(r.tokens for r in runs)
    return {"tasks": len(tasks), "verified": fixed, "rate": fixed / len(tasks) if tasks else 0.0,
            "regressions": sum(t.regressions for t in tasks), "did_not_hold": sum(t.did_not_hold for t in tasks),
            "cycles_per_fix": cycles / fixed if fixed else math.inf,
            "open_per_cycle": statistics.fmean(x for r in runs for x in r.open_per_cycle),
            "seconds": sum(r.seconds for r in runs), "tokens": tokens,
            "tokens_per_fix": tokens / fixed if tokens and fixed else None}


def _key(t: TaskResult) -> tuple[str, int, str]:
    return t.world, t.seed, t.problem


def compare(results: dict[str, list[RunResult]], arm: str, base: str = "full") -> dict[str, Any]:
    """Paired comparison of ``base`` with ``arm`` over the same tasks."""
    a = {_key(t): t.fixed for r in results[base] for t in r.tasks}
    b = {_key(t): t.fixed for r in results[arm] for t in r.tasks}
    keys = sorted(a.keys() & b.keys())
    xa, xb = [a[k] for k in keys], [b[k] for k in keys]
    only_a, only_b, p = mcnemar(xa, xb)
    ra, rb = sum(xa) / len(keys), sum(xb) / len(keys)
    lo, hi = ratio_ci(xa, xb)
    ratio = ra / rb if rb else (math.inf if ra else math.nan)
    return {"arm": arm, "tasks": len(keys), "rate_base": ra, "rate_arm": rb, "ratio": ratio,
            "ci": (lo, hi), "only_base": only_a, "only_arm": only_b, "p": p}


def report(results: dict[str, list[RunResult]], out: Any = None) -> dict[str, Any]:
    figures = {arm: arm_figures(runs) for arm, runs in results.items()}
    w = (out or sys.stdout).write
    w(f"{'arm':<22}{'tasks':>6}{'fixed':>6}{'rate':>7}{'regr':>6}{'unheld':>7}{'cyc/fix':>8}{'open/cyc':>9}\n")
    for arm, f in figures.items():
        w(f"{arm:<22}{f['tasks']:>6}{f['verified']:>6}{f['rate']:>7.3f}{f['regressions']:>6}{f['did_not_hold']:>7}"
          f"{f['cycles_per_fix']:>8.1f}{f['open_per_cycle']:>9.2f}\n")
    if any(f["tokens"] for f in figures.values()):  # a real agent's run (recorded or replayed)
        w("tokens per verified fix (the agent's own usage report): " + "; ".join(
            f"{arm} {f['tokens_per_fix']:,.0f}" if f["tokens_per_fix"] else f"{arm} {f['tokens']:,} for no fix"
            for arm, f in figures.items()) + "\n")
    comps = [compare(results, arm) for arm in results if arm != "full" and "full" in results]
    if comps:
        w("\npaired against full (exact McNemar over tasks; bootstrap 95% CI of the rate ratio full / arm)\n")
        w(f"{'arm':<22}{'full':>7}{'arm':>7}{'ratio':>7}{'95% CI':>16}{'full only':>10}{'arm only':>9}{'p':>9}\n")
        for c in comps:
            ci = f"{c['ci'][0]:.2f}-{c['ci'][1]:.2f}"
            w(f"{c['arm']:<22}{c['rate_base']:>7.3f}{c['rate_arm']:>7.3f}{c['ratio']:>7.2f}{ci:>16}"
              f"{c['only_base']:>10}{c['only_arm']:>9}{c['p']:>9.4f}\n")
    verdict = None
    off = next((c for c in comps if c["arm"] == "off"), None)
    if off is not None:
        ok = off["ratio"] >= TARGET_RATIO and off["p"] < TARGET_P
        verdict = "PASS" if ok else "FAIL"
        w(f"\ntarget: full / off >= {TARGET_RATIO} with p < {TARGET_P}: {off['ratio']:.2f}, p = {off['p']:.4f}: "
          f"{verdict}\n")
        disc = (off["only_base"] + off["only_arm"]) / max(1, off["tasks"])
        if off["rate_arm"] > 0 and disc > 0:
            need = tasks_needed(off["rate_arm"], TARGET_RATIO, disc)
            w(f"power (measured off rate {off['rate_arm']:.2f}, discordant share {disc:.2f}): {need} paired tasks "
              f"detect {TARGET_RATIO}x at p < {TARGET_P} with power 0.8; this run had {off['tasks']}\n")
            if off["rate_base"] > off["rate_arm"]:
                seen = tasks_needed(off["rate_arm"], off["rate_base"] / off["rate_arm"], disc)
                w(f"  ... and {seen} detect the difference measured here ({off['ratio']:.2f}x)\n")
    return {"figures": figures, "comparisons": comps, "verdict": verdict}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:2] == ["--world", "real"]:  # the real tasks (bench/real_world.py), with that module's options
        from real_world import main as real_main
        return real_main(argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world", choices=["written"], default="written", help="'--world real' (given first, with "
                    "bench/real_world.py's options): bug-fix tasks of public repositories instead")
    ap.add_argument("--quick", action="store_true", help="2 worlds, 1 seed, 3 cycles, arms full and off")
    ap.add_argument("--worlds", type=int, default=8)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1, help="first seed")
    ap.add_argument("--cycles", type=int, default=16)
    ap.add_argument("--arms", default="full,off", help=f"comma-separated, or 'all': {', '.join(ARMS)}")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--agent-cmd", help="a real agent instead of the scripted solver (with --record DIR)")
    ap.add_argument("--record", type=Path, help="save each prompt and the diff the real agent made")
    ap.add_argument("--replay", type=Path, help="play recorded diffs back for matching prompts")
    ap.add_argument("--json", type=Path, help="write the figures here")
    ap.add_argument("--careful-agent", action="store_true",
                    help="the scripted solver leaves an already fixed function alone (rule 5)")
    ap.add_argument("--keep", type=Path, help="keep the workspaces here (default: a temporary folder)")
    args = ap.parse_args(argv)
    if args.quick:
        args.worlds, args.seeds, args.cycles, args.arms = 2, 1, 3, "full,off"
    arms = list(ARMS) if args.arms == "all" else [a.strip() for a in args.arms.split(",") if a.strip()]
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        print(f"bench/evolution.py: unknown arm {unknown[0]!r} (known: {', '.join(ARMS)})", file=sys.stderr)
        return 2
    agent = None
    if args.replay:
        agent = f"{sys.executable} {AGENT} replay {args.replay.resolve()}"
    elif args.agent_cmd:
        if not args.record:
            print("bench/evolution.py: --agent-cmd needs --record DIR", file=sys.stderr)
            return 2
        agent = f"{sys.executable} {AGENT} record {args.record.resolve()} -- {args.agent_cmd}"
    if args.careful_agent:
        os.environ["GEP_BENCH_CAREFUL"] = "1"  # the workers and the agent they run inherit it
    root = args.keep or Path(tempfile.mkdtemp(prefix="gep-evolution-"))
    # arms interleaved: each world and seed runs under every arm before the next one starts
    start = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(days=2)
    jobs: list[Job] = [(arm, w, s, args.cycles, str(root), agent, start) for s in range(args.seed, args.seed + args.seeds)
            for w in range(args.worlds) for arm in arms]
    problems = sum(len(make_world(w, s, args.cycles).problems) for s in range(args.seed, args.seed + args.seeds)
                   for w in range(args.worlds))
    print(f"{args.worlds} worlds x {args.seeds} seeds x {args.cycles} cycles, arms {', '.join(arms)}: "
          f"{problems} paired tasks, {len(jobs) * args.cycles} cycles on {args.jobs} processes")
    print(f"power (planning: off rate 0.40, discordant share 0.30): {tasks_needed(0.40, TARGET_RATIO, 0.30)} "
          f"paired tasks detect {TARGET_RATIO}x at p < {TARGET_P} with power 0.8")
    t0 = time.perf_counter()
    results: dict[str, list[RunResult]] = {a: [] for a in arms}
    try:
        if args.jobs > 1:
            with ProcessPoolExecutor(args.jobs) as pool:
                for r in pool.map(_run_job, jobs):
                    results[r.arm].append(r)
        else:
            for job in jobs:
                r = _run_job(job)
                results[r.arm].append(r)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    wall = time.perf_counter() - t0
    summary = report(results)
    approaches: dict[str, dict[str, int]] = {}
    for arm, runs in results.items():
        for r in runs:
            for k, v in r.approaches.items():
                approaches.setdefault(arm, {}).setdefault(k, 0)
                approaches[arm][k] += v
    print("\nagent approaches per arm: " + "; ".join(
        f"{arm}: " + ", ".join(f"{k} {v}" for k, v in sorted(a.items())) for arm, a in approaches.items()))
    print(f"wall time {wall:.0f} s ({wall / max(1, len(jobs) * args.cycles):.2f} s a cycle over {args.jobs} "
          f"processes)")
    if args.json:
        args.json.write_text(json.dumps({**summary, "runs": {a: [asdict(r) for r in rs] for a, rs in results.items()},
                                         "wall_s": wall, "args": {k: str(v) for k, v in vars(args).items()}},
                                        indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
