"""``gep eval``'s run: tasks mined from the workspace's history, replayed in each arm through the real cycle.

Each arm is one clone of the workspace's history in the evaluation's scratch folder (gep/eval/scratch.py) with its
own store (``.gep`` of that clone, forced with ``GEP_DATABASE_URL``), so an arm learns across its tasks as a
workspace would, and never from the user's store. A task starts on branch ``gep-eval`` at the task's start
(gep/eval/tasks.py), its failing output in ``logs/gep-eval/task.log``; a cycle in command mode (the cycle runner
is passed in: this package sits below gep/cycle/) has the agent change it; the change is judged by the
workspace's validation with the fixing commit's tests put back. Up to ``attempts`` cycles per task; after each
one that did not fix it, the failing output is logged again (as a job that fails again would).

Arms: ``full`` (learning on) and ``off`` (``learning = "off"``: gep/core/learning_switch.py's plain engine).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, Field

from gep.core.config import CONFIG_FILE, Settings, load_settings
from gep.core.errors import GepError
from gep.core.models import EvolutionEvent
from gep.core.request import CycleRequest
from gep.core.stored_path import StoredPath
from gep.eval.scratch import clone, mirror, scratch_folder
from gep.eval.stats import mcnemar, ratio_ci
from gep.eval.tasks import Checker, Task, mine, overlay
from gep.git import open_repo
from gep.git.plumbing import Git
from gep.store.engine import default_url

ARMS: dict[str, str] = {"full": "on", "off": "off"}  # arm -> GEP_LEARNING
LOG = "logs/gep-eval/task.log"
# settings the evaluation decides for its arms, whatever the user's environment says
CONTROLLED_ENV = ("GEP_DATABASE_URL", "GEP_LEARNING", "GEP_HOLDOUT", "GEP_LOG_GLOBS", "GEP_BRANCH", "GEP_MUTATOR",
                  "GEP_AGENT_CMD")
RunCycle = Callable[[CycleRequest, Mapping[str, str]], EvolutionEvent | None]
Say = Callable[[str], None]


class NoTasks(GepError):
    """The history holds no task: nothing to compare (not bad input: exit 1)."""

    exit_code = 1


class Plan(BaseModel):
    workspace: Path
    agent_cmd: str
    tasks: int = 5
    arms: list[str] = Field(default_factory=lambda: ["full", "off"])
    seeds: int = 1
    attempts: int = 3
    scan: int = 100  # newest first-parent commits looked at for tasks
    record: Path | None = None
    replay: Path | None = None


class TaskResult(BaseModel):
    task: str
    seed: int
    fixed: bool = False
    attempts: int = 0  # cycles run on it
    agent_seconds: float = 0.0
    outcomes: list[str] = Field(default_factory=list)  # each cycle's outcome (and "fixed" when judged so)


class ArmResult(BaseModel):
    arm: str
    results: list[TaskResult] = Field(default_factory=list)

    def as_json(self) -> dict[str, object]:  # JSON edge: `gep eval --json`
        return {"fixed": sum(r.fixed for r in self.results), "tasks": len(self.results),
                "attempts": sum(r.attempts for r in self.results),
                "agent_seconds": round(sum(r.agent_seconds for r in self.results), 3),
                "results": [r.model_dump() for r in self.results]}


class EvalReport(BaseModel):
    workspace: StoredPath
    tasks: list[Task]
    arms: dict[str, ArmResult]
    seeds: int
    compared: list[str] = Field(default_factory=list)  # the two arms the test compares (first, second)
    only_first: int = 0
    only_second: int = 0
    p_value: float | None = None
    ratio: float | None = None
    ratio_ci: tuple[float, float] | None = None

    def as_json(self) -> dict[str, object]:  # JSON edge: `gep eval --json`
        return {"workspace": str(self.workspace), "seeds": self.seeds,
                "tasks": [t.model_dump(exclude={"start", "log"}) for t in self.tasks],
                "arms": {a: r.as_json() for a, r in self.arms.items()}, "compared": self.compared,
                "only_first": self.only_first, "only_second": self.only_second, "p_value": self.p_value,
                "ratio": _finite(self.ratio), "ratio_ci": [_finite(x) for x in self.ratio_ci] if self.ratio_ci else None}


def _finite(x: float | None) -> float | str | None:
    return "inf" if x is not None and x == float("inf") else x  # JSON has no infinity


def agent_command(plan: Plan) -> str:
    """The command the cycles run: the user's agent through gep/eval/tape.py (timed, recorded or replayed)."""
    tape = [sys.executable, "-m", "gep.eval.tape"]
    if plan.replay is not None:
        return shlex.join([*tape, "replay", str(plan.replay)])
    argv = shlex.split(plan.agent_cmd)
    if plan.record is not None:
        return shlex.join([*tape, "record", str(plan.record), "--", *argv])
    return shlex.join([*tape, "run", "--", *argv])


def env_dirs(workspace: Path, settings: Settings) -> list[Path]:
    """The workspace's environment folders (a virtualenv) the checks may need: linked, never copied or written."""
    found = [workspace / d.strip().strip("/") for d in settings.env_dirs if d.strip().strip("/")]
    return [p for p in found if p.is_dir() and not p.is_symlink()]


def arm_env(base: Mapping[str, str], arm: str, ws: Path, root: Path) -> dict[str, str]:
    env = {k: v for k, v in base.items() if k not in CONTROLLED_ENV}
    env.update(GEP_DATABASE_URL=default_url(ws), GEP_LEARNING=ARMS[arm], GEP_HOLDOUT="0", GEP_LOG_GLOBS=LOG,
               GEP_EVAL_ROOT=str(root), GEP_EVAL_STATE=str(root / "agent.jsonl"))
    return env


def _agent_seconds(state: Path, slot: str) -> float:
    if not state.is_file():
        return 0.0
    rows = [json.loads(line) for line in state.read_text().splitlines() if line.strip()]
    return sum(float(r.get("seconds", 0.0)) for r in rows if r.get("slot") == slot)


_FAILURE = re.compile(r"^(FAILED |FAIL: |ERROR: |E\s)|\b\w*(Error|Exception)\b|Traceback")


def headline(output: str) -> str:
    """The line of a failing output that says what failed: pytest's or unittest's first failure, else the last
    error named, else the last line."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip() and not ln.startswith("$ ")]
    for prefix in ("FAILED ", "FAIL: ", "ERROR: "):
        found = [ln for ln in lines if ln.startswith(prefix)]
        if found:
            return found[0]
    errors = [ln for ln in lines if re.search(r"\b\w*(Error|Exception)\b", ln)]
    return (errors or lines or ["validation failed"])[-1]


def _log(ws: Path, output: str, attempt: int) -> None:
    """Append a failing output as a job's log would show it: the headline first, then each line that reads as a
    failure marked ``[ERROR]`` (what the signal rules read), the rest as it was."""
    path = ws / LOG
    path.parent.mkdir(parents=True, exist_ok=True)
    at = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    lines = [f"{at} [ERROR] validation failed: {headline(output)}", f"{at} INFO validation run {attempt + 1}"]
    lines += [f"{at} [ERROR] {ln.strip()}" if _FAILURE.search(ln) else ln for ln in output.splitlines()]
    with path.open("a", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")


class Arm(BaseModel):
    """One arm's clone (its own store) for one seed."""

    model_config = {"arbitrary_types_allowed": True}

    name: str
    seed: int
    ws: Path
    git: Git
    env: dict[str, str]
    settings_file: Path | None = None  # the workspace's gep.toml, given to a task whose tree has none


def open_arm(name: str, seed: int, root: Path, base_env: Mapping[str, str], settings_file: Path | None) -> Arm:
    ws = root / "arms" / f"{name}-s{seed}"
    ws.parent.mkdir(parents=True, exist_ok=True)
    g = clone(root / "history.git", ws)
    with (ws / ".git" / "info" / "exclude").open("a", encoding="utf-8") as fh:
        fh.write(f"/logs/gep-eval/\n/{CONFIG_FILE}\n")  # excluding a tracked gep.toml changes nothing
    return Arm(name=name, seed=seed, ws=ws, git=g, env=arm_env(base_env, name, ws, root), settings_file=settings_file)


def _start(arm: Arm, task: Task) -> None:
    """The arm's tree at the task's start, its log written; the workspace's gep.toml when the tree has none (an
    untracked gep.toml: the cycles run with the settings the tasks were mined with)."""
    arm.git.run("checkout", "-q", "-f", "-B", "gep-eval", task.start)
    arm.git.run("clean", "-q", "-ffd")
    if arm.settings_file is not None and not arm.git.run("ls-files", "--", CONFIG_FILE).text.strip():
        shutil.copyfile(arm.settings_file, arm.ws / CONFIG_FILE)
    (arm.ws / LOG).unlink(missing_ok=True)
    _log(arm.ws, task.log, 0)


def judge(arm: Arm, task: Task, checker: Checker) -> tuple[bool, str]:
    """The workspace's validation on the arm's files with the task's tests put back."""
    judged = overlay(arm.git, "HEAD", task.commit, task.tests, "gep eval: judge", task.commit, checker.folder)
    return checker.check(judged, git=arm.git)


def run_task(arm: Arm, task: Task, index: int, plan: Plan, checker: Checker, run_cycle: RunCycle,
             say: Say) -> TaskResult:
    """Up to ``plan.attempts`` cycles on ``task`` in ``arm``, until the judge passes."""
    _start(arm, task)
    result = TaskResult(task=task.id, seed=arm.seed)
    for attempt in range(plan.attempts):
        slot = f"{task.id}:{arm.name}:{arm.seed}:{attempt}"
        env = {**arm.env, "GEP_EVAL_SLOT": slot}
        request = CycleRequest(workspace=arm.ws, mutator="command", agent_cmd=agent_command(plan),
                               seed=(arm.seed * 1000 + index) * 10 + attempt)
        event = run_cycle(request, env)
        status = str(event.outcome.status) if event is not None else "skipped"
        result.attempts += 1
        result.agent_seconds += _agent_seconds(Path(env["GEP_EVAL_STATE"]), slot)
        fixed, output = judge(arm, task, checker) if event is not None and event.meta.commit else (False, "")
        result.outcomes.append("fixed" if fixed else status)
        say(f"  {arm.name:<4} seed {arm.seed} task {task.id} attempt {attempt + 1}: "
            f"{'fixed' if fixed else status}")
        if fixed:
            result.fixed = True
            break
        _log(arm.ws, output or task.log, attempt + 1)
    return result


def compare(report: EvalReport) -> EvalReport:
    """The exact McNemar test and the ratio of fixes of the first two arms, over paired (task, seed)."""
    if len(report.arms) < 2:
        return report
    first, second = list(report.arms)[:2]
    a = [r.fixed for r in report.arms[first].results]
    b = [r.fixed for r in report.arms[second].results]
    report.compared = [first, second]
    report.only_first, report.only_second, report.p_value = mcnemar(a, b)
    report.ratio = sum(a) / sum(b) if sum(b) else (float("inf") if sum(a) else None)
    report.ratio_ci = ratio_ci(a, b)
    return report


def run_eval(plan: Plan, run_cycle: RunCycle, say: Say, env: Mapping[str, str] | None = None) -> EvalReport:
    """The whole evaluation, in a scratch folder removed whatever happens; the workspace is only read."""
    repo = open_repo(plan.workspace)
    settings = load_settings(repo.path)
    base_env = os.environ if env is None else env
    with scratch_folder() as root:
        history = mirror(repo.path, root / "history.git")
        checker = Checker(history, settings, root / "check", env_dirs(repo.path, settings))
        tasks = mine(history, checker, limit=plan.tasks, scan=plan.scan, say=say)
        if not tasks:
            cmds = "; ".join(checker.commands)
            raise NoTasks(f"no task in the newest {plan.scan} commits of {repo.path}: none passes the workspace's "
                          f"validation ({cmds}) where its parent failed it")
        say(f"{len(tasks)} task(s): " + ", ".join(t.id for t in tasks))
        arms = {name: ArmResult(arm=name) for name in plan.arms}
        for seed in range(plan.seeds):
            toml = repo.path / CONFIG_FILE
            opened = [open_arm(name, seed, root, base_env, toml if toml.is_file() else None) for name in plan.arms]
            for index, task in enumerate(tasks):
                say(f"seed {seed + 1}/{plan.seeds}, task {index + 1}/{len(tasks)} ({task.id}: {task.subject[:40]})")
                for arm in opened:
                    arms[arm.name].results.append(run_task(arm, task, index, plan, checker, run_cycle, say))
        report = EvalReport(workspace=repo.path, tasks=tasks, arms=arms, seeds=plan.seeds)
    return compare(report)
