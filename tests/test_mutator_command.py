"""Command mode: a real external agent process (a small Python script) run against the example workspace."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gep.core import constants
from gep.core.config import Settings
from gep.core.errors import ConfigError
from gep.core.models import Gene, Mutation
from gep.mutators.base import MutationRequest
from gep.mutators.command import CommandMutator, agent_env, split_command
from gep.mutators.gep_prompt import PromptInput, build_prompt, render_markdown

FIXING_AGENT = r'''
import json, os, pathlib, sys
stdin_text = sys.stdin.read()
file_text = pathlib.Path(os.environ["GEP_PROMPT_FILE"]).read_text()
stats = pathlib.Path("stats.py")
stats.write_text(stats.read_text().replace("(len(values) - 1)", "len(values)"))
report = {
    "same_prompt": stdin_text == file_text,
    "prompt_head": stdin_text[:60],
    "cwd": os.getcwd(),
    "cycle": os.environ.get("GEP_CYCLE_ID"),
    "has_db_url": "GEP_DATABASE_URL" in os.environ,
    "has_api_key": os.environ.get("ANTHROPIC_API_KEY") == "sk-ant-agent-key-" + "x" * 20,
}
pathlib.Path(sys.argv[1]).write_text(json.dumps(report))
print("working on it")
print("GEP_SUMMARY: Fix stats.mean to divide by len(values)")
'''

SLOW_AGENT = r'''
import subprocess, sys, time, pathlib
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
pathlib.Path(sys.argv[1]).write_text(str(child.pid))
print("started", flush=True)
time.sleep(60)
print("slept to the end", flush=True)
'''

FAILING_AGENT = r'''
import sys
print("trying something")
print("fatal: model quota exceeded for key sk-ant-api03-" + "Q" * 30, file=sys.stderr)
sys.exit(3)
'''

CHATTY_AGENT = r'''
import sys
for i in range(50_000):
    print(f"line {i} " + "." * 40)
print("THE END")
'''


def script(tmp_path: Path, name: str, body: str) -> Path:
    p = tmp_path / "agents" / name
    p.parent.mkdir(exist_ok=True)
    p.write_text(body)
    return p


def request(ws: Path, settings: Settings, cycle_id: str = "evt_cmd_1") -> MutationRequest:
    g = Gene(id="gene_repair_from_errors", strategy=["Fix the root cause"], validation=["python -m pytest -q"])
    prompt = build_prompt(PromptInput(mutation=Mutation(id="mut_1", category="repair"), gene=g,
                                      signals=["log_error"], cycle_id=cycle_id), context_chars=8000)
    return MutationRequest(work_tree=ws, cycle_id=cycle_id, prompt=prompt, gene=g, settings=settings,
                           forbidden_paths=[".git", ".gep"], validation_commands=list(g.validation))


def cmd(*argv: str | Path) -> str:
    return shlex.join([sys.executable, *map(str, argv)])


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead too (reaped by init later)
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ")[-1].startswith("Z"))


def test_agent_fixes_the_example(example_ws: Path, tmp_path: Path) -> None:
    agent = script(tmp_path, "agent.py", FIXING_AGENT)
    report = tmp_path / "report.json"
    settings = Settings(agent_cmd=cmd(agent, report))
    env = {**os.environ, "GEP_DATABASE_URL": "postgresql://gep:s3cret@db.internal/gep",
           "ANTHROPIC_API_KEY": "sk-ant-agent-key-" + "x" * 20}
    req = request(example_ws, settings)
    result = CommandMutator(settings, env).apply(req)

    assert result.status == "changed", result.error
    assert result.summary == "Fix stats.mean to divide by len(values)"
    assert "sum(values) / len(values)" in (example_ws / "stats.py").read_text()
    seen = json.loads(report.read_text())
    assert seen["same_prompt"] is True
    assert seen["prompt_head"] == render_markdown(req.prompt)[:60]
    assert Path(seen["cwd"]).resolve() == example_ws.resolve()
    assert seen["cycle"] == "evt_cmd_1"
    assert seen["has_db_url"] is False  # the store's credentials stay with the engine
    assert seen["has_api_key"] is True  # the agent's own key is passed through
    assert result.prompt_file == str(example_ws / ".gep" / "prompts" / "evt_cmd_1.md")
    assert "exit code 0" in result.output and "working on it" in result.output
    # the fix is real: the workspace's tests pass now
    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=example_ws,
                           capture_output=True, text=True)
    assert tests.returncode == 0, tests.stdout


def test_timeout_kills_the_agent_and_its_children(repo: Path, tmp_path: Path) -> None:
    agent = script(tmp_path, "slow.py", SLOW_AGENT)
    pidfile = tmp_path / "child.pid"
    settings = Settings(agent_cmd=cmd(agent, pidfile), agent_timeout_s=1.0)
    result = CommandMutator(settings, os.environ).apply(request(repo, settings))
    assert result.status == "error"
    assert result.error is not None and result.error.startswith("agent command timed out after 1s and was killed")
    assert "started" in result.output and "slept to the end" not in result.output  # killed at its limit
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while pid_alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pid_alive(child)


PID_AGENT = r'''
import os, sys, time, pathlib
pathlib.Path(sys.argv[1]).write_text(str(os.getpid()))
time.sleep(60)
'''

CYCLE_PROCESS = r'''
import os, sys
from pathlib import Path
sys.path[:0] = [sys.argv[1], os.path.join(sys.argv[1], "tests")]
from test_mutator_command import request
from gep.core.config import Settings
from gep.mutators.command import CommandMutator
settings = Settings(agent_cmd=sys.argv[3], agent_timeout_s=60)
CommandMutator(settings, os.environ).apply(request(Path(sys.argv[2]), settings))
'''


def test_the_agent_dies_with_a_killed_cycle(repo: Path, tmp_path: Path) -> None:
    """kill -9 of the cycle must not leave the agent writing into a workspace that recovery restores."""
    agent = script(tmp_path, "pid.py", PID_AGENT)
    pidfile = tmp_path / "agent.pid"
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.Popen([sys.executable, "-c", CYCLE_PROCESS, str(root), str(repo), cmd(agent, pidfile)])
    try:
        deadline = time.monotonic() + 30
        while not (pidfile.exists() and pidfile.read_text().strip()):
            assert proc.poll() is None and time.monotonic() < deadline, "the agent never started"
            time.sleep(0.05)
        proc.kill()
        proc.wait()
        agent_pid = int(pidfile.read_text())
        deadline = time.monotonic() + 5
        while pid_alive(agent_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        alive = pid_alive(agent_pid)
        if alive:
            os.kill(agent_pid, 9)
        assert not alive, "the agent outlived the killed cycle"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_non_zero_exit_is_an_error_with_output(repo: Path, tmp_path: Path) -> None:
    agent = script(tmp_path, "fail.py", FAILING_AGENT)
    settings = Settings(agent_cmd=cmd(agent))
    result = CommandMutator(settings, os.environ).apply(request(repo, settings))
    assert result.status == "error"
    assert result.error is not None
    assert result.error.startswith("agent command exited with code 3: ")
    assert "fatal: model quota exceeded" in result.error and "\n" not in result.error
    assert "trying something" in result.output and "--- stderr ---" in result.output
    assert "Q" * 30 not in result.output + result.error  # redacted
    assert "[REDACTED]" in result.output


def test_output_is_bounded_and_keeps_the_end(repo: Path, tmp_path: Path) -> None:
    agent = script(tmp_path, "chatty.py", CHATTY_AGENT)
    settings = Settings(agent_cmd=cmd(agent))
    result = CommandMutator(settings, os.environ).apply(request(repo, settings))
    assert result.status == "changed"
    assert result.summary == ""  # no GEP_SUMMARY line: the cycle falls back to the mutation
    assert len(result.output) <= constants.AGENT_OUTPUT_CHARS
    assert "THE END" in result.output and "line 0 " not in result.output


def test_missing_program_is_an_error(repo: Path) -> None:
    settings = Settings(agent_cmd="definitely-not-an-agent-xyz --go")
    result = CommandMutator(settings, os.environ).apply(request(repo, settings))
    assert result.status == "error"
    assert result.error is not None and result.error.startswith(
        "cannot start agent command 'definitely-not-an-agent-xyz'")


def test_no_shell_is_involved(repo: Path, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    # with a shell this would create the marker; split with shlex it is one literal argument to echo
    settings = Settings(agent_cmd=f"echo hello ; touch {marker}")
    result = CommandMutator(settings, os.environ).apply(request(repo, settings))
    assert result.status == "changed"
    assert f"hello ; touch {marker}" in result.output
    assert not marker.exists()


def test_split_command_and_env() -> None:
    assert split_command("claude -p --permission-mode acceptEdits") == [
        "claude", "-p", "--permission-mode", "acceptEdits"]
    assert split_command("aider --message-file 'my prompt.md'") == ["aider", "--message-file", "my prompt.md"]
    for bad in (None, "", "   ", "agent 'unclosed"):
        with pytest.raises(ConfigError):
            split_command(bad)
    env = agent_env({"GEP_DATABASE_URL": "postgresql://u:p@h/d", "OPENAI_API_KEY": "k", "PATH": "/bin"},
                    GEP_PROMPT_FILE="/w/.gep/prompts/x.md")
    assert env == {"OPENAI_API_KEY": "k", "PATH": "/bin", "GEP_PROMPT_FILE": "/w/.gep/prompts/x.md"}
