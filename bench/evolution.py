"""The whole loop, with and without learning: does running the engine make a workspace better?

Each task is one problem of one seeded world of a suite (bench/evolution_world.py: small Python projects whose nightly job
keeps logging the problems it hits, in ISO, Python logging, syslog or JSON-lines format, with generic warnings
beside the errors, problems arriving later, fixes that do not hold and people who correct the agent). Every arm
runs the same worlds and seeds, cycle after cycle, through the real engine (``gep.run_cycle`` in command mode:
real git clone, the agent as a subprocess, validation in the sandbox, commit), with the scripted solver of
bench/evolution_agent.py as the agent (or ``--replay DIR`` of a real agent's recorded diffs, or ``--agent-cmd
CMD --record DIR`` to record one). Between cycles the job runs again (new log lines), and a person labels
committed changes two cycles late, 60% of them, wrongly one time in five.

Ground truth comes from the world (the problem's code run on the job's input and a rare one), never from the
engine's verdicts. A task counts as a verified fix when its problem's code is really fixed at the end of the run.

Arms: ``full`` (the engine as it ships); ``off`` (``learning = "off"``: the plain engine); ``off_warnings`` (the
plain engine that also chases every new warning line, ``warning_signals``: the skeptic's baseline); ``full_warnings``
(``full`` with ``warning_signals``); ``fresh`` (the full
engine with an empty store before every cycle); ``no_<mechanism>`` (``learning_off = [mechanism]``) for each
mechanism of gep/core/learning_switch.py but ``context`` (agent sessions only); ``with_<mechanism>``
(``learning_on = [mechanism]``) for an experimental one, off in ``full``; ``reference_prompt`` (no lessons,
recent outcomes, capsule, avoid lines or session context: the prompt the reference builds).
Suites (docs/evaluation.md, "The suites"): ``classic``, ``kinds``, ``lesson``, ``capsule``, ``feedback``,
``families`` (a kind recurring in three functions), ``unseen`` (feedback's worlds where a silenced
function logs nothing), each built for a mechanism; ``--mechanism-arms`` adds each suite's own ablation arms
there. The unit of analysis is the world-seed (its tasks share one run): each arm is compared with ``full``
over the world-seeds both ran by a paired sign-flip permutation test, with a cluster-bootstrap 95% interval
and the smallest effect the run could detect, on verified fixes and on agent attempts per verified fix.

Run: ``.venv/bin/python bench/evolution.py [--quick] [--suites classic|all] [--worlds 8] [--seeds 3]
[--cycles 16] [--arms full,off|all] [--mechanism-arms] [--jobs 2] [--json FILE]``; ``make bench`` runs the
default configuration.
``--world real [--tasks N] ...`` runs bench/real_world.py instead: bug-fix tasks of public repositories.
Target (issue 41): against the competent off, full shows >= 1.3x verified fixes or <= 0.7x attempts per
verified fix, p < 0.01 by world-seed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from evolution_world import SUITES, World, build, make_world, tick, truth, write_genes  # noqa: E402 - beside this file

AGENT = Path(__file__).resolve().parent / "evolution_agent.py"
# every mechanism of gep/core/learning_switch.py that reaches a cycle; "context" only reaches agent sessions (the
# SessionStart hook), which the scripted agent does not have, so its arm would equal full and is not run
MECHANISMS = ("memory_graph", "feedback", "bans", "verdicts", "recent_outcomes", "drift", "dominance_cap", "avoid")
EXPERIMENTAL = ("problem_memory", "lessons", "capsules")  # off in full (gep.core.learning_switch.EXPERIMENTAL): its arm switches it on
ARMS: dict[str, dict[str, str]] = {
    "full": {}, "off": {"GEP_LEARNING": "off"}, "fresh": {},
    # the skeptic's baseline: no memory, but every new warning line chased like an error line (docs/evaluation.md)
    "off_warnings": {"GEP_LEARNING": "off", "GEP_WARNING_SIGNALS": "1"},
    # the full engine that also reads every new warning line (is the skeptic's idea worth keeping? issue 41)
    "full_warnings": {"GEP_WARNING_SIGNALS": "1"},
    **{f"no_{m}": {"GEP_LEARNING_OFF": m} for m in MECHANISMS},
    **{f"with_{m}": {"GEP_LEARNING_ON": m} for m in EXPERIMENTAL},
    "reference_prompt": {"GEP_LEARNING_OFF": "lessons,recent_outcomes,capsules,avoid,context"},
}
TARGET_RATIO, TARGET_COST, TARGET_P = 1.3, 0.7, 0.01
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
    suite: str = "classic"
    tasks: list[TaskResult] = field(default_factory=list)
    open_per_cycle: list[int] = field(default_factory=list)
    statuses: dict[str, int] = field(default_factory=dict)
    approaches: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    tokens: int = 0  # what a real agent reported it used (Claude Code's usage block); 0 for the scripted one
    attempts: int = 0  # agent runs that targeted one of the world's functions (repair attempts)

    @property
    def verified(self) -> int:
        return sum(t.fixed for t in self.tasks)


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
    due = [(eid, target) for c, eid, target in committed if c == cycle - LABEL_DELAY]
    if due:
        now = truth(world, ws, cycle)
        give_labels(ws, [(eid, now.get(target) == "fix") for eid, target in due], at, rng)


def give_labels(ws: Path, due: list[tuple[str, bool]], at: datetime, rng: random.Random) -> None:
    """Labels some of ``due`` (event id, whether its problem is really fixed now): LABEL_SHARE of them, wrongly
    LABEL_WRONG of the time, as `gep feedback` records them (real_world.py's person too)."""
    from gep.learning.feedback import FeedbackError
    from gep.learning.human_verdicts import give_feedback
    from gep.store import Store

    with Store.for_workspace(ws) as store:
        for eid, fixed in due:
            if rng.random() >= LABEL_SHARE:
                continue
            good = fixed if rng.random() >= LABEL_WRONG else not fixed
            try:
                give_feedback(store, eid, "helpful" if good else "not_helpful", now=at, author="bench-person")
            except FeedbackError:  # the fresh arm's store forgot the event: the label has nowhere to land
                continue


def run_world(arm: str, index: int, seed: int, cycles: int, root: Path, agent_cmd: str | None = None,
              t0: datetime | None = None, suite: str = "classic") -> RunResult:
    """One world and seed under one arm: ``cycles`` cycles an hour apart (simulated clock from ``t0``)."""
    from gep import CycleRequest, run_cycle

    started = time.perf_counter()
    world = make_world(index, seed, cycles, suite)
    base = root / arm / f"{world.name}-s{seed}"
    ws, side = base / "ws", base / "side"
    side.mkdir(parents=True, exist_ok=True)
    build(world, ws)
    world_json = side / "world.json"
    world_json.write_text(json.dumps(world.to_json()))
    state = side / "agent.jsonl"
    env = _env(arm, world_json, state, seed, side)
    cmd = agent_cmd or f"{sys.executable} {AGENT} solve"
    result = RunResult(arm=arm, world=world.name, seed=seed, cycles=cycles, suite=suite)
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
            write_genes(world, ws)  # the world's genes are the workspace's, not the store's
        env["GEP_BENCH_TICK"] = str(c)  # the agent's draws are keyed by it (bench/evolution_agent.py, rule 4)
        event = run_cycle(CycleRequest(workspace=ws, seed=seed * 1000 + c, mutator="command", agent_cmd=cmd),
                          env=env, clock=_clock(at))
        status = event.outcome.status if event is not None else "skipped"
        result.statuses[status] = result.statuses.get(status, 0) + 1
        did = _agent_did(state, event.id if event else "")
        result.approaches[did["approach"]] = result.approaches.get(did["approach"], 0) + 1
        result.tokens += int(did.get("tokens") or 0)
        result.attempts += 1 if did.get("target") else 0
        if event is not None and event.meta.commit and did.get("target"):
            committed.append((c, event.id, did["target"]))
        now = truth(world, ws, c)
        for p in world.problems:
            if p.arrives <= c:
                history[p.name].append(now[p.name])
        result.open_per_cycle.append(sum(1 for v in now.values() if v != "fix"))
        with (side / "trace.jsonl").open("a") as fh:  # per cycle, to trace a run kept with --keep
            fh.write(json.dumps({"cycle": c, "status": status, "target": did.get("target", ""),
                                 "approach": did.get("approach"), "event": event.id if event else None,
                                 "gene": event.gene_id if event else None,
                                 "signals": event.signals if event else [], "truth": now}) + "\n")
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


Job = tuple[str, int, int, int, str, str | None, datetime, str]


def _run_job(job: Job) -> RunResult:
    arm, index, seed, cycles, root, agent_cmd, t0, suite = job
    os.environ.setdefault("PREFECT_HOME", str(Path(root) / "prefect-home"))
    return run_world(arm, index, seed, cycles, Path(root) / suite, agent_cmd, t0, suite)


# ------------------------------------------------------------------ statistics (stdlib only), by world-seed
#
# Tasks of one world and seed share a run (one engine, one store, one agent's history): they are not independent.
# The unit of every test and interval is the world-seed (one world under one seed, in one suite), paired across
# arms (the same world, seed and ticks).


def sign_flip_p(diffs: Sequence[float], reps: int = 20_000, seed: int = 7) -> float:
    """Two-sided p of a paired sign-flip permutation test that the mean of ``diffs`` is 0: every pattern of
    signs up to 16 pairs (exact), else ``reps`` random patterns."""
    n, obs = len(diffs), abs(sum(diffs))
    if n == 0 or obs == 0:
        return 1.0
    if n <= 16:
        hits = sum(1 for mask in range(2 ** n)
                   if abs(sum(-d if mask >> i & 1 else d for i, d in enumerate(diffs))) >= obs - 1e-9)
        return hits / 2 ** n
    rng = random.Random(seed)
    hits = sum(1 for _ in range(reps) if abs(sum(d if rng.random() < .5 else -d for d in diffs)) >= obs - 1e-9)
    return (hits + 1) / (reps + 1)


def cluster_ci(n: int, stat: Callable[[list[int]], float], reps: int = 2000,
               seed: int = 7) -> tuple[float, float]:
    """Bootstrap 95% interval of ``stat`` over ``n`` world-seeds resampled with replacement (each drawn
    world-seed keeps all of its tasks and both arms' figures together)."""
    rng = random.Random(seed)
    values = sorted(stat([rng.randrange(n) for _ in range(n)]) for _ in range(reps))
    return values[int(0.025 * reps)], values[int(0.975 * reps) - 1]


def _ratio(x: float, y: float) -> float:
    return x / y if y else (math.inf if x else 1.0)


def cluster_ratio_ci(a: Sequence[float], b: Sequence[float], reps: int = 2000,
                     seed: int = 7) -> tuple[float, float]:
    """Bootstrap 95% interval of sum(a) / sum(b), resampling world-seeds (pairs ``a[i], b[i]``) together."""
    return cluster_ci(len(a), lambda idx: _ratio(sum(a[i] for i in idx), sum(b[i] for i in idx)), reps, seed)


def min_detectable(diffs: Sequence[float], alpha: float = 0.01, power: float = 0.8) -> float:
    """The smallest mean paired difference a two-sided test at ``alpha`` detects with ``power``, given the
    spread of ``diffs`` (normal approximation: (z(1 - alpha/2) + z(power)) * sd / sqrt(n))."""
    from statistics import NormalDist

    if len(diffs) < 2:
        return math.inf
    z = NormalDist()
    return (z.inv_cdf(1 - alpha / 2) + z.inv_cdf(power)) * statistics.stdev(diffs) / math.sqrt(len(diffs))


def _cost(r: RunResult) -> float:
    """A world-seed's attempts per verified fix, smoothed (+1 each) and logged for the paired test."""
    return math.log((r.attempts + 1) / (r.verified + 1))


def _unit(r: RunResult) -> tuple[str, str, int]:
    return r.suite, r.world, r.seed


def compare(results: dict[str, list[RunResult]], arm: str, base: str = "full",
            suite: str | None = None) -> dict[str, Any] | None:
    """``base`` against ``arm`` over the world-seeds both ran (of ``suite``, or all): verified fixes and
    attempts per verified fix, each with a cluster-bootstrap interval, a paired sign-flip p and the smallest
    effect the run could detect (p < 0.01, power 0.8)."""
    a = {_unit(r): r for r in results.get(base, []) if suite in (None, r.suite)}
    b = {_unit(r): r for r in results.get(arm, []) if suite in (None, r.suite)}
    keys = sorted(a.keys() & b.keys())
    if not keys:
        return None
    fa, fb = [a[k].verified for k in keys], [b[k].verified for k in keys]
    ta, tb = [a[k].attempts for k in keys], [b[k].attempts for k in keys]
    diffs = [x - y for x, y in zip(fa, fb, strict=True)]
    mde = min_detectable(diffs)
    mean_b = sum(fb) / len(keys)
    apf_a, apf_b = sum(ta) / max(1, sum(fa)), sum(tb) / max(1, sum(fb))
    # attempts per fix as a ratio of ratios: resample world-seeds, attempts and fixes together
    cost_ci = cluster_ci(len(keys), lambda idx: _ratio(
        sum(ta[i] for i in idx) / max(1, sum(fa[i] for i in idx)),
        sum(tb[i] for i in idx) / max(1, sum(fb[i] for i in idx))))
    return {"arm": arm, "suite": suite or "all", "units": len(keys), "fixed_base": sum(fa), "fixed_arm": sum(fb),
            "tasks": sum(len(a[k].tasks) for k in keys),
            "ratio": sum(fa) / sum(fb) if sum(fb) else (math.inf if sum(fa) else 1.0),
            "ci": cluster_ratio_ci(fa, fb), "p": sign_flip_p(diffs),
            "mde": mde, "mde_ratio": (mean_b + mde) / mean_b if mean_b else math.inf,
            "apf_base": apf_a, "apf_arm": apf_b, "apf_ratio": apf_a / apf_b if apf_b else math.inf,
            "apf_ci": cost_ci, "apf_p": sign_flip_p([_cost(a[k]) - _cost(b[k]) for k in keys])}


# ------------------------------------------------------------------ the run and its table


def arm_figures(runs: Sequence[RunResult]) -> dict[str, Any]:  # JSON edge: one arm's figures
    tasks = [t for r in runs for t in r.tasks]
    fixed = sum(t.fixed for t in tasks)
    cycles = sum(r.cycles for r in runs)
    tokens = sum(r.tokens for r in runs)
    attempts = sum(r.attempts for r in runs)
    return {"units": len(runs), "tasks": len(tasks), "verified": fixed, "rate": fixed / len(tasks) if tasks else 0.0,
            "regressions": sum(t.regressions for t in tasks), "did_not_hold": sum(t.did_not_hold for t in tasks),
            "attempts": attempts, "attempts_per_fix": attempts / fixed if fixed else math.inf,
            "cycles_per_fix": cycles / fixed if fixed else math.inf,
            "open_per_cycle": statistics.fmean(opened) if (opened := [x for r in runs for x in r.open_per_cycle])
            else math.nan,
            "seconds": sum(r.seconds for r in runs), "tokens": tokens,
            "tokens_per_fix": tokens / fixed if tokens and fixed else None}


def _comparison_rows(results: dict[str, list[RunResult]]) -> list[dict[str, Any]]:
    suites = sorted({r.suite for runs in results.values() for r in runs})
    rows = []
    for arm in results:
        if arm == "full" or "full" not in results:
            continue
        whole = arm in ("off", "off_warnings", "full_warnings") or len(suites) == 1  # over every suite too
        for suite in ([None] if whole else []) + (suites if len(suites) > 1 else []):
            c = compare(results, arm, suite=suite)
            if c is not None:
                rows.append(c)
    return rows


def _verdict(off: dict[str, Any], w: Callable[[str], Any]) -> str:
    fixes = off["ratio"] >= TARGET_RATIO and off["p"] < TARGET_P
    cost = off["apf_ratio"] <= TARGET_COST and off["apf_p"] < TARGET_P
    verdict = "PASS" if fixes or cost else "FAIL"
    w(f"\ntarget: full / off >= {TARGET_RATIO}x verified fixes or <= {TARGET_COST}x attempts per fix,\n"
      f"p < {TARGET_P} by world-seed: fixes {off['ratio']:.2f}x p = {off['p']:.4f}; attempts per fix\n"
      f"{off['apf_ratio']:.2f}x p = {off['apf_p']:.4f}: {verdict}\n")
    w(f"power: over {off['units']} world-seeds, the smallest gain in fixes detectable at p < {TARGET_P}\n"
      f"with power 0.8 is {off['mde']:.2f} a world-seed ({off['mde_ratio']:.2f}x off's mean)\n")
    return verdict


def report(results: dict[str, list[RunResult]], out: Any = None) -> dict[str, Any]:
    figures = {arm: arm_figures(runs) for arm, runs in results.items()}
    w = (out or sys.stdout).write
    w(f"{'arm':<20}{'units':>6}{'tasks':>6}{'fixed':>6}{'rate':>6}{'regr':>5}{'unheld':>7}{'att/fix':>8}"
      f"{'open/cyc':>9}\n")
    for arm, f in figures.items():
        w(f"{arm:<20}{f['units']:>6}{f['tasks']:>6}{f['verified']:>6}{f['rate']:>6.2f}{f['regressions']:>5}"
          f"{f['did_not_hold']:>7}{f['attempts_per_fix']:>8.1f}{f['open_per_cycle']:>9.2f}\n")
    if any(f["tokens"] for f in figures.values()):  # a real agent's run (recorded or replayed)
        w("tokens per verified fix (the agent's own usage report): " + "; ".join(
            f"{arm} {f['tokens_per_fix']:,.0f}" if f["tokens_per_fix"] else f"{arm} {f['tokens']:,} for no fix"
            for arm, f in figures.items()) + "\n")
    comps = _comparison_rows(results)
    if comps:
        w("\nfull against each arm by world-seed: fixes (sums), cluster-bootstrap 95% CI,\n"
          "paired sign-flip p; apf: full's attempts per verified fix over the arm's, its p\n")
        w(f"{'arm':<19}{'suite':<9}{'n':>3}{'full':>5}{'arm':>5}{'ratio':>6}{'95% CI':>11}{'p':>7}{'apf':>6}"
          f"{'p':>7}\n")
        for c in comps:
            ci = f"{c['ci'][0]:.2f}-{c['ci'][1]:.2f}" if c["ci"][1] < 100 else f"{c['ci'][0]:.2f}-inf"
            w(f"{c['arm'][:18]:<19}{c['suite']:<9}{c['units']:>3}{c['fixed_base']:>5}{c['fixed_arm']:>5}"
              f"{c['ratio']:>6.2f}{ci:>11}{c['p']:>7.4f}{c['apf_ratio']:>6.2f}{c['apf_p']:>7.4f}\n")
    off = next((c for c in comps if c["arm"] == "off" and c["suite"] == "all"), None)
    verdict = _verdict(off, w) if off is not None else None
    return {"figures": figures, "comparisons": comps, "verdict": verdict}


# the arms that switch off the mechanism each suite is built to exercise (docs/evaluation.md, "The suites")
SUITE_ARMS = {"classic": ("no_verdicts",), "kinds": ("no_memory_graph",), "lesson": ("with_lessons", "no_recent_outcomes"),
              "capsule": ("with_capsules", "with_problem_memory"), "feedback": ("no_feedback",),
              "families": ("no_memory_graph",), "unseen": ("no_feedback",)}


def plan(args: argparse.Namespace, arms: Sequence[str], suites: Sequence[str], root: Path, agent: str | None,
         start: datetime) -> list[Job]:
    """Every (arm, world, seed, suite) to run, each world-seed under all of its arms before the next one."""
    jobs: list[Job] = []
    for s in range(args.seed, args.seed + args.seeds):
        for suite in suites:
            extra = [a for a in SUITE_ARMS.get(suite, ()) if args.mechanism_arms and a not in arms]
            for w in range(args.worlds):
                jobs += [(arm, w, s, args.cycles, str(root), agent, start, suite) for arm in [*arms, *extra]]
    return jobs


def _run_all(jobs: Sequence[Job], n: int) -> dict[str, list[RunResult]]:
    """The jobs on ``n`` processes, a progress line as each ends."""
    results: dict[str, list[RunResult]] = {}
    t0 = time.perf_counter()

    def done(k: int, r: RunResult) -> None:
        results.setdefault(r.arm, []).append(r)
        print(f"[{k}/{len(jobs)} {time.perf_counter() - t0:5.0f} s] {r.suite} {r.world} s{r.seed} {r.arm}: "
              f"fixed {r.verified}/{len(r.tasks)}, {r.attempts} attempts", flush=True)

    if n > 1:
        with ProcessPoolExecutor(n) as pool:
            futures = [pool.submit(_run_job, job) for job in jobs]
            for k, fut in enumerate(as_completed(futures), 1):
                done(k, fut.result())
    else:
        for k, job in enumerate(jobs, 1):
            done(k, _run_job(job))
    for runs in results.values():  # a stable order whatever finished first
        runs.sort(key=lambda r: (r.suite, r.seed, r.world))
    return results


_PROGRESS = re.compile(r"^\[\d+/\d+ +\d+ s\] (\w+) (\S+) s(\d+) (\w+): fixed (\d+)/(\d+), (\d+) attempts$")


def from_progress(lines: Sequence[str], cycles: int = 0) -> dict[str, list[RunResult]]:
    """The results a run's progress lines give (a run cut short, or several runs' logs together): per world-seed
    and arm its verified fixes, tasks and attempts (no per-task detail: the report's world-seed figures only)."""
    results: dict[str, list[RunResult]] = {}
    for line in lines:
        m = _PROGRESS.match(line.strip())
        if m is None:
            continue
        suite, world, seed, arm, fixed, tasks, attempts = m.groups()
        ts = [TaskResult(world, int(seed), f"p{i}", 0, fixed=i < int(fixed), first_fixed=None, regressions=0,
                         did_not_hold=0) for i in range(int(tasks))]
        results.setdefault(arm, []).append(RunResult(arm, world, int(seed), cycles, suite=suite, tasks=ts,
                                                     attempts=int(attempts)))
    return results


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:2] == ["--world", "real"]:  # the real tasks (bench/real_world.py), with that module's options
        from real_world import main as real_main
        return real_main(argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world", choices=["written"], default="written", help="'--world real' (given first, with "
                    "bench/real_world.py's options): bug-fix tasks of public repositories instead")
    ap.add_argument("--quick", action="store_true", help="2 worlds, 1 seed, 3 cycles, arms full and off, classic")
    ap.add_argument("--suites", default="classic", help=f"comma-separated, or 'all': {', '.join(SUITES)}")
    ap.add_argument("--worlds", type=int, default=8, help="worlds per suite")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1, help="first seed")
    ap.add_argument("--cycles", type=int, default=16)
    ap.add_argument("--arms", default="full,off", help=f"comma-separated, or 'all': {', '.join(ARMS)}")
    ap.add_argument("--mechanism-arms", action="store_true",
                    help="also each suite's own ablation arms (SUITE_ARMS), in that suite only")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--agent-cmd", help="a real agent instead of the scripted solver (with --record DIR)")
    ap.add_argument("--record", type=Path, help="save each prompt and the diff the real agent made")
    ap.add_argument("--replay", type=Path, help="play recorded diffs back for matching prompts")
    ap.add_argument("--json", type=Path, help="write the figures here")
    ap.add_argument("--careful-agent", action="store_true",
                    help="the scripted solver leaves an already fixed function alone (rule 5)")
    ap.add_argument("--keep", type=Path, help="keep the workspaces here (default: a temporary folder); each "
                    "world's side/trace.jsonl has per cycle its signals, gene, the agent's target and the truth")
    ap.add_argument("--from-progress", type=Path, nargs="+", metavar="LOG",
                    help="no run: the world-seed report of the progress lines in these logs (a run cut short)")
    args = ap.parse_args(argv)
    if args.from_progress:
        report(from_progress([line for f in args.from_progress for line in f.read_text().splitlines()]))
        return 0
    if args.quick:
        args.worlds, args.seeds, args.cycles, args.arms, args.suites = 2, 1, 3, "full,off", "classic"
    arms = list(ARMS) if args.arms == "all" else [a.strip() for a in args.arms.split(",") if a.strip()]
    suites = list(SUITES) if args.suites == "all" else [x.strip() for x in args.suites.split(",") if x.strip()]
    unknown = [a for a in arms if a not in ARMS] + [x for x in suites if x not in SUITES]
    if unknown:
        print(f"bench/evolution.py: unknown arm or suite {unknown[0]!r} (arms: {', '.join(ARMS)}; suites: "
              f"{', '.join(SUITES)})", file=sys.stderr)
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
    start = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(days=2)
    jobs = plan(args, arms, suites, root, agent, start)
    units = args.seeds * args.worlds * len(suites)
    print(f"{len(suites)} suites x {args.worlds} worlds x {args.seeds} seeds = {units} world-seeds, {args.cycles} "
          f"cycles, arms {', '.join(arms)}" + (" + each suite's own" if args.mechanism_arms else "")
          + f": {len(jobs) * args.cycles} cycles on {args.jobs} processes", flush=True)
    t0 = time.perf_counter()
    try:
        results = _run_all(jobs, args.jobs)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    wall = time.perf_counter() - t0
    finish_run(report(results), results, args, wall, len(jobs))
    return 0


def finish_run(summary: dict[str, Any], results: dict[str, Any], args: argparse.Namespace, wall: float,
               n_jobs: int) -> None:
    """The lines that end a run (this bench's and bench/real_world.py's): the agent's approaches per arm, the
    wall time, and ``--json``'s file."""
    approaches: dict[str, dict[str, int]] = {}
    for arm, runs in results.items():
        for r in runs:
            for k, v in r.approaches.items():
                approaches.setdefault(arm, {}).setdefault(k, 0)
                approaches[arm][k] += v
    print("\nagent approaches per arm: " + "; ".join(
        f"{arm}: " + ", ".join(f"{k} {v}" for k, v in sorted(a.items())) for arm, a in approaches.items()))
    print(f"wall time {wall:.0f} s ({wall / max(1, n_jobs * args.cycles):.2f} s a cycle over {args.jobs} "
          f"processes)")
    if args.json:
        args.json.write_text(json.dumps({**summary, "runs": {a: [asdict(r) for r in rs] for a, rs in results.items()},
                                         "wall_s": wall, "args": {k: str(v) for k, v in vars(args).items()}},
                                        indent=1, default=str))


if __name__ == "__main__":
    sys.exit(main())
