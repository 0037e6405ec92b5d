"""The one safe command runner: gene validation, the canary and the model's `run_validation` tool.

A command is a single program with arguments. It is split with :func:`shlex.split` and executed without a
shell, so there is nothing to inject into; on top of that, anything that only makes sense to a shell
(operators, substitution, expansion, redirection, newlines) is refused outright rather than passed on
as a literal argument, and so are flags that run inline code (``python -c``, ``node -e``, ...). The
program's basename must be on the allowlist. Each command runs in its own process group with a scrubbed
environment and a timeout; on timeout the whole group is killed. Output is captured (tail kept, capped)
and redacted.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
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

from gep.config import Settings
from gep.models import CommandResult, ValidationReport, iso, utc_now
from gep.sanitize import redact, scrub_env

_PYTHONS = re.compile(r"^python(\d+(\.\d+)?)?$")
_ENV_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_CODE_MODULES = {"timeit"}  # stdlib modules whose arguments are Python statements
# Characters that only mean something to a shell; refused even inside quotes (no gene needs them).
_SHELL_OPERATORS = [(";", "';'"), ("&", "'&' (&&, background)"), ("|", "'|' (pipe, ||)"),
                    (">", "'>' (redirection)"), ("<", "'<' (redirection)")]


# ------------------------------------------------------------------ policy


def _short_flags(arg: str) -> str:
    """The letters of a short-option cluster (``-qc`` -> ``qc``); empty for anything else."""
    if arg.startswith("-") and not arg.startswith("--") and len(arg) > 1:
        return arg[1:].split("=", 1)[0]
    return ""


def _python_inline(args: Sequence[str]) -> str | None:
    """Interpreter options come before the script or ``-m module``; after that, args belong to it."""
    i = 0
    while i < len(args):
        a = args[i]
        if a == "-m" or (a.startswith("-") and _short_flags(a).endswith("m")):  # ``-m mod``, ``-qm pytest``
            module = args[i + 1] if i + 1 < len(args) else ""
            return f"python -m {module} (runs its arguments as code) is not allowed" if module in _CODE_MODULES else None
        if not a.startswith("-") or a == "-":
            return None  # script from here on (``-`` reads stdin, which is /dev/null)
        letters = _short_flags(a)
        if "c" in letters:
            return "python -c (inline code) is not allowed"
        if letters[-1:] in ("W", "X") and len(letters) == 1:
            i += 1  # option with a separate argument
        i += 1
    return None


def _node_inline(args: Sequence[str]) -> str | None:
    for a in args:
        if "data:" in a:  # --import/--loader/-r data:text/javascript,<code>
            return "node data: URL (inline code) is not allowed"
        if not a.startswith("-"):
            return None  # the script
        name = a.split("=", 1)[0]
        if name in ("--eval", "--print", "--input-type"):
            return f"node {name} (inline code) is not allowed"
        letters = _short_flags(a)
        if "e" in letters or "p" in letters:
            return f"node {a} (inline code) is not allowed"
    return None


def _npx_inline(args: Sequence[str]) -> str | None:
    for a in args:
        name = a.split("=", 1)[0]
        if name in ("-c", "--call", "--shell", "--shell-auto-fallback") or "c" in _short_flags(a):
            return f"{name} (runs a shell string) is not allowed"
    return None


def _make_inline(args: Sequence[str]) -> str | None:
    for a in args:
        name = a.split("=", 1)[0]
        if name in ("--eval", "-E") or (a.startswith("-E") and not a.startswith("--")):
            return "make --eval (inline makefile code) is not allowed"
        if name in ("SHELL", ".SHELLFLAGS", "MAKESHELL", "MAKEFLAGS"):
            return f"make variable {name} cannot be overridden"
    return None


def check_command(cmd: str, allowlist: Sequence[str]) -> str | None:
    """None if ``cmd`` may run; otherwise a one-line reason it is blocked."""
    if not cmd or not cmd.strip():
        return "empty command"
    if any(c in cmd for c in "\n\r\x00"):
        return "newlines and NUL are not allowed (one command per entry)"
    if "`" in cmd:
        return "backticks (command substitution) are not allowed"
    if "$(" in cmd:
        return "$( ) (command substitution) is not allowed"
    if "$" in cmd:
        return "'$' (shell expansion) is not allowed: commands run without a shell"
    for op, label in _SHELL_OPERATORS:
        if op in cmd:
            return f"shell operator {label} is not allowed: commands run without a shell"
    try:
        argv = shlex.split(cmd)
    except ValueError as exc:
        return f"cannot parse command ({exc})"
    if not argv:
        return "empty command"
    if _ENV_ASSIGN.match(argv[0]):
        return "environment assignments before the program are not allowed"
    program = argv[0]
    base = os.path.basename(program)
    if not base or base not in set(allowlist):
        return f"program '{base or program}' is not on the allowlist ({', '.join(allowlist)})"
    args = argv[1:]
    if _PYTHONS.match(base):
        return _python_inline(args)
    if base in ("node", "nodejs", "deno", "bun"):
        return _node_inline(args)
    if base == "npx":
        return _npx_inline(args)
    if base == "npm" and args[:1] in (["exec"], ["x"]):
        return _npx_inline(args[1:])
    if base in ("make", "gmake"):
        return _make_inline(args)
    return None


# ------------------------------------------------------------------ execution


def _load_prctl() -> Callable[[int, int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl  # type: ignore[no-any-return]
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
    if _PYTHONS.match(name):
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


def command_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = scrub_env(os.environ)
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # keep validation from leaving __pycache__ in the workspace
    # nor .pytest_cache (git sees it as ignored, so rollback and the blast radius would never notice it)
    addopts = env.get("PYTEST_ADDOPTS", "")
    if "no:cacheprovider" not in addopts:
        env["PYTEST_ADDOPTS"] = f"{addopts} -p no:cacheprovider".strip()
    env.pop("PYTHONSTARTUP", None)
    if extra:
        env.update(extra)
    return env


def run_argv(argv: Sequence[str], *, cwd: Path, settings: Settings, display: str | None = None,
             extra_env: Mapping[str, str] | None = None, timeout_s: float | None = None) -> CommandResult:
    """Run an already-checked argument vector (the engine's own commands, e.g. the canary)."""
    with tempfile.TemporaryDirectory(prefix="gep-pycache-") as cache:
        # bytecode (pytest's, `compileall`'s) goes to a throwaway dir: validation leaves the workspace as it was
        env = command_env({"PYTHONPYCACHEPREFIX": cache, **(extra_env or {})})
        return _run(argv, cwd=cwd, settings=settings, shown=display or shlex.join(argv), env=env,
                    timeout_s=timeout_s)


def _run(argv: Sequence[str], *, cwd: Path, settings: Settings, shown: str, env: dict[str, str],
         timeout_s: float | None) -> CommandResult:
    exe = resolve_program(argv[0], env)
    if exe is None:
        return CommandResult(cmd=shown, ok=False, exit_code=None, stderr=f"program '{argv[0]}' not found on PATH")
    timeout = settings.validation_timeout_s if timeout_s is None else timeout_s
    cap = settings.output_cap_chars
    started = time.monotonic()
    timed_out = False
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(
                [exe, *argv[1:]], cwd=str(cwd), env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                start_new_session=True, close_fds=True, preexec_fn=die_with_parent(os.getpid()))
        except OSError as exc:
            return CommandResult(cmd=shown, ok=False, exit_code=None, stderr=f"cannot start: {exc.strerror}")
        try:
            code: int | None = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            code = None
        finally:
            # kill whatever is left of the group (timeout, or background children of a finished command)
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            if proc.returncode is None:
                proc.wait()
        duration = int((time.monotonic() - started) * 1000)
        stdout = _read_tail(out, cap)
        stderr = _read_tail(err, cap)
    if timed_out:
        stderr = (stderr + f"\n[timed out after {timeout:g}s; process group killed]").lstrip("\n")
    return CommandResult(cmd=shown, ok=(code == 0 and not timed_out), exit_code=code, stdout=stdout,
                         stderr=stderr, duration_ms=duration, timed_out=timed_out)


def run_command(cmd: str, *, cwd: Path, settings: Settings, extra_env: Mapping[str, str] | None = None,
                timeout_s: float | None = None) -> CommandResult:
    """Run one user/gene-supplied command under the safety policy. Never raises for a bad command."""
    shown = redact(cmd.strip())
    reason = check_command(cmd, settings.command_allowlist)
    if reason is not None:
        return CommandResult(cmd=shown, ok=False, exit_code=None, blocked_reason=reason,
                             stderr=f"BLOCKED: {reason}")
    return run_argv(shlex.split(cmd), cwd=cwd, settings=settings, display=shown, extra_env=extra_env,
                    timeout_s=timeout_s)


def run_validation(*, commands: Sequence[str], cwd: Path, settings: Settings, gene_id: str | None,
                   report_id: str, now: Callable[[], datetime] | None = None) -> ValidationReport:
    """Run ``commands`` in order, stopping at the first failure (later ones would test a broken tree)."""
    clock = now or utc_now
    started = iso(clock())
    cmds = [c.strip() for c in commands if c and c.strip()]
    results: list[CommandResult] = []
    for cmd in cmds:
        res = run_command(cmd, cwd=cwd, settings=settings)
        results.append(res)
        if not res.ok:
            break
    return ValidationReport(id=report_id, gene_id=gene_id, commands=[redact(c) for c in cmds], results=results,
                            overall_ok=all(r.ok for r in results) and len(results) == len(cmds),
                            started_at=started, finished_at=iso(clock()))
