"""The gene pool a cycle selects from (issue 16): genes that can run here and are not retired, and an
automatic gene when the signals ask for work no selectable gene covers.

The select stage calls :func:`gene_pool` before selection (its ``excluded`` goes to the selector) and
:func:`fall_back_to_auto_gene` after it. ``gep genes list`` shows the same ``excluded`` reasons.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gep.core.config import Settings
from gep.core.models import Gene
from gep.core.records import AutoGeneRecord, GenePoolRecord
from gep.genes.automatic import ensure_gene
from gep.genes.eligibility import GenePool, GeneStatusRepository, selectable_genes
from gep.genes.selector import Selection
from gep.store import Store
from gep.validation.runner import command_env

AUTO_SOURCE = "auto"  # the genes table's ``source`` of a gene the engine built for uncovered signals


def gene_pool(genes: Sequence[Gene], *, statuses: GeneStatusRepository, workspace: Path,
              settings: Settings) -> GenePool:
    """The genes selection may draw from in ``workspace`` and why the others may not (retired, or their
    validation cannot run here with the environment validation runs with)."""
    return selectable_genes(genes, statuses=statuses.list_gene_statuses(), workspace=workspace, settings=settings,
                            env=command_env(settings))


def fall_back_to_auto_gene(selection: Selection, *, genes: Sequence[Gene], pool: GenePool, signals: Sequence[str],
                           store: Store, workspace: Path, settings: Settings) -> GenePoolRecord:
    """When selection found no gene: the automatic gene for the actionable signals (stored when new), so the
    cycle runs with it instead of ending empty. Genes banned this cycle or excluded here are not reused.
    ``selection`` is completed in place (its gene and decision), so the cycle carries one selection."""
    record = GenePoolRecord(excluded=dict(pool.excluded))
    if selection.gene is not None:
        return record
    banned = {b.gene_id for b in selection.decision.bans_applied}
    decision = ensure_gene(signals=signals, intent=None, genes=genes, excluded=banned | set(pool.excluded),
                           workspace=workspace, settings=settings, env=command_env(settings))
    gene = decision.gene
    record.auto_gene = AutoGeneRecord(gene_id=gene.id if gene else None, created=decision.created,
                                      reason=decision.reason)
    if gene is None:
        selection.decision.reasons.append(f"no automatic gene: {decision.reason}")
        return record
    if decision.created:
        store.upsert_gene(gene, source=AUTO_SOURCE)
    selection.gene = gene
    selection.decision.selected = gene.id
    selection.decision.reasons.insert(0, decision.reason)
    return record
