"""Imported genes at scale (issue 32, finding 11): what a cycle's select stage and `gep genes list` cost
when the store holds many imported genes, and what an import past the limit costs.

An import of 100,000 genes once made select take 51-63 s a cycle and `gep genes list` minutes. The store
now keeps at most MAX_STORED_GENES genes (gep/core/constants.py): a larger import is refused in one line before
anything is written, and `gep genes list` shows GENES_LIST_LIMIT rows unless asked for more.

Printed per pool size (0 and the limit by default): the seconds of the select stage's work (the workspace's
genes, the pool, preconditions, the selector over the store) as the median of --repeat runs, `gep genes
list -w` in this process, and the ratio to the empty pool; then the seconds an import of --refused genes
takes to be refused.

    .venv/bin/python bench/gene_pool.py [--sizes 0,2000] [--refused 100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from typer.testing import CliRunner

from gep.api import open_store
from gep.assets.gene_files import import_assets, workspace_genes
from gep.core import constants
from gep.core.config import load_settings
from gep.core.errors import AssetError
from gep.core.models import utc_now
from gep.cycle.stages import select_from_store
from gep.genes.pool import gene_pool
from gep.genes.preconditions import unmet_preconditions

ROOT = Path(__file__).resolve().parent.parent
SIGNALS = ["log_error", "errsig:TypeError: unsupported operand", "recurring_error"]


def genes_file(folder: Path, n: int) -> Path:
    """``n`` imported genes, each matching its own token; one of them also the signals above."""
    folder.mkdir(parents=True, exist_ok=True)
    genes = [{"type": "Gene", "id": f"imported_{i}", "category": "repair", "signals_match": [f"token_{i}_x"],
              "strategy": ["fix it"], "validation": ["python -m pytest -q"], "summary": f"gene {i}"}
             for i in range(n)]
    (folder / "genes.json").write_text(json.dumps({"genes": genes}))
    return folder


def workspace(tmp: Path, n: int) -> Path:
    ws = tmp / f"ws{n}"
    shutil.copytree(ROOT / "examples" / "workspace", ws)
    import subprocess

    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=b", "-c", "user.email=b@x", "commit", "-qm", "i"]):
        subprocess.run(["git", *args], cwd=ws, check=True)
    with open_store(ws) as store:
        if n:
            import_assets(store, genes_file(tmp / f"assets{n}", n))
    return ws


def select_once(ws: Path) -> float:
    t = time.perf_counter()
    settings = load_settings(ws)
    with open_store(ws) as store:
        genes = workspace_genes(ws, store, [])
        pool = gene_pool(genes, statuses=store, workspace=ws, settings=settings)
        pool.excluded.update(unmet_preconditions(genes, workspace=ws, signals=SIGNALS))
        select_from_store(store, genes=genes, signals=SIGNALS, settings=settings, rng=random.Random(7),
                          now=utc_now(), excluded=pool.excluded)
    return time.perf_counter() - t


def genes_list(ws: Path) -> float:
    from gep.cli.root import app

    t = time.perf_counter()
    result = CliRunner().invoke(app, ["genes", "list", "-w", str(ws)], terminal_width=80)
    assert result.exit_code == 0, result.output
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default=f"0,{constants.MAX_STORED_GENES}")
    ap.add_argument("--refused", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        base = None
        print(f"{'imported genes':>15} {'select s':>9} {'genes list s':>13} {'select ratio':>13}")
        for n in (int(x) for x in args.sizes.split(",")):
            ws = workspace(tmp, n)
            sel = statistics.median(select_once(ws) for _ in range(args.repeat))
            lst = statistics.median(genes_list(ws) for _ in range(args.repeat))
            base = base or sel
            print(f"{n:>15,} {sel:>9.3f} {lst:>13.3f} {sel / base:>13.2f}")
        assets = genes_file(tmp / "refused", args.refused)
        t = time.perf_counter()
        with open_store(ws) as store:
            try:
                import_assets(store, assets)
                print(f"an import of {args.refused:,} genes was accepted")
                return 1
            except AssetError as exc:
                print(f"an import of {args.refused:,} genes refused in {time.perf_counter() - t:.2f} s: {exc}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
