"""Gene distillation as a Prefect flow (daily deployment `distill-genes/daily`): the engine's
gep.distill_run.distill_workspace, with the analysis and the result shown as artifacts of the run."""

from __future__ import annotations

import os
from pathlib import Path

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.client.schemas.objects import State
from prefect.states import Failed

from flows.report_artifact import publish_workspace
from flows.reporting import workspace_key
from gep.api import open_store
from gep.core.config import load_settings
from gep.core.errors import GepError
from gep.core.models import utc_now
from gep.distill_run import analysis_rows, distill_workspace, run_line, run_markdown
from gep.genes.distiller import DistillRun


@flow(name="distill-genes", log_prints=False, validate_parameters=True)
def distill_genes(workspace: str, dry_run: bool = False) -> DistillRun | State:
    """Distil a workspace's successful capsules into a new gene (gene_distilled_*), stored with the other genes.

    Args:
        workspace: Path of the workspace (a git repository) on the worker's machine.
        dry_run: Analyse and synthesise, but store and log nothing.
    """
    if not workspace.strip() or "{{" in workspace:
        return Failed(message="parameter 'workspace' is empty: deploy with GEP_WORKSPACE=/path/to/workspace "
                              "or fill in the workspace field of the Run form")
    path = Path(workspace).expanduser()
    try:
        with open_store(path) as store:
            result = distill_workspace(store, workspace=path.resolve(), settings=load_settings(path),
                                       env=os.environ, now=utc_now(), dry_run=dry_run)
    except GepError as exc:
        get_run_logger().error(str(exc))
        return Failed(message=str(exc))
    run, key = result.run, workspace_key(path)
    line = run_line(run, dry_run)
    get_run_logger().info(line)
    create_markdown_artifact(key=f"gep-{key}-distill", markdown=run_markdown(run, dry_run),
                             description=f"Gene distillation on {path}")
    create_table_artifact(key=f"gep-{key}-distill-analysis",
                          table=analysis_rows(run.analysis) or [{"kind": "(none)", "subject": "", "detail": line}],
                          description="What the successful capsules have in common")
    publish_workspace(path)  # gep report's charts, as an artifact of this run
    return run
