"""The canary: after validation passes, does the workspace still load? (by default: byte-compile the changed
Python files, writing nothing into the workspace)."""

from __future__ import annotations

import tempfile

from pydantic import BaseModel

from gep.config import Settings
from gep.models import CommandResult
from gep.runner import run_argv, run_command
from gep.workspace import BlastReport, Workspace


class CanaryResult(BaseModel):
    ok: bool
    skipped: bool = False
    result: CommandResult | None = None


def run_canary(*, workspace: Workspace, blast: BlastReport, settings: Settings) -> CanaryResult:
    """Does the workspace still load? Default: byte-compile the changed Python files (nothing written)."""
    mode = (settings.canary or "").strip()
    if mode in ("", "none"):
        return CanaryResult(ok=True, skipped=True)
    if mode == "compileall":
        files = [c.path for c in blast.changes
                 if c.status != "deleted" and c.path.endswith(".py") and (workspace.path / c.path).is_file()]
        if not files:
            return CanaryResult(ok=True, skipped=True)
        with tempfile.TemporaryDirectory(prefix="gep-canary-") as cache:
            # the bytecode goes to a temp dir, so the canary leaves nothing in the workspace
            res = run_argv(["python", "-m", "compileall", "-q", *[f"./{f}" for f in files]], cwd=workspace.path,
                           settings=settings, display=f"compileall ({len(files)} changed .py files)",
                           extra_env={"PYTHONPYCACHEPREFIX": cache})
        return CanaryResult(ok=res.ok, result=res)
    res = run_command(mode, cwd=workspace.path, settings=settings)
    return CanaryResult(ok=res.ok, result=res)
