"""The one pipeline (gep/cycle/pipeline.py) and the typed records it writes."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from gep import CycleRequest, run_cycle
from gep.core.models import CycleRun, EventMeta, EvolutionEvent, Gene, Mutation, RunPending
from gep.cycle import pipeline
from gep.store import Store, asset_json

FIXED = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def stage_names() -> list[str]:
    return [s.name for s in pipeline.STAGES]


def test_the_stage_order_is_written_once() -> None:
    assert stage_names() == ["collect sources", "extract signals", "analyse history", "gate", "select",
                             "build mutation", "record baseline", "apply", "solidify"]
    assert pipeline.RESUME_AT in stage_names()


def test_the_context_holds_resources_and_the_state_what_the_stages_make(example_ws: Path) -> None:
    """One object per job: what a stage produces is never written on the context."""
    from gep.cycle.context import CycleContext, open_cycle
    from gep.cycle.state import CycleState

    assert set(CycleContext.model_fields) == {"request", "settings", "repo", "store", "event_id", "cycle_number",
                                              "seed", "started_at", "clock", "env", "stack", "opened",
                                              "holdout"}  # drawn when the cycle opens, as its seed
    assert {"run", "tree", "notes", "recovered", "approve", "abandoned"} <= set(CycleState.model_fields)
    ctx, state = open_cycle(CycleRequest(workspace=example_ws, mutator="prompt", seed=1), env={})
    try:
        assert state.run is None and state.notes == [] and state.tree is None
        done = pipeline.run_pipeline(ctx, state)
        assert done is state and state.run is not None and state.run.status == "awaiting_changes"
        assert state.tree is not None and state.event is not None and state.event.id == ctx.event_id
    finally:
        ctx.close()


def test_removing_a_stage_from_the_list_changes_what_a_cycle_does(example_ws: Path, monkeypatch) -> None:
    """The runner reads STAGES itself: without 'extract signals' there is nothing to repair."""
    monkeypatch.setattr(pipeline, "STAGES", [s for s in pipeline.STAGES if s.name != "extract signals"])
    event = run_cycle(CycleRequest(workspace=example_ws, mutator="prompt", seed=1), env={})
    assert event is not None and event.signals == [] and event.outcome.status == "empty"


def test_reordering_stages_changes_what_a_cycle_does(example_ws: Path, monkeypatch) -> None:
    """Selecting before the signals are extracted finds no gene for them (and so an empty cycle)."""
    by_name = {s.name: s for s in pipeline.STAGES}
    order = ["collect sources", "select", "extract signals", "analyse history", "gate", "build mutation",
             "record baseline", "apply", "solidify"]
    monkeypatch.setattr(pipeline, "STAGES", [by_name[n] for n in order])
    event = run_cycle(CycleRequest(workspace=example_ws, mutator="prompt", seed=1), env={})
    assert event is not None and "log_error" in event.signals and event.outcome.status == "empty"
    assert event.genes_used == []


def test_the_unchanged_pipeline_runs_the_example_to_awaiting_changes(example_ws: Path) -> None:
    event = run_cycle(CycleRequest(workspace=example_ws, mutator="prompt", seed=1), env={},
                      clock=lambda: FIXED)
    assert event is not None and event.outcome.status == "awaiting_changes"
    assert event.genes_used == ["gene_repair_from_errors"]
    assert event.meta.at == "2026-11-23T12:00:00.000Z"  # the injected clock, not the machine's
    assert event.meta.selector is not None and event.meta.selector.selected == "gene_repair_from_errors"
    assert event.meta.personality is not None and event.meta.mutation is not None


def test_a_stage_that_raises_is_recorded_as_a_failed_cycle(example_ws: Path, monkeypatch) -> None:
    def broken(_ctx, _state):
        raise RuntimeError("select exploded")

    monkeypatch.setattr(pipeline, "STAGES", [pipeline.Stage(s.name, broken) if s.name == "select" else s for s in pipeline.STAGES])
    event = run_cycle(CycleRequest(workspace=example_ws, mutator="prompt", seed=1), env={})
    assert event is not None and event.outcome.status == "failed"
    assert event.meta.failure_reasons == ["RuntimeError: select exploded"]
    with Store.for_workspace(example_ws) as store:
        assert store.get_event(event.id).outcome.status == "failed"  # type: ignore[union-attr]
        assert store.open_runs() == []


# ------------------------------------------------------------------ typed meta


def test_event_meta_is_typed_and_leaves_unset_fields_out() -> None:
    event = EvolutionEvent(id="evt_1")
    assert asset_json(event)["meta"] == {}
    event.meta.add_failure("validation: boom")
    event.meta.commit = None  # an explicit null is kept, as before
    assert asset_json(event)["meta"] == {"failure_reasons": ["validation: boom"], "commit": None}
    assert event.model_dump(mode="json")["meta"] == {"failure_reasons": ["validation: boom"], "commit": None}


def test_meta_written_by_other_tools_loads_and_dumps_back_unchanged() -> None:
    """The reference's selector has another shape; odd values keep their JavaScript truthiness."""
    foreign = {"at": "2024-06-10T06:13:20.000Z", "selector": {"selected": "g", "reason": ["signals match"]},
               "empty_cycle": "yes", "recovered": "a note", "cycle": 3.5, "custom": {"n": 1}}
    event = EvolutionEvent.model_validate({"id": "evt_x", "meta": foreign})
    assert event.meta.at == "2024-06-10T06:13:20.000Z"
    assert event.meta.empty_cycle is None and event.meta.recovered is None and event.meta.cycle is None
    dumped = event.model_dump(mode="json")["meta"]
    for key in ("empty_cycle", "recovered", "cycle", "custom", "at"):
        assert dumped[key] == foreign[key]
    assert dumped["selector"]["reason"] == ["signals match"] and dumped["selector"]["selected"] == "g"
    again = EvolutionEvent.model_validate_json(json.dumps(event.model_dump(mode="json")))
    assert again.model_dump(mode="json")["meta"] == dumped


def test_run_pending_is_typed_and_old_records_still_load() -> None:
    gene = Gene(id="gene_x")
    mutation = Mutation(id="mut_1", category="repair")
    run = CycleRun(event_id="evt_1", workspace="/w", head_sha="abc",
                   pending=RunPending(event=EvolutionEvent(id="evt_1"), gene=gene, mutation=mutation, review=True))
    back = CycleRun.model_validate_json(run.model_dump_json())
    assert back.pending.gene == gene and back.pending.review is True and back.pending.solidify is None
    old = {"event_id": "evt_2", "workspace": "/w", "head_sha": "abc", "pending": {}}
    assert CycleRun.model_validate(old).pending.event is None


def test_outcome_and_intent_use_their_enums() -> None:
    from gep.core.models import Intent, OutcomeStatus

    event = EvolutionEvent.model_validate({"id": "e", "intent": "optimize", "outcome": {"status": "success"}})
    assert event.intent is Intent.optimize and event.outcome.status is OutcomeStatus.success
    other = EvolutionEvent.model_validate({"id": "e", "intent": "explore", "outcome": {"status": "partial"}})
    assert other.intent == "explore" and other.outcome.status == "partial"  # another tool's words still load


def test_recovered_has_one_type() -> None:
    """The ids a cycle's start recovered; what recovery itself noted is another field."""
    assert EventMeta.model_fields["recovered"].annotation == (list[str] | None)
    assert EventMeta.model_fields["recovery"].annotation is not None


def test_a_checked_request_is_opened_once_unless_gep_toml_changed(example_ws: Path, monkeypatch) -> None:
    """`gep cycle` checks, then hands what the check opened to its run's open_cycle: the repository, the
    settings (one git probe, one gep.toml read) and the store are taken over, unless gep.toml changed
    meanwhile; the store stays open for the one who checked (the CLI reads it when Prefect fails)."""
    import gep.core.config
    import gep.git.repo
    from gep.cycle.context import check_cycle, open_cycle

    probes: list[Path] = []
    reads: list[Path] = []
    probe, from_toml = gep.git.repo._probe, gep.core.config._from_toml
    monkeypatch.setattr(gep.git.repo, "_probe", lambda p: probes.append(p) or probe(p))
    monkeypatch.setattr(gep.core.config, "_from_toml", lambda p: reads.append(p) or from_toml(p))
    toml = example_ws / "gep.toml"
    toml.write_text('validation = ["python -m compileall -q ."]\n')
    request = CycleRequest(workspace=example_ws, mutator="prompt", seed=1)

    def opened(checked=None, req: CycleRequest = request) -> tuple[int, int]:
        ctx, _ = open_cycle(req, opened=checked)
        taken = checked is not None and ctx.store is checked.store
        assert taken == (checked is not None and checked.serves(req, False))
        ctx.close()
        return len(probes), len(reads)

    with check_cycle(request) as checked:
        assert opened(checked) == (1, 1)
        assert checked.store.count_events() == 0  # the cycle did not close the store it was handed
        assert opened() == (2, 2)  # a cycle handed nothing opens its own
        assert opened(checked, request.model_copy(update={"strategy": "harden"})) == (3, 3)  # another request
        toml.write_text('validation = ["python -m compileall -q ."]\nlock_timeout_s = 5\n')
        assert opened(checked) == (4, 4)  # gep.toml changed since the check: read again
