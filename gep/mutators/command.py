"""Command mode: run the user's own agent CLI (Claude Code, Codex, aider ...) non-interactively.

``Settings.agent_cmd`` is split with shlex and run without a shell, cwd = the cycle's clone of the workspace
(gep/cycle/tree.py: the user's own tree is never touched while the agent works), with the
prompt on stdin and its path in ``GEP_PROMPT_FILE``. Output is captured to temporary files (so a chatty
agent cannot fill memory), then kept bounded and redacted. On timeout the whole process group is killed,
and so are stragglers the agent left behind after it exits.

Environment: the agent gets the caller's environment, because it usually needs its own API key
(ANTHROPIC_API_KEY, OPENAI_API_KEY ...). Only the engine's own store credentials (GEP_DATABASE_URL)
are removed: the agent has no business with the event store. Added: GEP_PROMPT_FILE, GEP_CYCLE_ID,
GEP_WORKSPACE (the clone). The command line is recorded redacted (``redact_command``).

An agent may print a line ``GEP_SUMMARY: <one line>``; it becomes the summary (the commit subject).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO

from gep.core import constants
from gep.core.child_wait import wait_exit
from gep.core.config import Settings
from gep.core.deadline import left
from gep.core.errors import ConfigError
from gep.core.sanitize import REDACT_MARGIN, redact, redact_command
from gep.mutators.base import (
    MutationRequest,
    MutatorMetrics,
    MutatorResult,
    bounded_output,
    one_line,
    write_prompt_file,
)
from gep.validation.runner import die_with_parent

WITHHELD_ENV = ("GEP_DATABASE_URL",)
_SUMMARY_RE = re.compile(r"^\s*GEP_SUMMARY:\s*(.+?)\s*$", re.MULTILINE)


def split_command(cmd: str | None) -> list[str]:
    if not cmd or not cmd.strip():
        raise ConfigError("mutator 'command' needs an agent command: --agent-cmd CMD or agent_cmd in gep.toml")
    try:
        argv = shlex.split(cmd)
    except ValueError as exc:
        raise ConfigError(f"agent_cmd: cannot split '{cmd}' ({exc})") from None
    if not argv:
        raise ConfigError("agent_cmd is empty")
    return argv


def missing_program(cmd: str | None, env: Mapping[str, str], cwd: Path) -> str | None:
    """Why the agent command's program cannot be started (not on PATH, not there, not executable), in one
    line; None when it can. Checked before a cycle starts, so that a typo costs no cycle."""
    program = split_command(cmd)[0]
    shown_program = redact_command(program)
    if "/" not in program:
        if shutil.which(program, path=env.get("PATH", os.defpath)) is None:
            return (f"agent program '{shown_program}' is not on PATH: install it, or give its full path "
                    "(--agent-cmd or agent_cmd in gep.toml)")
        return None
    path = Path(program).expanduser()
    path = path if path.is_absolute() else cwd / path  # the agent runs in the cycle's clone of the workspace
    if not path.is_file() or not os.access(path, os.X_OK):
        what = "is not an executable file" if path.exists() else "does not exist"
        return f"agent program '{shown_program}' {what} (--agent-cmd or agent_cmd in gep.toml)"
    return None


def agent_env(base: Mapping[str, str], **extra: str) -> dict[str, str]:
    env = {k: v for k, v in base.items() if k not in WITHHELD_ENV}
    env.update(extra)
    return env


def _tail(f: IO[bytes], limit: int) -> str:
    """The last ``limit`` characters of ``f``, redacted before they are cut (over REDACT_MARGIN more)."""
    f.seek(0, os.SEEK_END)
    f.seek(max(0, f.tell() - (limit + REDACT_MARGIN) * 4))  # bytes, with room for multi-byte characters
    return redact(f.read().decode("utf-8", errors="replace")[-(limit + REDACT_MARGIN):])[-limit:]


def _share(stdout: str, stderr: str, limit: int) -> tuple[str, str]:
    """Both tails within ``limit`` together; a quiet stream leaves its room to the other."""
    if len(stdout) + len(stderr) <= limit:
        return stdout, stderr
    half = limit // 2
    if len(stdout) > half and len(stderr) > half:
        return stdout[-half:], stderr[-half:]
    if len(stdout) > half:
        return stdout[-(limit - len(stderr)):], stderr
    return stdout, stderr[-(limit - len(stdout)):]


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class CommandMutator:
    name = "command"

    def __init__(self, settings: Settings, env: Mapping[str, str]) -> None:
        self.argv = split_command(settings.agent_cmd)
        self.env = dict(env)

    def apply(self, req: MutationRequest) -> MutatorResult:
        started = time.monotonic()
        try:
            prompt_file = write_prompt_file(req)
        except OSError as exc:
            return MutatorResult(status="error", error=one_line(f"cannot write the prompt file: {exc}"))
        env = agent_env(self.env, GEP_PROMPT_FILE=str(prompt_file), GEP_CYCLE_ID=req.cycle_id,
                        GEP_WORKSPACE=str(req.work_tree))
        cut = left(req.deadline) < req.settings.agent_timeout_s  # the cycle's own limit comes first
        timeout = max(1.0, min(req.settings.agent_timeout_s, left(req.deadline)))
        limit = constants.AGENT_OUTPUT_CHARS
        timed_out = False
        with open(prompt_file, "rb") as stdin, tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            try:
                # own process group (a timeout kills the agent's children too); dies with the cycle, so a
                # kill -9 of the cycle never leaves an agent editing a workspace that recovery restores
                proc = subprocess.Popen(self.argv, cwd=req.work_tree, env=env, stdin=stdin, stdout=out,
                                        stderr=err, start_new_session=True, preexec_fn=die_with_parent(os.getpid()))
            except OSError as exc:
                return MutatorResult(status="error", prompt_file=str(prompt_file),
                                     error=one_line(f"cannot start agent command '{redact_command(self.argv[0])}': "
                                                    f"{exc.strerror or exc}"))
            try:
                waited = wait_exit(proc, timeout)
                if waited is None:
                    timed_out = True
                    _kill_group(proc.pid)
                code = proc.wait() if waited is None else waited
            finally:
                _kill_group(proc.pid)  # the agent's leftover children, if any
            stdout, stderr = _tail(out, limit), _tail(err, limit)

        metrics = MutatorMetrics(duration_ms=int((time.monotonic() - started) * 1000))
        output = self._output(code, stdout, stderr, limit)
        base = {"metrics": metrics, "output": output, "prompt_file": str(prompt_file)}
        cmd = redact_command(shlex.join(self.argv))  # recorded in the event: a key on the command line stays out
        if timed_out:
            limit_name = "the cycle's time limit (cycle_timeout_s)" if cut else "agent_timeout_s"
            return MutatorResult(status="error", error=one_line(
                f"agent command timed out after {round(timeout, 1):g}s and was killed ({limit_name}): {cmd}"), **base)
        if code != 0:
            lines = (stderr or stdout).strip().splitlines()
            last = one_line(lines[-1], 200) if lines else ""
            return MutatorResult(status="error", error=one_line(
                f"agent command exited with code {code}: {cmd}" + (f" ({last})" if last else "")), **base)
        match = _SUMMARY_RE.findall(stdout)
        summary = one_line(match[-1], 200) if match else ""
        return MutatorResult(status="changed", summary=summary,
                             rationale=f"changes made by agent command: {one_line(cmd, 200)}", **base)

    @staticmethod
    def _output(code: int, stdout: str, stderr: str, limit: int) -> str:
        stdout, stderr = _share(stdout, stderr, limit)
        parts = [f"exit code {code}"]
        if stdout.strip():
            parts.append("--- stdout ---\n" + stdout.rstrip())
        if stderr.strip():
            parts.append("--- stderr ---\n" + stderr.rstrip())
        return bounded_output("\n".join(parts), limit)
