"""`gep eval`: does gep help with this workspace and this agent? The arms replayed on the workspace's own
history (gep/eval/run.py) and their paired table. Runs cycles without Prefect (the plain runner): nothing of it
is a flow run, and nothing is written to the workspace.
"""

from __future__ import annotations

import shlex
import shutil
import signal
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import FrameType
from typing import Annotated, Any

import typer

from gep.cli.workspace_arg import WorkspaceOpt, workspace_or_here
from gep.core.errors import GepError

EPILOG = ("Claude Code: gep eval --agent-cmd \"claude -p --permission-mode acceptEdits\". Any agent CLI that "
          "reads the prompt on stdin (or the file $GEP_PROMPT_FILE) and edits the files in its current folder "
          "works the same way.")


def register(app: typer.Typer, friendly: Callable[[Any], Any]) -> None:
    """Add the `eval` command to ``app``; ``friendly`` turns errors into one line (gep.cli.root's)."""
    app.command("eval", epilog=EPILOG)(friendly(eval_cmd))


def eval_cmd(
    workspace: WorkspaceOpt = None,
    agent_cmd: Annotated[str | None, typer.Option("--agent-cmd", help="Your agent's command line: the prompt "
                                                  "on stdin, the task's clone as its current folder.")] = None,
    tasks: Annotated[int, typer.Option("--tasks", min=1, max=1000, help="Tasks to mine from the history, "
                                       "newest first.")] = 5,
    arms: Annotated[str, typer.Option("--arms", help="Arms to compare, comma-separated: full (learning on), "
                                      "off (learning = \"off\": the plain engine).")] = "full,off",
    seeds: Annotated[int, typer.Option("--seeds", min=1, max=100, help="Runs of every task in every arm, "
                                       "each from an empty store and its own random seed.")] = 1,
    attempts: Annotated[int, typer.Option("--attempts", min=1, max=20, help="Cycles per task and arm at most "
                                          "(stops at the first that fixes it).")] = 3,
    scan: Annotated[int, typer.Option("--scan", min=1, max=100_000, help="Newest commits (first parents) "
                                      "to look for tasks in.")] = 100,
    record: Annotated[Path | None, typer.Option("--record", help="Keep the agent's answers (its diff per "
                                                "prompt) in this folder.")] = None,
    replay: Annotated[Path | None, typer.Option("--replay", help="Play answers kept with --record back "
                                                "instead of running the agent.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON on stdout and nothing else: tasks, "
                                          "arms (each task's result), p_value.")] = False,
) -> None:
    """Replay tasks from the workspace's own git history with your agent, with and without what gep learns,
    and print a paired table: per arm the tasks fixed, the cycles it took and the agent's time; the exact
    McNemar p and a bootstrap interval of the ratio of fixes.

    A task is a commit that makes the workspace's validation (`validation` in gep.toml, else
    `default_validation`) pass where its parent failed; it starts from the parent with the commit's tests,
    its failing output as the log, and is judged by the commit's tests. Each arm works in its own clone in
    the system's temporary folder, with its own store: your workspace, branches, store and files are only
    read, and Ctrl-C leaves nothing behind. Progress goes to stderr.

    Exit status: 0 compared; 1 no task found in the history; 2 bad input; 130 interrupted.
    """
    from gep.eval.run import ARMS, Plan  # deferred: pydantic and the engine only when `gep eval` runs

    chosen = [a.strip() for a in arms.split(",") if a.strip()]
    unknown = [a for a in chosen if a not in ARMS]
    if not chosen or unknown or len(set(chosen)) != len(chosen):
        raise GepError(f"--arms must name distinct arms among {', '.join(ARMS)}, not {arms!r}")
    if record is not None and replay is not None:
        raise GepError("--record and --replay exclude each other: record a run first, then replay it")
    if replay is not None and not replay.expanduser().is_dir():
        raise GepError(f"--replay {replay}: not a folder of recorded answers")
    if record is not None and record.expanduser().exists() and not record.expanduser().is_dir():
        raise GepError(f"--record {record}: not a folder")
    if replay is None:
        _check_agent(agent_cmd)
    plan = Plan(workspace=workspace_or_here(workspace), agent_cmd=agent_cmd or "", tasks=tasks, arms=chosen,
                seeds=seeds, attempts=attempts, scan=scan,
                record=record.expanduser().resolve() if record else None,
                replay=replay.expanduser().resolve() if replay else None)
    _run(plan, as_json)


def _check_agent(agent_cmd: str | None) -> None:
    if not agent_cmd or not agent_cmd.strip():
        raise GepError("--agent-cmd is needed (your agent's command line), or --replay DIR of a recorded run")
    try:
        argv = shlex.split(agent_cmd)
    except ValueError as exc:
        raise GepError(f"--agent-cmd: cannot split {agent_cmd!r} ({exc})") from None
    if not argv:
        raise GepError("--agent-cmd is empty")
    if shutil.which(argv[0]) is None:  # every cycle would fail to start it: say so before the first one
        raise GepError(f"--agent-cmd: {argv[0]!r} is not a program on PATH")


def _interrupted(signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # SIGTERM cleans up as Ctrl-C does


def _run(plan: Any, as_json: bool) -> None:
    # deferred, each: the cycle's machinery costs every other `gep` command's start (bench/cli.py)
    from gep.cli.store_open import emit_json  # the JSON printer
    from gep.core.request import CycleRequest  # the request model
    from gep.cycle.pipeline import run_cycle  # the engine
    from gep.eval.run import run_eval  # the evaluation
    from gep.eval.table import lines  # its table

    def cycle(request: CycleRequest, env: Mapping[str, str]) -> Any:
        return run_cycle(request, env=env)

    def say(text: str) -> None:
        print(f"gep eval: {text}"[:200], file=sys.stderr, flush=True)

    previous = signal.signal(signal.SIGTERM, _interrupted)
    try:
        report = run_eval(plan, cycle, say)
    except KeyboardInterrupt:
        print("gep eval: interrupted; its scratch folder is removed, your workspace was not touched",
              file=sys.stderr)
        raise typer.Exit(130) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
    if as_json:
        emit_json(report.as_json())
        return
    for line in lines(report):
        typer.echo(line)
