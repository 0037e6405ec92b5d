"""`gep server start|stop|status`: one local Prefect server in the background, shared by every `gep` command.

Without it each `gep cycle` would start Prefect's temporary server (seconds per command, ~20 s on a fresh
machine while Prefect creates its database) and the runs would be visible in no UI once it exits. The
server runs `prefect server start` in its own session (process group), so `stop` ends it with its children;
its pid, port and addresses are kept in ``$PREFECT_HOME/gep-server.json`` and its output in
``gep-server.log`` beside it. No Prefect import here: the commands answer at once.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from pydantic import BaseModel, ValidationError

from gep import prefect_api as api
from gep.core.errors import GepError

if TYPE_CHECKING:  # the cycle's models are read only by server_state (deferred there)
    from gep.cycle.status_models import ServerState

RECORD_FILE = "gep-server.json"
LOG_FILE = "gep-server.log"
LOCK_FILE = "gep-server.lock"
DEFAULT_PORT = 4200
HOST = "127.0.0.1"
START_TIMEOUT_S = 240.0  # a first start migrates Prefect's database: ~20 s on 2 idle cores, more when busy
STOP_GRACE_S = 10.0
LEASE_STORAGE = "prefect.server.concurrency.lease_storage.filesystem"
START_SERVER = ("start one with `gep server start` (or `prefect server start` and "
                "PREFECT_API_URL=http://127.0.0.1:4200/api)")

Progress = Callable[[str], None]


class ServerError(GepError):
    """The background server cannot be started or reached."""

    exit_code = 1


class ServerRecord(BaseModel):
    """What `gep server start` left in PREFECT_HOME: enough to find, use and stop the server."""

    pid: int | None = None  # None: a server gep found already answering on the port (not gep's to stop)
    port: int
    api_url: str
    ui_url: str
    log: str | None = None
    started_at: float = 0.0


class ServerStatus(BaseModel):
    running: bool
    record: ServerRecord | None = None
    starting: bool = False  # the process lives but does not answer yet

    def line(self) -> str:
        if self.record is None:
            return "stopped (start it with `gep server start`)"
        r = self.record
        if self.running:
            owner = f"pid {r.pid}" if r.pid else "not started by gep"
            return f"running at {r.ui_url} ({owner}; API {r.api_url})"
        if self.starting:
            return f"starting at {r.ui_url} (pid {r.pid}; log {r.log})"
        return "stopped (start it with `gep server start`)"


def record_path(env: Mapping[str, str] | None = None) -> Path:
    return api.prefect_home(env) / RECORD_FILE


def port_setting(env: Mapping[str, str] | None = None) -> int:
    raw = api.setting("PREFECT_SERVER_API_PORT", env)
    if raw is None:
        return DEFAULT_PORT
    try:
        port = int(raw)
    except ValueError:
        raise ServerError(f"PREFECT_SERVER_API_PORT={raw!r} is not a port number") from None
    if not 0 < port < 65536:
        raise ServerError(f"PREFECT_SERVER_API_PORT={port} is not a port number (1-65535)")
    return port


def read_record(env: Mapping[str, str] | None = None) -> ServerRecord | None:
    try:
        return ServerRecord.model_validate_json(record_path(env).read_text(encoding="utf-8"))
    except (OSError, ValueError, ValidationError):
        return None


def _write_record(rec: ServerRecord, env: Mapping[str, str] | None) -> None:
    path = record_path(env)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{RECORD_FILE}.{os.getpid()}")
    tmp.write_text(json.dumps(rec.model_dump(mode="json")), encoding="utf-8")
    tmp.replace(path)


def _alive(pid: int | None) -> bool:
    """Whether ``pid`` is a live `prefect server` process (not a recycled pid)."""
    if not pid:
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        try:
            os.kill(pid, 0)  # no /proc (macOS): trust the pid
            return True
        except OSError:
            return False
    zombie = stat.rsplit(")", 1)[-1].split()[:1] == ["Z"]
    return not zombie and b"prefect" in cmdline and b"server" in cmdline


def status(env: Mapping[str, str] | None = None, timeout_s: float = api.TIMEOUT_S) -> ServerStatus:
    rec = read_record(env)
    if rec is None or rec.pid is None:  # no record, or one of a server gep only found (older versions)
        return ServerStatus(running=False)
    if api.healthy(rec.api_url, timeout_s, env):
        return ServerStatus(running=True, record=rec)
    return ServerStatus(running=False, record=rec if _alive(rec.pid) else None, starting=_alive(rec.pid))


def running_api_url(env: Mapping[str, str] | None = None, timeout_s: float = api.TIMEOUT_S) -> str | None:
    """The API URL of the background server when it answers, else None (at once when none was started)."""
    st = status(env, timeout_s)
    return st.record.api_url if st.running and st.record else None


# ------------------------------------------------------------------ start


# Prefect's command line, run as its console script does, behind the `gep` command's pause of the garbage
# collector while it imports (gep/core/collector.py): the server's start is ~7 s of CPU, most of it imports
_PREFECT_CLI = ("import sys; from gep.core.collector import pause_while_starting; pause_while_starting(); "
                "from prefect.cli import app; sys.argv[0] = 'prefect'; sys.exit(app())")


def _prefect_command() -> list[str]:
    return [sys.executable, "-c", _PREFECT_CLI]


TASK_RUN_BATCHING = {"PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_BATCH_SIZE": "200",
                     "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_READ_BATCH_SIZE": "200",
                     "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_FLUSH_INTERVAL": "2"}


def _server_env(env: Mapping[str, str], port: int) -> dict[str, str]:
    child = {k: v for k, v in env.items() if k != "PREFECT_API_URL"}
    child.setdefault("DO_NOT_TRACK", "1")
    child.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    # stream logs out, so `prefect deployment run --watch` shows a run's log (a refusal's reason) live
    child.setdefault("PREFECT_SERVER_LOGS_STREAM_OUT_ENABLED", "true")
    child.setdefault("PREFECT_SERVER_LOGS_STREAM_PUBLISHING_ENABLED", "true")
    # SQLite takes one writer at a time, and Prefect answers a write that collides with another one 503 (its
    # client retries ~2 s later). By default the task-run recorder writes each task-run event in a transaction
    # of its own, a cycle's nine tasks ~27 of them beside the run's own writes: batched (up to 2 s late in the
    # UI), the collisions fall from 8 to 3-4 in 30 runs in a row and a warm run's median from 0.68 to 0.44 s.
    for name, value in TASK_RUN_BATCHING.items():
        child.setdefault(name, value)
    # leases on disk (PREFECT_HOME/concurrency_leases), not in memory: a restart keeps the cycles' slots and
    # their leases, so a slot held across it is given back or expires instead of staying held for good
    child.setdefault("PREFECT_SERVER_CONCURRENCY_LEASE_STORAGE", LEASE_STORAGE)
    # the port through the setting, not --port: the UI asks the API at PREFECT_SERVER_API_PORT
    child["PREFECT_SERVER_API_HOST"] = HOST
    child["PREFECT_SERVER_API_PORT"] = str(port)
    return child


def start(env: Mapping[str, str] | None = None, progress: Progress | None = None,
          timeout_s: float = START_TIMEOUT_S) -> tuple[ServerRecord, bool]:
    """Start the server unless one answers already; wait until it does. Returns (record, started_now)."""
    env = dict(os.environ if env is None else env)
    say = progress or (lambda _msg: None)
    with _start_lock(env):  # two `gep` commands starting it at once: the second finds the first's record
        rec, proc = _spawn_unless_running(env, say)
    if proc is not None:
        return _wait(rec, env, say, timeout_s, proc), True
    if rec.pid is None or api.healthy(rec.api_url, env=env):
        return rec, False
    return _wait(rec, env, say, timeout_s, None), False  # another `gep` is starting it


@contextmanager
def _start_lock(env: Mapping[str, str]) -> Iterator[None]:
    home = api.prefect_home(env)
    home.mkdir(parents=True, exist_ok=True)
    fd = os.open(home / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _spawn_unless_running(env: dict[str, str], say: Progress) -> tuple[ServerRecord, subprocess.Popen[bytes] | None]:
    """The running (or starting) server's record, or a new server process and its record."""
    current = status(env)
    if current.record and (current.running or current.starting):
        return current.record, None
    port = choose_port(port_setting(env), env, say)
    base = f"http://{HOST}:{port}"
    rec = ServerRecord(pid=None, port=port, api_url=f"{base}/api", ui_url=base)
    home = api.prefect_home(env)
    home.mkdir(parents=True, exist_ok=True)
    log = home / LOG_FILE
    with log.open("ab") as out:
        proc = subprocess.Popen([*_prefect_command(), "server", "start"], env=_server_env(env, port), cwd=home,
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    rec = rec.model_copy(update={"pid": proc.pid, "log": str(log), "started_at": time.time()})
    _write_record(rec, env)
    first = not (home / "prefect.db").exists()
    say(f"starting a Prefect server at {rec.ui_url} (pid {proc.pid}); waiting until its API answers"
        + (" - the first start creates Prefect's database, about 20 s" if first else ""))
    return rec, proc


def choose_port(port: int, env: Mapping[str, str], say: Progress) -> int:
    """``port``, or a free one when something else listens there (and says so).

    A server gep did not start (a person's own Prefect, another user's) is never sent gep's runs, their
    parameters and artifacts: gep starts its own beside it, and the record keeps the port it chose, so every
    later `gep` command finds it. That other server is used only when PREFECT_API_URL points at it."""
    if not port_taken(port):
        return port
    base = f"http://{HOST}:{port}"
    prefect = api.healthy(f"{base}/api", env=env)
    who = "a Prefect server gep did not start" if prefect else "another program"
    free = free_port(port)
    say(f"port {port} is taken by {who} (left alone): starting gep's own at http://{HOST}:{free}"
        + (f"; PREFECT_API_URL={base}/api would use that one" if prefect else ""))
    return free


def port_taken(port: int) -> bool:
    """Whether a process listens on ``port`` of the loopback address (a bind as the server's would fail)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: TIME_WAIT is no conflict
        try:
            sock.bind((HOST, port))
        except OSError:
            return True
    return False


def free_port(taken: int) -> int:
    """A port nobody listens on: the next few after ``taken`` (easy to remember), else one the system picks."""
    for port in range(taken + 1, min(taken + 20, 65536)):
        if not port_taken(port):
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def _wait(rec: ServerRecord, env: Mapping[str, str], say: Progress, timeout_s: float,
          proc: subprocess.Popen[bytes] | None) -> ServerRecord:
    started = time.monotonic()
    last = 0.0
    while time.monotonic() - started < timeout_s:
        if api.healthy(rec.api_url, env=env):
            return rec
        if proc is not None and proc.poll() is not None or proc is None and not _alive(rec.pid):
            record_path(env).unlink(missing_ok=True)
            raise ServerError(f"the Prefect server exited before answering{_log_hint(rec)}")
        waited = time.monotonic() - started
        if waited - last >= 10:
            last = waited
            say(f"still waiting for the Prefect server to answer at {rec.api_url}/health ({waited:.0f} s)")
        time.sleep(0.25)
    stop(env)
    raise ServerError(f"the Prefect server did not answer within {timeout_s:.0f} s{_log_hint(rec)}")


def _log_hint(rec: ServerRecord) -> str:
    """The last meaningful line of the server's log, e.g. the port being in use."""
    if not rec.log:
        return ""
    try:
        lines = [ln.strip() for ln in Path(rec.log).read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    last = next((ln for ln in reversed(lines) if "rror" in ln or "in use" in ln), lines[-1] if lines else "")
    hint = f": {last[:200]}" if last else ""
    if "in use" in last or "address already" in last.lower():
        hint += f" (use another port: PREFECT_SERVER_API_PORT={rec.port + 1} gep server start)"
    return f"{hint}; log: {rec.log}"


# ------------------------------------------------------------------ stop


def stop(env: Mapping[str, str] | None = None) -> str:
    """Stop the server gep started (its whole process group); a line saying what happened."""
    rec = read_record(env)
    if rec is None:
        return "no Prefect server started by gep is running"
    if rec.pid is None:
        record_path(env).unlink(missing_ok=True)
        return f"the Prefect server at {rec.ui_url} was not started by gep; stop it where it runs"
    if not _alive(rec.pid):
        record_path(env).unlink(missing_ok=True)
        return f"the Prefect server (pid {rec.pid}) had already stopped"
    _kill_group(rec.pid)
    record_path(env).unlink(missing_ok=True)
    return f"stopped the Prefect server at {rec.ui_url} (pid {rec.pid})"


def _kill_group(pid: int) -> None:
    """SIGTERM the server's process group, then SIGKILL whatever is left after the grace period."""
    for sig, wait_s in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        except PermissionError:
            raise ServerError(f"not allowed to stop the Prefect server (pid {pid})") from None
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            _reap(pid)
            if not group_alive(pid):
                return
            time.sleep(0.1)


def group_alive(pgid: int) -> bool:
    """Whether any process of the group lives (zombies waiting to be reaped do not count)."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
            return True
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
    return any(p.pgid == pgid for p in live_processes())


class ProcessInfo(NamedTuple):
    pid: int
    ppid: int
    pgid: int


def live_processes() -> Iterator[ProcessInfo]:
    """Every live process /proc lists (zombies waiting to be reaped do not count)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if fields[0] != "Z":
                yield ProcessInfo(int(entry.name), int(fields[1]), int(fields[2]))
        except (OSError, IndexError, ValueError):
            continue


def _reap(pid: int) -> None:
    """Collect the leader's exit status when this process started it (otherwise it stays a zombie)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


# ------------------------------------------------------------------ which server a command's flow run uses


def api_for_run(env: Mapping[str, str] | None = None, progress: Progress | None = None) -> str:
    """The Prefect API a `gep cycle`/`gep solidify` run reports to, never a temporary per-command server.

    PREFECT_API_URL (environment or profile) when set, and it must answer; else the background server,
    started now if it is not running (the first start says what it waits for)."""
    env = os.environ if env is None else env
    configured = api.configured_api_url(env)
    if configured:
        if not api.healthy(configured, timeout_s=5.0, env=env):
            raise ServerError(f"cannot reach the Prefect server at {configured} (PREFECT_API_URL): start it, "
                              "or unset PREFECT_API_URL and let gep use its own (`gep server start`)")
        return configured
    running = running_api_url(env)
    if running:
        return running
    say = progress or (lambda _msg: None)
    say("no Prefect server is running: starting one in the background for this and later runs "
        "(`gep server status` shows it, `gep server stop` stops it)")
    rec, _ = start(env, progress)
    return rec.api_url


def server_state(env: Mapping[str, str] | None = None) -> ServerState:
    """The Prefect server runs report to, for `gep status`: PREFECT_API_URL (environment or profile) when set,
    else gep's background server."""
    from gep.cycle.status_models import ServerState  # deferred: not needed by `gep server ...`

    configured = api.configured_api_url(env)
    if configured:
        up = api.healthy(configured, env=env)
        return ServerState(running=up, api_url=configured, ui_url=api.ui_url(configured, env) if up else None,
                           note="" if up else f"PREFECT_API_URL={configured} does not answer")
    st = status(env)
    if st.running and st.record is not None:
        return ServerState(running=True, api_url=st.record.api_url, ui_url=st.record.ui_url)
    return ServerState(running=False, note=st.line())
