"""Imported genes are bounded (issue 32, finding 11): an import of 100,000 genes made every cycle's select
take 51-63 s and `gep genes list` minutes. A store keeps at most MAX_STORED_GENES genes: an import past it is
refused in one line with nothing written; a store filled before the limit gives select the limit's worth;
`gep genes list` shows GENES_LIST_LIMIT rows unless asked. The speed: bench/gene_pool.py."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from conftest import init_repo
from test_cli import one_line_error, run

from gep.api import open_store
from gep.assets.gene_files import workspace_genes
from gep.core import constants
from gep.core.config import load_settings
from gep.core.models import Gene, utc_now
from gep.cycle.stages import select_from_store
from gep.genes.pool import gene_pool

LIMIT = 30  # the limit, made small so the test is quick; the same code runs at 2,000


@pytest.fixture(autouse=True)
def small_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(constants, "MAX_STORED_GENES", LIMIT)


def gene(i: int) -> dict:
    return {"type": "Gene", "id": f"imported_{i}", "category": "repair", "signals_match": [f"token_{i}_x"],
            "strategy": ["fix it"], "validation": ["python -m compileall -q ."], "summary": f"gene {i}"}


def assets(folder: Path, ids: range) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "genes.json").write_text(json.dumps({"genes": [gene(i) for i in ids]}))
    return folder


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return init_repo(tmp_path / "ws", {"app.py": "print(1)\n"})


def imported(ws: Path) -> list[str]:
    with open_store(ws) as store:
        return [g.id for g in store.list_genes()]


def picks(ws: Path, signal: str) -> str | None:
    """The gene the select stage's work picks for ``signal``."""
    settings = load_settings(ws)
    with open_store(ws) as store:
        genes = workspace_genes(ws, store, [])
        pool = gene_pool(genes, statuses=store, workspace=ws, settings=settings)
        selection, _ = select_from_store(store, genes=genes, signals=[signal], settings=settings,
                                         rng=random.Random(1), now=utc_now(), excluded=pool.excluded)
    return selection.gene.id if selection.gene else None


@pytest.mark.parametrize("jsonl", [False, True])
def test_an_import_past_the_limit_is_refused_in_one_line_with_nothing_written(tmp_path: Path, ws: Path,
                                                                              jsonl: bool):
    folder = assets(tmp_path / "a", range(LIMIT + 1))
    if jsonl:
        genes = json.loads((folder / "genes.json").read_text())["genes"]
        (folder / "genes.json").unlink()
        (folder / "genes.jsonl").write_text("".join(json.dumps(g) + "\n" for g in genes))
    one_line_error(run("import", str(folder), "-w", str(ws)), f"{LIMIT + 1} genes is over the limit of {LIMIT}",
                   "nothing was imported")
    assert imported(ws) == []


def test_the_limit_counts_what_the_store_holds_and_selection_still_picks_the_right_gene(tmp_path: Path,
                                                                                         ws: Path):
    assert run("import", str(assets(tmp_path / "a", range(LIMIT))), "-w", str(ws)).exit_code == 0
    assert picks(ws, "token_17_x") == "imported_17"
    # one more gene beside the limit's worth: refused; the same genes again (nothing new): accepted
    one_line_error(run("import", str(assets(tmp_path / "b", range(LIMIT, LIMIT + 1))), "-w", str(ws)),
                   f"1 genes beside the {LIMIT} stored is over the limit")
    assert run("import", str(tmp_path / "a"), "-w", str(ws)).exit_code == 0
    assert len(imported(ws)) == LIMIT


def test_a_store_filled_before_the_limit_gives_select_the_limits_worth(ws: Path):
    with open_store(ws) as store:  # as an import before the limit left it
        for i in range(LIMIT * 3):
            store.upsert_gene(Gene.model_validate(gene(i)), source="import")
        warnings: list = []
        genes = workspace_genes(ws, store, warnings)
    assert len([g for g in genes if g.id.startswith("imported_")]) == LIMIT
    assert any(f"{LIMIT * 3} stored, over the limit of {LIMIT}" in str(w) for w in warnings)


def test_genes_list_shows_a_page_unless_asked_for_all(tmp_path: Path, ws: Path, monkeypatch):
    monkeypatch.setattr(constants, "GENES_LIST_LIMIT", 10)
    assert run("import", str(assets(tmp_path / "a", range(LIMIT))), "-w", str(ws)).exit_code == 0
    shown = run("genes", "list", "-w", str(ws), "--json")
    total = LIMIT + 7  # and the seed genes
    assert len(json.loads(shown.stdout)) == 10
    assert f"{total - 10} more genes not shown (--limit 0 lists all {total})" in shown.stderr
    assert len(json.loads(run("genes", "list", "-w", str(ws), "--json", "--limit", "0").stdout)) == total
