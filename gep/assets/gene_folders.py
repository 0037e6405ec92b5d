"""Gene files: the engine's seed genes, a workspace's ``.gep/genes/*.json`` and its stored genes, as a cycle
selects from them (:func:`workspace_genes`). One JSON object per file; ids and ``signals_match`` patterns are
checked as an import checks them (gep/assets/gene_files.py imports and exports the reference's asset files).

Apart from the asset files, so that `gep genes list|show` load genes without importing what an import or an
export needs (the workspace's learning, retirements and the selector: ~0.3 s).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from gep.assets.files import _read_json, _validate
from gep.core import constants
from gep.core.config import gep_dir
from gep.core.errors import AssetError
from gep.core.hashing import compute_asset_id, verify_asset_id
from gep.core.models import Gene
from gep.core.records import InputWarning
from gep.core.safe_files import Unreadable, glob_files, note, printable, shown
from gep.genes.patterns import pattern_refusal

if TYPE_CHECKING:  # store-only commands list genes without importing SQLAlchemy (gep/store/quick_read.py)
    from gep.store.quick_read import ReadStore

# Gene ids end up in commit trailers, file names and prompts: data, never structure (no newline, no path).
GENE_ID_PATTERN = r"[A-Za-z0-9_.:-]{1,120}"
_GENE_ID = re.compile(GENE_ID_PATTERN)


def is_valid_gene_id(gene_id: object) -> bool:
    return isinstance(gene_id, str) and _GENE_ID.fullmatch(gene_id) is not None


def _check_gene_id(gene: Gene, where: str) -> Gene:
    """The gene's id and its ``signals_match`` regexes (which must run without backtracking) are checked."""
    if not is_valid_gene_id(gene.id):
        shown = repr(gene.id[:80]) + ("..." if len(gene.id) > 80 else "")
        raise AssetError(f"{where}: field 'id': gene id {shown} must match {GENE_ID_PATTERN}")
    refused = next((r for r in map(pattern_refusal, gene.signals_match) if r), None)
    if refused:
        raise AssetError(f"{where}: field 'signals_match': pattern refused, {refused}")
    return gene


def load_gene_file(path: Path | str, within: Path | None = None) -> Gene:
    """One gene from a JSON file; AssetError naming the file and the field when it is malformed, or
    :class:`gep.core.safe_files.Unreadable` when it is no regular file (inside ``within``) of at most 1 MB."""
    path = Path(path)
    obj = _read_json(path, constants.GENE_FILE_MAX_BYTES, within)
    gene = _check_gene_id(_validate(Gene, obj, str(path)), str(path))
    if isinstance(obj.get("asset_id"), str) and obj["asset_id"] and not verify_asset_id(obj):
        raise AssetError(f"{path}: field 'asset_id': does not match the gene's content "
                         f"(it hashes to {compute_asset_id(obj)}; remove asset_id or fix it)")
    return gene


def load_genes_dir(directory: Path | str, warnings: list[InputWarning] | None = None,
                   within: Path | None = None) -> list[Gene]:
    """Every ``*.json`` gene in ``directory`` (sorted by file name; none when the folder does not exist).

    A FIFO, a device, a symlink out of ``within`` (default: the folder), a file over 1 MB, a malformed gene
    (not UTF-8, not strict JSON: NaN, nested too deep; a bad id or field) and a second file with an id already
    defined are skipped and noted in ``warnings`` (None: the log): one bad file costs that gene only, never
    every cycle (issue 45, G04)."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    within = Path(within) if within is not None else directory
    genes: list[Gene] = []
    seen: dict[str, Path] = {}
    for path in glob_files(directory, "*.json", warnings=warnings, root=within):
        if path.is_dir():
            continue
        try:
            gene = load_gene_file(path, within=within)
        except Unreadable as exc:
            note(warnings, exc.warning(within))
            continue
        except AssetError as exc:
            note(warnings, InputWarning(path=shown(path, within), reason=f"skipped: {_reason(exc, path)}"))
            continue
        if gene.id in seen:
            note(warnings, InputWarning(path=shown(path, within), reason=f"skipped: gene id '{gene.id}' is already "
                                        f"defined in {seen[gene.id].name}"))
            continue
        seen[gene.id] = path
        genes.append(gene)
    return genes


def _reason(exc: AssetError, path: Path) -> str:
    """An AssetError's message without the path it starts with (the warning names it), on one line, bounded."""
    text = str(exc).removeprefix(f"{path}: ").strip().splitlines()
    return printable(text[0] if text else "malformed")[:300]


def seed_genes_dir() -> Path:
    """The engine's ``genes/`` folder (next to the package: a source checkout or an editable install)."""
    override = os.environ.get("GEP_SEED_GENES_DIR")
    folder = Path(override) if override else Path(__file__).resolve().parents[2] / "genes"
    if not folder.is_dir():
        raise AssetError(f"seed genes folder not found: {folder} (set GEP_SEED_GENES_DIR)")
    return folder


def workspace_genes_dir(workspace: Path | str) -> Path:
    return gep_dir(workspace) / "genes"


def workspace_genes(workspace: Path | str, store: ReadStore, warnings: list[InputWarning] | None = None) -> list[Gene]:
    """Genes a cycle selects from: seed genes, then store genes, then ``<workspace>/.gep/genes/*.json``.

    A later source overrides an earlier gene with the same id in place, so the order stays stable: seeds by
    file name, then new store genes by id, then new workspace files by file name. Gene files skipped (see
    :func:`load_genes_dir`) are noted in ``warnings``.
    """
    merged: dict[str, Gene] = {}
    # a stored gene with an id no import accepts any more (stored before ids were checked) is left out
    stored = [g for g in store.list_genes() if is_valid_gene_id(g.id)]
    if len(stored) > constants.MAX_STORED_GENES:  # stored before imports had a limit: select reads the limit's worth
        if warnings is not None:
            warnings.append(InputWarning(path="the store's genes", reason=f"{len(stored):,} stored, over the "
                                         f"limit of {constants.MAX_STORED_GENES:,}: the first ones by id are used"))
        stored = sorted(stored, key=lambda g: g.id)[:constants.MAX_STORED_GENES]
    local = load_genes_dir(workspace_genes_dir(workspace), warnings, within=Path(workspace).resolve())
    for gene in [*load_genes_dir(seed_genes_dir(), warnings), *stored, *local]:
        merged[gene.id] = gene
    return list(merged.values())
