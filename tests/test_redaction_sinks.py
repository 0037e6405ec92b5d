"""Issue 32 finding 10: redaction happens before any cut, in every sink.

The ``search`` tool redacted line by line (a PEM key's body lines carry no marker of their own); the command
mutator cut the agent's output before redacting it (a token straddling the cut kept its remainder in clear);
``gep solidify --summary TEXT`` went to Prefect as a flow-run parameter unredacted. Every shape of
tests/test_redaction_shapes.py goes through each of these sinks here."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from test_flows import flow_run, prefect_server  # noqa: F401 - the session's live Prefect server
from test_mutator_command import request
from test_redaction_shapes import SHAPES, _pem

from gep.core import constants
from gep.core.config import Settings
from gep.core.sanitize import redact
from gep.mutators.command import CommandMutator
from gep.mutators.tools import WorkspaceTools

BODY = "Qx7Rk2Vb9Lm4Tz8Wc3Ny6Pd1Hf5Js0Ga"
PLANTED = [SHAPES[name](BODY) for name in sorted(SHAPES)]
BLOB = "\n".join(p for p, _ in PLANTED)
PARTS = sorted({part for _, ps in PLANTED for part in ps})


def _tools(ws: Path) -> WorkspaceTools:
    return WorkspaceTools(ws, forbidden_paths=[], validation_commands=[], settings=Settings(), gene_id="g",
                          cycle_id="evt_t")


def test_the_search_tool_never_shows_a_secret_nor_a_pem_body_line(tmp_path: Path) -> None:
    (tmp_path / "keys.txt").write_text(BLOB + "\n", encoding="utf-8")
    (tmp_path / "sa.json").write_text(json.dumps({"private_key": _pem(BODY * 4, "PRIVATE KEY")}, indent=1))
    (tmp_path / "id_ed25519").write_text(_pem(BODY * 4, "OPENSSH PRIVATE KEY") + "\n")
    tools = _tools(tmp_path)
    for pattern in (".", "^[A-Za-z0-9+/=]{8,}$", BODY[:6], "Qx7", "password|BEGIN|ghp_|sk-|key"):
        out = tools.call("search", {"pattern": pattern}).content
        assert not [p for p in PARTS if p in out], (pattern, out)
        assert BODY[:16] not in out and BODY[16:] not in out
    assert "[REDACTED]" in tools.call("search", {"pattern": "."}).content
    assert "no match" in tools.call("search", {"pattern": BODY[:16]}).content  # no oracle on the clear text


@pytest.mark.parametrize("kind", ["RSA PRIVATE KEY", "OPENSSH PRIVATE KEY", "PGP PRIVATE KEY BLOCK"])
@pytest.mark.parametrize("inside", [3, 20, 200])  # the tail starts 3, 20 or 200 bytes into the key's body
def test_a_log_tail_starting_inside_a_key_block_shows_none_of_it(tmp_path: Path, kind: str, inside: int) -> None:
    """The tail of a log starts at a full line: when the cut fell inside a key block, its body lines (no
    marker of their own) reached the prompt and the timeline in clear."""
    from datetime import UTC, datetime

    from gep.signals.sources import collect_sources, collect_tails

    key = _pem(BODY * 16, kind)
    (tmp_path / "logs").mkdir()
    head = "2026-11-27 10:00:00 INFO boot\n" * 5 + f"2026-11-27 10:00:01 ERROR loaded key\n{key}\n"
    rest = "2026-11-27 10:00:02 ERROR TypeError: boom\n" * 3
    (tmp_path / "logs" / "app.log").write_text(head + rest)
    body_at = head.index(BODY[:16])
    settings = Settings(log_tail_bytes=len(head) + len(rest) - body_at - inside)
    seen = collect_sources(tmp_path, settings, datetime.now(UTC)).today_log
    seen += "".join(line.text for t in collect_tails(tmp_path, settings, datetime.now(UTC), []) for line in t.lines)
    assert "TypeError: boom" in seen  # what follows the key is still read
    assert not [i for i in range(0, len(BODY) * 16 - 8, 8) if (BODY * 16)[i:i + 8] in seen], seen


@pytest.mark.parametrize("straddle", [4, 12, 20])
def test_read_file_redacts_the_whole_file_before_a_line_range_or_the_cut(tmp_path: Path, straddle: int) -> None:
    """A line range inside a PEM key showed its body lines in clear; a token across the size cut kept its head."""
    key = _pem(BODY * 4, "OPENSSH PRIVATE KEY")
    (tmp_path / "id_ed25519").write_text(key + "\n")
    token = "ghp_" + (BODY * 2)[:36]
    (tmp_path / "big.txt").write_text("x" * (constants.TOOL_READ_MAX_CHARS - 2 - len(token) + straddle) + f" {token}\n")
    (tmp_path / "keys.txt").write_text(BLOB + "\n", encoding="utf-8")
    tools = _tools(tmp_path)
    for args in ({"path": "id_ed25519", "start_line": 2, "end_line": 4}, {"path": "id_ed25519"},
                 {"path": "big.txt"}, {"path": "keys.txt"}, {"path": "keys.txt", "start_line": 3}):
        out = tools.call("read_file", args).content
        assert BODY[:8] not in out and BODY[16:24] not in out and token[4:4 + straddle] not in out, (args, out)
        assert not [p for p in PARTS if p in out], (args, out)


@pytest.mark.parametrize("straddle", [4, 12, 20])
def test_the_agents_output_is_redacted_before_it_is_cut(repo: Path, tmp_path: Path, straddle: int) -> None:
    token = "ghp_" + (BODY * 2)[:36]
    tail = "x" * (constants.AGENT_OUTPUT_CHARS - straddle)  # the cut falls `straddle` characters before the token's end
    agent = tmp_path / "agent.py"
    agent.write_text(f"import sys\nsys.stdin.read()\nprint({BLOB!r})\nprint({token!r} + {tail!r})\n"
                     f"print({BLOB!r}, file=sys.stderr)\n")
    settings = Settings(agent_cmd=f"{sys.executable} {agent}")
    result = CommandMutator(settings, {}).apply(request(repo, settings))
    assert result.status == "changed", result.error
    leaked = [p for p in [*PARTS, (BODY * 2)[36 - straddle:36]] if p in result.output]
    assert not leaked, result.output[:400]


@pytest.mark.parametrize("straddle", [4, 12, 20, 40])
def test_an_agent_turn_clipped_from_a_transcript_keeps_no_part_of_a_cut_token(straddle: int) -> None:
    """Issue 45 (E02): a session's agent turns were cut to their last 4,000 characters before anything
    redacted them (the Claude signal pass and the behavioural capture redact later): a token across the cut
    kept its tail, which no rule recognises without its head, and a value its name (private_key_id).
    Also a key block whose BEGIN line was cut off."""
    from gep.signals.sources import transcript_exchanges

    filler = "y" * 4000
    for planted, parts in [*PLANTED, (_pem(BODY * 8, "PRIVATE KEY"), [(BODY * 8)[i:i + 12] for i in range(0, 200, 12)])]:
        # the cut falls `straddle` characters into the planted text's last line
        last = planted.splitlines()[-1] if planted.strip() else planted
        text = planted + " " + filler[: 4000 - len(last) + straddle - 1]
        lines = [json.dumps({"type": "assistant", "sessionId": "s1", "message": {"role": "assistant",
                             "content": [{"type": "text", "text": text}]}}),
                 json.dumps({"type": "user", "sessionId": "s1", "message": {"role": "user", "content": "thanks"}})]
        ex = transcript_exchanges("\n".join(lines)).exchanges[0]
        seen = redact(ex.agent)
        leaked = [p for p in parts if len(p) >= 8 and any(p[i:i + 8] in seen for i in range(0, len(p) - 7, 4))]
        assert not leaked, (planted[:40], seen[:120])


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_gep_solidify_summary_is_redacted_before_prefect(prefect_server, example_ws: Path) -> None:  # noqa: F811
    from test_flows import cycle
    from typer.testing import CliRunner

    from gep.cli.root import app

    event = cycle(workspace=str(example_ws), mutator="prompt")
    assert event is not None and event.outcome.status == "awaiting_changes"
    stats = example_ws / "stats.py"
    stats.write_text(stats.read_text().replace("(len(values) - 1)", "len(values)"))
    token = "ghp_" + (BODY * 2)[:36]
    res = CliRunner().invoke(app, ["solidify", "-w", str(example_ws), "--summary", f"Fix the mean, key {token}"])
    assert res.exit_code == 0, res.output
    from gep.store import Store

    with Store.for_workspace(example_ws) as store:
        done = store.get_event(event.id)
    assert done is not None and done.meta.solidify_flow_run_id
    params = flow_run(done.meta.solidify_flow_run_id).parameters
    assert token[4:] not in json.dumps(params) and "[REDACTED]" in params["summary"]
    import subprocess

    log = subprocess.run(["git", "log", "-1", "--format=%B"], cwd=example_ws, capture_output=True, text=True).stdout
    assert token[4:] not in log and log.startswith("gep(repair): Fix the mean, key [REDACTED]")
