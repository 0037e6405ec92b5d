"""Distillation without a model: collection, the skips, the analysis, deterministic synthesis, the checks."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from distill_cases import (
    KEY,
    NOW,
    PERF_TRIGGER,
    REPAIR_TRIGGER,
    ZERO_DIV,
    capsule,
    events,
    mixed_capsules,
    python_workspace,
    repair_capsules,
    seed_genes,
)

from gep.core.config import Settings
from gep.core.hashing import verify_asset_id
from gep.core.models import Capsule, EvolutionEvent, Gene, GeneConstraints, GeneProvenance, Outcome
from gep.genes.distiller import (
    DistillRun,
    InMemoryDistillLog,
    ProposalContext,
    check_proposal,
    data_hash,
    derive_id,
    distill,
    id_problem,
    rejected_capsules,
    successful_capsules,
)
from gep.genes.selector import match_score
from gep.learning.feedback import FeedbackKind, FeedbackSignal, Observation

SETTINGS = Settings()


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return python_workspace(tmp_path / "ws")


def run(ws: Path, capsules: list[Capsule], log: InMemoryDistillLog | None = None, now=NOW,
        genes: list[Gene] | None = None, settings: Settings = SETTINGS, **kw):
    return distill(capsules=capsules, events=events(), genes=seed_genes() if genes is None else genes,
                   log=log if log is not None else InMemoryDistillLog(), workspace=ws, settings=settings, env={},
                   now=now, **kw)


# ------------------------------------------------------------------ collection and thresholds


def test_only_successes_at_or_above_the_score_count() -> None:
    ok = successful_capsules(mixed_capsules(), SETTINGS)
    assert [c.id for c in ok] == [f"cap_{i:03d}" for i in [*range(12), 20, 21, 22]]
    assert len(successful_capsules(mixed_capsules(), Settings(distill_min_score=0.4))) == 16


def _said(i: int, event_id: str, kind: FeedbackKind, origin: Observation = Observation.person) -> FeedbackSignal:
    return FeedbackSignal(id=f"fb_{i}", gene_id="gene_repair_from_errors", event_id=event_id, kind=kind,
                          confidence=1.0, origin=origin, created_at=NOW + timedelta(minutes=i))


def test_capsules_people_rejected_are_not_learned_from(ws: Path) -> None:
    """A person's not_helpful (a verdict, a rejected review, a revert) keeps its cycle's capsule out of
    distillation, whatever its checks said; their later helpful brings it back."""
    caps = repair_capsules(10)
    evts = [EvolutionEvent(id=f"evt_{i}", capsule_id=c.id, outcome=Outcome(status="success", score=0.85))
            for i, c in enumerate(caps)]
    said = [_said(1, "evt_0", FeedbackKind.not_helpful), _said(2, "evt_1", FeedbackKind.not_helpful,
                                                                 Observation.reverted),
            _said(3, "evt_2", FeedbackKind.not_helpful), _said(4, "evt_2", FeedbackKind.helpful),
            _said(5, "evt_3", FeedbackKind.ignored, Observation.fix_did_not_hold)]  # not a person's word
    rejected = rejected_capsules(evts, said)
    assert rejected == {caps[0].id, caps[1].id}
    assert [c.id for c in successful_capsules(caps, SETTINGS, rejected)] == [c.id for c in caps[2:]]
    result = run(ws, caps, rejected=rejected)  # 8 successes left: under the threshold of 10
    assert result.run.status == "skipped" and result.run.reasons == ["not enough successful capsules (8 < 10)"]
    kept = run(ws, caps, rejected=rejected, settings=Settings(distill_min_capsules=8))
    assert kept.gene is not None and not {caps[0].id, caps[1].id} & set(kept.gene.provenance.source_capsule_ids)


def test_distilling_a_workspace_leaves_out_what_its_people_rejected(ws: Path) -> None:
    from gep.distill_run import distill_workspace
    from gep.store import Store

    caps = repair_capsules(10)
    with Store.for_workspace(ws) as store:
        for i, c in enumerate(caps):
            store.upsert_capsule(c)
            store.add_event(EvolutionEvent(id=f"evt_{i}", capsule_id=c.id, genes_used=["gene_repair_from_errors"],
                                           outcome=Outcome(status="success", score=0.85)))
        store.add_feedback(_said(1, "evt_4", FeedbackKind.not_helpful))
        result = distill_workspace(store, workspace=ws, settings=SETTINGS, env={}, now=NOW, dry_run=True)
    assert result.run.capsule_count == 9 and result.run.status == "skipped", result.run


def test_below_the_threshold_nothing_is_distilled(ws: Path) -> None:
    log = InMemoryDistillLog()
    result = run(ws, [*repair_capsules(9), *mixed_capsules()[15:]], log)  # 9 successes and 3 that do not count
    assert result.gene is None
    assert result.run.status == "skipped"
    assert result.run.reasons == ["not enough successful capsules (9 < 10)"]
    assert log.runs == [result.run]  # skips are logged too
    assert run(ws, repair_capsules(9), settings=Settings(distill_min_capsules=9)).run.status == "kept"


def test_at_the_threshold_a_gene_is_distilled(ws: Path) -> None:
    log = InMemoryDistillLog()
    result = run(ws, repair_capsules(10), log)
    assert result.run.status == "kept", result.run.reasons
    assert result.gene is not None and result.gene.id.startswith("gene_distilled_")
    assert log.last_distill_attempt() == result.run


def test_interval_and_unchanged_data_skip(ws: Path) -> None:
    log = InMemoryDistillLog()
    first = run(ws, mixed_capsules(), log)
    assert first.run.status == "kept"
    more = [*mixed_capsules(), capsule(40, "gene_perf_bottleneck", PERF_TRIGGER, "Stream the report rows")]
    soon = run(ws, more, log, now=NOW + timedelta(hours=23))
    assert (soon.run.status, soon.run.reasons) == ("skipped", ["last distillation attempt 23.0 h ago (interval 24 h)"])
    same = run(ws, mixed_capsules(), log, now=NOW + timedelta(hours=25))
    assert same.run.status == "skipped"
    assert same.run.reasons == [f"capsule set unchanged since the last distillation (hash {first.run.data_hash})"]
    # the hash is over ids: order and the capsules that do not count change nothing
    assert data_hash(list(reversed(successful_capsules(mixed_capsules(), SETTINGS)))) == first.run.data_hash
    changed = run(ws, more, log, now=NOW + timedelta(hours=25))
    assert changed.run.status != "skipped"
    assert [r.status for r in log.runs] == ["kept", "skipped", "skipped", changed.run.status]
    # the interval is a setting
    quick = Settings(distill_interval_hours=1)
    assert run(ws, more, log, now=NOW + timedelta(hours=27), settings=quick).run.reasons[0].startswith(
        "capsule set unchanged")


def test_dry_run_logs_nothing(ws: Path) -> None:
    log = InMemoryDistillLog()
    result = run(ws, mixed_capsules(), log, dry_run=True)
    assert result.run.status == "kept" and log.runs == []


# ------------------------------------------------------------------ analysis


def test_analysis_as_the_reference(ws: Path) -> None:
    analysis = run(ws, mixed_capsules()).run.analysis
    assert (analysis.total_success, analysis.total_capsules) == (15, 18)
    assert analysis.success_rate == pytest.approx(15 / 18, abs=1e-4)
    [hf] = analysis.high_frequency  # the perf gene has 3 capsules: under 5
    assert (hf.gene_id, hf.count, hf.avg_score) == ("gene_repair_from_errors", 12, 0.85)
    # triggers lower-cased, most frequent first; the control signal ban_gene: is not a trigger
    assert hf.top_triggers == ["log_error", ZERO_DIV.lower(), "recurring_error"]
    [drift] = analysis.strategy_drift
    assert drift.gene_id == "gene_repair_from_errors" and drift.similarity < 0.6
    assert drift.early_summary.startswith("Guard stats.mean") and drift.recent_summary.startswith("Rewrite")
    # seen in 3 events and in no capsule trigger; the plateau is the engine's own signal, capability_gap seen once
    assert [(g.signal, g.frequency) for g in analysis.coverage_gaps] == [
        ("user_feature_request:export the report as csv", 3)]


def test_no_drift_when_summaries_agree(ws: Path) -> None:
    caps = [capsule(i, "gene_repair_from_errors", REPAIR_TRIGGER, "Guard stats.mean against an empty list")
            for i in range(10)]
    assert run(ws, caps).run.analysis.strategy_drift == []


# ------------------------------------------------------------------ deterministic synthesis


def test_deterministic_synthesis_from_the_analysis(ws: Path) -> None:
    result = run(ws, mixed_capsules())
    g = result.gene
    assert result.run.synthesis == "deterministic" and result.run.status == "kept"
    assert id_problem(g.id) is None
    assert g.id == "gene_distilled_log-error-zerodivisionerror-division-zero"
    assert g.signals_match == ["log_error", ZERO_DIV.lower(), "recurring_error"]
    assert g.category == "repair"
    assert 10 <= len(g.summary) <= 200
    assert g.constraints == GeneConstraints(max_files=6, forbidden_paths=[".git", ".gep", ".venv", "node_modules"])
    assert g.validation == ["python -m compileall -q .", "python -m pytest -q"]
    # steps: the situation, the source gene's steps, what worked (newest first), validation
    assert g.strategy[0].startswith("Confirm the situation first")
    assert "Reuse the fix that worked before: Rewrite the report cache so stale entries expire" in g.strategy
    assert "Reuse the fix that worked before: Guard stats.mean against an empty list before dividing" in g.strategy
    assert g.provenance.source_capsule_ids == [f"cap_{i:03d}" for i in range(12)]
    assert g.provenance.source_gene_ids == ["gene_repair_from_errors"]
    assert g.provenance.data_hash == result.run.data_hash and g.provenance.analysis == result.run.analysis
    assert verify_asset_id(g.to_asset())
    assert match_score(g, ["log_error", ZERO_DIV]) == pytest.approx(2 * 0.8)  # distilled genes score x0.8


def test_same_capsules_same_gene(ws: Path) -> None:
    a = run(ws, mixed_capsules()).gene
    b = run(ws, mixed_capsules(), now=NOW + timedelta(days=3)).gene
    assert a is not None and a.to_asset() == b.to_asset()


def test_recorded_strategies_and_verified_fixes_come_first(ws: Path) -> None:
    caps = repair_capsules(10)
    caps[3] = caps[3].model_copy(update={"summary": "Verified: return 0.0 for an empty list"})
    caps[3].verification = "verified"
    g = run(ws, caps).gene
    reuse = [s for s in g.strategy if s.startswith("Reuse")]
    assert reuse[0] == "Reuse the fix that worked before: Verified: return 0.0 for an empty list"
    steps = ["Read the traceback", "Add a guard", "Run the tests"]
    recorded = [c.model_copy(update={"strategy": steps}) for c in repair_capsules(10)]
    assert run(ws, recorded).gene.strategy[1:4] == steps


def test_recurring_error_counts_do_not_split_a_pattern(ws: Path) -> None:
    caps = [capsule(i, "gene_repair_from_errors", [f"recurring_errsig({3 + i % 2}x):boom in job.py",
                                                   "recurring_errsig(3x):boom in job.py"], "Fix the job")
            for i in range(10)]
    g = run(ws, caps).gene
    assert r"/recurring_errsig\(\d+x\):boom\ in\ job\.py/i" in g.signals_match
    assert match_score(g, ["recurring_errsig(9x):boom in job.py"]) > 0


def test_a_distilled_gene_is_not_distilled_twice(ws: Path) -> None:
    log = InMemoryDistillLog()
    first = run(ws, mixed_capsules(), log).gene
    genes = [*seed_genes(), first]
    second = run(ws, [*mixed_capsules(), *repair_capsules(3, start=50)], log, now=NOW + timedelta(days=2),
                 genes=genes)
    assert second.run.status == "rejected" and second.gene is None
    assert second.run.reasons == [f"gene_repair_from_errors: near-duplicate of existing gene {first.id} "
                                  "(same signals_match set)"]
    # a third gene with 5+ capsules is tried next
    perf = [capsule(60 + k, "gene_perf_bottleneck", PERF_TRIGGER, "Cache the parsed report template")
            for k in range(5)]
    third = run(ws, [*mixed_capsules(), *perf], log, now=NOW + timedelta(days=4), genes=genes)
    assert third.run.status == "kept" and third.gene.provenance.source_gene_ids == ["gene_perf_bottleneck"]
    assert third.run.notes == [f"gene_repair_from_errors: near-duplicate of existing gene {first.id} "
                               "(same signals_match set)"]


def test_nothing_to_distil_without_a_frequent_gene(ws: Path) -> None:
    caps = [capsule(i, f"gene_{i % 3}", ["log_error"], "Fix it") for i in range(12)]
    result = run(ws, caps)
    assert result.run.status == "rejected"
    assert result.run.reasons[0].startswith("nothing to distil: no gene has 5 or more successful capsules")


def test_secrets_in_capsules_never_reach_the_gene_or_the_log(ws: Path) -> None:
    caps = repair_capsules(10)
    caps[-1] = caps[-1].model_copy(update={"summary": f"Rotated the key {KEY} in settings"})
    result = run(ws, caps)
    assert KEY not in result.gene.model_dump_json() and KEY not in result.run.model_dump_json()


# ------------------------------------------------------------------ the checks, one by one


def ctx(ws: Path, existing: list[Gene] | None = None) -> ProposalContext:
    return ProposalContext(existing=seed_genes() if existing is None else existing,
                           source_triggers=REPAIR_TRIGGER, workspace=ws, settings=SETTINGS, env={})


PROV = GeneProvenance(origin="distilled", synthesis="claude")


def good(**update: object) -> Gene:
    g = Gene(id="gene_distilled_guard-empty-mean", category="repair",
             signals_match=["errsig:ZeroDivisionError", "recurring_error"],
             strategy=["Find the division", "Guard the empty case", "Run the tests"],
             constraints=GeneConstraints(max_files=4, forbidden_paths=[".git", ".gep"]),
             validation=["python -m pytest -q tests/test_stats.py"],
             summary="Guard averages against empty input before dividing")
    return g.model_copy(update=update)


def test_a_good_proposal_passes_unchanged(ws: Path) -> None:
    checked = check_proposal(good(), ctx(ws), PROV)
    assert (checked.ok, checked.repairs, checked.errors) == (True, [], [])
    assert checked.gene.model_dump(exclude={"provenance", "schema_version", "asset_id"}) == \
        good().model_dump(exclude={"provenance", "schema_version", "asset_id"})
    assert checked.gene.provenance == PROV and verify_asset_id(checked.gene.to_asset())


@pytest.mark.parametrize("gene_id, expected", [
    ("gene_distilled_retry-on-timeout", None),
    ("gene_distilled_cursor-1773331925711", "id holds a tool name (cursor)"),
    ("gene_distilled_1773331925711", "id holds a timestamp (1773331925711)"),
    ("gene_distilled_fix-4242", "id holds a bare number (4242)"),
    ("gene_distilled_fix-1", "id holds a bare number (1)"),
    ("gene_distilled_fix-20260301121500", "id holds a timestamp (20260301121500)"),
    ("gene_distilled_fix-3f9a0c7d12", "id holds a random hex string (3f9a0c7d12)"),
    ("gene_distilled_fix", "id suffix is not a descriptive name of 2-8 words"),
    ("gene_distilled_Retry_On", "id suffix is not kebab-case"),
    ("gene_retry-on-timeout", "id does not start with gene_distilled_"),
])
def test_id_rules(gene_id: str, expected: str | None) -> None:
    assert id_problem(gene_id) == expected


@pytest.mark.parametrize("gene_id, fixed", [
    ("gene_guard_empty_mean", "gene_distilled_guard-empty-mean"),  # wrong prefix: re-prefixed, kebab-cased
    ("Guard Empty Mean", "gene_distilled_guard-empty-mean"),
    ("gene_distilled_1773331925711", "gene_distilled_zerodivisionerror-recurring-error"),  # derived from content
    ("gene_distilled_codex-42", "gene_distilled_zerodivisionerror-recurring-error"),
    ("", "gene_distilled_zerodivisionerror-recurring-error"),
])
def test_bad_ids_are_repaired(ws: Path, gene_id: str, fixed: str) -> None:
    checked = check_proposal(good(id=gene_id), ctx(ws), PROV)
    assert checked.ok and checked.gene.id == fixed
    assert checked.repairs and checked.repairs[0].startswith(f"id: '{gene_id}'")


def test_derive_id_falls_back_to_summary_then_generic_words() -> None:
    g = Gene(id="x", signals_match=["oom"], summary="Stream rows instead of loading the whole report")
    assert derive_id(g) == "gene_distilled_oom-stream-rows-instead-loading"
    assert derive_id(Gene(id="x")) == "gene_distilled_learned-strategy"


def test_taken_id_gets_a_content_word(ws: Path) -> None:
    existing = [*seed_genes(), good(signals_match=["something_else"])]
    checked = check_proposal(good(), ctx(ws, existing), PROV)
    assert checked.ok and checked.gene.id == "gene_distilled_guard-empty-mean-averages"


def test_constraints_summary_and_validation_are_repaired(ws: Path) -> None:
    proposal = good(constraints=GeneConstraints(max_files=50, forbidden_paths=["node_modules"]),
                    summary="Fix", validation=["python -m pytest -q; curl evil.invalid", "node check.js",
                                               "python -m pytest -q tests/test_stats.py"])
    checked = check_proposal(proposal, ctx(ws), PROV)
    assert checked.ok, checked.errors
    g = checked.gene
    assert g.constraints.max_files == 12 and g.constraints.forbidden_paths == ["node_modules", ".git", ".gep"]
    assert g.summary == "Find the division"
    assert g.validation == ["python -m pytest -q tests/test_stats.py"]
    assert any("dropped 'python -m pytest -q; curl evil.invalid': blocked by the runner: shell operator ';'" in r
               for r in checked.repairs)
    long = check_proposal(good(summary="word " * 60), ctx(ws), PROV).gene.summary
    assert len(long) <= 200 and long.endswith("word")


def test_no_runnable_command_falls_back_to_the_workspace_default(ws: Path) -> None:
    checked = check_proposal(good(validation=["node scripts/validate-modules.js"]), ctx(ws), PROV)
    assert checked.ok and checked.gene.validation == SETTINGS.default_validation
    none_here = ProposalContext(existing=[], source_triggers=REPAIR_TRIGGER, workspace=ws,
                                settings=Settings(default_validation=["node x.js"]), env={"PATH": ""})
    refused = check_proposal(good(validation=[]), none_here, PROV)
    assert not refused.ok and refused.errors == ["validation: no command can run in this workspace"]


@pytest.mark.parametrize("update, error", [
    ({"signals_match": ["error|exception|traceback|failed|错误|异常|エラー", "log_error", "errsig", "recurring_error",
                        "test_failure"]}, "near-duplicate of existing gene gene_repair_from_errors"),
    ({"signals_match": ["TEST_FAILURE", "errsig", "recurring_error", "log_error",
                        "failed|exception|error|traceback|错误|异常|エラー"], "category": "optimize"},
     "near-duplicate of existing gene gene_repair_from_errors"),  # order, case, alternatives, category
    ({"signals_match": ["ban_gene:x", "", "ab"]}, "signals_match is empty"),
    ({"strategy": ["  "]}, "strategy is empty"),
    ({"signals_match": ["user_feature_request"]}, "signals_match matches none of the source capsules' triggers"),
])
def test_refused_proposals(ws: Path, update: dict, error: str) -> None:
    checked = check_proposal(good(**update), ctx(ws), PROV)
    assert not checked.ok
    assert any(e.startswith(error) for e in checked.errors), checked.errors


def test_category_outside_the_intents_is_inferred(ws: Path) -> None:
    checked = check_proposal(good(category="bugfix"), ctx(ws), PROV)
    assert checked.ok and checked.gene.category == "repair"


def test_run_log_model_round_trips() -> None:
    run_ = DistillRun(at=NOW, status="rejected", reasons=["x"], data_hash="abc")
    assert DistillRun.model_validate_json(run_.model_dump_json()) == run_


def test_thresholds_are_settings_with_one_line_errors() -> None:
    from gep.core.config import load_settings
    from gep.core.errors import ConfigError

    assert load_settings(None, env={"GEP_DISTILL_INTERVAL_HOURS": "6"}).distill_interval_hours == 6
    with pytest.raises(ConfigError, match="setting 'distill_min_score'"):
        load_settings(None, env={"GEP_DISTILL_MIN_SCORE": "1.5"})


def test_provenance_survives_the_store_and_an_export(ws: Path, tmp_path: Path) -> None:
    from gep.assets.gene_files import export_assets, import_assets
    from gep.store import Store

    gene = run(ws, mixed_capsules()).gene
    with Store.open(f"sqlite:///{tmp_path / 'a.db'}") as store:
        store.upsert_gene(gene)
        export_assets(store, tmp_path / "out")
    with Store.open(f"sqlite:///{tmp_path / 'b.db'}") as other:
        report = import_assets(other, tmp_path / "out")
        assert report.rejected == []
        back = other.get_gene(gene.id)
    assert back is not None and back.provenance == gene.provenance and back.to_asset() == gene.to_asset()
