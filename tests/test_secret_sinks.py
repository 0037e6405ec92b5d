"""Issue 32, finding 10 (Required): every planted secret shape, in every source a cycle reads, reaches no sink.

One real cycle through Prefect (the session's live server) with the real anthropic SDK against the fake
Messages API. Every shape of tests/test_redaction_shapes.py is planted in the error log, MEMORY.md, a Claude
Code session (the user's own words: a correction and a preference next to them) and in what the model says
(its summary and rationale, which become the commit message). Then each sink is searched for every shape's
secret parts: the store and everything else under .gep/ (events, prompt files, lessons, the behavioural
signals file), the requests sent to the Messages API, `gep export`, every commit of every ref, the stdout of
`gep history --json`, `gep show --json` and `gep lessons list --json`, the flow run's parameters, every
artifact of the run, its log lines and the state messages of the run and its tasks."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fake_anthropic import FakeAnthropic, message, text_block, tool_use
from test_behavior_cycles import write_session
from test_flows import prefect_server, run_state  # noqa: F401 - the session's live Prefect server
from test_mutator_anthropic import BUGGY, FIXED
from test_redaction_shapes import SHAPES
from typer.testing import CliRunner

from gep.cli.root import app

BODY = "Zr4Kp8Qw2Nd6Ty1Hb9Mv3Lc7Xs5Fg0Je"
PLANTED = [SHAPES[name](BODY) for name in sorted(SHAPES)]
BLOB = "\n".join(p for p, _ in PLANTED)
PARTS = sorted({part for _, ps in PLANTED for part in ps})
KEY = "sk-ant-api03-" + "Pq4" * 14


def leaks(text: str) -> list[str]:
    return [p for p in PARTS if p in text]


def plant(ws: Path) -> None:
    with (ws / "logs" / "agent.log").open("a", encoding="utf-8") as fh:
        for line in BLOB.splitlines():
            fh.write(f"2026-11-27 10:00:00 ERROR TypeError: deploy failed with {line}\n")
    with (ws / "MEMORY.md").open("a", encoding="utf-8") as fh:
        fh.write("\n## Credentials (do not share)\n" + BLOB + "\n")
    start = datetime.now(UTC) - timedelta(minutes=30)
    turns: list[tuple[str, str]] = []
    for planted, _ in PLANTED:
        turns += [("user", f"No, I said use {planted} as the key! Please always use bullet points."),
                  ("assistant", "Understood.")]
    write_session(ws, turns, start)


def session(req_blob: str) -> list[dict]:
    return [
        message(tool_use("edit_file", {"path": "stats.py", "old_text": BUGGY, "new_text": FIXED})),
        message(text_block("Done."), tool_use("finish", {"summary": f"Fix stats.mean {req_blob}",
                                                        "rationale": f"the tests pass; keys: {req_blob}"})),
    ]


def sinks_of(ws: Path, out: Path, run_id: str, base: str) -> dict[str, str]:
    from prefect import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        FlowRunFilter,
        FlowRunFilterId,
        LogFilter,
        LogFilterFlowRunId,
    )

    got: dict[str, str] = {}
    for f in (ws / ".gep").rglob("*"):
        if f.is_file():
            got[f"file {f.relative_to(ws)}"] = f.read_bytes().decode("utf-8", "replace")
    cli = CliRunner()
    for args in (["export", str(out), "-w", str(ws)], ["history", "--json", "-w", str(ws)],
                 ["lessons", "list", "--json", "-w", str(ws)]):
        res = cli.invoke(app, args)
        got[" ".join(args[:2])] = res.stdout + res.stderr
    ids = [e["id"] for e in json.loads(got["history --json"])]
    for i in ids:
        res = cli.invoke(app, ["show", i, "--json", "-w", str(ws)])
        got[f"show {i}"] = res.stdout + res.stderr
    for f in out.rglob("*"):
        if f.is_file():
            got[f"export {f.name}"] = f.read_text(errors="replace")
    # the engine's commits on every ref (the user's own commit of the planted files is the user's)
    got["commits"] = subprocess.run(["git", "log", "--all", "-p", "--format=%H%n%B", "--not", base], cwd=ws,
                                    capture_output=True, text=True).stdout
    with get_client(sync_client=True) as client:
        run = client.read_flow_run(run_id)
        got["flow run parameters"] = json.dumps(run.parameters)
        arts = client.read_artifacts(artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(
            any_=[run_id])))
        got["artifacts"] = json.dumps([a.model_dump(mode="json") for a in arts])
        # the run's log lines and every state message (the flow run's and its stage tasks') Prefect keeps
        from prefect.logging.handlers import APILogWorker

        APILogWorker.drain_all()  # the log lines are sent in batches: all of them are on the server now
        logs = client.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[run_id])))
        got["prefect logs"] = "\n".join(line.message for line in logs)
        tasks = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[run_id])))
        states = [*client.read_flow_run_states(run_id), *(st for t in tasks for st in client.read_task_run_states(t.id))]
        got["prefect states"] = json.dumps([(st.name, st.message) for st in states])
    return got


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_no_planted_shape_reaches_any_sink(prefect_server, example_ws: Path, tmp_path: Path,  # noqa: F811
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from flows.cycle import evolution_cycle
    from flows.states import event_of

    plant(example_ws)
    subprocess.run(["git", "add", "-A"], cwd=example_ws, check=True)
    subprocess.run(["git", "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "logs"], cwd=example_ws,
                   check=True)
    base = subprocess.run(["git", "rev-parse", "HEAD"], cwd=example_ws, capture_output=True, text=True).stdout.strip()
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    with FakeAnthropic(session(BLOB)) as fake:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
        state = run_state(evolution_cycle, workspace=str(example_ws), mutator="anthropic")
    event = event_of(state)
    assert event is not None and event.outcome.status == "success", (state, event)
    assert event.meta.behavior is not None and event.meta.behavior.captured > 0  # the session was read
    sent = json.dumps([r.body for r in fake.requests])
    assert "[REDACTED]" in sent and not leaks(sent)  # the planted secrets were redacted, not left out
    found = {name: leaks(text) for name, text in sinks_of(example_ws, tmp_path / "export",
                                                          str(event.meta.flow_run_id), base).items()}
    assert {name: parts for name, parts in found.items() if parts} == {}
    # the sinks were there to search: the store, the signals file, a prompt, the export, artifacts
    assert any(n.endswith(".db") for n in found) and any("behavior" in n for n in found), sorted(found)
    assert any(n.startswith("export ") for n in found) and len(found) > 8
    assert "prefect logs" in found and "prefect states" in found
    assert "[REDACTED]" in subprocess.run(["git", "log", "-1", "--format=%B"], cwd=example_ws, capture_output=True,
                                          text=True).stdout  # the model's summary went into the commit, redacted
    assert os.environ["ANTHROPIC_API_KEY"] == KEY
