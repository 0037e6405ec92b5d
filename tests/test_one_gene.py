"""The gene is carried once from selection to the recorded event (issue 46, point 3): one Selection, the record
types produced directly (no ``model_validate(x.model_dump())`` between twin types), no agreement check."""

from __future__ import annotations

import ast
from pathlib import Path

from source_trees import nodes

from gep import CycleRequest
from gep.core.config import Settings
from gep.core.records import SelectorDecision
from gep.cycle import pipeline
from gep.cycle.context import open_cycle
from gep.genes.eligibility import GenePool
from gep.genes.pool import fall_back_to_auto_gene
from gep.genes.selector import Selection
from gep.store import Store

ROOT = Path(__file__).resolve().parents[1]


def _round_trips(path: Path) -> list[str]:
    """``X.model_validate(...model_dump(...)...)`` calls in one file: a copy between two types of one record."""
    found = []
    for node in nodes(path):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "model_validate":
            dumps = [n for arg in node.args for n in ast.walk(arg) if isinstance(n, ast.Call)
                     and isinstance(n.func, ast.Attribute) and n.func.attr == "model_dump"]
            if dumps:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_no_record_is_copied_into_its_twin_through_a_dump() -> None:
    files = sorted([*(ROOT / "gep").rglob("*.py"), *(ROOT / "flows").rglob("*.py")])
    assert len(files) > 100
    assert [hit for f in files for hit in _round_trips(f)] == []


def test_the_stored_gene_list_is_read_as_a_gene_in_one_place() -> None:
    """``genes_used[0]`` only in EvolutionEvent.gene_id (gep/core/models.py); every reader asks the event."""
    files = sorted([*(ROOT / "gep").rglob("*.py"), *(ROOT / "flows").rglob("*.py"), *(ROOT / "bench").rglob("*.py")])
    hits = [f"{f.relative_to(ROOT)}:{n}" for f in files
            for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1) if "genes_used[0]" in line]
    assert hits == ["gep/core/models.py:432"]


def test_solidify_checks_no_agreement_between_copies_of_the_gene() -> None:
    """The event's gene and the gene solidified are one value: checks.py no longer compares them."""
    source = (ROOT / "gep" / "cycle" / "checks.py").read_text(encoding="utf-8")
    assert "genes_used" not in source and "gene_mismatch" not in source


def test_the_selected_gene_reaches_the_recorded_event_as_one_object(example_ws: Path) -> None:
    ctx, state = open_cycle(CycleRequest(workspace=example_ws, mutator="prompt", seed=1), env={})
    try:
        pipeline.run_pipeline(ctx, state)
        assert state.selection is not None and state.gene is not None and state.event is not None
        assert state.gene is state.selection.gene  # not a copy
        assert state.run is not None and state.run.pending.gene is state.gene  # what `gep solidify` gets back
        assert state.event.gene_id == state.gene.id == "gene_repair_from_errors"
        assert state.event.genes_used == [state.gene.id]  # the stored GEP list, derived in one place
        # the records the event keeps are the values the stages made, not copies into twin types
        assert state.persona is not None and state.event.meta.personality is state.persona.record
        assert state.event.meta.history is state.history
        assert state.result is not None and state.event.meta.mutator_result is state.result
        assert state.event.meta.selector is state.selection.decision
    finally:
        ctx.close()


def test_the_automatic_gene_completes_the_one_selection(tmp_path: Path) -> None:
    """No gene selected: the automatic gene goes into the selection the cycle holds, not into a rebuilt one."""
    selection = Selection(decision=SelectorDecision(reasons=["no match"]))
    decision = selection.decision
    with Store.for_workspace(tmp_path, Settings()) as store:
        record = fall_back_to_auto_gene(selection, genes=[], pool=GenePool(genes=[]), store=store,
                                        signals=["perf_bottleneck"], workspace=tmp_path, settings=Settings())
        gene = selection.gene
        assert gene is not None and record.auto_gene is not None and record.auto_gene.gene_id == gene.id
        assert selection.decision is decision and decision.selected == gene.id
        assert decision.reasons[1:] == ["no match"] and gene.id in decision.reasons[0]
        assert store.get_gene(gene.id) is not None  # a new automatic gene is stored
