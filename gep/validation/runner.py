"""The one safe command runner: gene validation, the canary and the model's `run_validation` tool.

A command is a single program with arguments. It is split with :func:`shlex.split` and executed without a
shell, so there is nothing to inject into; on top of that, anything that only makes sense to a shell
(operators, substitution, expansion, redirection, newlines) is refused outright rather than passed on as
a literal argument, and each program's arguments are parsed by gep.validation.allowlist (inline code, debuggers,
paths outside the workspace ...). Every refusal names its rule.

Each command runs in the sandbox (gep.validation.sandbox: bubblewrap when available, see setting ``sandbox``), in
its own process group, with only the environment it needs, under limits: a timeout (the whole group is
killed, and the cgroup's stragglers), memory and processes, and an output cap (a command printing more
than ``max_output_bytes`` is killed; the kept text is a redacted tail of ``output_cap_chars``). The
result records which sandbox ran and which limits applied.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import IO

from gep.core.child_wait import wait_exit
from gep.core.config import Settings
from gep.core.models import CommandResult, ValidationReport, iso, utc_now
from gep.core.sanitize import redact
from gep.validation.allowlist import PYTHONS, check_argv
from gep.validation.sandbox import Limits, Sandbox, SandboxUnavailable, command_environment, sandbox_env
from gep.validation.scratch import throwaway
from gep.validation.slots import validation_slot
from gep.validation.tool_module import PROBE_MARK, pinned, probe_argv

# Characters that only mean something to a shell; refused even inside quotes (no gene needs them).
_SHELL_OPERATORS = [(";", "';'"), ("&", "'&' (&&, background)"), ("|", "'|' (pipe, ||)"),
                    (">", "'>' (redirection)"), ("<", "'<' (redirection)")]


# ------------------------------------------------------------------ policy


def _shell_syntax(cmd: str) -> str | None:
    """What in ``cmd`` only a shell would act on (it runs without one), naming the rule; None if nothing."""
    if any(c in cmd for c in "\n\r\x00"):
        return "newlines and NUL are not allowed (one command per entry) [rule: one-command]"
    if "`" in cmd:
        return "backticks (command substitution) are not allowed [rule: shell-substitution]"
    if "$(" in cmd:
        return "$( ) (command substitution) is not allowed [rule: shell-substitution]"
    if "$" in cmd:
        return "'$' (shell expansion) is not allowed: commands run without a shell [rule: shell-expansion]"
    for op, label in _SHELL_OPERATORS:
        if op in cmd:
            return f"shell operator {label} is not allowed: commands run without a shell [rule: shell-operator]"
    return None


def check_command(cmd: str, settings: Settings, cwd: Path | None = None) -> str | None:
    """None if ``cmd`` may run (in ``cwd``, the workspace); otherwise a one-line reason naming the rule.

    Shell syntax is refused here; each program's arguments are parsed by gep.validation.allowlist."""
    if not cmd or not cmd.strip():
        return "empty command [rule: empty]"
    reason = _shell_syntax(cmd)
    if reason is not None:
        return reason
    try:
        argv = shlex.split(cmd)
    except ValueError as exc:
        return f"cannot parse command ({exc}) [rule: parse]"
    return check_argv(argv, settings, cwd)


# ------------------------------------------------------------------ execution


def _load_prctl() -> Callable[[int, int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    # dlopen(NULL): the process's own symbols, libc's among them. find_library("c") would run `ldconfig -p`,
    # a subprocess in every process that imports this module (each `gep cycle`).
    for name in (None, "libc.so.6"):
        try:
            return ctypes.CDLL(name, use_errno=True).prctl
        except (OSError, AttributeError):
            continue
    try:
        return ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _load_prctl()
_PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> Callable[[], None] | None:
    """Make the child die with its parent (kill -9 of a cycle must not leave validation running)."""
    prctl = _PRCTL
    if prctl is None:
        return None

    def setup() -> None:  # runs in the forked child: keep it minimal (no imports, no allocation-heavy code)
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os._exit(137)

    return setup


def resolve_program(name: str, env: Mapping[str, str]) -> str | None:
    """The executable for ``name``: PATH's (the workspace's venv when activated), else this interpreter."""
    if os.sep in name:
        return name if os.access(name, os.X_OK) else None
    found = shutil.which(name, path=env.get("PATH", os.defpath))
    if found:
        return found
    if PYTHONS.match(name):
        return sys.executable
    return None


def _read_tail(f: IO[bytes], cap: int) -> str:
    """Redacted tail of a captured stream, at most ``cap`` characters (the end of a test run matters most)."""
    size = f.seek(0, os.SEEK_END)
    window = max(cap * 4, 4096)
    start = max(0, size - window)
    f.seek(start)
    text = f.read().decode("utf-8", errors="replace")
    # redact before cutting, so a secret is never split into an unrecognisable half at the edge
    text = redact(text)
    cut = len(text) - cap if len(text) > cap else 0
    if start or cut:
        dropped = start + max(cut, 0)
        return f"[... {dropped} earlier bytes truncated ...]\n" + text[cut:]
    return text


def command_env(settings: Settings, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a command: only what it needs (gep.validation.sandbox.command_environment), plus the engine's
    settings that keep validation from writing caches into the workspace."""
    env = command_environment(os.environ, settings.validation_env)
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # keep validation from leaving __pycache__ in the workspace
    # nor .pytest_cache (git sees it as ignored, so rollback and the blast radius would never notice it)
    addopts = env.get("PYTEST_ADDOPTS", "")
    if "no:cacheprovider" not in addopts:
        env["PYTEST_ADDOPTS"] = f"{addopts} -p no:cacheprovider".strip()
    if extra:
        env.update(extra)
    return env


def run_argv(argv: Sequence[str], *, cwd: Path, settings: Settings, display: str | None = None,
             extra_env: Mapping[str, str] | None = None, timeout_s: float | None = None,
             sandbox: Sandbox | None = None) -> CommandResult:
    """Run an already-checked argument vector (the engine's own commands, e.g. the canary) in ``sandbox``
    (default: the one ``settings`` ask for, confining ``cwd``)."""
    box = sandbox or Sandbox.resolve(cwd, settings)
    shown = display or shlex.join(argv)
    if box.refusal:
        return _blocked(shown, f"sandbox: {box.refusal}", box)
    # No PYTHONPYCACHEPREFIX: the commands run in a throw-away copy (gep/validation/scratch.py), so bytecode
    # they write is deleted with it; a prefix would also hide the interpreter's and the venv's own cached
    # bytecode, and every command compiled pytest and its plugins again (1.7 s of CPU a validation here).
    env = command_env(settings, extra_env)
    return _run(argv, cwd=cwd, settings=settings, shown=shown, env=env, timeout_s=timeout_s, box=box)


def _blocked(shown: str, reason: str, box: Sandbox) -> CommandResult:
    return CommandResult(cmd=shown, ok=False, exit_code=None, blocked_reason=reason, stderr=f"BLOCKED: {reason}",
                         sandbox=box.kind)


def _preexec(limits: Limits) -> Callable[[], None]:
    dies = die_with_parent(os.getpid())

    def setup() -> None:  # in the forked child
        limits.preexec()
        if dies is not None:
            dies()

    return setup


def _run(argv: Sequence[str], *, cwd: Path, settings: Settings, shown: str, env: dict[str, str],
         timeout_s: float | None, box: Sandbox) -> CommandResult:
    exe = resolve_program(argv[0], env)
    if exe is None:
        return CommandResult(cmd=shown, ok=False, exit_code=None, stderr=f"program '{argv[0]}' not found on PATH",
                             sandbox=box.kind, missing=argv[0])
    timeout = settings.validation_timeout_s if timeout_s is None else timeout_s
    try:
        # `python -m X`: X from the environment, never a module of the tree standing in for it (tool_module.py)
        full = box.wrap(pinned([exe, *argv[1:]]), cwd=cwd, env=env)
    except SandboxUnavailable as exc:
        return _blocked(shown, f"sandbox: {exc}", box)
    run_env = sandbox_env(env) if box.kind == "bwrap" else env
    started = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, Limits(settings, timeout_s=timeout) as lim:
        try:
            proc = subprocess.Popen(full, cwd=str(box.host_cwd(cwd)), env=run_env, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=err, start_new_session=True, close_fds=True, preexec_fn=_preexec(lim))
        except (OSError, subprocess.SubprocessError) as exc:
            why = exc.strerror if isinstance(exc, OSError) else str(exc)
            return CommandResult(cmd=shown, ok=False, exit_code=None, stderr=f"cannot start: {why}",
                                 sandbox=box.kind, started=False)
        try:
            code, over = _wait(proc, timeout, [out, err], settings.max_output_bytes)
        finally:
            # kill whatever is left (timeout, or background children of a finished command; the cgroup
            # catches those that left the process group)
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            if proc.returncode is None:
                proc.wait()
            lim.kill_all()
        duration = int((time.monotonic() - started) * 1000)
        stdout = _read_tail(out, settings.output_cap_chars)
        stderr = _read_tail(err, settings.output_cap_chars)
        limits = lim.applied
    timed_out = code is None and not over
    if timed_out:
        stderr = (stderr + f"\n[timed out after {timeout:g}s; process group killed]").lstrip("\n")
    if over:
        stderr = (stderr + f"\n[output over {settings.max_output_bytes} bytes; process group killed]").lstrip("\n")
    missing = _missing_module([exe, *argv[1:]], cwd=cwd, env=run_env, box=box) if code == 1 else None
    return CommandResult(cmd=shown, ok=(code == 0 and not timed_out and not over), exit_code=code, stdout=stdout,
                         stderr=stderr, duration_ms=duration, timed_out=timed_out, sandbox=box.kind, limits=limits,
                         missing=missing)


def _missing_module(argv: Sequence[str], *, cwd: Path, env: dict[str, str], box: Sandbox) -> str | None:
    """The module of a failed ``python -m`` command when it resolves nowhere, asked of the sandbox (PROBE runs
    no code of the tree); None for any other command, or when the probe cannot tell."""
    probe = probe_argv(argv)
    if probe is None:
        return None
    try:
        done = subprocess.run(box.wrap(probe, cwd=cwd, env=env), cwd=str(box.host_cwd(cwd)), env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=60, start_new_session=True,
                              preexec_fn=die_with_parent(os.getpid()))
    except (OSError, subprocess.SubprocessError, SandboxUnavailable):
        return None
    said = done.stdout.decode("utf-8", "replace").split()
    return probe[-1] if said[-2:] == [PROBE_MARK, "missing"] else None


def _wait(proc: subprocess.Popen[bytes], timeout: float, files: Sequence[IO[bytes]], max_bytes: int,
          ) -> tuple[int | None, bool]:
    """Wait for ``proc``: (exit code, False); (None, False) on timeout; (None, True) when its output passed
    ``max_bytes`` (checked every 50 ms, so a flood cannot fill the disk)."""
    deadline = time.monotonic() + timeout
    while True:
        code = wait_exit(proc, max(0.0, min(0.05, deadline - time.monotonic())))
        if code is not None:
            return code, False
        if sum(os.fstat(f.fileno()).st_size for f in files) > max_bytes:
            return None, True
        if time.monotonic() >= deadline:
            return None, False


def run_command(cmd: str, *, cwd: Path, settings: Settings, extra_env: Mapping[str, str] | None = None,
                timeout_s: float | None = None, sandbox: Sandbox | None = None) -> CommandResult:
    """Run one user/gene-supplied command under the safety policy. Never raises for a bad command."""
    shown = redact(cmd.strip())
    box = sandbox or Sandbox.resolve(cwd, settings)
    reason = check_command(cmd, settings, cwd)
    if reason is not None:
        return _blocked(shown, reason, box)
    return run_argv(shlex.split(cmd), cwd=cwd, settings=settings, display=shown, extra_env=extra_env,
                    timeout_s=timeout_s, sandbox=box)


def run_validation(*, commands: Sequence[str], cwd: Path, settings: Settings, gene_id: str | None,
                   report_id: str, now: Callable[[], datetime] | None = None,
                   sandbox: Sandbox | None = None) -> ValidationReport:
    """Run ``commands`` in order, stopping at the first failure (later ones would test a broken tree)."""
    clock = now or utc_now
    started = iso(clock())
    box = sandbox or Sandbox.resolve(cwd, settings)
    cmds = [c.strip() for c in commands if c and c.strip()]
    results: list[CommandResult] = []
    # one of the process's validation slots (a fleet run here: one test run per core at a time)
    with validation_slot(), throwaway(box) as copy:  # what they write never reaches the tree (scratch.py)
        for cmd in cmds:
            res = run_command(cmd, cwd=cwd, settings=settings, sandbox=copy)
            results.append(res)
            if not res.ok:
                break
    return ValidationReport(id=report_id, gene_id=gene_id, commands=[redact(c) for c in cmds], results=results,
                            overall_ok=all(r.ok for r in results) and len(results) == len(cmds),
                            started_at=started, finished_at=iso(clock()), sandbox=box.kind)
