"""`gep genes list|show|retire|restore|distill`: every verb of the gene pool. Plain store work: never imports
Prefect."""

from __future__ import annotations

import contextlib
import os
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Column, Table

from gep.cli.prefect_link import err
from gep.cli.store_open import emit_json, genes_here, out, writable_store
from gep.cli.workspace_arg import WorkspaceOpt, workspace_or_here
from gep.core import constants
from gep.core.errors import GepError
from gep.core.event_ids import resolve_gene
from gep.core.json_safe import dumps_finite

if TYPE_CHECKING:
    from gep.core.models import Gene
    from gep.core.records import GeneBan
    from gep.store.quick_read import ReadStore

GeneId = Annotated[str, typer.Argument(help="A gene id as `gep genes list` lists it (or a unique prefix).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON on stdout and nothing else.")]


def genes_app(friendly: Callable[[Any], Any]) -> typer.Typer:
    """The `genes` group; ``friendly`` turns errors into one line (gep.cli.root's)."""
    app = typer.Typer(help="List and inspect genes (seed genes, workspace genes, imported genes); retire and "
                      "restore them; distil new ones from successful capsules.", no_args_is_help=True)
    for name, command in (("retire", retire), ("restore", restore), ("distill", distill), ("list", genes_list),
                          ("show", genes_show)):  # the order `gep genes --help` lists them in
        app.command(name)(friendly(command))
    return app


def retire(
    gene_id: GeneId,
    reason: Annotated[str, typer.Option("--reason", help="Why the gene is taken out of selection.")],
    workspace: WorkspaceOpt = None,
) -> None:
    """Take a gene out of selection in this workspace for good (until `gep genes restore`).

    The gene stays in the store and in exports; `gep genes list --workspace DIR` shows it as retired.
    """
    from gep.assets.gene_folders import workspace_genes
    from gep.core.models import utc_now
    from gep.genes.eligibility import retire_gene

    workspace = workspace_or_here(workspace)
    with writable_store(workspace) as store:
        known = {g.id for g in workspace_genes(Path(workspace), store)}
        gene_id = resolve_gene(gene_id, sorted(known))
        status = retire_gene(store, gene_id, reason=reason, now=utc_now(), known_ids=known)
    typer.echo(f"retired {gene_id}: {status.reason}")


def restore(gene_id: GeneId, workspace: WorkspaceOpt = None) -> None:
    """Put a retired gene back into selection (its retirement stays in its history)."""
    from gep.core.models import utc_now
    from gep.genes.eligibility import restore_gene

    with writable_store(workspace) as store:
        retired = sorted(s.gene_id for s in store.list_gene_statuses() if s.retired)
        with contextlib.suppress(GepError):  # not a retired one's id or prefix: restore_gene says so
            gene_id = resolve_gene(gene_id, retired)
        restore_gene(store, gene_id, now=utc_now())
    typer.echo(f"restored {gene_id}")


def distill(
    workspace: WorkspaceOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Analyse and synthesise, but store and log "
                                          "nothing.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the run as JSON on stdout and nothing "
                                          "else.")] = False,
) -> None:
    """Distil the workspace's successful capsules into a new gene (gene_distilled_*), as the daily
    `distill-genes` flow does.

    Skipped with fewer than distill_min_capsules successes, within distill_interval_hours of the last
    attempt, or when the capsules are those of the last attempt. With ANTHROPIC_API_KEY Claude proposes the
    gene, else it is synthesised from the analysis; either way it is checked and repaired or refused.
    """
    from gep.core.config import load_settings
    from gep.core.models import utc_now
    from gep.distill_run import distill_workspace, run_line

    workspace = workspace_or_here(workspace)
    with writable_store(workspace) as store:
        settings = load_settings(workspace)
        result = distill_workspace(store, workspace=Path(workspace).resolve(), settings=settings, env=os.environ,
                                   now=utc_now(), dry_run=dry_run)
    if as_json:
        data = {**result.run.model_dump(mode="json", exclude_none=True), "dry_run": dry_run,
                "stored": result.gene is not None and not dry_run}
        sys.stdout.write(dumps_finite(data) + "\n")
        return
    typer.echo(run_line(result.run, dry_run))
    for item in [*result.run.repairs, *result.run.notes]:
        typer.echo(f"  {item}")


def genes_list(
    workspace: Annotated[Path | None, typer.Option("--workspace", "-w", help="Include the workspace's "
                                                   "genes and show active bans, retired genes and genes "
                                                   "that cannot run here.")] = None,
    as_json: JsonOpt = False,
    limit: Annotated[int | None, typer.Option(min=0, show_default=False, help="Show at most this many genes "
                                              f"(0: all; default {constants.GENES_LIST_LIMIT}).")] = None,
) -> None:
    """List genes with their category, signal patterns, any active ban, and whether they can be selected
    in the workspace (retired, or "not runnable here: node not found")."""
    bans: dict[str, GeneBan] = {}
    excluded: dict[str, str] = {}
    with genes_here(workspace) as (path, store, genes):
        if path is not None:
            bans, excluded = _bans_and_exclusions(path, store, genes)
    limit = constants.GENES_LIST_LIMIT if limit is None else limit
    if limit and len(genes) > limit:
        err.print(f"{len(genes) - limit:,} more genes not shown (--limit 0 lists all {len(genes):,})")
        genes = genes[:limit]
    if as_json:
        emit_json([{**g.to_asset(), "ban": bans[g.id].model_dump(mode="json") if g.id in bans else None,
                    **({"selectable": g.id not in excluded, "excluded": excluded.get(g.id)}
                       if workspace is not None else {})} for g in genes])
        return
    # in a narrow terminal every cell is wrapped to its column's width beforehand (ids broken, never cut: they
    # are typed), so that the table fits; the signal patterns are shortened: `gep genes show` has them all
    narrow = out.size.width < WIDE
    widths = _widths(out.size.width, workspace is not None)
    table = Table(*(Column(name, no_wrap=narrow, width=w if narrow else None, overflow="fold")
                    for name, w in widths.items()))
    for g in genes:
        b = bans.get(g.id)
        ban = (f"banned ({b.cycles_left} cycles left): {b.reason}" if b and b.cycles_left is not None
               else f"banned: {b.reason}" if b else "")
        signals = _cut(", ".join(g.signals_match), 2 * widths["signals_match"] if narrow else 70)
        cells = [g.id, g.category, signals, ban, *([excluded.get(g.id, "yes")] if workspace is not None else [])]
        table.add_row(*(_fill(c, w) if narrow else c for c, w in zip(cells, widths.values(), strict=True)))
    out.print(table, soft_wrap=False)  # the cells wrap to the terminal (soft wrap would let them stick out)


WIDE = 120  # from this many columns rich lays the genes table out itself (piped output has 200)


def _widths(columns: int, with_workspace: bool) -> dict[str, int]:
    """Each column's width in a table ``columns`` wide (borders and padding: 3 per column, plus 1)."""
    names = ["id", "category", "signals_match", "ban", *(["selectable"] if with_workspace else [])]
    room = max(columns, 60) - 3 * len(names) - 1
    fixed = {"id": 20 if with_workspace else 30, "category": 8, "selectable": 10}
    rest = room - sum(fixed[n] for n in names if n in fixed)
    return {n: fixed.get(n) or (rest * 3 // 5 if n == "signals_match" else rest - rest * 3 // 5) for n in names}


def _fill(text: str, width: int) -> str:
    return "\n".join(textwrap.wrap(text, width, break_on_hyphens=False)) if len(text) > width else text


def _cut(text: str, room: int) -> str:
    return text if len(text) <= room else text[: room - 1] + "…"


def _bans_and_exclusions(path: Path, store: ReadStore | None,
                         genes: list[Gene]) -> tuple[dict[str, GeneBan], dict[str, str]]:
    """The workspace's active bans by gene, and why each gene a cycle there cannot select is excluded."""
    # deferred: selection, eligibility and the command runner (~0.3 s): only `gep genes list --workspace`
    from gep.core.config import load_settings
    from gep.core.models import utc_now
    from gep.genes.eligibility import selectable_genes
    from gep.genes.selector import active_bans
    from gep.validation.runner import command_env

    events = store.recent_events(500) if store is not None else []
    failed = store.list_failed_capsules() if store is not None else []
    settings = load_settings(path)
    statuses = store.list_gene_statuses() if store is not None else []
    excluded = selectable_genes(genes, statuses=statuses, workspace=path, settings=settings,
                                env=command_env(settings)).excluded
    bans = {b.gene_id: b for b in active_bans(recent_events=events, signals=[], settings=settings,
                                              failed_capsules=failed, genes=genes, now=utc_now())}
    return bans, excluded


def genes_show(
    gene_id: GeneId,
    workspace: Annotated[Path | None, typer.Option("--workspace", "-w", help="Also look in the workspace's "
                                                   "genes (.gep/genes/ and imported ones).")] = None,
) -> None:
    """Print one gene as JSON (the asset, with its asset_id)."""
    with genes_here(workspace) as (_, _, genes):
        found = resolve_gene(gene_id, [g.id for g in genes])
    emit_json(next(g for g in genes if g.id == found).to_asset(), indent=2 if sys.stdout.isatty() else None)
