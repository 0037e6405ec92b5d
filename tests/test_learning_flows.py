"""People steering through Prefect: the review pause shows the change and keeps the reviewer's note as feedback;
the `feedback` flow (and its deployment's run form) does what `gep feedback` does."""

from __future__ import annotations

import asyncio
import sys
import threading
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, git
from learning_helpers import REPAIR, agent_workspace, committed_fix, store_of, venv_first
from test_flows import FIX_AGENT, agent, flow_run, paused_run, prefect_server  # noqa: F401 - the session's server

from gep.core.models import EvolutionEvent
from gep.core.request import CycleRequest
from gep.learning.feedback import FeedbackKind, Observation

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    venv_first(monkeypatch)
    return agent_workspace(tmp_path / "ws")


def review_form(run_id: str) -> str:
    """The description the Prefect UI shows above the pause form."""
    from prefect import get_client

    run = flow_run(run_id)
    key = run.state.state_details.run_input_keyset["description"]
    with get_client(sync_client=True) as client:
        return client.read_flow_run_input(run_id, key)


@pytest.mark.parametrize("decision", ["reject", "approve", "ask for changes"])
def test_the_review_form_shows_the_diff_and_the_note_becomes_feedback(prefect_server, ws: Path, tmp_path: Path,  # noqa: F811
                                                                      decision: str) -> None:
    from prefect.flow_runs import resume_flow_run

    from flows.cycle import evolution_cycle
    from flows.states import event_of

    result: dict[str, EvolutionEvent | None] = {}
    def cycle() -> None:  # a rejected change is a Failed run: its state carries the event
        request = CycleRequest(workspace=ws, mutator="command", review=True, agent_cmd=agent(tmp_path, "fix", FIX_AGENT))
        state = asyncio.run(evolution_cycle(request=request, return_state=True))
        result["event"] = event_of(state)

    runner = threading.Thread(target=cycle, daemon=True)
    runner.start()
    run_id = paused_run(ws, runner)
    form = review_form(run_id)
    assert "`stats.py`" in form and "```diff" in form
    assert "-    return sum(values) / (len(values) - 1)" in form and "+    return sum(values) / len(values)" in form
    assert "there is no default" in form
    # Submit untouched: no decision is made for the reviewer (the form's decision is required)
    with pytest.raises(RuntimeError, match="'decision' is a required property"):
        resume_flow_run(run_id, run_input={"note": ""})
    assert flow_run(run_id).state_name == "Paused" and runner.is_alive()
    approve = decision == "approve"
    note = "right fix, and the log said so" if approve else "hides the empty-list case; handle it first"
    resume_flow_run(run_id, run_input={"decision": decision, "note": note})
    runner.join(120)
    event = result["event"]
    assert event is not None and event.outcome.status == ("success" if approve else "failed")
    with store_of(ws) as store:
        person = [f for f in store.list_feedback() if f.origin == Observation.person]
        lessons = [x for x in store.list_lessons(REPAIR) if x.category.value == "person"]
    if decision == "ask for changes":  # kept out, and nothing counts against the gene
        assert person == [] and lessons == []
        assert git(ws, "log", "-1", "--format=%s").strip() == "initial"
        return
    [signal], [lesson] = person, lessons
    assert (signal.event_id, signal.gene_id, signal.note) == (event.id, REPAIR, note)  # the reviewer's words
    assert signal.kind == (FeedbackKind.helpful if approve else FeedbackKind.not_helpful)
    assert note in lesson.content
    if not approve:
        assert git(ws, "log", "-1", "--format=%s").strip() == "initial"
        with store_of(ws) as store:  # counted once, as the reviewer's word: no implicit 'ignored' as well
            kinds = [f.kind for f in store.list_feedback() if f.event_id == event.id]
            failures = [x for x in store.list_lessons(REPAIR) if x.category.value == "failure"]
        assert kinds == [FeedbackKind.not_helpful] and failures == []  # and no failure lesson for a correct fix


def test_the_feedback_flow_does_what_gep_feedback_does(prefect_server, ws: Path) -> None:  # noqa: F811
    from flows.feedback import feedback

    fixed = committed_fix(ws)
    signal = feedback(workspace=str(ws), event_id=fixed.id, verdict="helpful", note="the report is right again")
    assert (signal.kind, signal.gene_id, signal.note) == (FeedbackKind.helpful, REPAIR, "the report is right again")
    with store_of(ws) as store:
        assert [f.id for f in store.list_feedback() if f.origin == Observation.person] == [signal.id]
    with pytest.raises(Exception, match="no event 'evt_nope'"):
        feedback(workspace=str(ws), event_id="evt_nope", verdict="not_helpful")


def test_the_feedback_deployment_asks_for_what_gep_feedback_takes() -> None:
    """What the UI's run form shows: every parameter described, the verdict a choice of the two."""
    from prefect.flows import load_flow_from_entrypoint
    from prefect.utilities.callables import parameter_schema

    spec = yaml.safe_load((ROOT / "prefect.yaml").read_text())
    [dep] = [d for d in spec["deployments"] if d["name"] == "feedback"]
    assert dep["entrypoint"] == "flows/feedback.py:feedback" and dep["parameters"] == {"workspace": "{{ $GEP_WORKSPACE }}"}
    sys.path.insert(0, str(ROOT))
    flow = load_flow_from_entrypoint(str(ROOT / dep["entrypoint"]))
    schema = parameter_schema(flow).model_dump()
    props = schema["properties"]
    assert set(schema["required"]) == {"workspace", "event_id", "verdict"}
    assert all(props[p].get("description") for p in ("workspace", "event_id", "verdict", "note"))
    assert props["verdict"]["enum"] == ["helpful", "not_helpful"]
