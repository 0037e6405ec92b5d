"""Whether a validation report is a verdict on the change, or validation could not run here at all.

A program that is not installed, a ``python -m`` module that is missing, a command the allowlist refuses,
a sandbox this machine cannot provide, or the runner's own timeout say nothing about the change: a person's
change (prompt mode) is then left as it is, awaiting changes, and the one line says what is missing and how
to fix it. Everything else (a test that fails, a crash inside the checked code) is a verdict.
"""

from __future__ import annotations

import re
import shlex

from gep.core.models import CommandResult, ValidationReport

_NOT_FOUND = re.compile(r"^program '(?P<prog>[^']+)' not found on PATH")
GEP_TOML_FIX = "or set the validation commands this workspace runs in gep.toml (validation = [\"...\"])"


def _module(cmd: str) -> str | None:
    """The module of ``python -m <module> ...`` (``-m`` glued or not), None for anything else."""
    try:
        argv = shlex.split(cmd)
    except ValueError:
        return None
    for i, arg in enumerate(argv[1:], start=1):
        if arg == "-m" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("-m") and len(arg) > 2:
            return arg[2:]
    return None


def _missing_module(r: CommandResult) -> str | None:
    module = _module(r.cmd)
    if module is None or r.exit_code != 1:
        return None
    names = {module, module.split(".")[0]}
    # the interpreter's own words, "<python>: No module named pytest": not an import error inside a test
    for line in (r.stderr or "").splitlines():
        m = re.search(r": No module named '?([A-Za-z0-9_.]+)'?\s*$", line.strip())
        if m and m.group(1) in names and not line.lstrip().startswith(("E ", "ModuleNotFoundError")):
            return module
    return None


def cannot_run(r: CommandResult) -> str | None:
    """Why the command ``r`` could not run here (what is missing and the fix), or None for a verdict."""
    cmd = r.cmd[:120]
    if r.ok:
        return None
    if r.blocked_reason:
        if r.blocked_reason.startswith("sandbox:"):
            return f"`{cmd}` was not run: {r.blocked_reason.removeprefix('sandbox:').strip()}"
        return (f"`{cmd}` is not allowed here ({r.blocked_reason}): allow it in gep.toml (command_allowlist, "
                f"python_modules), {GEP_TOML_FIX}")
    found = _NOT_FOUND.match(r.stderr or "")
    if found and r.exit_code is None:
        return f"`{found['prog']}` is not installed (not found on PATH): install it, {GEP_TOML_FIX}"
    if r.exit_code is None and (r.stderr or "").startswith("cannot start:"):
        return f"`{cmd}` cannot be started ({r.stderr.strip()}): install it, {GEP_TOML_FIX}"
    module = _missing_module(r)
    if module:
        return (f"the Python module {module} is not installed for `{cmd.split()[0]}`: install it (pip install "
                f"{module.split('.')[0]}), {GEP_TOML_FIX}")
    if r.timed_out:
        return f"`{cmd}` ran past the validation timeout: raise validation_timeout_s in gep.toml, {GEP_TOML_FIX}"
    return None


def not_run(report: ValidationReport) -> str | None:
    """One line when validation could not run (the first command that failed could not run), else None."""
    failed = next((r for r in report.results if not r.ok), None)
    if failed is None:
        return None
    why = cannot_run(failed)
    return f"validation could not run here: {why}" if why else None
