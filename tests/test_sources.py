"""What a cycle reads from a workspace (gep/signals/sources.py)."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

from gep.core.config import Settings, load_settings
from gep.core.sanitize import REDACTED
from gep.signals.rules import extract_signals
from gep.signals.sources import (
    MEMORY_MISSING,
    NO_SESSION_LOGS,
    USER_MISSING,
    collect_sources,
    read_tail,
    render_transcript,
)

NOW = datetime(2026, 3, 14, 23, 30, tzinfo=UTC)
RECENT = NOW.timestamp() - 3600  # an hour before NOW: inside the 24-hour session window


def write(path: Path, text: str | bytes, mtime: float | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def test_empty_workspace_gives_the_reference_markers(tmp_path: Path) -> None:
    bundle = collect_sources(tmp_path, Settings(), now=NOW)
    assert bundle.recent_session_transcript == NO_SESSION_LOGS
    assert bundle.today_log == ""
    assert bundle.memory_snippet == MEMORY_MISSING
    assert bundle.user_snippet == USER_MISSING
    assert bundle.files == []
    signals = extract_signals(**bundle.model_dump(exclude={"files", "warnings"}))
    assert signals == ["memory_missing", "user_missing", "session_logs_missing"]


def test_example_workspace_yields_its_bug(example_ws: Path) -> None:
    bundle = collect_sources(example_ws, load_settings(example_ws), now=NOW)
    signals = extract_signals(**bundle.model_dump(exclude={"files", "warnings"}))
    assert signals[0] == "log_error"
    assert signals[1].startswith("errsig:") and "AssertionError: mean" in signals[1]
    assert {f.kind for f in bundle.files} >= {"log", "memory", "user"}


def test_today_memory_log_uses_the_injected_clock_then_logs(tmp_path: Path) -> None:
    write(tmp_path / "memory/2026-03-14.md", "today: I need a csv export")
    write(tmp_path / "memory/2026-03-13.md", "yesterday: Error: old")
    write(tmp_path / "logs/app.log", "worker timeout\n")
    bundle = collect_sources(tmp_path, Settings(), now=NOW)
    assert bundle.today_log.startswith(
        "today: I need a csv export\n--- LOG (logs/app.log) ---\nworker timeout"
    )
    assert "yesterday" not in bundle.today_log
    # The date is taken in UTC, as the reference's toISOString.
    local_evening = datetime(2026, 3, 15, 1, 0, tzinfo=UTC).astimezone()
    assert "today" not in collect_sources(tmp_path, Settings(), now=local_evening).today_log


def test_logs_newest_first_and_capped_in_number(tmp_path: Path) -> None:
    for i in range(5):
        write(tmp_path / f"logs/sub/{i}.log", f"entry {i}\n", mtime=1_700_000_000 + i)
    bundle = collect_sources(tmp_path, Settings(max_source_files=3), now=NOW)
    assert [f.path for f in bundle.files if f.kind == "log"] == [
        "logs/sub/4.log",
        "logs/sub/3.log",
        "logs/sub/2.log",
    ]
    assert bundle.today_log.index("entry 4") < bundle.today_log.index("entry 3")
    assert "entry 0" not in bundle.today_log


def test_huge_sparse_log_costs_only_the_tail(tmp_path: Path) -> None:
    big = tmp_path / "logs/huge.log"
    big.parent.mkdir(parents=True)
    with big.open("wb") as fh:
        fh.truncate(2 * 1024**3)  # 2 GB, sparse
        fh.seek(2 * 1024**3 - 40)
        fh.write(b"\nTypeError: boom at the very end\n")
    bundle = collect_sources(tmp_path, Settings(log_tail_bytes=4096), now=NOW)
    (entry,) = [f for f in bundle.files if f.kind == "log"]
    assert entry.size >= 2 * 1024**3
    assert entry.bytes_read <= 4096
    assert entry.truncated
    assert "TypeError: boom at the very end" in bundle.today_log
    assert len(bundle.today_log) < 5000


def test_binary_and_invalid_utf8_never_crash(tmp_path: Path) -> None:
    write(tmp_path / "logs/bin.log", bytes(range(256)) * 50 + b"\xff\xfe Error: after garbage\n")
    write(tmp_path / "MEMORY.md", b"\xc3\x28 broken \xe2\x82 utf8")
    bundle = collect_sources(tmp_path, Settings(), now=NOW)
    assert "Error: after garbage" in bundle.today_log
    assert "\ufffd" in bundle.memory_snippet
    assert "\x00" not in bundle.today_log


def test_tail_starts_on_a_line_and_character_boundary(tmp_path: Path) -> None:
    path = write(tmp_path / "x.log", "é" * 100 + "\nsecond line\nthird line\n")
    for cap in (27, 30):  # 27 starts inside a two-byte "é", 30 on its first byte
        tail = read_tail(path, cap)
        assert tail.truncated and tail.bytes_read == cap
        assert tail.text == "second line\nthird line\n"
    assert read_tail(path, 10_000).text.startswith("é")


def test_secrets_are_redacted_everywhere(tmp_path: Path) -> None:
    key = "sk-ant-api03-" + "Q" * 40
    write(tmp_path / "logs/a.log", f"calling with ANTHROPIC_API_KEY={key}\n")
    write(tmp_path / "MEMORY.md", "owner: alice@example.com\npassword: hunter2hunter2")
    write(tmp_path / "USER.md", "token ghp_" + "x" * 36)
    line = {"type": "user", "message": {"role": "user", "content": f"use {key} please"}}
    write(tmp_path / "sessions/s.jsonl", json.dumps(line) + "\n")
    bundle = collect_sources(tmp_path, Settings(), now=NOW)
    text = bundle.model_dump_json()
    for secret in (key, "alice@example.com", "hunter2hunter2", "ghp_" + "x" * 36):
        assert secret not in text
    assert REDACTED in bundle.today_log and REDACTED in bundle.recent_session_transcript


def test_git_and_gep_dirs_and_escaping_globs_are_never_read(tmp_path: Path) -> None:
    write(tmp_path / ".git/logs/HEAD.log", "Error: from git\n")
    write(tmp_path / ".gep/logs/x.log", "Error: from gep\n")
    outside = tmp_path.parent / f"{tmp_path.name}-outside.log"
    outside.write_text("Error: outside\n")
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs/link.log").symlink_to(outside)
    settings = Settings(log_globs=["**/*.log", "../*.log", str(outside)])
    bundle = collect_sources(tmp_path, settings, now=NOW)
    assert bundle.today_log == ""
    assert bundle.files == [] or all(f.kind != "log" for f in bundle.files)


def test_openclaw_session_rendering() -> None:
    lines = [
        {
            "type": "message",
            "message": {"role": "user", "content": [{"type": "text", "text": "please add\nexport"}]},
        },
        {
            "type": "message",
            "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": "on it"}, {"type": "toolCall", "name": "exec"}],
            },
        },
        {"type": "message", "message": {"role": "assistant", "content": "HEARTBEAT_OK"}},
        {
            "type": "message",
            "message": {
                "role": "assistant",
                "content": [],
                "errorMessage": "Unsupported MIME type: image/gif",
            },
        },
        {"type": "tool_result", "content": "done"},
        {"type": "tool_result", "content": "Traceback ... ZeroDivisionError: division by zero " + "x" * 300},
        {
            "type": "message",
            "message": {"role": "assistant", "content": [{"type": "toolCall", "name": "exec"}]},
        },
        {
            "type": "message",
            "message": {"role": "assistant", "content": [{"type": "toolCall", "name": "exec"}]},
        },
    ]
    text = render_transcript("\n".join(json.dumps(x) for x in lines) + "\nnot json\n")
    out = text.split("\n")
    assert out[0] == "**USER**: please add export"
    assert out[1] == "**ASSISTANT**: on it [TOOL: exec]"
    assert out[2] == "**ASSISTANT**: [LLM ERROR] Unsupported MIME type: image/gif"
    assert out[3].startswith("[TOOL RESULT] Traceback ... ZeroDivisionError") and out[3].endswith("...")
    assert out[4] == "**ASSISTANT**: [TOOL: exec]"
    assert out[5] == "   ... [Repeated 1 times] ..."
    assert "unsupported_input_type" in extract_signals(recent_session_transcript=text)


def test_claude_code_session_rendering(tmp_path: Path) -> None:
    lines = [
        {"type": "summary", "summary": "x"},
        {"type": "user", "message": {"role": "user", "content": "fix the failing test"}},
        {
            "type": "assistant",
            "message": {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "hmm"},
                    {"type": "text", "text": "Running tests"},
                    {"type": "tool_use", "name": "Bash", "input": {"command": "pytest"}},
                ],
            },
        },
        {
            "type": "user",
            "message": {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "is_error": True,
                        "content": [{"type": "text", "text": "Error: 1 failed"}],
                    }
                ],
            },
        },
        {
            "type": "assistant",
            "isApiErrorMessage": True,
            "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": "API Error: 529 overloaded"}],
            },
        },
    ]
    write(tmp_path / ".claude/projects/p/abc.jsonl", "\n".join(json.dumps(x) for x in lines))
    bundle = collect_sources(tmp_path, Settings(), now=NOW)
    assert bundle.recent_session_transcript.split("\n") == [
        "--- SESSION (abc.jsonl) ---",
        "**USER**: fix the failing test",
        "**ASSISTANT**: Running tests [TOOL: Bash]",
        "[TOOL ERROR] Error: 1 failed",
        "[LLM ERROR] API Error: 529 overloaded",
    ]
    assert [f.kind for f in bundle.files] == ["transcript"]


def test_transcripts_newest_first_with_partial_first_line_dropped(tmp_path: Path) -> None:
    old = {"type": "user", "message": {"role": "user", "content": "old session"}}
    new = {"type": "user", "message": {"role": "user", "content": "new session"}}
    write(tmp_path / "sessions/a.jsonl", json.dumps(old), mtime=RECENT)
    filler = json.dumps({"type": "user", "message": {"role": "user", "content": "z" * 500}})
    write(tmp_path / "sessions/b.jsonl", filler + "\n" + json.dumps(new) + "\n", mtime=RECENT + 100)
    bundle = collect_sources(tmp_path, Settings(transcript_tail_bytes=200), now=NOW)
    text = bundle.recent_session_transcript
    assert text.index("new session") < text.index("old session")
    assert "zzz" not in text


def test_only_sessions_of_the_last_24_hours_are_read(tmp_path: Path) -> None:
    def session(name: str, text: str, hours_ago: float) -> None:
        record = {"type": "user", "message": {"role": "user", "content": text}}
        write(tmp_path / f"sessions/{name}.jsonl", json.dumps(record), mtime=NOW.timestamp() - hours_ago * 3600)

    def transcript(**settings: float) -> str:
        return collect_sources(tmp_path, Settings(**settings), now=NOW).recent_session_transcript

    session("fresh", "fresh talk", 23.9)
    session("stale", "stale talk", 24.1)
    assert "fresh talk" in transcript() and "stale talk" not in transcript()
    # the window is a setting; 0 reads them all
    assert "stale talk" in transcript(transcript_max_age_hours=48)
    assert "stale talk" in transcript(transcript_max_age_hours=0)
    # only stale sessions: nothing recent to read, the reference's marker
    (tmp_path / "sessions/fresh.jsonl").unlink()
    assert transcript() == NO_SESSION_LOGS


# ---------------------------------------------------------------- sessions where the agents keep them


def claude_code_session(cwd: str) -> list[dict[str, object]]:
    """Records as Claude Code 2.x writes them (fields trimmed to those that vary in kind)."""
    base = {"isSidechain": False, "userType": "external", "cwd": cwd, "version": "2.0.61",
            "sessionId": "4f35e220-c435-4cf7-b9b9-f40426042847", "gitBranch": "main"}
    return [
        {"type": "summary", "summary": "Fix failing stats test", "leafUuid": "42f8e822"},
        {**base, "parentUuid": None, "uuid": "u1", "timestamp": "2026-03-14T10:00:00.000Z", "type": "user",
         "message": {"role": "user", "content": "the stats test fails, please fix it"}},
        {**base, "parentUuid": "u1", "uuid": "a1", "timestamp": "2026-03-14T10:00:05.000Z", "type": "assistant",
         "requestId": "req_011", "message": {
             "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
             "content": [{"type": "thinking", "thinking": "look at the test", "signature": "sig"},
                         {"type": "text", "text": "Let me run the tests."},
                         {"type": "tool_use", "id": "toolu_01", "name": "Bash",
                          "input": {"command": "pytest -q", "description": "Run tests"}}],
             "stop_reason": "tool_use", "usage": {"input_tokens": 10, "output_tokens": 20}}},
        {**base, "parentUuid": "a1", "uuid": "u2", "timestamp": "2026-03-14T10:00:09.000Z", "type": "user",
         "message": {"role": "user", "content": [
             {"tool_use_id": "toolu_01", "type": "tool_result", "is_error": True,
              "content": "FAILED tests/test_stats.py::test_mean - AssertionError: mean\n1 failed"}]},
         "toolUseResult": "Error: FAILED tests/test_stats.py::test_mean"},
        {**base, "parentUuid": "u2", "uuid": "a2", "timestamp": "2026-03-14T10:00:12.000Z", "type": "assistant",
         "isApiErrorMessage": True, "message": {
             "id": "msg_02", "type": "message", "role": "assistant", "model": "<synthetic>",
             "content": [{"type": "text", "text": "API Error: 529 {\"type\":\"overloaded_error\"}"}]}},
    ]


def test_claude_code_sessions_are_read_where_claude_code_keeps_them(tmp_path: Path, monkeypatch) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    ws = tmp_path / "my_proj.v2"
    ws.mkdir()
    # Claude Code names the folder after the absolute path, every non-alphanumeric character a "-".
    slug = "".join(c if c.isascii() and c.isalnum() else "-" for c in str(ws.resolve()))
    session = home / ".claude" / "projects" / slug / "4f35e220-c435-4cf7-b9b9-f40426042847.jsonl"
    write(session, "\n".join(json.dumps(r) for r in claude_code_session(str(ws))) + "\n")
    write(home / ".claude" / "projects" / (slug + "-other") / "x.jsonl",
          json.dumps({"type": "user", "message": {"role": "user", "content": "another project"}}))

    bundle = collect_sources(ws, Settings(), now=NOW)
    assert bundle.recent_session_transcript.split("\n") == [
        "--- SESSION (4f35e220-c435-4cf7-b9b9-f40426042847.jsonl) ---",
        "**USER**: the stats test fails, please fix it",
        "**ASSISTANT**: Let me run the tests. [TOOL: Bash]",
        "[TOOL ERROR] FAILED tests/test_stats.py::test_mean - AssertionError: mean 1 failed",
        '[LLM ERROR] API Error: 529 {"type":"overloaded_error"}',
    ]
    # What the event stores names the file without the home directory (nor the user name in the slug).
    assert [f.path for f in bundle.files] == ["{claude_project}/4f35e220-c435-4cf7-b9b9-f40426042847.jsonl"]
    signals = extract_signals(**bundle.model_dump(exclude={"files", "warnings"}))
    assert "session_logs_missing" not in signals and "log_error" in signals

    # CLAUDE_CONFIG_DIR moves Claude Code's whole configuration, sessions included.
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "cfg"))
    assert collect_sources(ws, Settings(), now=NOW).recent_session_transcript == NO_SESSION_LOGS
    write(tmp_path / "cfg" / "projects" / slug / "s.jsonl", json.dumps(claude_code_session(str(ws))[1]))
    assert "please fix it" in collect_sources(ws, Settings(), now=NOW).recent_session_transcript


def test_openclaw_sessions_under_home_by_a_configured_pattern(tmp_path: Path, monkeypatch) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    records = [
        {"type": "session", "version": 3, "id": "s1", "timestamp": "2026-03-14T10:00:00.000Z", "cwd": "/w"},
        {"type": "model_change", "id": "m0", "provider": "anthropic", "modelId": "claude-sonnet-4-6"},
        {"type": "message", "id": "m1", "parentId": None, "timestamp": "2026-03-14T10:00:01.000Z",
         "message": {"role": "user", "content": [{"type": "text", "text": "add a csv export command"}],
                     "timestamp": 1773482401000}},
        {"type": "message", "id": "m2", "parentId": "m1", "message": {
            "role": "assistant", "content": [{"type": "text", "text": "Running it."},
                                             {"type": "toolCall", "id": "call_1", "name": "exec",
                                              "arguments": {"command": "python export.py"}}],
            "api": "anthropic-messages", "stopReason": "toolUse"}},
        {"type": "message", "id": "m3", "parentId": "m2", "message": {
            "role": "toolResult", "toolCallId": "call_1", "toolName": "exec", "isError": True,
            "content": [{"type": "text", "text": "Traceback (most recent call last):\nKeyError: 'rows'"}]}},
        {"type": "message", "id": "m4", "parentId": "m3", "message": {
            "role": "assistant", "content": [], "stopReason": "error",
            "errorMessage": "400 Unsupported MIME type: image/heic"}},
    ]
    sessions = home / ".openclaw" / "agents" / "main" / "sessions"
    write(sessions / "abc.jsonl", "\n".join(json.dumps(r) for r in records) + "\n")
    write(sessions / "abc.jsonl.lock", "")

    # Outside the workspace only when asked for (the default reads no OpenClaw directory).
    assert collect_sources(tmp_path / "ws", Settings(), now=NOW).recent_session_transcript == NO_SESSION_LOGS
    settings = Settings(transcript_globs=["~/.openclaw/agents/main/sessions/*.jsonl"])
    bundle = collect_sources(tmp_path / "ws", settings, now=NOW)
    assert bundle.recent_session_transcript.split("\n") == [
        "--- SESSION (abc.jsonl) ---",
        "**USER**: add a csv export command",
        "**ASSISTANT**: Running it. [TOOL: exec]",
        "[TOOL ERROR] Traceback (most recent call last): KeyError: 'rows'",
        "**ASSISTANT**: [LLM ERROR] 400 Unsupported MIME type: image/heic",
    ]
    assert [f.path for f in bundle.files] == ["~/.openclaw/agents/main/sessions/abc.jsonl"]
    signals = extract_signals(**bundle.model_dump(exclude={"files", "warnings"}))
    assert "unsupported_input_type" in signals and "user_feature_request:add a csv export command" in signals
    # An absolute pattern works too; log and memory patterns stay inside the workspace.
    absolute = Settings(transcript_globs=[f"{sessions}/*.jsonl"], log_globs=[f"{sessions}/*.jsonl"])
    bundle = collect_sources(tmp_path / "ws", absolute, now=NOW)
    assert "KeyError" in bundle.recent_session_transcript and bundle.today_log == ""
    refused = Settings(transcript_globs=["{claude_project}/../*/*.jsonl", "{claude_project}", "~nosuchuser/x/*.jsonl"])
    assert collect_sources(tmp_path / "ws", refused, now=NOW).recent_session_transcript == NO_SESSION_LOGS


def test_sessions_that_render_to_nothing_are_not_missing(tmp_path: Path) -> None:
    """Only heartbeats, or a last record longer than the tail cap: the sessions exist, so no
    session_logs_missing (the reference returns "" here too)."""
    beat = {"type": "message", "message": {"role": "assistant", "content": "HEARTBEAT_OK"}}
    write(tmp_path / "sessions/a.jsonl", json.dumps(beat) + "\n")
    huge = {"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "content": "é" * 40_000}]}}
    write(tmp_path / "sessions/b.jsonl", json.dumps(huge, ensure_ascii=False) + "\n")
    bundle = collect_sources(tmp_path, Settings(transcript_tail_bytes=10_000), now=NOW)
    assert bundle.recent_session_transcript == ""
    assert [f.kind for f in bundle.files] == ["transcript", "transcript"]
    assert "session_logs_missing" not in extract_signals(**bundle.model_dump(exclude={"files", "warnings"}))


def test_the_engines_own_agent_sessions_are_skipped(tmp_path: Path, monkeypatch) -> None:
    """With `claude -p` as agent_cmd, the agent's session (its first message is the cycle's prompt)
    lands among the workspace's sessions: the next cycle must not read its own prompt back."""
    from gep.mutators.gep_prompt import SYSTEM_PROMPT
    from gep.signals.sources import ENGINE_PROMPT_MARKER

    assert ENGINE_PROMPT_MARKER in SYSTEM_PROMPT
    prompt = SYSTEM_PROMPT + "\n## Signals\nlog_error, errsig:Error: from the previous cycle\n"
    own = [{"type": "user", "message": {"role": "user", "content": prompt}}] + [
        {"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": "x" * 100}]}}
    ] * 50
    write(tmp_path / "sessions/agent.jsonl", "\n".join(json.dumps(r) for r in own), mtime=RECENT + 100)
    user = {"type": "user", "message": {"role": "user", "content": "the real user session"}}
    write(tmp_path / "sessions/user.jsonl", json.dumps(user), mtime=RECENT)
    # Read with a tail cap that no longer holds the prompt: the file's head still tells.
    bundle = collect_sources(tmp_path, Settings(transcript_tail_bytes=2000), now=NOW)
    assert bundle.recent_session_transcript == "--- SESSION (user.jsonl) ---\n**USER**: the real user session"
    assert [f.path for f in bundle.files] == ["sessions/user.jsonl"]
