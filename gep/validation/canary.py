"""The canary: after validation passes, does the tree still load? (by default: byte-compile the changed Python
files, writing nothing into the tree). It runs where validation ran, in the same sandbox."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel

from gep.core.config import Settings
from gep.core.models import CommandResult
from gep.validation.runner import run_argv, run_command
from gep.validation.sandbox import Sandbox
from gep.validation.scratch import throwaway
from gep.validation.slots import validation_slot


class CanaryResult(BaseModel):
    ok: bool
    skipped: bool = False
    result: CommandResult | None = None


def run_canary(*, tree: Path, paths: Sequence[str], settings: Settings, sandbox: Sandbox) -> CanaryResult:
    """Does ``tree`` still load? ``paths``: the files the change writes (``compileall`` checks the .py ones)."""
    mode = (settings.canary or "").strip()
    if mode in ("", "none"):
        return CanaryResult(ok=True, skipped=True)
    with validation_slot(), throwaway(sandbox) as copy:  # what the canary writes never reaches the tree (gep/validation/scratch.py)
        return _run_canary(mode, tree=tree, paths=paths, settings=settings, sandbox=copy)


def _run_canary(mode: str, *, tree: Path, paths: Sequence[str], settings: Settings, sandbox: Sandbox) -> CanaryResult:
    if mode == "compileall":
        files = [p for p in paths if p.endswith(".py") and (tree / p).is_file() and not (tree / p).is_symlink()]
        if not files:
            return CanaryResult(ok=True, skipped=True)
        # the bytecode lands in the throw-away copy (run_canary), never in the tree
        res = run_argv(["python", "-m", "compileall", "-q", *[f"./{f}" for f in files]], cwd=tree,
                       settings=settings, display=f"compileall ({len(files)} changed .py files)", sandbox=sandbox)
        return CanaryResult(ok=res.ok, result=res)
    res = run_command(mode, cwd=tree, settings=settings, sandbox=sandbox)
    return CanaryResult(ok=res.ok, result=res)
