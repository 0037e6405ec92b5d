"""`gep capture` as a Claude Code UserPromptSubmit hook, the cycle's capture of the same exchanges, and
`gep signals`."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gep.cli.root import app
from gep.core.config import Settings
from gep.sessions.capture import parse_hook, run_hook
from gep.signals.behavior_log import capture_sessions, read_signals, seen
from gep.signals.sources import ENGINE_PROMPT_MARKER, collect_exchanges

FIXTURES = Path(__file__).parent / "fixtures"
GEP = Path(sys.executable).parent / "gep"
NOW = datetime(2026, 3, 14, 12, 0, tzinfo=UTC)
SID = "7c1e2a90-5b7d-4f4e-9a63-2f1d0b8e4c11"


def hook_json(transcript: Path, prompt: str, **extra: object) -> str:
    """The JSON Claude Code writes to a UserPromptSubmit hook's stdin (hooks reference: the common fields
    session_id, transcript_path, cwd, permission_mode, hook_event_name, then prompt)."""
    return json.dumps({"session_id": SID, "transcript_path": str(transcript), "cwd": str(transcript.parent),
                       "permission_mode": "default", "hook_event_name": "UserPromptSubmit", "prompt": prompt,
                       **extra})


def transcript(tmp_path: Path, upto: str | None = None) -> Path:
    """The Claude Code fixture session, cut just before the user turn ``upto`` (as a hook sees it)."""
    records = (FIXTURES / "behavior_claude_code.jsonl").read_text(encoding="utf-8").splitlines()
    if upto is not None:
        cut = next(i for i, r in enumerate(records) if json.loads(r).get("message", {}).get("content") == upto)
        records = records[:cut]
    path = tmp_path / "claude" / f"{SID}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(records) + "\n", encoding="utf-8")
    return path


def append_user(path: Path, text: str) -> None:
    record = {"type": "user", "sessionId": SID, "timestamp": "2026-03-14T10:09:00.000Z",
              "message": {"role": "user", "content": text}}
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")


# ------------------------------------------------------------------ the hook's JSON


def test_parse_hook_takes_the_documented_shape_and_ignores_other_fields(tmp_path: Path) -> None:
    hook = parse_hook(hook_json(tmp_path / "t.jsonl", "No, use csv", prompt_id="p1", effort="high"))
    assert hook is not None and hook.session_id == SID and hook.prompt == "No, use csv"
    assert hook.transcript_path.endswith("t.jsonl")


@pytest.mark.parametrize("payload", [
    "", "not json", "[1]", '{"hook_event_name": "PreToolUse", "prompt": "x"}', '{"prompt": "   "}',
    '{"prompt": "/clear"}', '{"prompt": "/deploy staging"}', '{"prompt": 42}', '{"prompt": "x", "cwd": ["a"]}',
])
def test_parse_hook_refuses_what_is_not_a_prompt_to_capture(payload: str) -> None:
    assert parse_hook(payload) is None


# ------------------------------------------------------------------ live capture and the cycle agree


def test_live_capture_then_the_cycle_rereading_the_transcript_captures_it_once(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    prompt = "I didn't ask you to refactor the CLI, please revert that part."
    path = transcript(tmp_path, upto=prompt)  # the hook runs before the prompt is in the transcript
    report = run_hook(ws, hook_json(path, prompt), now=NOW)
    assert report is not None and [s.type for s in report.written] == ["correction"]
    assert report.written[0].ts == "2026-03-14T12:00:00Z"  # the hook's clock: the transcript has no time yet

    append_user(path, prompt)  # Claude Code writes the prompt, the session goes on, a cycle reads it all
    settings = Settings(transcript_globs=[str(path.parent / "*.jsonl")], transcript_max_age_hours=0)
    sessions = collect_exchanges(ws, settings, now=NOW)
    again = capture_sessions(ws, sessions, now=NOW)
    assert again.new == len(sessions[0].exchanges) - 1  # all but the one the hook took
    assert [s.type for s in again.written] == []  # the exchanges before the prompt hold no signal
    assert [s.type for s in read_signals(ws).signals] == ["correction"]


def test_live_capture_when_the_transcript_already_holds_the_prompt(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    path = transcript(tmp_path)  # the whole session: its last user turn is "push"
    report = run_hook(ws, hook_json(path, "push"), now=NOW)
    assert report is not None and [s.type for s in report.written] == ["style"]  # history was read too
    assert report.written[0].ts.startswith("2026-03-14T10:")  # the transcript's time
    assert run_hook(ws, hook_json(path, "push"), now=NOW).new == 0  # a second hook call: nothing new


def test_live_capture_without_a_transcript_and_of_the_engines_own_sessions(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    report = run_hook(ws, hook_json(tmp_path / "missing.jsonl", "This is so frustrating!!!"), now=NOW)
    assert report is not None and [s.type for s in report.written] == ["emotion"]
    engine = tmp_path / "engine.jsonl"
    engine.write_text(json.dumps({"type": "user", "message": {"role": "user",
                                  "content": f"# {ENGINE_PROMPT_MARKER}\n..."}}) + "\n")
    assert run_hook(ws, hook_json(engine, "No, that's wrong!!"), now=NOW) is None


def test_a_cut_tail_drops_its_first_exchange_whose_agent_turn_may_be_partial(tmp_path: Path) -> None:
    path = transcript(tmp_path)
    whole = Settings(transcript_globs=[str(path.parent / "*.jsonl")], transcript_max_age_hours=0)
    [full] = collect_exchanges(tmp_path, whole, now=NOW)
    cut = whole.model_copy(update={"transcript_tail_bytes": path.stat().st_size // 2})
    [tail] = collect_exchanges(tmp_path, cut, now=NOW)
    assert 0 < len(tail.exchanges) < len(full.exchanges)
    first = next(i for i, e in enumerate(full.exchanges) if e.user == tail.exchanges[0].user)
    assert full.exchanges[first].agent == tail.exchanges[0].agent  # what is kept is whole


def test_nothing_private_reaches_the_files(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    key = "sk-ant-api03-" + "p" * 32
    prompt = (f"No, you got it wrong!! From now on always email Alice Moreau at dana.k@example.com with the key "
              f"{key} and the file /home/dana/secrets.txt, I told you twice")
    path = transcript(tmp_path, upto="I didn't ask you to refactor the CLI, please revert that part.")
    report = run_hook(ws, hook_json(path, prompt), now=NOW)
    assert report is not None and {s.type for s in report.written} >= {"correction", "preference"}
    written = "".join(p.read_text() for p in (ws / "memory").rglob("*.jsonl")) + \
        "".join(p.read_text() for p in (ws / ".gep").rglob("*") if p.is_file())
    for private in ("Alice", "Moreau", "dana", key, "/home/", "secrets"):
        assert private.lower() not in written.lower(), private
    words = prompt.lower().split()
    assert not any(" ".join(words[i:i + 4]) in written.lower() for i in range(len(words) - 3))  # no quote


# ------------------------------------------------------------------ the real hook process


def run_gep(*args: str, stdin: str = "", cwd: Path | None = None) -> tuple[subprocess.CompletedProcess[str], float, float]:
    """Run the `gep` console script; (result, wall seconds, CPU seconds of that process)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    result = subprocess.run([str(GEP), *args], input=stdin, capture_output=True, text=True, cwd=cwd, timeout=60,
                            env={**os.environ, "CLAUDE_PROJECT_DIR": ""})
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return result, wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def wait_for(check, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return False


def test_gep_capture_as_a_hook_prints_nothing_exits_0_fast_and_captures(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    prompt = "From now on, keep your answers short and skip the explanations."
    path = transcript(tmp_path, upto=prompt)
    result, wall, cpu = run_gep("capture", "--workspace", str(ws), stdin=hook_json(path, prompt))
    assert result.returncode == 0 and result.stdout == "" and result.stderr == ""
    # 300 ms is the budget; on an idle machine the process takes ~0.1 s (docs/behavior.md). CPU time is what
    # this process costs; wall time is also scheduling on a shared test machine, hence its looser bound.
    assert cpu < 0.3, f"gep capture used {cpu:.3f}s of CPU"
    assert wall < 1.5, f"gep capture took {wall:.3f}s"
    assert wait_for(lambda: read_signals(ws).signals), "the worker wrote nothing"
    assert [s.type for s in read_signals(ws).signals] == ["preference"]
    assert wait_for(lambda: len(seen(ws, "rules")) == 1)


def test_gep_capture_imports_nothing_heavy(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    payload = hook_json(tmp_path / "none.jsonl", "Perfect, thanks!")
    result = subprocess.run([sys.executable, "-X", "importtime", str(GEP), "capture", "--workspace", str(ws)],
                            input=payload, capture_output=True, text=True, timeout=60)
    modules = {line.split("|")[-1].strip().split(".")[0] for line in result.stderr.splitlines() if "|" in line}
    heavy = {"prefect", "pydantic", "sqlalchemy", "anthropic", "flows", "typer", "rich"}  # typer+rich: ~70 ms
    assert "gep" in modules and not modules & heavy
    assert wait_for(lambda: read_signals(ws).signals)  # and the worker did the work


def test_gep_signals_does_not_import_prefect(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-X", "importtime", str(GEP), "signals", "-w", str(tmp_path)],
                            capture_output=True, text=True, timeout=60)
    modules = {line.split("|")[-1].strip().split(".")[0] for line in result.stderr.splitlines() if "|" in line}
    assert result.returncode == 0 and "gep" in modules and not modules & {"prefect", "sqlalchemy", "flows"}


@pytest.mark.parametrize(("args", "stdin"), [
    (["capture"], ""),
    (["capture", "--workspace"], "{}"),
    (["capture", "--workspace", "/nonexistent/ws", "--bogus", "-x"], '{"prompt": "No, wrong!!"}'),
    (["capture", "--no-such-flag"], "\x00\xff garbage"),
])
def test_gep_capture_never_fails_the_hook(args: list[str], stdin: str, tmp_path: Path) -> None:
    result, _wall, _cpu = run_gep(*args, stdin=stdin, cwd=tmp_path)
    assert result.returncode == 0 and result.stdout == "" and result.stderr == ""  # exit 2 would block the prompt
    assert list(tmp_path.iterdir()) == []


def test_worker_errors_go_to_the_capture_log(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "memory" / "growth").mkdir(parents=True)
    (ws / "memory" / "growth" / "signals").write_text("a file where the folder should be")
    result = subprocess.run([sys.executable, "-m", "gep.sessions.capture", "--worker", "--workspace", str(ws)],
                            input=hook_json(tmp_path / "none.jsonl", "This is so frustrating!!!"),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout == "" and result.stderr == ""
    log = (ws / ".gep" / "behavior" / "capture.log").read_text()
    assert "capture:" in log and len(log.splitlines()) == 1


def test_the_documented_hook_snippet_is_valid_settings_json_for_this_command() -> None:
    doc = (Path(__file__).resolve().parents[1] / "docs" / "behavior.md").read_text(encoding="utf-8")
    section = doc.split("## In short, and the Claude Code hooks", 1)[1].split("\n## ", 1)[0]
    settings = json.loads(section.split("```json", 1)[1].split("```", 1)[0])
    [entry] = settings["hooks"]["UserPromptSubmit"]
    [hook] = entry["hooks"]
    assert hook["type"] == "command" and hook["command"] == 'gep capture --workspace "$CLAUDE_PROJECT_DIR"'


# ------------------------------------------------------------------ gep signals


runner = CliRunner()


def test_gep_signals_lists_filters_and_reports_malformed_lines(tmp_path: Path) -> None:
    path = transcript(tmp_path)
    settings = Settings(transcript_globs=[str(path.parent / "*.jsonl")], transcript_max_age_hours=0)
    capture_sessions(tmp_path, collect_exchanges(tmp_path, settings, now=NOW), now=NOW)
    day = tmp_path / "memory" / "growth" / "signals" / "2026-03-14.jsonl"
    day.write_text(day.read_text() + "{oops\n")

    table = runner.invoke(app, ["signals", "--workspace", str(tmp_path)])
    assert table.exit_code == 0 and "correction" in table.stdout and "style" in table.stdout
    assert "1 malformed line(s) skipped" in table.stderr
    listed = json.loads(runner.invoke(app, ["signals", "-w", str(tmp_path), "--json", "--type", "emotion"]).stdout)
    assert [s["type"] for s in listed] == ["emotion"] and listed[0]["intensity"] == 5
    assert json.loads(runner.invoke(app, ["signals", "-w", str(tmp_path), "--json", "--date",
                                          "2026-03-15"]).stdout) == []
    for bad, needle in ((["--date", "14/03/2026"], "--date must be YYYY-MM-DD"), (["--type", "mood"], "--type"),
                        (["-w", str(tmp_path / "nope")], "does not exist")):
        args = ["signals", "-w", str(tmp_path), *bad] if bad[0] != "-w" else ["signals", *bad]
        result = runner.invoke(app, args)
        assert result.exit_code == 2 and needle in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_capture_help_says_where_it_writes_without_waiting_for_a_hook_payload(tmp_path: Path) -> None:
    """A person typing `gep capture --help` gets the help at once (it used to wait on stdin, then print
    nothing), naming the folder it writes and how that folder stays out of git status (issue 31, point 8)."""
    env = {**os.environ, "COLUMNS": "80", "HOME": str(tmp_path)}
    gep = Path(sys.executable).parent / "gep"
    done = subprocess.run([str(gep), "capture", "--help"], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert text.startswith("Usage: ") and "DIR/memory/growth/signals/" in text
    assert "ignores itself in git" in text and "gep signals" in text
