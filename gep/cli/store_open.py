"""How a command opens the store, and what every command prints beside its answer: JSON on stdout, skipped
inputs as warnings on stderr. Here, not in gep/cli/root.py, so that each command group's module
(gep/cli/genes_cmd.py, ...) opens the store the one way without importing the root command line back.

Commands that only read the store (history, show, genes list|show) open it with :func:`store_only`: no
Prefect, no git library, no cycle machinery, so they answer in a fraction of a second; `tests/test_cli.py`
checks that none of them imports Prefect. Commands that write (import, genes retire ...) use
:func:`writable_store`, the workspace checked as a cycle checks it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from gep.cli.prefect_link import err
from gep.cli.workspace_arg import checked_top, workspace_or_here
from gep.core.errors import GepError
from gep.core.json_safe import dumps_finite

if TYPE_CHECKING:
    from gep.core.models import Gene
    from gep.core.records import InputWarning
    from gep.store import Store
    from gep.store.quick_read import ReadStore

# when piped, rich assumes 80 columns and truncates ids: give tables room instead (unless COLUMNS says)
out = Console(soft_wrap=True, width=None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 200)


def warn(warnings: list[InputWarning]) -> None:
    """Inputs skipped (a FIFO or a device among the gene files ...): one stderr line each."""
    for w in warnings:
        err.print(f"gep: warning: {w}", markup=False, highlight=False)


def emit_json(obj: Any, indent: int | None = None) -> None:
    sys.stdout.write(dumps_finite(obj, indent=indent) + "\n")  # a NaN in the store prints as null, never invalid JSON
    sys.stdout.flush()


@contextmanager
def store_only(workspace: Path | None) -> Iterator[tuple[Path, ReadStore | None]]:
    """(workspace, its store), or (workspace, None) when nothing was ever recorded there.

    A read never creates ``.gep/``: a workspace no cycle ran on has no store yet. The workspace's own SQLite
    file is read without SQLAlchemy when it can be (gep/store/quick_read.py), else through the full store."""
    # deferred: the console script imports every command module at start, and the settings and the store
    # they read with cost ~0.1 s (pydantic models) that `gep --help` or `gep server status` never need
    from gep.core.config import gep_dir, load_settings
    from gep.store.quick_read import open_quick  # deferred: as above

    path = checked_top(workspace)
    state = gep_dir(path)
    if state.exists() and not state.is_dir():
        raise GepError(f"cannot write engine state in {state}: it is a file, not a folder")
    settings = load_settings(path)
    if not settings.database_url and not state.is_dir():
        yield path, None
        return
    quick = open_quick(path, settings)
    if quick is not None:
        with quick:
            yield path, quick
        return
    # deferred: SQLAlchemy and SQLModel (~0.4 s), only when the quick path cannot answer
    from gep.store import Store

    with Store.for_workspace(path, settings) as store:
        yield path, store


@contextmanager
def genes_here(workspace: Path | None) -> Iterator[tuple[Path | None, ReadStore | None, list[Gene]]]:
    """(workspace, its store, the genes a cycle there selects from); the seed genes alone, with no workspace
    and no store, when ``workspace`` is None. Gene files skipped are warned about once the store is closed."""
    # deferred: the gene loader imports the models and the pattern checks (~0.1 s), which history skips
    from gep.assets.gene_folders import load_genes_dir, seed_genes_dir, workspace_genes

    if workspace is None:
        yield None, None, load_genes_dir(seed_genes_dir())
        return
    skipped: list[InputWarning] = []
    with store_only(workspace) as (path, store):
        yield path, store, (workspace_genes(path, store, skipped) if store is not None
                            else load_genes_dir(seed_genes_dir(), skipped))
    warn(skipped)


def writable_store(workspace: Path | None) -> Store:
    """The store for a command that writes to it: the workspace (default: here) checked as a cycle checks
    it, its state directory made. Close it (or use ``with``)."""
    # deferred: gep.api imports the git layer and settings (~0.1 s), which read-only commands skip
    from gep.api import open_store

    return open_store(workspace_or_here(workspace))
