"""`gep mcp` driven by the MCP SDK's own client over stdio (mcp.client.stdio), against a real workspace after a
failed cycle: the tools' listing, recall of the failed change (and its record, judged like a session's
context), bad input and unknown tools as error results, a secret in the store and the logs never returned, and
gep_cycle's progress notifications."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from learning_helpers import REPAIR, agent_workspace, cycle, later, log_again, store_of, venv_first
from mcp import Client, StdioServerParameters
from typer.testing import CliRunner

from gep import CycleRequest, recover, run_cycle
from gep.cli.root import app
from gep.core.models import EvolutionEvent
from gep.learning.feedback import FeedbackKind, FeedbackSignal, Observation
from gep.learning.injections import read_log, scores
from gep.sessions import mcp_answers as answers
from gep.sessions.mcp_models import DATA_NOTE

pytestmark = pytest.mark.timeout(300)
GEP = str(Path(sys.executable).parent / "gep")
TOKEN = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
BREAK = "import pathlib, sys; sys.stdin.read(); pathlib.Path('stats.py').write_text('def mean(:\\n')"
TOOLS = {"gep_live_problems", "gep_recall", "gep_history", "gep_status", "gep_feedback", "gep_cycle"}
Session = Callable[[Client], Awaitable[Any]]


def failed_attempt(ws: Path) -> EvolutionEvent:
    """A command agent breaks the example's module: the cycle fails its checks (the real engine, no Prefect)."""
    event = run_cycle(CycleRequest(workspace=ws, mutator="command", seed=1,
                                   agent_cmd=shlex.join([sys.executable, "-c", BREAK])), env=dict(os.environ))
    assert event is not None and event.outcome.status == "failed" and event.genes_used == [REPAIR]
    return event


@pytest.fixture(scope="module")
def failed_ws(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, EvolutionEvent]:
    """The example workspace after a failed cycle, with a token in its logs and, raw, in a person's note."""
    with pytest.MonkeyPatch.context() as mp:
        venv_first(mp)
        ws = agent_workspace(tmp_path_factory.mktemp("mcp") / "ws")
        with (ws / "logs" / "agent.log").open("a") as fh:
            fh.write(f"2026-12-01T10:00:00Z [ERROR] deploy: push refused for token {TOKEN}\n")
        failed = failed_attempt(ws)
    with store_of(ws) as store:  # as an older version (or another tool) may have stored them: unredacted
        assert failed.meta.mutator_result is not None
        failed.meta.mutator_result.summary = f"rewrote mean(); pushed with {TOKEN}"
        store.add_event(failed)
        store.add_feedback(FeedbackSignal(id="fb_raw", gene_id=REPAIR, event_id=failed.id,
                                          kind=FeedbackKind.not_helpful, confidence=1.0, origin=Observation.person,
                                          created_at=datetime.now(UTC), note=f"it broke the parser; token {TOKEN}"))
    return ws, failed


def serve(ws: Path, session: Session, env: dict[str, str] | None = None) -> Any:
    """Run ``session`` against `gep mcp --workspace ws`, started by the SDK's stdio client."""
    params = StdioServerParameters(command=GEP, args=["mcp", "--workspace", str(ws)],
                                   env={"PATH": os.environ["PATH"], **(env or {})})

    async def main() -> Any:
        async with Client(params, read_timeout_seconds=120) as client:
            return await session(client)

    return anyio.run(main)


def test_tools_are_listed_within_5_s_with_schemas_and_annotations(failed_ws: tuple[Path, EvolutionEvent]) -> None:
    ws, _ = failed_ws

    async def session(client: Client) -> Any:
        listed = await client.list_tools()
        return time.monotonic(), listed, await client.list_resources()

    started = time.monotonic()
    answered, listed, resources = serve(ws, session)
    assert answered - started < 5.0
    tools = {t.name: t for t in listed.tools}
    assert set(tools) == TOOLS
    for name in TOOLS - {"gep_feedback", "gep_cycle"}:
        assert tools[name].annotations.read_only_hint is True, name
    assert tools["gep_cycle"].annotations.read_only_hint is False
    assert tools["gep_feedback"].annotations.read_only_hint is False
    assert set(tools["gep_recall"].input_schema["properties"]) == {"problem", "file"}
    assert set(tools["gep_feedback"].input_schema["required"]) == {"event", "verdict"}
    assert all(t.output_schema and "data_note" in t.output_schema["properties"] for t in tools.values())
    assert {str(r.uri) for r in resources.resources} == {"gep://lessons", "gep://genes", "gep://problems"}


def test_recall_returns_the_failed_change_and_is_recorded(failed_ws: tuple[Path, EvolutionEvent]) -> None:
    ws, failed = failed_ws

    async def session(client: Client) -> Any:
        live = (await client.call_tool("gep_live_problems", {})).structured_content
        key = live["problems"][0]["key"]
        by_problem = await client.call_tool("gep_recall", {"problem": key})
        by_error = await client.call_tool("gep_recall", {"problem": live["problems"][0]["error"]})
        by_file = await client.call_tool("gep_recall", {"file": "stats.py"})
        return live, by_problem, by_error, by_file

    live, by_problem, by_error, by_file = serve(ws, session)
    assert live["data_note"] == DATA_NOTE and "mean([2, 4, 6])" in live["problems"][0]["error"]
    assert live["problems"][0]["failed"] == 1
    got = by_problem.structured_content
    assert not by_problem.is_error and got["data_note"] == DATA_NOTE
    [attempt] = got["attempts"]
    assert attempt["event"] == failed.id.rsplit("_", 1)[1] and attempt["outcome"] == "failed"
    assert "+def mean(:" in attempt["change"] and attempt["files"] == ["stats.py"]
    assert any("SyntaxError" in c for c in attempt["checks"])
    assert [n["verdict"] for n in got["notes"]] == ["not_helpful"]
    assert by_error.structured_content["attempts"] == got["attempts"]  # the error as the logs say it
    assert by_file.structured_content["attempts"] == got["attempts"]
    assert DATA_NOTE in by_problem.content[0].text  # the text a client shows the model is marked too
    injections, _ = read_log(ws)
    recalled = [i for i in injections if i.via == "recall"]
    assert len(recalled) == 3 and all(i.session.startswith("mcp:") for i in recalled)
    with store_of(ws) as store:
        lesson = next(x for x in store.list_lessons() if x.event_id == failed.id)
    assert recalled[0].items[0].ref == lesson.id and recalled[0].items[0].problems == [live["problems"][0]["key"]]
    assert scores(*read_log(ws), datetime.now(UTC))[lesson.id].recalled == 3


def test_bad_input_and_unknown_tools_are_error_results(failed_ws: tuple[Path, EvolutionEvent]) -> None:
    ws, _ = failed_ws
    calls = [("gep_history", {"limit": "lots"}), ("gep_history", {"limit": 0}), ("gep_no_such_tool", {}),
             ("gep_recall", {}), ("gep_feedback", {"event": "evt_nope", "verdict": "helpful"}),
             ("gep_feedback", {"event": "x", "verdict": "maybe"}), ("gep_cycle", {"strategy": "yolo"})]

    async def session(client: Client) -> Any:
        results = [await client.call_tool(name, args) for name, args in calls]
        return results, await client.call_tool("gep_history", {"limit": 1})

    results, after = serve(ws, session)
    for (name, args), r in zip(calls, results, strict=True):
        assert r.is_error, (name, args)
        text = r.content[0].text
        assert "Traceback" not in text and len(text) < 1000, text
    assert "Unknown tool: gep_no_such_tool" in results[2].content[0].text
    assert "no event 'evt_nope'" in results[4].content[0].text
    assert not after.is_error and len(after.structured_content["cycles"]) == 1  # it kept answering


def test_feedback_as_gep_feedback_takes_it(failed_ws: tuple[Path, EvolutionEvent]) -> None:
    ws, failed = failed_ws
    short = failed.id.rsplit("_", 1)[1]

    async def session(client: Client) -> Any:
        return await client.call_tool("gep_feedback", {"event": short, "verdict": "not_helpful", "note": "no"})

    said = serve(ws, session)
    assert not said.is_error, said.content
    assert said.structured_content["event"] == short and said.structured_content["gene"] == REPAIR
    with store_of(ws) as store:
        said_by_people = [f.note for f in store.list_feedback() if f.origin == Observation.person]
    assert said_by_people[-1] == "no" and len(said_by_people) == 2


def test_a_secret_in_the_store_and_the_logs_is_never_returned(failed_ws: tuple[Path, EvolutionEvent]) -> None:
    ws, failed = failed_ws
    with store_of(ws) as store:  # the raw note and summary are there: only the server's redaction keeps them out
        assert any(TOKEN in (f.note or "") for f in store.list_feedback())
        assert TOKEN in str(store.get_event(failed.id))
    assert TOKEN in (ws / "logs" / "agent.log").read_text()

    async def session(client: Client) -> Any:
        out = [await client.call_tool("gep_recall", {"problem": "push refused for token"}),
               await client.call_tool("gep_recall", {"file": "stats.py"}),
               await client.call_tool("gep_recall", {"problem": f"token {TOKEN}"}),
               *[await client.call_tool(t, {}) for t in ("gep_live_problems", "gep_history", "gep_status")]]
        texts = [json.dumps(r.structured_content) + " ".join(c.text for c in r.content) for r in out]
        for uri in ("gep://lessons", "gep://genes", "gep://problems"):
            texts += [c.text for c in (await client.read_resource(uri)).contents]
        return texts

    texts = serve(ws, session)
    assert any("it broke the parser; token [REDACTED" in t for t in texts)  # the note is shown, its token is not
    assert any("rewrote mean(); pushed with [REDACTED" in t for t in texts)
    assert all(TOKEN not in t for t in texts)
    assert TOKEN not in (ws / ".gep" / "context" / "injections.jsonl").read_text()


def prefect_env(live_prefect: Any, tmp_path: Path) -> dict[str, str]:
    """The environment `gep mcp` gets when its cycle should report to the tests' live server."""
    return {"PREFECT_API_URL": live_prefect.api_url, "PREFECT_HOME": str(tmp_path / "prefect-home"),
            "DO_NOT_TRACK": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}


def flow_run_of(api_url: str, run_id: str) -> Any:
    from prefect.client.orchestration import get_client
    from prefect.settings import temporary_settings

    async def read() -> Any:
        async with get_client() as client:
            return await client.read_flow_run(run_id)

    with temporary_settings(updates={"api.url": api_url}):
        return anyio.run(read)


def test_a_cycle_is_a_flow_run_that_reports_progress_and_returns_its_outcome(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, live_prefect: Any) -> None:
    """gep_cycle runs the cycle as `gep cycle` does: a Prefect flow run (it was the library's cycle, in the
    store but not in Prefect), named and tagged like every cycle's run, its state the outcome's."""
    venv_first(monkeypatch)
    ws = agent_workspace(tmp_path / "ws")
    seen: list[tuple[float, float | None, str | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        seen.append((done, total, message))

    async def session(client: Client) -> Any:
        return await client.call_tool("gep_cycle", {"mutator": "command", "agent_cmd": shlex.join(
            [sys.executable, "-c", BREAK])}, progress_callback=progress)

    result = serve(ws, session, prefect_env(live_prefect, tmp_path))
    assert not result.is_error, result.content
    got = result.structured_content
    assert got["outcome"] == "failed" and got["gene"] == REPAIR and got["files"] == ["stats.py"]
    assert got["rescued_patch"] and any("SyntaxError" in r for r in got["reasons"])
    assert [m for _, _, m in seen][:2] == ["collect sources", "extract signals"] and seen[-1] == (10, 10, "record")
    with store_of(ws) as store:
        events = store.list_events()
    assert [e.outcome.status for e in events] == ["failed"] and events[0].meta.flow_run_id
    run = flow_run_of(live_prefect.api_url, events[0].meta.flow_run_id)
    assert run.name.startswith(f"cycle-0001 repair {REPAIR}") and run.state is not None and run.state.is_failed()
    assert "outcome:failed" in run.tags


def test_the_read_tools_never_import_prefect_nor_sqlalchemy(failed_ws: tuple[Path, EvolutionEvent]) -> None:
    """The server answers from the quick store (gep/store/quick_read.py), as the store-only commands do."""
    ws, _ = failed_ws
    script = f"""
import sys, anyio
from mcp import Client
from gep.sessions.mcp_server import build

async def main():
    async with Client(build(__import__("pathlib").Path({str(ws)!r}))) as client:
        for name, args in [("gep_live_problems", {{}}), ("gep_recall", {{"file": "stats.py"}}),
                           ("gep_history", {{}}), ("gep_status", {{}})]:
            assert not (await client.call_tool(name, args)).is_error, name
        await client.read_resource("gep://lessons")
    print(sorted(m for m in ("prefect", "sqlalchemy", "sqlmodel") if m in sys.modules))

anyio.run(main)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


def test_the_next_cycle_judges_what_recall_gave(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A recall is judged as a session's context: the problem showing again in the logs afterwards makes the
    recalled lesson `ignored` (gep/learning/injections.py), and `gep lessons list` counts it as asked for."""
    venv_first(monkeypatch)
    ws = agent_workspace(tmp_path / "ws")
    failed = failed_attempt(ws)
    key = answers.live_problems(ws).problems[0].key
    got = answers.recall_for(ws, problem=key, file=None, session="mcp:test", now=later(0.5))
    assert got.attempts and got.attempts[0].outcome == "failed"
    log_again(ws, later(1))
    cycle(ws, 2, clock=lambda: later(2))
    injections, judgments = read_log(ws)
    [asked] = [i for i in injections if i.via == "recall"]
    with store_of(ws) as store:
        lesson = next(x for x in store.list_lessons() if x.event_id == failed.id)
    assert [(j.injection, j.ref, j.verdict) for j in judgments] == [(asked.id, lesson.id, "ignored")]
    listed = CliRunner().invoke(app, ["lessons", "list", "--workspace", str(ws)])
    assert "injected 1x (1 asked for), used 0, ignored 1" in listed.output


def test_what_gep_init_claude_writes_runs_as_claude_code_runs_it(failed_ws: tuple[Path, EvolutionEvent],
                                                                tmp_path: Path) -> None:
    """The hooks and the server read back from the files `gep init --claude` wrote, run the way Claude Code
    runs them: the hook's command line through a shell with $CLAUDE_PROJECT_DIR, the server from .mcp.json."""
    ws, _ = failed_ws
    env = {**os.environ, "PATH": f"{Path(GEP).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run([GEP, "init", "--claude", "--workspace", str(ws)], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    try:
        settings = json.loads((ws / ".claude" / "settings.json").read_text())
        [start] = [h for e in settings["hooks"]["SessionStart"] for h in e["hooks"]]
        payload = {"session_id": "s-claude", "transcript_path": "", "cwd": str(ws),
                   "hook_event_name": "SessionStart", "source": "startup"}
        hook = subprocess.run(["bash", "-c", start["command"]], input=json.dumps(payload), capture_output=True,
                              text=True, env={**env, "CLAUDE_PROJECT_DIR": str(ws)}, cwd=tmp_path,
                              timeout=start["timeout"] * 6)
        context = json.loads(hook.stdout)["hookSpecificOutput"]["additionalContext"]
        assert "Tried before on a live problem and failed" in context and TOKEN not in context
        server = json.loads((ws / ".mcp.json").read_text())["mcpServers"]["gep"]
        assert settings["enabledMcpjsonServers"] == ["gep"] and server["args"] == ["mcp"]
        params = StdioServerParameters(command=server["command"], args=server["args"], cwd=str(tmp_path),
                                       env={"PATH": env["PATH"], "CLAUDE_PROJECT_DIR": str(ws)})

        async def main() -> Any:
            async with Client(params, read_timeout_seconds=120) as client:
                return await client.call_tool("gep_status", {})

        status = anyio.run(main)
        assert status.structured_content["workspace"] == str(ws)
    finally:
        undone = subprocess.run([GEP, "init", "--claude", "--remove", "--workspace", str(ws)], capture_output=True,
                                text=True, env=env, timeout=120)
        assert undone.returncode == 0, undone.stderr
    assert not (ws / ".mcp.json").exists() and not (ws / ".claude").exists()


def test_outside_a_repository_the_server_says_so_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run([GEP, "mcp"], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={k: v for k, v in os.environ.items() if k != "CLAUDE_PROJECT_DIR"}, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == f"gep: {tmp_path} is not inside a git repository: run this in a workspace or " \
        "pass --workspace DIR"


def test_a_cancelled_cycle_leaves_no_process_and_is_recorded_as_interrupted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, live_prefect: Any) -> None:
    venv_first(monkeypatch)
    ws = agent_workspace(tmp_path / "ws")
    pid_file = tmp_path / "agent.pid"
    slow = f"import os, sys, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); sys.stdin.read(); time.sleep(120)"

    async def session(client: Client) -> list[str]:
        stages: list[str] = []
        with anyio.move_on_after(90) as scope:
            async def progress(done: float, total: float | None, message: str | None) -> None:
                stages.append(message or "")

            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: client.call_tool("gep_cycle", {"mutator": "command", "agent_cmd": shlex.join(
                    [sys.executable, "-c", slow])}, progress_callback=progress))
                while not pid_file.exists():
                    await anyio.sleep(0.1)
                tg.cancel_scope.cancel()
        assert not scope.cancelled_caught
        return stages

    stages = serve(ws, session, prefect_env(live_prefect, tmp_path))
    assert stages[-1] == "apply"
    agent = int(pid_file.read_text())
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _alive(agent):
        time.sleep(0.2)
    assert not _alive(agent)
    recover(ws)
    with store_of(ws) as store:
        assert [e.outcome.status for e in store.list_events()] == ["interrupted"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
