"""`gep eval` on a history built here (two fixes), with a scripted agent; its bad input; its statistics."""

from __future__ import annotations

import json
import math
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import git, init_repo
from eval_helpers import history_with_two_fixes, snapshot, write_agent
from test_cli import in_process_error, run

from gep.eval.stats import difference_sequence, mcnemar, mixture_radius, rate_sequence, ratio_ci

pytestmark = pytest.mark.timeout(400)
GEP = str(Path(sys.executable).parent / "gep")


def _eval(ws: Path, tmp: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TMPDIR": str(tmp), **(env or {})}
    return subprocess.run([GEP, "eval", "-w", str(ws), "--json", *args], env=env, capture_output=True, text=True,
                          timeout=350)


def _by_subject(ws: Path, subject: str) -> str:
    return git(ws, "log", "--format=%H", f"--grep=^{subject}$").strip()


def test_gep_eval_replays_two_fixes_in_both_arms_and_leaves_the_workspace_as_it_was(tmp_path: Path):
    ws = history_with_two_fixes(tmp_path / "ws")
    (ws / "calc.py").write_text((ws / "calc.py").read_text() + "# my edit, not committed\n")
    (ws / "notes.txt").write_text("mine\n")
    git(ws, "branch", "keep-me")
    scratch, tape, agent_log = tmp_path / "tmp", tmp_path / "tape", tmp_path / "agent.log"
    scratch.mkdir()
    agent = write_agent(tmp_path / "agent")
    before = snapshot(ws)
    done = _eval(ws, scratch, "--agent-cmd", agent, "--record", str(tape), "--attempts", "2",
                 env={"GEP_TEST_AGENT_LOG": str(agent_log)})
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    fixes = [_by_subject(ws, "mean of nothing is 0"), _by_subject(ws, "parse takes 12.0")]
    assert [t["commit"] for t in data["tasks"]] == fixes  # the two fixes, oldest first; nothing else
    assert data["tasks"][0]["tests"] == ["tests/test_calc.py"]
    assert set(data["arms"]) == {"full", "off"}
    full, off = data["arms"]["full"], data["arms"]["off"]
    assert [(r["task"], r["fixed"], r["attempts"]) for r in full["results"]] == [
        (fixes[0][:10], True, 1), (fixes[1][:10], True, 1)]
    # the agent leaves parse alone in the off arm: the judge says not fixed after both attempts
    assert [(r["task"], r["fixed"], r["attempts"]) for r in off["results"]] == [
        (fixes[0][:10], True, 1), (fixes[1][:10], False, 2)]
    assert full["fixed"] == 2 and off["fixed"] == 1 and full["agent_seconds"] > 0 and off["attempts"] == 3
    assert data["compared"] == ["full", "off"] and (data["only_first"], data["only_second"]) == (1, 0)
    assert data["p_value"] == 1.0 and data["ratio"] == 2.0  # one discordant task: exact p = 1
    assert agent_log.read_text().split() == ["mean", "mean", "parse", "nothing", "nothing"]
    assert "looking for tasks" in done.stderr  # progress, on stderr
    assert snapshot(ws) == before  # refs, HEAD, status, index, stash, every file (.git's, .gep's) as they were
    assert not (ws / ".gep").exists()
    assert list(scratch.iterdir()) == []  # nothing left in the temporary folder

    again = _eval(ws, scratch, "--replay", str(tape), "--attempts", "2", env={"GEP_TEST_AGENT_LOG": str(agent_log)})
    assert again.returncode == 0, again.stderr
    replayed = json.loads(again.stdout)
    assert {a: [(r["fixed"], r["attempts"]) for r in v["results"]] for a, v in replayed["arms"].items()} == \
        {a: [(r["fixed"], r["attempts"]) for r in v["results"]] for a, v in data["arms"].items()}
    assert len(agent_log.read_text().split()) == 5  # without the agent
    assert snapshot(ws) == before and list(scratch.iterdir()) == []


SLEEPY = '''
import os, sys, time
sys.stdin.read()
open(os.environ["PID_FILE"], "w").write(str(os.getpid()))
time.sleep(120)
'''


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_leaves_nothing_behind(tmp_path: Path, signum: int):
    ws = history_with_two_fixes(tmp_path / "ws")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    (tmp_path / "sleepy.py").write_text(SLEEPY)
    pid_file = tmp_path / "agent.pid"
    before = snapshot(ws)
    env = {**os.environ, "TMPDIR": str(scratch), "PID_FILE": str(pid_file)}
    proc = subprocess.Popen([GEP, "eval", "-w", str(ws), "--agent-cmd", f"{sys.executable} {tmp_path / 'sleepy.py'}"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 200
    while not pid_file.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert pid_file.exists(), proc.communicate()[1] if proc.poll() is not None else "the agent never started"
    assert any(scratch.iterdir())  # the run's scratch folder, while it runs
    proc.send_signal(signum)  # Ctrl-C (or a kill), while the agent works in an arm's cycle
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    assert list(scratch.iterdir()) == []
    assert snapshot(ws) == before
    agent = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        for _ in range(50):  # killed with its process group; reaped by init
            os.kill(agent, 0)
            time.sleep(0.1)


def test_a_history_without_a_fix_is_one_line_and_exit_1(tmp_path: Path):
    ws = init_repo(tmp_path / "ws", {"gep.toml": 'validation = ["python -m compileall -q ."]\n', "a.py": "x = 1\n"})
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    done = _eval(ws, scratch, "--agent-cmd", "true")
    assert done.returncode == 1 and done.stdout == ""
    assert [ln for ln in done.stderr.splitlines() if ln.startswith("gep: ")] == [
        f"gep: no task in the newest 100 commits of {ws.resolve()}: none passes the workspace's validation "
        "(python -m compileall -q .) where its parent failed it"]
    assert list(scratch.iterdir()) == []


@pytest.mark.parametrize(("args", "needle"), [
    (["--agent-cmd", "x", "--arms", "full,bogus"], "--arms must name distinct arms among full, off"),
    (["--agent-cmd", "x", "--arms", "full,full"], "--arms must name distinct arms"),
    (["--agent-cmd", "x", "--record", "a", "--replay", "b"], "--record and --replay exclude each other"),
    ([], "--agent-cmd is needed"),
    (["--agent-cmd", "  "], "--agent-cmd is needed"),
    (["--agent-cmd", "claude 'unclosed"], "--agent-cmd: cannot split"),
    (["--replay", "/nonexistent/tape"], "--replay /nonexistent/tape: not a folder"),
    (["--agent-cmd", "no-such-agent-here -p"], "--agent-cmd: 'no-such-agent-here' is not a program on PATH"),
    (["--agent-cmd", "true", "--record", "README.md"], "not a folder"),
])
def test_bad_input_is_one_line_and_exit_2(repo: Path, args: list[str], needle: str):
    in_process_error(run("eval", "-w", str(repo), *args), needle)


def test_a_validation_that_cannot_run_here_is_one_line(tmp_path: Path):
    ws = init_repo(tmp_path / "ws", {"gep.toml": 'validation = ["curl https://example.invalid"]\n', "a.py": "x = 1\n"})
    in_process_error(run("eval", "-w", str(ws), "--agent-cmd", "true"), "the workspace's validation cannot run here",
                     "curl")


def test_a_workspace_that_is_not_a_repository_is_one_line(tmp_path: Path):
    in_process_error(run("eval", "-w", str(tmp_path), "--agent-cmd", "true"), "is not a git repository")


# ------------------------------------------------------------------ the statistics


def test_mcnemar_and_the_ratio_interval():
    a = [True] * 8 + [False] * 2
    b = [True] * 2 + [False] * 8
    assert mcnemar(a, b) == (6, 0, 2 / 2 ** 6)  # 6 discordant, all one way: exact two-sided p = 2 * (1/2)^6
    lo, hi = ratio_ci(a, b) or (0, 0)
    assert 1 < lo <= 4 <= hi
    assert mcnemar(a, a)[2] == 1.0 and ratio_ci(a, a) == (1.0, 1.0) and ratio_ci([], []) is None


def test_the_confidence_sequence_holds_at_every_count_at_once():
    """Over 200 simulated sequences of 400 draws, the running interval misses the true rate at some count in
    fewer than 5% of them (it is built to miss in at most alpha = 5%); a fixed-n 95% interval checked at every
    count misses far more often."""
    rng = random.Random(3)
    p, misses, naive = 0.3, 0, 0
    for _ in range(200):
        s, missed, naive_missed = 0, False, False
        for n in range(1, 401):
            s += rng.random() < p
            lo, hi = rate_sequence(s, n, 0.05)
            missed |= not lo <= p <= hi
            half = 1.96 * math.sqrt(max(s / n * (1 - s / n), 1e-9) / n)
            naive_missed |= n >= 10 and not s / n - half <= p <= s / n + half
        misses += missed
        naive += naive_missed
    assert misses / 200 < 0.05 < naive / 200
    assert mixture_radius(100, 0.05) > mixture_radius(1000, 0.05)  # it narrows as cycles come


def test_the_difference_interval():
    lo, hi = difference_sequence(80, 200, 20, 200)
    assert 0 < lo < 0.3 < hi < 0.6  # 0.4 vs 0.1 with 200 cycles each: learning helps
    lo, hi = difference_sequence(3, 10, 3, 10)
    assert lo < 0 < hi


# ------------------------------------------------------------------ the tape: an agent's answers kept and given back


def test_the_tape_records_an_answer_and_gives_it_back_by_prompt_then_by_slot(repo: Path, tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch):
    from gep.eval.tape import record, replay

    monkeypatch.chdir(repo)
    tape = tmp_path / "tape"
    agent = ["sh", "-c", "printf 'new\\n' > new.txt; printf 'hello again\\n' > README.md; echo 'GEP_SUMMARY: did it'"]
    prompt = "cycle evt_1764_abc123 at 2026-12-07T11:00:00.000Z in /scratch/x/arms: fix README.md (took 3.2s)"
    done = record(tape, agent, prompt, "t1:full:0:0", "/scratch/x")
    assert done["how"] == "recorded" and done["rc"] == 0
    assert git(repo, "status", "--porcelain") == " M README.md\n?? new.txt\n"
    assert git(repo, "ls-files", "--stage").count("\n") == 1  # the clone's index untouched by reading the change
    git(repo, "checkout", "-q", "--", "README.md")
    (repo / "new.txt").unlink()
    # the same prompt in another run: other event id, time, scratch folder and duration
    again = "cycle evt_1999_ffffff at 2026-12-08T09:30:01.123Z in /scratch/y/arms: fix README.md (took 9.9s)"
    assert replay(tape, again, "other:slot", "/scratch/y")["how"] == "replayed"
    assert (repo / "new.txt").read_text() == "new\n" and (repo / "README.md").read_text() == "hello again\n"
    git(repo, "checkout", "-q", "--", "README.md")
    (repo / "new.txt").unlink()
    assert replay(tape, "another prompt", "t1:full:0:0", "/scratch/y")["how"] == "replayed by slot"
    assert (repo / "new.txt").exists()
    assert replay(tape, "another prompt", "t2:full:0:0", "")["how"] == "no recording"


def test_the_table_fits_80_columns():
    from gep.eval.run import ArmResult, EvalReport, TaskResult, compare
    from gep.eval.table import lines
    from gep.eval.tasks import Task

    tasks = [Task(id=f"{i:010x}", commit=f"{i:040x}", parent="0" * 40, subject="a very long subject " * 8,
                  tests=["tests/test_x.py"], start="1" * 40, log="") for i in range(3)]
    arms = {"full": ArmResult(arm="full", results=[TaskResult(task=t.id, seed=s, fixed=True, attempts=1,
                                                              agent_seconds=75.5) for s in range(2) for t in tasks]),
            "off": ArmResult(arm="off", results=[TaskResult(task=t.id, seed=s, fixed=i == 0, attempts=3)
                                                 for s in range(2) for i, t in enumerate(tasks)])}
    report = compare(EvalReport(workspace="/home/someone/" + "deep/" * 20 + "project", tasks=tasks, arms=arms,
                                seeds=2))
    text = lines(report)
    assert all(len(line) <= 80 for line in text), text
    assert report.only_first == 4 and report.only_second == 0 and report.p_value == 0.125
    assert "full          6      6   1.00         6       7m33s" in text
    assert "full vs off: 4 fixed only by full, 0 only by off; exact McNemar p = 0.125" in text
    assert any(line.startswith("ratio of fixes full/off: 3.00 (95% bootstrap interval") for line in text)
