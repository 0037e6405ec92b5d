"""Retired genes in asset files: an export marks them, an import retires them again (issue 16).

``genes.json`` gets a ``retired`` object beside its ``genes`` array: gene id -> ``{"reason", "retired_at"}``.
The genes themselves stay exactly as stored (their asset ids still verify) and a retired seed gene, which is
never exported, is marked all the same. The reference ignores the key; importing it retires each known gene
not retired yet in the target workspace, with the exported reason.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any

from gep.genes.eligibility import GeneStatusRepository, retire_gene

RETIRED_KEY = "retired"


def retired_marks(statuses: GeneStatusRepository) -> dict[str, dict[str, str]]:
    """The ``retired`` object of an export (empty when nothing is retired). A JSON edge."""
    return {s.gene_id: {"reason": s.reason or "", "retired_at": s.changed_at.isoformat() if s.changed_at else ""}
            for s in statuses.list_gene_statuses() if s.retired}


def import_retired(statuses: GeneStatusRepository, doc: Mapping[str, Any], *, known_ids: Collection[str],
                   now: datetime) -> list[str]:
    """Retire the genes ``doc`` (a genes.json object, a JSON edge) marks as retired; the ids retired now.
    Unknown genes, genes retired already and marks that are not objects with a reason are left alone."""
    marks = doc.get(RETIRED_KEY)
    done: list[str] = []
    if not isinstance(marks, dict):
        return done
    for gene_id, mark in marks.items():
        reason = mark.get("reason") if isinstance(mark, dict) else None
        if not isinstance(reason, str) or not reason.strip() or gene_id not in known_ids:
            continue
        current = statuses.get_gene_status(gene_id)
        if current is None or not current.retired:
            retire_gene(statuses, gene_id, reason=reason, now=now, known_ids=known_ids)
            done.append(gene_id)
    return done
