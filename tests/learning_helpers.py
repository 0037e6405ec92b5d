"""Shared by the learning tests: the example workspace as an agent keeps it, and cycles on it (no Prefect)."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from conftest import EXAMPLE, init_repo

from gep import CycleRequest, run_cycle, solidify_pending
from gep.core.models import EvolutionEvent
from gep.store import Store

REPAIR = "gene_repair_from_errors"
BUG, FIX = "(len(values) - 1)", "len(values)"
LOG = Path("logs") / "agent.log"
ERROR_LINE = "[ERROR] report: AssertionError: mean([2, 4, 6]) returned 6.0, expected 4.0"


def venv_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """`python` in gene validation resolves to this interpreter (which has pytest)."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")


def agent_workspace(path: Path, files: dict[str, str] | None = None) -> Path:
    """The bundled example with its logs ignored by git, as an agent's logs usually are: appending to them
    leaves the repository clean and no rollback touches them."""
    shutil.copytree(EXAMPLE, path)
    (path / ".gitignore").write_text("logs/\n")
    for rel, text in (files or {}).items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(text)
    return init_repo(path, {})


def cycle(ws: Path, seed: int, clock: Callable[[], datetime] | None = None, **request: object) -> EvolutionEvent:
    kwargs = {"clock": clock} if clock else {}
    event = run_cycle(CycleRequest(workspace=ws, seed=seed, **{"mutator": "prompt", **request}), env={}, **kwargs)
    assert event is not None
    return event


def finish(ws: Path, summary: str | None = None, clock: Callable[[], datetime] | None = None) -> EvolutionEvent:
    """What `gep solidify` runs: the pipeline from the solidify stage."""
    kwargs = {"clock": clock} if clock else {}
    event = solidify_pending(CycleRequest(workspace=ws, summary=summary), env={}, **kwargs)
    assert event is not None
    return event


def fix_the_mean(ws: Path) -> None:
    p = ws / "stats.py"
    p.write_text(p.read_text().replace(BUG, FIX))


def log_again(ws: Path, at: datetime) -> None:
    """The agent's report hits the same error again, at ``at``."""
    with (ws / LOG).open("a") as fh:
        fh.write(f"{at.astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%SZ')} {ERROR_LINE}\n")


def log_ok(ws: Path, at: datetime) -> None:
    """The agent's report runs again without the error, at ``at``: evidence a fix can be judged on."""
    with (ws / LOG).open("a") as fh:
        fh.write(f"{at.astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%SZ')} INFO report: mean ok\n")


def committed_fix(ws: Path, seed: int = 1) -> EvolutionEvent:
    """Cycle in prompt mode on the example, the fix made by hand, then solidified: a committed repair."""
    first = cycle(ws, seed)
    assert first.outcome.status == "awaiting_changes" and first.genes_used == [REPAIR], (first.signals, first.meta.selector)
    fix_the_mean(ws)
    done = finish(ws, "Fix the mean")
    assert done.outcome.status == "success" and done.meta.commit, done.meta.failure_reasons
    return done


def later(minutes: float) -> datetime:
    return datetime.now(UTC) + timedelta(minutes=minutes)


def store_of(ws: Path) -> Store:
    return Store.for_workspace(ws)
