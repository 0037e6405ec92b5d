"""The reference implementation's asset files, imported into the store and exported from it.

Genes: one JSON object per file, loaded by gep/assets/gene_folders.py (its names stay importable from here).
``seed_genes_dir()`` ships with the engine; a workspace adds or overrides genes in
``<workspace>/.gep/genes/*.json`` or by importing them into its store.

Asset files (the reference's ``assets/gep`` folder): ``genes.json`` (``{"version":1,"genes":[...]}``),
``capsules.json`` (``{"version":1,"capsules":[...]}``), ``failed_capsules.json``
(``{"version":1,"failed_capsules":[...]}``) and ``events.jsonl`` (one EvolutionEvent or ValidationReport per
line, in the order they happened). ``genes.jsonl`` and ``capsules.jsonl``, which the reference also reads, are
imported too.

Import policy:
- A file that is not valid JSON, or an object that does not validate, stops the import before anything is
  written (AssetError naming the file, the object and the field).
- An object whose ``asset_id`` does not match its content is not imported; it is listed in
  ``ImportReport.rejected`` (file, id, reason) and the rest is imported. Pass ``allow_mismatch=True`` to import
  such objects anyway, unchanged (they are then listed in ``ImportReport.mismatched``). The reference itself
  can leave stale ids: it hashes capsules with ``undefined`` fields that JSON then drops, and it re-saves genes
  after adding epigenetic marks without re-hashing them.
- Imported assets are data. A gene id must match ``GENE_ID_PATTERN`` (no newline, no path, at most 120
  characters): anything else stops the import (AssetError naming the file and the id), as it stops loading
  ``.gep/genes/``. A gene with the id of one of the engine's seed genes is not imported (listed in
  ``ImportReport.rejected``, unless identical to the seed): an import never replaces the engine's genes.
- An asset file must be a regular file of at most 512 MB (a FIFO, a device or a bigger file stops the import
  with an AssetError naming it). In a genes folder, a file that is not a regular file (a FIFO, a symlink to
  ``/dev/zero``), a symlink out of the workspace or a file over 1 MB is skipped with a warning instead:
  reading it would hang or fill the memory, and one planted file must not stop every cycle.
- Importing the same files again adds nothing. Genes and capsules with a known id are replaced by the file's
  version; events and validation reports already stored are left as they are (history is append-only).
Export writes the stored JSON objects back exactly as stored, formatted as the reference formats them
(``JSON.stringify(obj, null, 2)`` for .json files, one ``JSON.stringify(obj)`` per line for events.jsonl).
Genes retired in the workspace are marked in genes.json, and an import retires them again (gep/assets/retired.py).
What the workspace learned (lessons, their deletions, feedback) travels in files of its own beside these
(gep/assets/learned.py); the file helpers both use are in gep/assets/files.py.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, Field

from gep.assets.files import (
    ImportReport,
    KindCounts,
    RejectedAsset,
    _cannot_read,
    _json_type,
    _present,
    _read_json,
    _read_jsonl,
    _validate,
    _where,
    _write_atomic,
)
from gep.assets.gene_folders import GENE_ID_PATTERN as GENE_ID_PATTERN
from gep.assets.gene_folders import _check_gene_id, load_genes_dir, seed_genes_dir
from gep.assets.gene_folders import is_valid_gene_id as is_valid_gene_id
from gep.assets.gene_folders import load_gene_file as load_gene_file
from gep.assets.gene_folders import workspace_genes as workspace_genes
from gep.assets.gene_folders import workspace_genes_dir as workspace_genes_dir
from gep.assets.learned import LEARNING_FILES, export_learning, import_learning, read_learning
from gep.assets.retired import RETIRED_KEY, import_retired, retired_marks
from gep.core import constants
from gep.core.errors import AssetError
from gep.core.hashing import compute_asset_id, js_dumps, verify_asset_id
from gep.core.models import Capsule, EvolutionEvent, FailedCapsule, Gene, ValidationReport, utc_now
from gep.core.safe_files import Unreadable

if TYPE_CHECKING:  # store-only commands list genes without importing SQLAlchemy (gep/store/quick_read.py)
    from gep.store import Store

M = TypeVar("M", bound=BaseModel)

GENES_FILE = "genes.json"
GENES_JSONL = "genes.jsonl"
CAPSULES_FILE = "capsules.json"
CAPSULES_JSONL = "capsules.jsonl"
FAILED_CAPSULES_FILE = "failed_capsules.json"
EVENTS_FILE = "events.jsonl"
ASSET_FILES = (GENES_FILE, CAPSULES_FILE, FAILED_CAPSULES_FILE, EVENTS_FILE)
# ------------------------------------------------------------------ reports (ImportReport: gep/assets/files.py)


class ExportReport(BaseModel):
    out_dir: str
    genes: int = 0
    capsules: int = 0
    failed_capsules: int = 0
    events: int = 0
    validation_reports: int = 0
    retired: int = 0  # genes marked retired in genes.json
    lessons: int = 0
    lesson_deletions: int = 0
    feedback: int = 0
    files: list[str] = Field(default_factory=list)

    def summary(self) -> str:
        return (f"exported to {self.out_dir}: {self.genes} genes ({self.retired} marked retired), "
                f"{self.capsules} capsules, {self.failed_capsules} failed capsules, {self.events} events, "
                f"{self.validation_reports} validation reports, {self.lessons} lessons, "
                f"{self.lesson_deletions} lesson deletions, {self.feedback} feedback signals")


# ------------------------------------------------------------------ import


def _list_in(path: Path, key: str) -> list[Any]:
    try:
        doc = _read_json(path)
    except Unreadable as exc:
        raise _cannot_read(path, exc) from None
    if not isinstance(doc, dict) or not isinstance(doc.get(key), list):
        raise AssetError(f"{path}: expected an object with a '{key}' array")
    return doc[key]


_Read = dict[str, Any]  # JSON edge: an object as read from an asset file, stored as the file had it


@dataclass
class _Plan:
    """Everything read and validated, with the JSON object each model was read from, before any write."""

    genes: list[tuple[Gene, _Read]] = field(default_factory=list)
    capsules: list[tuple[Capsule, _Read]] = field(default_factory=list)
    failed_capsules: list[tuple[FailedCapsule, _Read]] = field(default_factory=list)
    events: list[tuple[EvolutionEvent, _Read]] = field(default_factory=list)
    validation_reports: list[tuple[ValidationReport, _Read]] = field(default_factory=list)


def _accept(obj: _Read, path: Path, report: ImportReport, allow_mismatch: bool) -> bool:
    claimed = obj.get("asset_id")
    if not isinstance(claimed, str) or not claimed or verify_asset_id(obj):
        return True
    item = RejectedAsset(file=path.name, id=str(obj.get("id")),
                         reason=f"asset_id {claimed} does not match the content ({compute_asset_id(obj)})")
    (report.mismatched if allow_mismatch else report.rejected).append(item)
    return allow_mismatch


def _plan(assets_dir: Path, report: ImportReport, allow_mismatch: bool) -> _Plan:
    plan = _Plan()

    def array_file(name: str, key: str, cls: type[M], into: list[tuple[M, _Read]]) -> None:
        path = assets_dir / name
        if not _present(path):
            return
        report.files.append(name)
        items = _list_in(path, key)
        if cls is Gene:
            _gene_cap(path, len(into) + len(items))
        for i, obj in enumerate(items):
            model = _validate(cls, obj, _where(path, i, obj))
            if isinstance(model, Gene):
                _check_gene_id(model, f"{path} (item {i})")
            if _accept(obj, path, report, allow_mismatch):
                into.append((model, obj))

    def lines_file(name: str, cls: type[M], into: list[tuple[M, _Read]]) -> None:
        path = assets_dir / name
        if not _present(path):
            return
        report.files.append(name)
        for lineno, obj in _read_jsonl(path):
            if cls is Gene:
                _gene_cap(path, len(into) + 1)
            model = _validate(cls, obj, _where(path, lineno, obj, line=True))
            if isinstance(model, Gene):
                _check_gene_id(model, f"{path}:{lineno}")
            if _accept(obj, path, report, allow_mismatch):
                into.append((model, obj))

    array_file(GENES_FILE, "genes", Gene, plan.genes)
    lines_file(GENES_JSONL, Gene, plan.genes)
    array_file(CAPSULES_FILE, "capsules", Capsule, plan.capsules)
    lines_file(CAPSULES_JSONL, Capsule, plan.capsules)
    array_file(FAILED_CAPSULES_FILE, "failed_capsules", FailedCapsule, plan.failed_capsules)

    events_path = assets_dir / EVENTS_FILE
    if _present(events_path):
        report.files.append(EVENTS_FILE)
        for lineno, obj in _read_jsonl(events_path):
            where = _where(events_path, lineno, obj, line=True)
            kind = obj.get("type") if isinstance(obj, dict) else None
            if kind == "ValidationReport":
                vr = _validate(ValidationReport, obj, where)
                if _accept(obj, events_path, report, allow_mismatch):
                    plan.validation_reports.append((vr, obj))
            elif kind == "EvolutionEvent" or (isinstance(obj, dict) and kind is None):
                ev = _validate(EvolutionEvent, obj, where)
                if _accept(obj, events_path, report, allow_mismatch):
                    plan.events.append((ev, obj))
            elif isinstance(obj, dict):
                raise AssetError(f"{where}: field 'type': expected 'EvolutionEvent' or 'ValidationReport', "
                                 f"got {kind!r}")
            else:
                raise AssetError(f"{where}: expected a JSON object, got {_json_type(obj)}")
    return plan


def _gene_cap(path: Path, count: int, stored: int = 0) -> None:
    """Refuse an import that would leave the store more genes than every cycle's select can read fast."""
    if count + stored > constants.MAX_STORED_GENES:
        held = f" beside the {stored:,} stored" if stored else ""
        raise AssetError(f"{path}: {count:,} genes{held} is over the limit of {constants.MAX_STORED_GENES:,} genes a "
                         "store keeps; import fewer (nothing was imported)")


def _count(store: Store, kind: str, obj_id: str, obj: Mapping[str, Any], counts: KindCounts) -> bool:
    """Count one object against the store; True when it needs writing."""
    stored = store.stored_json(kind, obj_id)
    if stored is None:
        counts.added += 1
        return True
    if stored == obj:
        counts.unchanged += 1
        return False
    counts.updated += 1
    return True


def _content(gene: Gene) -> dict[str, Any]:  # JSON edge: compared as a file holds it
    """A gene's content for comparison (asset_id and schema_version left out)."""
    return gene.model_dump(mode="json", exclude={"asset_id", "schema_version"})


def import_assets(store: Store, assets_dir: Path | str, *, allow_mismatch: bool = False) -> ImportReport:
    """Import the reference's asset files from ``assets_dir`` into ``store`` (policy: module docstring)."""
    assets_dir = Path(assets_dir)
    if not assets_dir.is_dir():
        raise AssetError(f"{assets_dir}: not a directory")
    report = ImportReport(source=str(assets_dir))
    plan = _plan(assets_dir, report, allow_mismatch)
    learned = read_learning(assets_dir)
    report.files += learned.files
    if not report.files:
        raise AssetError(f"{assets_dir}: no asset files found (expected one of "
                         f"{', '.join(ASSET_FILES + LEARNING_FILES)})")

    seeds = {g.id: g for g in load_genes_dir(seed_genes_dir())}
    stored_ids = {g.id for g in store.list_genes()}
    new_ids = {g.id for g, _ in plan.genes} - stored_ids - set(seeds)
    if new_ids:
        _gene_cap(assets_dir, len(new_ids), len(stored_ids))
    for gene, obj in plan.genes:
        seed = seeds.get(gene.id)
        if seed is not None:  # the engine's own genes are not an import's to replace
            if _content(seed) == _content(gene):
                report.genes.unchanged += 1
            else:
                report.rejected.append(RejectedAsset(
                    file=GENES_FILE, id=gene.id, reason=f"'{gene.id}' is a seed gene of the engine: an import cannot "
                                                        "replace it (give the gene another id to import it)"))
            continue
        if _count(store, "genes", gene.id, obj, report.genes):
            store.upsert_gene(gene, source="import", as_read=obj)
    for capsule, obj in plan.capsules:
        if _count(store, "capsules", capsule.id, obj, report.capsules):
            store.upsert_capsule(capsule, as_read=obj)
    for failed, obj in plan.failed_capsules:
        if _count(store, "failed_capsules", failed.id, obj, report.failed_capsules):
            store.add_failed_capsule(failed, as_read=obj)
    for vr, obj in plan.validation_reports:
        if store.stored_json("validation_reports", vr.id) is None:
            store.add_validation_report(vr, as_read=obj)
            report.validation_reports.added += 1
        else:
            report.validation_reports.unchanged += 1
    added = store.import_events(plan.events)
    report.events.added = added
    report.events.unchanged = len(plan.events) - added
    if GENES_FILE in report.files:
        known = {*seeds, *(g.id for g in store.list_genes())}
        report.retired = import_retired(store, _read_json(assets_dir / GENES_FILE), known_ids=known, now=utc_now())
    import_learning(store, learned, report)
    return report


# ------------------------------------------------------------------ export


def _events_lines(store: Store, report: ExportReport) -> Iterator[str]:
    """Events in the order they were stored, each preceded by its validation report (as the reference
    appends them); reports no event points to follow at the end."""
    written: set[str] = set()
    for event in store.iter_asset_json("events"):
        vr_id = event.get("validation_report_id")
        if isinstance(vr_id, str) and vr_id not in written:
            vr = store.stored_json("validation_reports", vr_id)
            if vr is not None:
                written.add(vr_id)
                report.validation_reports += 1
                yield js_dumps(vr) + "\n"
        report.events += 1
        yield js_dumps(event) + "\n"
    for vr in store.iter_asset_json("validation_reports"):
        if vr.get("id") not in written:
            report.validation_reports += 1
            yield js_dumps(vr) + "\n"


def export_assets(store: Store, out_dir: Path | str) -> ExportReport:
    """Write the store's genes, capsules, failed capsules, events and validation reports to ``out_dir``."""
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AssetError(f"{out}: cannot create ({exc.strerror or exc})") from None
    report = ExportReport(out_dir=str(out))
    for name, kind, key in ((GENES_FILE, "genes", "genes"), (CAPSULES_FILE, "capsules", "capsules"),
                            (FAILED_CAPSULES_FILE, "failed_capsules", "failed_capsules")):
        items = list(store.iter_asset_json(kind))
        setattr(report, kind, len(items))
        doc: dict[str, Any] = {"version": 1, key: items}  # JSON edge: the file's object
        if kind == "genes" and (marks := retired_marks(store)):
            doc[RETIRED_KEY], report.retired = marks, len(marks)
        _write_atomic(out / name, iter([js_dumps(doc, indent=2) + "\n"]))
        report.files.append(name)
    _write_atomic(out / EVENTS_FILE, _events_lines(store, report))
    report.files.append(EVENTS_FILE)
    for name, count in export_learning(store, out).items():
        setattr(report, name.removesuffix(".jsonl"), count)
        report.files.append(name)
    return report
