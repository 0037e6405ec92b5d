"""One distillation run over a workspace's store (``gep genes distill`` and the ``distill-genes`` flow), and
how its result reads: a line, a markdown report and a table of the analysis.

The analysis and synthesis are gep/genes/distiller.py's; this module feeds it the store's capsules, recent events
and every known gene, logs the run (unless a dry run) and stores the kept gene with the other genes.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

from gep.assets.gene_files import workspace_genes
from gep.core import constants
from gep.core.config import Settings
from gep.core.models import DistillAnalysis
from gep.genes.distiller import DistillResult, DistillRun, distill, rejected_capsules
from gep.store import Store
from gep.validation.runner import command_env

DISTILLED_SOURCE = "distilled"  # the genes table's ``source`` of a distilled gene
CAPSULE_LIMIT = 2_000  # the newest capsules a run reads (the capsule-set hash covers exactly these)
CLAUDE_ENV = ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")


def distill_env(settings: Settings, env: Mapping[str, str]) -> dict[str, str]:
    """What distillation runs with: the environment validation commands get (its PATH decides which
    commands can run here), plus the Claude credentials for the proposer, which validation never sees."""
    return {**command_env(settings), **{k: env[k] for k in CLAUDE_ENV if env.get(k)}}


def distill_workspace(store: Store, *, workspace: Path, settings: Settings, env: Mapping[str, str], now: datetime,
                      dry_run: bool = False) -> DistillResult:
    """Distil the workspace's own successful capsules into a gene; a kept gene is stored unless ``dry_run``."""
    capsules = [c for c in store.list_capsules(limit=CAPSULE_LIMIT) if c.origin is None or c.origin.own]
    events = store.recent_events(constants.MEMORY_GRAPH_EVENTS)
    result = distill(capsules=capsules, events=events, genes=workspace_genes(workspace, store), log=store,
                     workspace=workspace, settings=settings, env=distill_env(settings, env), now=now, dry_run=dry_run,
                     rejected=rejected_capsules(events, store.list_feedback()))
    if result.gene is not None and not dry_run:
        store.upsert_gene(result.gene, source=DISTILLED_SOURCE)
    return result


# ------------------------------------------------------------------ how a run reads


def run_line(run: DistillRun, dry_run: bool = False) -> str:
    """One line: what the run did."""
    prefix = "dry run: " if dry_run else ""
    if run.status == "kept":
        stored = "would be stored" if dry_run else "stored"
        return (f"{prefix}kept {run.gene_id} ({run.synthesis} synthesis from {run.capsule_count} successful "
                f"capsules; {stored})")
    if run.status == "rejected":
        return f"{prefix}rejected {run.gene_id or '(no gene)'}: " + "; ".join(run.reasons)
    return f"{prefix}skipped: " + "; ".join(run.reasons)


def analysis_rows(analysis: DistillAnalysis | None) -> list[dict[str, str]]:
    """The analysis as table rows (kind, subject, detail)."""
    if analysis is None:
        return []
    rows = [{"kind": "high frequency", "subject": h.gene_id,
             "detail": f"{h.count} capsules, avg score {h.avg_score:.2f}; top triggers: {', '.join(h.top_triggers)}"}
            for h in analysis.high_frequency]
    rows += [{"kind": "strategy drift", "subject": d.gene_id,
              "detail": f"similarity {d.similarity:.2f}: '{d.early_summary}' -> '{d.recent_summary}'"}
             for d in analysis.strategy_drift]
    rows += [{"kind": "coverage gap", "subject": g.signal, "detail": f"seen in {g.frequency} events"}
             for g in analysis.coverage_gaps]
    return rows


def run_markdown(run: DistillRun, dry_run: bool = False) -> str:
    """The run as a report: outcome, repairs, notes, analysis, and the gene."""
    lines = [f"# Gene distillation: {run.status}", "", run_line(run, dry_run)]
    a = run.analysis
    if a is not None:
        lines += ["", "## Analysis", f"{a.total_success} successful of {a.total_capsules} capsules "
                  f"(rate {a.success_rate:.0%})", ""]
        lines += [f"- {r['kind']}: `{r['subject']}`: {r['detail']}" for r in analysis_rows(a)] or ["- (no pattern)"]
    for title, items in (("Repairs", run.repairs), ("Notes", run.notes),
                         ("Reasons", run.reasons if run.status != "skipped" else [])):
        if items:
            lines += ["", f"## {title}"] + [f"- {i}" for i in items]
    if run.gene is not None:
        lines += ["", f"## Gene `{run.gene.id}`", "```json", run.gene.model_dump_json(indent=2, exclude_none=True),
                  "```"]
    return "\n".join(lines)
