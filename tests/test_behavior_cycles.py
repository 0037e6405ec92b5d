"""What people say steers real cycles (issue 17): behavioural signals captured from the transcripts a cycle
reads, merged into its signals, kept in the store; a transcript full of corrections leads to a repair of the
agent's instruction file that only appends; the caps and idempotence across cycles and the live hook; the
Claude pass (local fake Messages API) with its tokens and cost on the event; approval after a GEP change
counted as helpful. Real git repositories, stores and cycles through gep.run_cycle."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from conftest import git, init_repo
from fake_anthropic import FakeAnthropic, message, text_block, tool_use
from test_behavior_evolution import CORRECTIONS

import gep.learning.approval
from gep import CycleRequest, run_cycle
from gep.core.config import Settings
from gep.core.errors import ConfigError
from gep.core.models import EvolutionEvent
from gep.cycle.budget import tokens_used_on
from gep.cycle.collect_behavior import signals_since
from gep.learning.feedback import FeedbackKind, InMemoryFeedback
from gep.learning.memory_graph import parse_at
from gep.signals.behavior_log import locked, read_signals, signals_dir
from gep.store import Store

pytestmark = pytest.mark.timeout(300)

AGENTS = "# Agent\n\nAnswer in English. Keep the README current.\n"
SID = "s-corr"
APPEND_AGENT = """import pathlib, sys
sys.stdin.read()
p = pathlib.Path('AGENTS.md')
p.write_text(p.read_text() + '\\n## Learned from the user\\n- Change only the command the user names; never rename '
             'options nobody asked to rename.\\n')
print('GEP_SUMMARY: Append a rule against unasked renames to AGENTS.md')
"""
REWRITE_AGENT = """import pathlib, sys
sys.stdin.read()
pathlib.Path('AGENTS.md').write_text('# Agent\\n\\nOnly change what the user names.\\n')
print('GEP_SUMMARY: Rewrite AGENTS.md')
"""
EMPTY_AGENT = """import pathlib, sys
sys.stdin.read()
pathlib.Path('AGENTS.md').write_text('')
print('GEP_SUMMARY: Start AGENTS.md over')
"""
NOOP_AGENT = "import sys; sys.stdin.read(); print('nothing to do')\n"


def ts(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


def record(role: str, text: str, at: datetime, sid: str = SID) -> str:
    content: object = [{"type": "text", "text": text}] if role == "assistant" else text
    return json.dumps({"type": role, "sessionId": sid, "timestamp": ts(at),
                       "message": {"role": role, "content": content}})


def write_session(ws: Path, turns: list[tuple[str, str]], start: datetime, name: str = "corr",
                  sid: str = SID) -> Path:
    """A Claude Code session under ``sessions/`` (one of the default transcript globs), a minute per turn."""
    path = ws / "sessions" / f"{name}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [record(role, text, start + timedelta(minutes=i), sid) for i, (role, text) in enumerate(turns)]
    with path.open("a", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    return path


def workspace(tmp_path: Path, toml: str = "") -> Path:
    files = {"AGENTS.md": AGENTS, "MEMORY.md": "# memory\n", "USER.md": "# user\n",
             "tests/test_ok.py": "def test_ok():\n    assert True\n", ".gitignore": "sessions/\n"}
    if toml:
        files["gep.toml"] = toml
    return init_repo(tmp_path / "ws", files)


def agent(tmp_path: Path, code: str, name: str = "agent") -> str:
    script = tmp_path / f"{name}.py"
    script.write_text(code)
    return f"{sys.executable} {script}"


def cycle(ws: Path, agent_cmd: str, seed: int = 1, env: dict[str, str] | None = None,
          **request: object) -> EvolutionEvent:
    event = run_cycle(CycleRequest(workspace=ws, mutator="command", agent_cmd=agent_cmd, seed=seed, **request),
                      env=env)
    assert event is not None
    return event


def stored_signals(ws: Path) -> list[dict]:
    with Store.for_workspace(ws) as store:
        return [s.model_dump() for s in store.list_behavior_signals()]


def ago(minutes: float) -> datetime:
    return datetime.now(UTC) - timedelta(minutes=minutes)


def one_day_from(minutes: float, span: float) -> datetime:
    """``ago(minutes)``, or earlier when ``span`` minutes from there would cross midnight UTC: then the turns
    end five minutes before it (the caps count per UTC day; a run just after midnight split them in two)."""
    start = ago(minutes)
    end = start + timedelta(minutes=span)
    if start.date() != end.date():
        start = datetime(end.year, end.month, end.day, tzinfo=UTC) - timedelta(minutes=span + 5)
    return start


# ------------------------------------------------------------------ corrections lead to a repair that appends


def test_a_transcript_full_of_corrections_repairs_the_agents_instruction_file_by_appending(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    write_session(ws, CORRECTIONS, ago(20))
    event = cycle(ws, agent(tmp_path, APPEND_AGENT))

    assert event.outcome.status == "success", event.meta.failure_reasons
    assert event.genes_used == ["gene_agent_instructions"] and event.intent == "repair"
    assert event.meta.mutation.target == "gene:gene_agent_instructions"
    for s in ("user_correction:User restated what they had asked for", "user_frustration",
              "user_correction_repeated"):
        assert s in event.signals
    behavior = event.meta.behavior
    assert (behavior.exchanges, behavior.new_exchanges, behavior.captured, behavior.stored) == (4, 4, 4, 4)
    assert behavior.signals == [s for s in event.signals if s.startswith("user_") and
                                not s.startswith("user_feature_request")]

    # the commit lands and only appends: what the file said before is still its beginning
    after = (ws / "AGENTS.md").read_text()
    assert after.startswith(AGENTS) and "## Learned from the user" in after[len(AGENTS):]
    assert git(ws, "show", "--name-only", "--format=", "HEAD").split() == ["AGENTS.md"]
    assert event.meta.commit == git(ws, "rev-parse", "HEAD").strip()
    assert git(ws, "status", "--porcelain", "--", "AGENTS.md") == ""

    # the store and the workspace's files hold the same signals; neither holds the user's words
    files = read_signals(ws).signals
    stored = stored_signals(ws)
    assert sorted(s["summary"] for s in stored) == sorted(s.summary for s in files) and len(stored) == 4
    kept = json.dumps(stored) + "".join(p.read_text() for p in signals_dir(ws).glob("*.jsonl"))
    for words in ("export command", "--max", "rename it", "frustrating"):
        assert words not in kept


@pytest.mark.parametrize("code, violation", [(REWRITE_AGENT, "protected file rewritten (it may only be appended to)"),
                                             (EMPTY_AGENT, "protected file emptied")])
def test_the_instruction_file_is_never_rewritten_or_emptied(tmp_path: Path, code: str, violation: str) -> None:
    ws = workspace(tmp_path)
    write_session(ws, CORRECTIONS, ago(20))
    event = cycle(ws, agent(tmp_path, code))
    assert event.genes_used == ["gene_agent_instructions"] and event.outcome.status == "failed"
    assert any(violation in r for r in event.meta.failure_reasons), event.meta.failure_reasons
    assert (ws / "AGENTS.md").read_text() == AGENTS and event.meta.commit is None


# ------------------------------------------------------------------ caps and idempotence across cycles and the hook


def test_caps_hold_and_each_exchange_is_captured_once_across_cycles(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    turns: list[tuple[str, str]] = []
    for i in range(14):  # 14 corrections of one day: 10 are kept (seed 000's daily cap per source)
        turns += [("assistant", f"I renamed option number {i}."), ("user", f"No, that's wrong, I asked for option {i}.")]
    write_session(ws, turns, one_day_from(60, span=len(turns) - 1))
    noop = agent(tmp_path, NOOP_AGENT)
    first = cycle(ws, noop)
    b = first.meta.behavior
    assert (b.exchanges, b.new_exchanges, b.captured, b.capped, b.stored) == (14, 14, 10, 4, 10)
    keys = Counter(s.key for s in read_signals(ws).signals)
    assert sum(keys.values()) == 10 and max(keys.values()) <= 3

    second = cycle(ws, noop, seed=2)  # the same transcript read again
    b = second.meta.behavior
    assert (b.new_exchanges, b.captured, b.stored) == (0, 0, 0)
    assert sum(1 for _ in read_signals(ws).signals) == 10 and len(stored_signals(ws)) == 10
    assert b.signals == []  # said before the last cycle: it already steered that one


def test_the_live_hook_and_the_next_cycle_capture_an_exchange_once(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    session = write_session(ws, [("user", "which tests ran last night?"), ("assistant", "All 42 tests passed.")],
                            ago(10))
    noop = agent(tmp_path, NOOP_AGENT)
    cycle(ws, noop)  # reads the first exchange (nothing in it)
    prompt = "Please always use bullet points in your replies."
    hook = json.dumps({"session_id": SID, "transcript_path": str(session), "cwd": str(ws),
                       "permission_mode": "default", "hook_event_name": "UserPromptSubmit", "prompt": prompt})
    gep_script = Path(sys.executable).with_name("gep")
    with locked(ws, 1):  # the worker cannot write while this test holds the lock: the hook must not wait for it
        proc = subprocess.run([str(gep_script), "capture", "--workspace", str(ws)], input=hook,
                              capture_output=True, text=True, timeout=30)
        assert proc.returncode == 0 and proc.stdout == "" and not read_signals(ws).signals
    deadline = time.monotonic() + 20
    while not read_signals(ws).signals and time.monotonic() < deadline:  # the detached worker writes it
        time.sleep(0.1)
    [live] = read_signals(ws).signals
    assert (live.type, live.summary) == ("preference", "User prefers bullet-point lists")

    with session.open("a", encoding="utf-8") as fh:  # Claude Code then writes the prompt into the transcript
        fh.write(record("user", prompt, datetime.now(UTC)) + "\n")
    event = cycle(ws, noop, seed=2)
    b = event.meta.behavior
    assert b.captured == 0 and b.new_exchanges == 0  # the hook had it: not captured twice
    assert len(read_signals(ws).signals) == 1 and b.stored == 1  # ... and the cycle adds it to the store
    assert f"user_preference:{live.summary}" in event.signals  # said since the last cycle: it steers this one
    assert event.genes_used == ["gene_agent_instructions"] and event.intent == "optimize"


def test_a_signal_said_in_the_second_the_last_cycle_started_is_not_lost() -> None:
    last = EvolutionEvent(id="evt_1", meta={"at": "2026-11-23T10:00:05.900Z"})
    since = signals_since([last], Settings(), datetime(2026, 11, 23, 11, 0, tzinfo=UTC))
    said = datetime(2026, 11, 23, 10, 0, 5, 950_000, tzinfo=UTC)  # stamped 10:00:05Z in the signal files
    assert since is not None and said.replace(microsecond=0) >= since
    assert signals_since([], Settings(), said) == said - timedelta(hours=24)  # first cycle: the transcripts' window


# ------------------------------------------------------------------ the Claude pass


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        yield server


PROSE = "honestly I just want the code, every paragraph of prose costs me time when I review"


def test_the_claude_pass_runs_in_the_cycle_with_its_tokens_and_cost_on_the_event(tmp_path: Path,
                                                                                 fake: FakeAnthropic) -> None:
    ws = workspace(tmp_path, "llm_signals = true\n")
    write_session(ws, [("assistant", "Here is a long explanation of the change, then the code."), ("user", PROSE)],
                  ago(5))
    fake.script = [message(tool_use("extract_signal", {"type": "preference", "content": "Wants code without prose",
                                                       "source": "I just want the code", "confidence": 0.9}),
                           input_tokens=420, output_tokens=60),
                   message(text_block("Done."), input_tokens=500, output_tokens=5)]
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-api03-test-" + "k" * 24, "ANTHROPIC_BASE_URL": fake.url}
    event = cycle(ws, agent(tmp_path, NOOP_AGENT), env=env)
    llm = event.meta.behavior.llm
    assert llm is not None and (llm.asked, llm.kept) == (1, 1)
    assert (llm.metrics.input_tokens, llm.metrics.output_tokens) == (920, 65)
    assert llm.metrics.estimated_cost_usd is not None and llm.metrics.estimated_cost_usd > 0
    assert "user_preference:Wants code without prose" in event.signals
    assert event.genes_used == ["gene_agent_instructions"]
    with Store.for_workspace(ws) as store:  # recorded on the stored event too
        assert store.get_event(event.id).meta.behavior.llm.metrics.input_tokens == 920
    # asked once: the next cycle does not send the same exchange again
    again = cycle(ws, agent(tmp_path, NOOP_AGENT), seed=2, env=env)
    assert again.meta.behavior.llm.asked == 0 and len(fake.requests) == 2


def test_the_claude_pass_counts_toward_the_daily_budget_and_stops_when_it_is_spent(tmp_path: Path,
                                                                                  fake: FakeAnthropic) -> None:
    ws = workspace(tmp_path, "llm_signals = true\ndaily_token_budget = 900\n")
    now = datetime.now(UTC)
    t0 = now if now.hour < 23 else now.replace(hour=12)  # every cycle on one UTC day
    write_session(ws, [("assistant", "Here is a long explanation of the change, then the code."), ("user", PROSE)],
                  t0 - timedelta(minutes=5))
    fake.script = [message(tool_use("extract_signal", {"type": "preference", "content": "Wants code without prose",
                                                       "source": "I just want the code", "confidence": 0.9}),
                           input_tokens=420, output_tokens=60),
                   message(text_block("Done."), input_tokens=500, output_tokens=5)]
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-api03-test-" + "k" * 24, "ANTHROPIC_BASE_URL": fake.url,
           "GEP_MODEL": "claude-sonnet-4-6"}

    def run(mutator: str, seed: int, at: datetime, **request: object) -> EvolutionEvent:
        event = run_cycle(CycleRequest(workspace=ws, mutator=mutator, seed=seed, **request), env=env,
                          clock=lambda: at)
        assert event is not None
        return event

    first = run("command", 1, t0, agent_cmd=agent(tmp_path, NOOP_AGENT))
    assert first.meta.behavior.llm.metrics.total_tokens == 985 and len(fake.requests) == 2
    write_session(ws, [("assistant", "Refactored the parser."), ("user", "the summaries on mondays run long")],
                  t0 - timedelta(minutes=1), name="later")
    # the pass spent the day's 900: the next cycle does not ask Claude, and its event says why
    second = run("command", 2, t0 + timedelta(seconds=30), agent_cmd=agent(tmp_path, NOOP_AGENT))
    reason = (f"daily token budget spent: Claude used 985 of 900 tokens on {t0.date()} (UTC); the Claude "
              f"signal pass runs again from {t0.date() + timedelta(days=1)}T00:00:00.000Z")
    assert second.meta.behavior.llm.not_run == reason and len(fake.requests) == 2
    assert second.outcome.status != "skipped"  # an agent's cycle spends none of the engine's tokens: it runs
    # a Claude-driven cycle is skipped, counting the pass's tokens, and its event keeps the capture's record
    skipped = run("anthropic", 3, t0 + timedelta(seconds=60))
    assert skipped.outcome.status == "skipped" and len(fake.requests) == 2
    assert skipped.meta.skip_reason is not None and "Claude used 985 of 900 tokens" in skipped.meta.skip_reason
    assert skipped.meta.behavior is not None and skipped.meta.behavior.llm.not_run == reason


def test_a_skipped_scheduled_tick_that_asked_claude_keeps_its_tokens_counted(tmp_path: Path,
                                                                             fake: FakeAnthropic) -> None:
    ws = workspace(tmp_path, 'llm_signals = true\nstrategy = "steady-state"\n')
    write_session(ws, [("assistant", "Here is a long explanation of the change, then the code."), ("user", PROSE)],
                  ago(5))
    fake.script = [message(text_block("Nothing to extract."), input_tokens=300, output_tokens=7)]
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-api03-test-" + "k" * 24, "ANTHROPIC_BASE_URL": fake.url}
    tick = cycle(ws, agent(tmp_path, NOOP_AGENT), env=env, scheduled=True)
    assert tick.outcome.status == "skipped" and tick.meta.skip_reason.startswith("steady-state: scheduled runs")
    assert tick.meta.behavior.llm.metrics.total_tokens == 307 and len(fake.requests) == 1
    at = parse_at(tick.meta.at)
    assert at is not None
    with Store.for_workspace(ws) as store:
        assert tokens_used_on(store, at.date()) == 307
    # a tick that asked Claude nothing (tick 2 of every 5 under steady state) is skipped without an event
    quiet = run_cycle(CycleRequest(workspace=ws, mutator="command", agent_cmd=agent(tmp_path, NOOP_AGENT), seed=2,
                                   scheduled=True), env=env)
    assert quiet is None and len(fake.requests) == 1


def test_the_claude_pass_is_off_unless_asked_and_refused_without_a_key(tmp_path: Path, fake: FakeAnthropic) -> None:
    ws = workspace(tmp_path)
    write_session(ws, [("assistant", "Here is the code."), ("user", PROSE)], ago(5))
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"} | {"ANTHROPIC_BASE_URL": fake.url}
    event = cycle(ws, agent(tmp_path, NOOP_AGENT), env=env)
    assert event.meta.behavior.llm is None and fake.requests == []
    with pytest.raises(ConfigError, match="needs ANTHROPIC_API_KEY"):
        cycle(ws, agent(tmp_path, NOOP_AGENT), env=env, llm_signals=True)
    gep_script = Path(sys.executable).with_name("gep")
    proc = subprocess.run([str(gep_script), "cycle", "--workspace", str(ws), "--llm-signals"], capture_output=True,
                          text=True, timeout=60, env={**env, "HOME": str(tmp_path)})
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        "gep: the Claude signal pass (--llm-signals / llm_signals = true) needs ANTHROPIC_API_KEY in the environment"]


# ------------------------------------------------------------------ approval after a GEP change


def test_approval_after_a_gep_change_counts_as_helpful_for_its_gene(tmp_path: Path, monkeypatch) -> None:
    ws = workspace(tmp_path)
    session = write_session(ws, CORRECTIONS, ago(20))
    change = cycle(ws, agent(tmp_path, APPEND_AGENT))
    assert change.outcome.status == "success" and change.meta.commit

    feedback = InMemoryFeedback()
    # the hook: until the store keeps feedback (issue 15's table), tests hand it a repository
    monkeypatch.setattr(gep.learning.approval, "feedback_repository", lambda store: feedback)
    with session.open("a", encoding="utf-8") as fh:
        fh.write(record("assistant", "Done: I added the rule to AGENTS.md.", datetime.now(UTC)) + "\n")
        fh.write(record("user", "Great work, thank you!", datetime.now(UTC) + timedelta(seconds=1)) + "\n")
    noop = agent(tmp_path, NOOP_AGENT, "noop")
    after = cycle(ws, noop, seed=2)
    assert "user_approval" in after.signals
    [approval] = after.meta.behavior.approvals
    assert (approval.event_id, approval.gene_id, approval.recorded) == (change.id, "gene_agent_instructions", True)
    [signal] = feedback.list_feedback()
    assert (signal.gene_id, signal.event_id, signal.kind) == ("gene_agent_instructions", change.id,
                                                              FeedbackKind.helpful)
    assert signal.situation and "Great work" not in (signal.note or "")

    # more praise for the same change counts once
    with session.open("a", encoding="utf-8") as fh:
        fh.write(record("assistant", "Anything else?", datetime.now(UTC)) + "\n")
        fh.write(record("user", "Thanks, that is perfect now!", datetime.now(UTC) + timedelta(seconds=1)) + "\n")
    cycle(ws, noop, seed=3)
    assert len(feedback.list_feedback()) == 1


def test_without_a_feedback_table_the_approval_is_listed_on_the_event(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    session = write_session(ws, CORRECTIONS, ago(20))
    change = cycle(ws, agent(tmp_path, APPEND_AGENT))
    with session.open("a", encoding="utf-8") as fh:
        fh.write(record("assistant", "Done.", datetime.now(UTC)) + "\n")
        fh.write(record("user", "Great work, thank you!", datetime.now(UTC) + timedelta(seconds=1)) + "\n")
    after = cycle(ws, agent(tmp_path, NOOP_AGENT, "noop"), seed=2)
    recorded = hasattr(Store, "add_feedback")  # true once issue 15's feedback table is on main
    assert [(a.event_id, a.gene_id, a.recorded) for a in after.meta.behavior.approvals] == \
        [(change.id, "gene_agent_instructions", recorded)]


def test_a_signal_file_that_is_not_a_file_is_skipped_and_named_on_the_event(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    write_session(ws, CORRECTIONS, ago(20))
    folder = signals_dir(ws)
    folder.mkdir(parents=True)
    today = datetime.now(UTC).date().isoformat()
    os.mkfifo(folder / f"{today}.jsonl")  # another tool's mistake: reading it would block the cycle
    event = cycle(ws, agent(tmp_path, NOOP_AGENT))
    b = event.meta.behavior
    assert any(today in w.path for w in b.warnings), b
    assert event.outcome.status in ("empty", "success"), event.meta.failure_reasons
