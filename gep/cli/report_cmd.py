"""`gep report [--workspace DIR]... [--out FILE.html] [--json]`: one self-contained HTML page of how the workspaces
evolved (gep/report/data.py computes it, gep/report/html.py draws it).

Plain store work: never imports Prefect, and reads a workspace no cycle ran on without creating its ``.gep/``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from gep.cli.workspace_arg import checked_top
from gep.core.errors import GepError

DEFAULT_OUT = "report.html"  # in the (first) workspace's .gep/: engine state git never shows


def register(app: typer.Typer, friendly: Callable[[Any], Any]) -> None:
    """Add the `report` command to ``app``; ``friendly`` turns errors into one line (gep.cli.root's)."""
    app.command("report")(friendly(report))


def report(
    workspace: Annotated[list[Path] | None, typer.Option(
        "--workspace", "-w", help="A workspace (repeat for a fleet: a row per workspace); default: the git "
        "repository the current directory is in.")] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="The HTML file to write (default: "
                                             f".gep/{DEFAULT_OUT} in the first workspace).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the page's data as JSON on stdout (each "
                                          "workspace's cycles, totals, learning_effect ...) and write no page.")] = False,
) -> None:
    """Write one HTML page with charts of how the workspaces evolved: outcomes per cycle, the rolling
    verified-fix rate, gene usage and usefulness, signal families, lessons, avoid entries and host failures.

    The page is self-contained (inline SVG and styles, no script, nothing fetched): open it offline, mail
    it, or keep it as a record. Prints the file's path and one line per workspace, then the measured effect
    of learning when cycles were drawn into the holdout (`holdout = 0.1` in gep.toml): verified fixes per
    cycle and attempts per verified fix in each group, and an interval of the difference valid at any cycle
    count ("not enough cycles yet" until each group has 10 cycles). --json prints the page's data instead.

    Exit status: 0 written; 1 written, but a workspace's store could not be read (said on stderr); 2 bad
    input, or no store could be read (nothing written).
    """
    from gep.core.models import utc_now
    from gep.report.data import load_report
    from gep.report.html import render, write_page

    given: list[Path | None] = [*workspace] if workspace else [None]
    paths = list(dict.fromkeys(checked_top(w) for w in given))  # a workspace listed twice: one row
    if as_json:
        _print_json(load_report(paths, utc_now()))
        return
    target = out.expanduser() if out is not None else _default_out(paths[0])
    if target.is_dir():
        raise GepError(f"--out {target} is a directory: name the HTML file to write")
    data = load_report(paths, utc_now())
    broken = [w for w in data.workspaces if w.error]
    if len(broken) == len(data.workspaces):  # nothing to show: the one reason, and no page
        raise GepError(broken[0].summary())
    write_page(target, render(data))
    for w in data.workspaces:
        if not w.error:
            typer.echo(w.summary())
            effect = w.learning_effect
            if effect and (effect.learned.cycles or effect.holdout.cycles):
                for line in effect.lines():
                    typer.echo(f"  {line}")
    typer.echo(f"wrote {target}")
    if broken:  # the page shows the others, and says why these are missing
        for w in broken:
            typer.echo(f"gep: {w.summary()}", err=True)
        raise typer.Exit(1)

def _print_json(data: Any) -> None:
    """The page's data on stdout; exit 1 when a workspace's store could not be read (its `error` says why)."""
    from gep.cli.store_open import emit_json  # deferred: rich's console, only for --json

    emit_json({"generated_at": data.generated_at.isoformat(), "workspaces": [w.as_json() for w in data.workspaces]})
    if any(w.error for w in data.workspaces):
        raise typer.Exit(1)


def _default_out(workspace: Path) -> Path:
    """``.gep/report.html``: the state folder made as a cycle makes it (git never shows it) if none is there."""
    from gep.core.config import gep_dir

    state = gep_dir(workspace)
    if not state.is_dir():
        from gep.git import open_repo
        from gep.git.repo import ensure_state_dir

        ensure_state_dir(open_repo(workspace))
    return state / DEFAULT_OUT

