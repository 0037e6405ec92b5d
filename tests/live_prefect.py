"""A real Prefect server for end-to-end tests and benchmarks, started and stopped as a user does it
(`gep server start` / `gep server stop`), and the processes run against it.

Every process is started in its own session (process group) and killed with its children on stop, even
when a test fails half-way, so nothing outlives the test session. Stopping checks that `gep server stop`
left no process of the server behind.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from gep.server import group_alive, live_processes

if TYPE_CHECKING:
    from prefect.client.orchestration import SyncPrefectClient

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent

# The health endpoint answers in about 8-20 s here; a cold CI machine can take longer.
STARTUP_TIMEOUT_S = 240.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env(**extra: str) -> dict[str, str]:
    """os.environ without any PREFECT_* setting (the test harness sets its own) and without analytics."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(DO_NOT_TRACK="1", PREFECT_SERVER_ANALYTICS_ENABLED="false")
    env.pop("ANTHROPIC_API_KEY", None)
    env.update(extra)
    return env


def kill_group(proc: subprocess.Popen, sig: int = signal.SIGTERM, grace_s: float = 10.0) -> None:
    """Signal the process's whole group, then SIGKILL the group if it has not exited in ``grace_s``."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            pass
    # Children (a worker's flow-run process, the server's workers) may outlive the leader: sweep the group.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if proc.poll() is None:
        proc.wait(5)


def wait_for_flow_run_processes(proc: subprocess.Popen, timeout_s: float = 60.0) -> None:
    """Wait until the processes ``proc`` started in sessions of their own (a worker's flow runs) have exited:
    a run may be final on the server while its process still sends its last logs and events, and a worker
    stopped meanwhile waits for it (on a busy machine longer than a Ctrl-C's grace)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and outside_group(proc.pid):
        time.sleep(0.2)


def outside_group(pgid: int) -> list[int]:
    """The live descendants of the group's processes that are no longer in the group (own sessions)."""
    procs = list(live_processes())
    group = {p.pid for p in procs if p.pgid == pgid}
    found, todo = [], list(group)
    while todo:
        current = todo.pop()
        children = [p.pid for p in procs if p.ppid == current and p.pid not in group]
        found += children
        todo += children
    return found


class LiveServer:
    """`gep server start` on 127.0.0.1 with its own PREFECT_HOME and port; context manager.

    ``env`` points commands at it with PREFECT_API_URL; ``home_env`` only with PREFECT_HOME, as a user who
    ran `gep server start` and set nothing else."""

    def __init__(self, home: Path, port: int | None = None, *, scheduler: bool = False,
                 server_env: Mapping[str, str] | None = None, template: Path | None = None) -> None:
        self.home = Path(home)
        self.template = template  # a migrated Prefect database shared by the session's servers (see start)
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.api_url = f"{self.url}/api"
        self.env = clean_env(PREFECT_HOME=str(self.home), PREFECT_API_URL=self.api_url)
        # The scheduler service would create runs of the cron deployment on its own at :00 and :30, which a
        # `--run-once` worker could pick up instead of the run under test. Off unless asked for.
        self._server_env = {**self.env, "PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED": str(scheduler).lower(),
                            **(server_env or {})}  # e.g. its database (PREFECT_API_DATABASE_CONNECTION_URL)
        self._server_env.pop("PREFECT_API_URL")
        self.pid: int | None = None
        self.start_output = ""
        self.procs: list[subprocess.Popen] = []
        self.log = self.home / "gep-server.log"
        self.home_env = {k: v for k, v in self.env.items() if k != "PREFECT_API_URL"}

    # ------------------------------------------------------------ lifecycle

    def start(self, timeout_s: float = STARTUP_TIMEOUT_S) -> LiveServer:
        """`gep server start` in this server's PREFECT_HOME, on its port (PREFECT_SERVER_API_PORT)."""
        self.home.mkdir(parents=True, exist_ok=True)
        with self._from_template():
            self._start(timeout_s)
        return self

    @contextmanager
    def _from_template(self) -> Iterator[None]:
        """With a ``template``: the server starts on a copy of a database Prefect already created (the first
        server of the session creates it, ~20 s of CPU on 2 cores, and leaves a copy; the others wait for it),
        as a server restarted on its own database does. Without one, or with a database of its own, as is."""
        db = self.home / "prefect.db"
        if self.template is None or db.exists() or "PREFECT_API_DATABASE_CONNECTION_URL" in self._server_env:
            yield
            return
        self.template.parent.mkdir(parents=True, exist_ok=True)
        with open(self.template.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            if self.template.exists():
                shutil.copyfile(self.template, db)
                yield
                return
            yield
            with sqlite3.connect(db) as live, sqlite3.connect(self.template.with_suffix(".tmp")) as copy:
                live.backup(copy)  # a consistent copy of a database in use
            self.template.with_suffix(".tmp").replace(self.template)

    def _start(self, timeout_s: float) -> None:
        env = {**self._server_env, "PREFECT_SERVER_API_PORT": str(self.port)}
        started = subprocess.run([str(BIN / "gep"), "server", "start"], env=env, cwd=self.home,
                                 capture_output=True, text=True, timeout=timeout_s + 60, stdin=subprocess.DEVNULL)
        try:
            record = json.loads((self.home / "gep-server.json").read_text())
            self.pid = record["pid"]
        except (OSError, ValueError, KeyError):
            record = {}
        if started.returncode != 0 or record.get("api_url") != self.api_url:
            self.stop()
            raise RuntimeError(f"gep server start exited {started.returncode} ({record}):\n{started.stdout}\n"
                               f"{started.stderr}\n{self.tail()}")
        self.start_output = started.stdout + started.stderr

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.api_url}/health", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def stop(self) -> None:
        """Stop what ran against the server, then `gep server stop`; raise if it left a process behind."""
        for p in reversed(self.procs):
            kill_group(p)
        self.procs.clear()
        if self.pid is None:
            return
        pid, self.pid = self.pid, None
        subprocess.run([str(BIN / "gep"), "server", "stop"], env=self._server_env, capture_output=True,
                       timeout=60, stdin=subprocess.DEVNULL)
        left = group_alive(pid)
        if left:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            raise AssertionError(f"`gep server stop` left the server's process group {pid} running")

    def tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def __enter__(self) -> LiveServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------ processes against this server

    def command_env(self, env: Mapping[str, str] | None = None, base: Mapping[str, str] | None = None
                    ) -> dict[str, str]:
        return {**(self.env if base is None else base), **(env or {})}

    def spawn(self, args: Sequence[str], *, cwd: Path = ROOT, env: Mapping[str, str] | None = None,
              log: Path | None = None, base: Mapping[str, str] | None = None) -> subprocess.Popen:
        """Start a long-running process (worker, `gep serve`) in its own group; stopped with the server."""
        out = open(log, "wb") if log else None  # the child owns it from here
        try:
            proc = subprocess.Popen(list(args), cwd=cwd, env=self.command_env(env, base),
                                    stdout=out if out is not None else subprocess.DEVNULL,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        finally:
            if out is not None:
                out.close()
        self.procs.append(proc)
        return proc

    def run(self, args: Sequence[str], *, cwd: Path = ROOT, env: Mapping[str, str] | None = None,
            timeout_s: float = 60, base: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """Run a command to completion; on timeout its whole group is killed and TimeoutError raised.
        ``env`` adds to ``base`` (default: ``self.env``)."""
        proc = subprocess.Popen(list(args), cwd=cwd, env=self.command_env(env, base), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                                start_new_session=True)
        self.procs.append(proc)
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            kill_group(proc, grace_s=2)
            out, err = proc.communicate()
            raise TimeoutError(f"{' '.join(args)} did not finish in {timeout_s} s:\n{out}\n{err}") from None
        finally:
            kill_group(proc, grace_s=0)  # sweep anything it left in its group
            self.procs.remove(proc)
        return subprocess.CompletedProcess(list(args), proc.returncode, out, err)

    def client(self) -> SyncPrefectClient:
        """A synchronous Prefect client for this server (independent of the process's settings)."""
        from prefect.client.orchestration import SyncPrefectClient

        return SyncPrefectClient(api=self.api_url)
