"""Whether a validation report is a verdict on the change, or validation could not run here at all.

A program that is not installed, a ``python -m`` module that is missing (as the runner found them, never as
the output says), a command the allowlist refuses,
a sandbox this machine cannot provide, or the runner's own timeout say nothing about the change: a person's
change (prompt mode) is then left as it is, awaiting changes, and the one line says what is missing and how
to fix it. Everything else (a test that fails, a crash inside the checked code) is a verdict.
"""

from __future__ import annotations

from gep.core.models import CommandResult, ValidationReport

GEP_TOML_FIX = "or set the validation commands this workspace runs in gep.toml (validation = [\"...\"])"


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
    # what the runner found (a program or module that resolved nowhere, a start that failed), never the words
    # a command printed: a tree's own pytest.py printing "No module named pytest" is the change's failure
    if r.missing and r.exit_code is None:
        return f"`{r.missing}` is not installed (not found on PATH): install it, {GEP_TOML_FIX}"
    if not r.started:
        return f"`{cmd}` cannot be started ({r.stderr.strip()[:200]}): install it, {GEP_TOML_FIX}"
    if r.missing:
        return (f"the Python module {r.missing} is not installed for `{cmd.split()[0]}`: install it (pip install "
                f"{r.missing}), {GEP_TOML_FIX}")
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
