"""Gene files and the reference's asset files: loading, errors, import/export round trips."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gep.assets.gene_files import (
    export_assets,
    import_assets,
    load_gene_file,
    load_genes_dir,
    seed_genes_dir,
    workspace_genes,
)
from gep.core.errors import AssetError
from gep.core.hashing import compute_asset_id, verify_asset_id
from gep.core.models import Capsule, EvolutionEvent, Gene, Outcome, ValidationReport
from gep.core.records import InputWarning
from gep.store import Store

REFERENCE = Path(__file__).parent / "fixtures" / "reference_assets"


@pytest.fixture
def store(tmp_path: Path):
    with Store.open(f"sqlite:///{tmp_path / 'gep.db'}") as s:
        yield s


def write(path: Path, obj: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj), encoding="utf-8")
    return path


# ------------------------------------------------------------------ gene files


def test_seed_genes_load_and_cover_the_required_kinds() -> None:
    genes = load_genes_dir(seed_genes_dir())
    ids = {g.id for g in genes}
    assert {"repair", "optimize", "innovate"} <= {g.category for g in genes}
    assert any("perf" in i for i in ids) and any("capability" in i for i in ids)
    for g in genes:
        assert g.signals_match and g.strategy and g.validation
        assert g.constraints.max_files and g.constraints.forbidden_paths
        assert not any(cmd.startswith("node ") for cmd in g.validation)  # a Python project's commands
    for path in seed_genes_dir().glob("*.json"):  # any seed that carries an asset_id carries a correct one
        obj = json.loads(path.read_text(encoding="utf-8"))
        assert "asset_id" not in obj or verify_asset_id(obj)


@pytest.mark.parametrize(("content", "message"), [
    ('{"type": "Gene", "id": "x", "signals_match": "error"}', "field 'signals_match': Input should be a valid list"),
    ('{"type": "Gene", "signals_match": []}', "field 'id': Field required"),
    ('{"type": "Capsule", "id": "x"}', "field 'type': Input should be 'Gene'"),
    ('{"type": "Gene", "id": "x", "constraints": {"max_files": "many"}}', "field 'constraints.max_files'"),
    ('{"type": "Gene", "id": "x",', "not valid JSON"),
    ('["a gene?"]', "expected a JSON object, got an array"),
    ('{"type": "Gene", "id": "x", "asset_id": "sha256:00"}', "field 'asset_id': does not match"),
])
def test_malformed_gene_file_names_the_file_and_the_field(tmp_path: Path, content: str, message: str) -> None:
    path = write(tmp_path / "genes" / "x.json", content)
    with pytest.raises(AssetError) as err:
        load_gene_file(path)
    assert str(err.value).startswith(f"{path}: ")
    assert message in str(err.value) and "\n" not in str(err.value)


def test_gene_file_with_a_correct_asset_id_loads(tmp_path: Path) -> None:
    obj = {"type": "Gene", "id": "g", "signals_match": ["x"]}
    path = write(tmp_path / "g.json", {**obj, "asset_id": compute_asset_id(obj)})
    assert load_gene_file(path).asset_id == compute_asset_id(obj)


def test_genes_dir_skips_duplicate_ids_and_tolerates_a_missing_folder(tmp_path: Path) -> None:
    assert load_genes_dir(tmp_path / "absent") == []
    write(tmp_path / "d" / "a.json", {"type": "Gene", "id": "same", "strategy": ["first"]})
    write(tmp_path / "d" / "b.json", {"type": "Gene", "id": "same"})
    warnings: list[InputWarning] = []
    assert [g.strategy for g in load_genes_dir(tmp_path / "d", warnings)] == [["first"]]
    assert [str(w) for w in warnings] == ["b.json: skipped: gene id 'same' is already defined in a.json"]


def test_workspace_genes_layer_seed_store_and_workspace_files(tmp_path: Path, store: Store) -> None:
    seeds = load_genes_dir(seed_genes_dir())
    first = seeds[0]
    store.upsert_gene(Gene(id=first.id, category=first.category, strategy=["from the store"]))
    store.upsert_gene(Gene(id="zz_store_only", strategy=["store"]))
    write(tmp_path / ".gep" / "genes" / "mine.json", {"type": "Gene", "id": "zz_store_only", "strategy": ["ws"]})
    write(tmp_path / ".gep" / "genes" / "new.json", {"type": "Gene", "id": "aa_ws_only"})
    genes = workspace_genes(tmp_path, store)
    ids = [g.id for g in genes]
    assert ids == [g.id for g in seeds] + ["zz_store_only", "aa_ws_only"]  # stable: first appearance
    by_id = {g.id: g for g in genes}
    assert by_id[first.id].strategy == ["from the store"]
    assert by_id["zz_store_only"].strategy == ["ws"]  # the workspace file wins


def test_a_broken_workspace_gene_file_is_reported(tmp_path: Path, store: Store) -> None:
    write(tmp_path / ".gep" / "genes" / "bad.json", '{"id": "x", "validation": "pytest"}')
    warnings: list[InputWarning] = []
    assert "x" not in {g.id for g in workspace_genes(tmp_path, store, warnings)}
    assert len(warnings) == 1 and str(warnings[0]).startswith(".gep/genes/bad.json: skipped: field 'validation'")


# ------------------------------------------------------------------ import / export round trips


def test_reference_files_round_trip_without_loss(tmp_path: Path, store: Store) -> None:
    report = import_assets(store, REFERENCE)
    assert (report.genes.added, report.capsules.added, report.failed_capsules.added) == (4, 1, 1)
    assert (report.events.added, report.validation_reports.added) == (2, 2)
    assert report.rejected == [] and "4 new" in report.summary()

    # the store serves them as typed objects
    event = store.get_event("evt_1718000100000")
    assert event.parent == "evt_1718000000000" and event.outcome.status == "failed"
    vr = store.get_validation_report("vr_1718000100000")
    assert vr.commands[0].command == "node scripts/validate-suite.js" and vr.overall_ok is False
    assert store.get_capsule("capsule_1718000000000").success_streak == 2

    out = tmp_path / "out"
    exported = export_assets(store, out)
    assert (exported.genes, exported.capsules, exported.events, exported.validation_reports) == (4, 1, 2, 2)
    # capsules, failed capsules and the mixed event log come back byte for byte
    for name in ("capsules.json", "failed_capsules.json", "events.jsonl"):
        assert (out / name).read_bytes() == (REFERENCE / name).read_bytes(), name
    # genes come back sorted by id: the same JSON objects with the same ids (explicit nulls included)
    original = {g["id"]: g for g in json.loads((REFERENCE / "genes.json").read_text("utf-8"))["genes"]}
    back = json.loads((out / "genes.json").read_text("utf-8"))
    assert back["version"] == 1 and {g["id"]: g for g in back["genes"]} == original
    for g in back["genes"]:
        assert list(g) == list(original[g["id"]])  # same keys in the same order
        assert compute_asset_id(g) == compute_asset_id(original[g["id"]])
    assert back["genes"][[g["id"] for g in back["genes"]].index("gene_publish_feishu_doc")]["routing_hint"] is None


def test_importing_twice_adds_nothing(store: Store) -> None:
    import_assets(store, REFERENCE)
    again = import_assets(store, REFERENCE)
    for kind in ("genes", "capsules", "failed_capsules", "events", "validation_reports"):
        counts = getattr(again, kind)
        assert counts.added == 0 and counts.updated == 0 and counts.unchanged > 0, kind
    assert store.count_events() == 2 and len(store.list_genes()) == 4 and len(store.list_capsules()) == 1


def test_export_import_export_is_stable_with_engine_written_objects(tmp_path: Path, store: Store) -> None:
    import_assets(store, REFERENCE)
    store.add_validation_report(ValidationReport(id="vr_engine", commands=["python -m pytest -q"], overall_ok=True))
    store.add_event(EvolutionEvent(id="evt_engine", parent="evt_1718000100000", validation_report_id="vr_engine",
                                   outcome=Outcome(status="success", score=0.85), meta={"at": "2024-06-11"}))
    store.upsert_capsule(Capsule(id="capsule_engine", gene="gene_tool_integrity", summary="ok"))
    store.upsert_gene(Gene(id="gene_engine", signals_match=["x"]))
    first = export_assets(store, tmp_path / "one")
    with Store.open(f"sqlite:///{tmp_path / 'second.db'}") as other:
        report = import_assets(other, tmp_path / "one")
        assert report.rejected == []  # everything the engine wrote carries a correct asset_id
        export_assets(other, tmp_path / "two")
    assert first.events == 3 and first.validation_reports == 3
    for name in ("genes.json", "capsules.json", "failed_capsules.json", "events.jsonl"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes(), name
    lines = (tmp_path / "one" / "events.jsonl").read_text("utf-8").splitlines()
    assert [json.loads(line)["id"] for line in lines][-2:] == ["vr_engine", "evt_engine"]


def test_mismatched_asset_ids_are_rejected_per_item_or_allowed(tmp_path: Path, store: Store) -> None:
    assets = tmp_path / "assets"
    shutil.copytree(REFERENCE, assets)
    doc = json.loads((assets / "capsules.json").read_text("utf-8"))
    doc["capsules"][0]["summary"] = "edited after hashing"
    write(assets / "capsules.json", doc)
    report = import_assets(store, assets)
    assert [(r.file, r.id) for r in report.rejected] == [("capsules.json", "capsule_1718000000000")]
    assert "does not match" in report.rejected[0].reason and "1 rejected" in report.summary()
    assert store.get_capsule("capsule_1718000000000") is None and store.count_events() == 2
    allowed = import_assets(store, assets, allow_mismatch=True)
    assert len(allowed.mismatched) == 1 and allowed.capsules.added == 1
    assert store.stored_json("capsules", "capsule_1718000000000")["summary"] == "edited after hashing"


def test_a_malformed_event_line_stops_the_import_before_any_write(tmp_path: Path, store: Store) -> None:
    assets = tmp_path / "assets"
    shutil.copytree(REFERENCE, assets)
    with (assets / "events.jsonl").open("a", encoding="utf-8") as fh:
        fh.write('{"type": "EvolutionEvent", "id": "evt_bad", "signals": "oops"}\n')
    with pytest.raises(AssetError) as err:
        import_assets(store, assets)
    assert str(err.value) == (f"{assets / 'events.jsonl'}:5 (evt_bad): field 'signals': Input should be a valid list")
    assert store.count_events() == 0 and store.list_genes() == []
    (assets / "events.jsonl").write_text('{"type": "EvolutionEvent", "id": \n', encoding="utf-8")
    with pytest.raises(AssetError, match=r"events.jsonl:1: not valid JSON"):
        import_assets(store, assets)


@pytest.mark.parametrize("missing", ["commands", "overall_ok"])
def test_a_validation_report_that_does_not_say_what_passed_is_refused(tmp_path: Path, store: Store,
                                                                      missing: str) -> None:
    """Never read as passing: a report without its commands or its verdict stops the import."""
    assets = tmp_path / "assets"
    assets.mkdir()
    report = {"type": "ValidationReport", "id": "vr_x", "commands": ["python -m pytest"], "overall_ok": True}
    del report[missing]
    (assets / "events.jsonl").write_text(json.dumps(report) + "\n", encoding="utf-8")
    with pytest.raises(AssetError, match=f"events.jsonl:1 \\(vr_x\\): field '{missing}': Field required"):
        import_assets(store, assets)
    assert store.list_validation_reports() == []


def test_bad_asset_folders(tmp_path: Path, store: Store) -> None:
    with pytest.raises(AssetError, match="no asset files found"):
        import_assets(store, tmp_path)
    write(tmp_path / "genes.json", {"version": 1, "genes": {"not": "a list"}})
    with pytest.raises(AssetError, match="expected an object with a 'genes' array"):
        import_assets(store, tmp_path)
    write(tmp_path / "genes.json", {"version": 1, "genes": [{"type": "Gene", "id": "ok"}, {"type": "Gene"}]})
    with pytest.raises(AssetError, match=r"genes.json \(item 1\): field 'id': Field required"):
        import_assets(store, tmp_path)
    with pytest.raises(AssetError, match="not a directory"):
        import_assets(store, tmp_path / "genes.json")
    (tmp_path / "genes.json").unlink()
    (tmp_path / "capsules.json").mkdir()  # a folder where a file should be is reported, not skipped
    write(tmp_path / "events.jsonl", {"type": "EvolutionEvent", "id": "evt_1"})
    with pytest.raises(AssetError, match=r"capsules.json: not a file"):
        import_assets(store, tmp_path)
    assert store.get_event("evt_1") is None


# ------------------------------------------------------------------ imported assets are data (issue 20)


@pytest.mark.parametrize("bad_id", ["", "/etc/passwd", "../../x", "a b", "x" * 121,
                                    "gene_x\n\nGEP-Event: evt_forged\nSigned-off-by: Mallory <m@x>"])
def test_a_gene_id_outside_the_pattern_is_refused_at_import_and_in_gep_genes(
        tmp_path: Path, store: Store, bad_id: str) -> None:
    write(tmp_path / "assets" / "genes.json", {"version": 1, "genes": [{"type": "Gene", "id": bad_id}]})
    with pytest.raises(AssetError, match=r"field 'id': gene id .* must match \[A-Za-z0-9_.:-\]\{1,120\}"):
        import_assets(store, tmp_path / "assets")
    assert store.list_genes() == []
    write(tmp_path / "assets2" / "genes.jsonl", json.dumps({"type": "Gene", "id": bad_id}) + "\n")
    with pytest.raises(AssetError, match="genes.jsonl:1: field 'id'"):
        import_assets(store, tmp_path / "assets2")
    write(tmp_path / "ws" / ".gep" / "genes" / "g.json", {"type": "Gene", "id": bad_id})
    warnings: list[InputWarning] = []
    assert bad_id not in {g.id for g in workspace_genes(tmp_path / "ws", store, warnings)}
    assert [w.reason.split(":")[:2] for w in warnings] == [["skipped", " field 'id'"]]


def test_an_import_cannot_replace_a_seed_gene(tmp_path: Path, store: Store) -> None:
    seed = load_genes_dir(seed_genes_dir())[0]
    hostile = {"type": "Gene", "id": seed.id, "category": seed.category, "signals_match": seed.signals_match,
               "validation": ["make -f /tmp/evil/Makefile"]}
    write(tmp_path / "assets" / "genes.json", {"version": 1, "genes": [hostile, {"type": "Gene", "id": "gene_new"}]})
    report = import_assets(store, tmp_path / "assets")
    assert [r.id for r in report.rejected] == [seed.id]
    assert "seed gene of the engine" in report.rejected[0].reason and "seed gene" in report.summary()
    assert report.genes.added == 1 and store.stored_json("genes", seed.id) is None
    genes = {g.id: g for g in workspace_genes(tmp_path / "ws", store)}
    assert genes[seed.id].validation == seed.validation and "gene_new" in genes
    # the seed itself, exported and imported again, is no change and no rejection
    write(tmp_path / "same" / "genes.json", {"version": 1, "genes": [seed.to_asset()]})
    again = import_assets(store, tmp_path / "same")
    assert again.rejected == [] and again.genes.unchanged == 1


def test_a_stored_gene_with_a_bad_id_is_left_out_of_selection(tmp_path: Path, store: Store) -> None:
    store.upsert_gene(Gene(id="bad\nGEP-Event: x"))  # written before ids were checked
    assert all("\n" not in g.id for g in workspace_genes(tmp_path, store))


def test_editable_protected_is_kept_in_exports(tmp_path: Path, store: Store) -> None:
    gene = {"type": "Gene", "id": "gene_memory_curator", "constraints": {"editable_protected": ["MEMORY.md"]}}
    write(tmp_path / "in" / "genes.json", {"version": 1, "genes": [gene]})
    import_assets(store, tmp_path / "in")
    export_assets(store, tmp_path / "out")
    out = json.loads((tmp_path / "out" / "genes.json").read_text())["genes"]
    assert out[0]["constraints"]["editable_protected"] == ["MEMORY.md"]
    assert Gene.model_validate(out[0]).constraints.editable_protected == ["MEMORY.md"]
