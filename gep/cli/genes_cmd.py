"""`gep genes retire|restore|distill`: the gene pool's store commands. Plain store work: never imports Prefect."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from gep.cli.workspace_arg import WorkspaceOpt, workspace_or_here
from gep.core.json_safe import dumps_finite

GeneId = Annotated[str, typer.Argument(help="A gene id as `gep genes list` lists it.")]


def add_gene_commands(app: typer.Typer, friendly: Callable[[Any], Any]) -> None:
    """Add the commands to the `genes` group; ``friendly`` turns errors into one line (gep.cli.root's)."""
    app.command("retire")(friendly(retire))
    app.command("restore")(friendly(restore))
    app.command("distill")(friendly(distill))


def retire(
    gene_id: GeneId,
    reason: Annotated[str, typer.Option("--reason", help="Why the gene is taken out of selection.")],
    workspace: WorkspaceOpt = None,
) -> None:
    """Take a gene out of selection in this workspace for good (until `gep genes restore`).

    The gene stays in the store and in exports; `gep genes list --workspace DIR` shows it as retired.
    """
    from gep.api import open_store
    from gep.assets.gene_files import workspace_genes
    from gep.core.models import utc_now
    from gep.genes.eligibility import retire_gene

    workspace = workspace_or_here(workspace)
    with open_store(workspace) as store:
        known = {g.id for g in workspace_genes(Path(workspace), store)}
        status = retire_gene(store, gene_id, reason=reason, now=utc_now(), known_ids=known)
    typer.echo(f"retired {gene_id}: {status.reason}")


def restore(gene_id: GeneId, workspace: WorkspaceOpt = None) -> None:
    """Put a retired gene back into selection (its retirement stays in its history)."""
    from gep.api import open_store
    from gep.core.models import utc_now
    from gep.genes.eligibility import restore_gene

    with open_store(workspace_or_here(workspace)) as store:
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
    from gep.api import open_store
    from gep.core.config import load_settings
    from gep.core.models import utc_now
    from gep.distill_run import distill_workspace, run_line

    workspace = workspace_or_here(workspace)
    with open_store(workspace) as store:
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
