"""Issue 32 finding 3: a regular expression from outside the engine cannot hang a cycle.

Each attack below backtracks for hours under Python's ``re`` (2^40 paths over one line of 40 "a"s): without
the fix these tests run into the pytest timeout. With it, patterns run under RE2 (linear) and what RE2
cannot run (backreferences, lookarounds) is refused with its reason."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gep.assets.gene_files import import_assets
from gep.core.config import Settings
from gep.core.errors import AssetError
from gep.core.models import Gene, GeneConstraints
from gep.core.safe_regex import UnsafePattern, compile_untrusted
from gep.genes.distiller import GeneProvenance, ProposalContext, check_proposal
from gep.genes.selector import match_pattern, select_gene_and_capsule
from gep.mutators.tools import WorkspaceTools
from gep.store import Store

EVIL = "(a+)+$"  # catastrophic backtracking in a backtracking engine
LINE = "a" * 40 + "!"
BACKREF = r"(\w+)\1x"
LOOKAROUND = r"(?=(a+))+b"

pytestmark = pytest.mark.timeout(60)


def test_a_backtracking_pattern_runs_in_linear_time_and_unbounded_features_are_refused() -> None:
    assert not compile_untrusted(EVIL).search(LINE * 1000)
    assert compile_untrusted("(?P<w>err)or", ignore_case=True).search("ERROR")
    for pattern, word in ((BACKREF, "backreference"), (LOOKAROUND, "lookaround"), ("x{1000}{1000}", "too large"),
                          ("a" * 3000, "longer than")):
        with pytest.raises(UnsafePattern, match=word):
            compile_untrusted(pattern)


def _tools(ws: Path) -> WorkspaceTools:
    return WorkspaceTools(ws, forbidden_paths=[], validation_commands=[], settings=Settings(), gene_id="g",
                          cycle_id="evt_t")


def test_the_models_search_pattern_cannot_hang_the_engine(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text(f"header\n{LINE}\n", encoding="utf-8")
    tools = _tools(tmp_path)
    out = tools.call("search", {"pattern": EVIL})
    assert not out.is_error and out.content.startswith("no match for")
    assert "notes.txt:2:" in tools.call("search", {"pattern": "a{40}!"}).content
    refused = tools.call("search", {"pattern": BACKREF})
    assert refused.is_error and "pattern refused: backreferences are not supported" in refused.content


def test_an_imported_genes_pattern_cannot_hang_select_and_an_unbounded_one_is_refused(tmp_path: Path) -> None:
    gene = {"type": "Gene", "id": "gene_hostile", "category": "repair", "signals_match": [f"/{EVIL}/"],
            "strategy": ["x"], "validation": []}
    (tmp_path / "ok").mkdir()
    (tmp_path / "ok" / "genes.json").write_text(json.dumps({"genes": [gene]}), encoding="utf-8")
    bad = {**gene, "id": "gene_backref", "signals_match": [f"/{BACKREF}/i"]}
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "genes.json").write_text(json.dumps({"genes": [bad]}), encoding="utf-8")
    with Store.open(f"sqlite:///{tmp_path / 'gep.db'}") as store:
        import_assets(store, tmp_path / "ok")
        with pytest.raises(AssetError, match="signals_match.*backreferences are not supported"):
            import_assets(store, tmp_path / "bad")
        genes = store.list_genes()
    assert [g.id for g in genes] == ["gene_hostile"]
    sel = select_gene_and_capsule(genes=genes, capsules=[], failed_capsules=[], signals=[LINE, "log_error"],
                                  recent_events=[], settings=Settings(), rng=random.Random(0), now=datetime.now(UTC))
    assert sel.gene is None  # ran to the end: the pattern does not match "a...a!"
    assert match_pattern(f"/{EVIL}/", "a" * 40)


def test_a_distilled_genes_unbounded_pattern_is_refused(tmp_path: Path) -> None:
    proposal = Gene(id="gene_distilled_x", category="repair", signals_match=["errsig:ZeroDivisionError",
                                                                             f"/{LOOKAROUND}/"],
                    strategy=["Guard the division"], constraints=GeneConstraints(max_files=2),
                    validation=[], summary="Guard averages against empty input before dividing")
    ctx = ProposalContext(existing=[], source_triggers=["errsig:ZeroDivisionError"], workspace=tmp_path,
                          settings=Settings(), env={})
    checked = check_proposal(proposal, ctx, GeneProvenance(origin="distilled", synthesis="claude"))
    assert not checked.ok
    assert any("pattern refused" in e and "lookarounds are not supported" in e for e in checked.errors)
