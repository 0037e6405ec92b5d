"""Issue 32 finding 5: Ctrl-C (SIGINT to the terminal's process group) while the agent works stops the cycle
as SIGTERM does: nothing is committed or landed after it, and `gep recover` records it as interrupted.

Before the fix, asyncio turned SIGINT into a cancellation that Prefect waited out: the cycle validated,
committed and landed the change, printed "success" and only then exited 130."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest
from live_prefect import BIN, LiveServer

from gep.prefect_api import workspace_slot_name
from gep.server import group_alive, live_processes
from gep.store import Store

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

AGENT = textwrap.dedent("""
    import os, pathlib, sys, time
    sys.stdin.read()
    p = pathlib.Path("stats.py")
    p.write_text(p.read_text().replace("(len(values) - 1)", "len(values)"))
    pathlib.Path(sys.argv[1]).write_text(str(os.getpid()))
    time.sleep(8)
    print("fixed the mean")
""")


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting to be reaped does not count)."""
    return any(p.pid == pid for p in live_processes())


def _git(ws: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=ws, capture_output=True, text=True, check=True).stdout.strip()


def test_sigint_while_the_agent_works_commits_nothing(live_prefect: LiveServer, example_ws: Path,
                                                       tmp_path: Path) -> None:
    agent, marker = tmp_path / "agent.py", tmp_path / "agent.pid"
    agent.write_text(AGENT)
    head = _git(example_ws, "rev-parse", "HEAD")
    proc = subprocess.Popen([str(BIN / "gep"), "cycle", "-w", str(example_ws), "--mutator", "command",
                             "--agent-cmd", f"{sys.executable} {agent} {marker}"], env=live_prefect.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in the terminal does
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGINT, (out, err)
    assert "gep: interrupted: the cycle stops here" in err and "success" not in out + err
    # nothing happens after the interrupt: checked once gep's process group and the agent are gone (the
    # agent would have finished 8 s after its marker; waited on, not slept out)
    agent_pid = int(marker.read_text())
    deadline = time.monotonic() + 30
    while group_alive(proc.pid) or _alive(agent_pid):
        assert time.monotonic() < deadline, "gep's processes or the agent outlived the interrupt"
        time.sleep(0.05)
    assert _git(example_ws, "rev-parse", "HEAD") == head  # nothing committed or landed
    assert "len(values) - 1" in (example_ws / "stats.py").read_text()
    done = subprocess.run([str(BIN / "gep"), "recover", "-w", str(example_ws)], env=live_prefect.env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "recorded as interrupted" in done.stdout, (done.stdout, done.stderr)
    with Store.for_workspace(example_ws) as store:
        (event,) = store.list_events(limit=5)
    assert event.outcome.status == "interrupted" and event.meta.rescued_patch
    assert "len(values)" in Path(event.meta.rescued_patch).read_text()  # the agent's change is kept


# ------------------------------------------------------------------ issue 45, D06-D07: the slot is given back


def _active_slots(server: LiveServer, ws: Path) -> int:
    r = httpx.get(f"{server.api_url}/v2/concurrency_limits/{workspace_slot_name(ws)}", timeout=10)
    r.raise_for_status()
    return int(r.json()["active_slots"])


def _start_and_signal(server: LiveServer, argv: list[str], marker: Path, sig: int) -> tuple[int, str, str]:
    """Start ``argv``, wait for the agent to work, send ``sig`` to the process group, collect the end."""
    proc = subprocess.Popen(argv, env=server.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        os.killpg(proc.pid, sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, out, err


@pytest.mark.parametrize(("sig", "here", "said"), [(signal.SIGINT, False, "gep: interrupted: the cycle stops here"),
                                                   (signal.SIGTERM, True, "gep: terminated: the cycle stops here")])
def test_ctrl_c_and_sigterm_give_the_slot_back_at_once_in_one_line(
        live_prefect: LiveServer, example_ws: Path, tmp_path: Path, sig: int, here: bool, said: str) -> None:
    """D06, D07: after Ctrl-C of `gep cycle` or `fleet --here` the slot stayed held (the next cycle printed
    nothing and waited 5 minutes, even after `gep recover`); SIGTERM to `fleet --here` printed a traceback."""
    agent, marker = tmp_path / "agent.py", tmp_path / "agent.pid"
    agent.write_text(AGENT)
    cmd = f"{sys.executable} {agent} {marker}"
    argv = ([str(BIN / "gep"), "fleet", "--here", "-w", str(example_ws), "--mutator", "command", "--agent-cmd", cmd]
            if here else [str(BIN / "gep"), "cycle", "-w", str(example_ws), "--mutator", "command", "--agent-cmd", cmd])
    code, out, err = _start_and_signal(live_prefect, argv, marker, sig)
    assert code == -sig, (out, err)
    assert said in err and "Traceback" not in err, err
    ours = [line for line in err.splitlines() if line.startswith("gep:")]
    assert len(ours) == 1 and ours[0].startswith(said) and "slot given back" in ours[0], err
    assert _active_slots(live_prefect, example_ws) == 0  # given back, not held for the lease's 5 minutes


def test_recover_gives_back_the_slot_of_a_killed_cycle(live_prefect: LiveServer, example_ws: Path,
                                                       tmp_path: Path) -> None:
    agent, marker = tmp_path / "agent.py", tmp_path / "agent.pid"
    agent.write_text(AGENT)
    argv = [str(BIN / "gep"), "cycle", "-w", str(example_ws), "--mutator", "command", "--agent-cmd",
            f"{sys.executable} {agent} {marker}"]
    code, out, err = _start_and_signal(live_prefect, argv, marker, signal.SIGKILL)
    assert code == -signal.SIGKILL
    assert _active_slots(live_prefect, example_ws) == 1  # a SIGKILL gives nothing back: the lease holds it
    done = subprocess.run([str(BIN / "gep"), "recover", "-w", str(example_ws)], env=live_prefect.env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "gave back the workspace slot" in done.stdout, (done.stdout, done.stderr)
    assert _active_slots(live_prefect, example_ws) == 0
