"""Per problem family, each gene's discounted record: the evidence selection ranks by (issue 41, point 5).

A problem family is one memory-graph situation (its signal key). In a family, every outcome of any gene
multiplies all the genes' records there by ``FAMILY_DISCOUNT`` before it is counted, as a discounted
Thompson / greedy bandit forgets: a gene the family has stopped picking loses its stale record as the family
moves on, so a gene that stopped working here, or an unlucky early record of one that works, does not rank for
long on what it once did. Families are independent: a gene that stops working in one keeps its record in
another. The memory graph weighs the families similar to the current one by their similarity (priors from
similar problems) and gives a gene with no record in them its record elsewhere as a prior.

Pure: outcomes in (oldest first, each with its family, gene, success or not and time weight), records out.
The store's folded summaries stand for outcomes older than every event: their windowed evidence is where a
family's record starts.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from gep.core import constants


class FamilyOutcome(NamedTuple):
    family: str
    gene_id: str
    ok: bool
    weight: float  # the outcome's time decay (1 when undated)


Records = dict[str, dict[str, list[float]]]  # family -> gene -> [successes, failures], discounted


def family_records(start: Iterable[tuple[str, str, float, float]], outcomes: Iterable[FamilyOutcome],
                   discount: float = constants.FAMILY_DISCOUNT) -> Records:
    """Each family's discounted record per gene. ``start``: (family, gene, successes, failures) of folded
    history (the summaries' windowed evidence); ``outcomes``: the events after it, oldest first."""
    out: Records = {}
    for family, gene_id, s, f in start:
        rec = out.setdefault(family, {}).setdefault(gene_id, [0.0, 0.0])
        rec[0] += s
        rec[1] += f
    for o in outcomes:
        genes = out.setdefault(o.family, {})
        for rec in genes.values():
            rec[0] *= discount
            rec[1] *= discount
        rec = genes.setdefault(o.gene_id, [0.0, 0.0])
        rec[0 if o.ok else 1] += o.weight
    return out
