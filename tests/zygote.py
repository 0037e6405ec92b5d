"""A driver's imports paid once: a process that imports a crash driver and gep, then forks a child per run.

    python tests/zygote.py DRIVER.py

Each line on stdin is a run (JSON: argv, env, cwd, out, err); the zygote forks, the child runs the driver's
``main(argv)`` with that environment and folder, its stdout and stderr in the files ``out`` and ``err``, and
the zygote answers ``{"pid": ...}`` then ``{"code": ...}`` once the child ended (``-N``: killed by signal N).
The child is a real process of its own: a test kills it with SIGKILL like one it started itself. A driver
process spends ~1.6 s of CPU importing gep; the crash tests start ~80 of them (tests/test_recovery.py,
tests/test_git_recovery.py).

Also the test side: ``Zygote`` starts one and ``spawn`` gives a ``subprocess.Popen``-like handle.
"""

from __future__ import annotations

import importlib.util
import json
import os
import select
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

TESTS = Path(__file__).resolve().parent


def _load(driver: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(driver.stem, driver)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[driver.stem] = module
    spec.loader.exec_module(module)
    return module


def _child(module: ModuleType, run: dict[str, Any]) -> None:
    """In the forked child: become the driver run asked for, then end without returning to the loop."""
    code = 1
    try:
        fd_in = os.open(os.devnull, os.O_RDONLY)
        fd_out = os.open(run["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        fd_err = os.open(run["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        for fd, std in ((fd_in, 0), (fd_out, 1), (fd_err, 2)):
            os.dup2(fd, std)
        os.environ.clear()
        os.environ.update(run["env"])
        os.chdir(run["cwd"])
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        code = module.main(run["argv"])
    except BaseException:  # noqa: BLE001 - whatever the driver raises is its exit code 1, as in a process
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code if isinstance(code, int) else 1)


def serve(driver: Path) -> int:
    module = _load(driver)
    for name in getattr(module, "PRELOAD", ()):  # what main imports: in the zygote, once
        importlib.import_module(name)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        run = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(module, run)
        print(json.dumps({"pid": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"code": os.waitstatus_to_exitcode(status)}), flush=True)
    return 0


# ------------------------------------------------------------------ the test side


class Zygote:
    """One zygote for ``driver``; ``close()`` ends it (a module-scoped fixture owns it)."""

    def __init__(self, driver: Path, scratch: Path) -> None:
        self.driver, self.scratch = driver, scratch
        self.runs = 0
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), str(driver)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self._buffer = b""  # read from the pipe's fd directly: select() cannot see a file object's buffer
        assert self._answer(120).get("ready"), "the zygote did not start"

    def _answer(self, timeout: float | None) -> dict[str, Any]:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([fd], [], [], left)[0]:
                raise subprocess.TimeoutExpired("zygote", timeout or 0)
            chunk = os.read(fd, 65536)
            assert chunk, "the zygote died"
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return dict(json.loads(line))

    def spawn(self, argv: list[str]) -> Forked:
        """Run the driver with ``argv`` (its arguments, without python and the script) in a forked child."""
        self.runs += 1
        out, err = self.scratch / f"run{self.runs}.out", self.scratch / f"run{self.runs}.err"
        run = {"argv": argv, "env": dict(os.environ), "cwd": os.getcwd(), "out": str(out), "err": str(err)}
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(run).encode() + b"\n")
        self.proc.stdin.flush()
        return Forked(self, int(self._answer(60)["pid"]), out, err)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            if self.proc.stdout is not None:
                self.proc.stdout.close()


class Forked:
    """The part of ``subprocess.Popen`` the crash tests use, for a child of the zygote."""

    def __init__(self, zygote: Zygote, pid: int, out: Path, err: Path) -> None:
        self.zygote, self.pid, self.out, self.err = zygote, pid, out, err
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                self.returncode = int(self.zygote._answer(0)["code"])
            except subprocess.TimeoutExpired:
                pass
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            try:
                self.returncode = int(self.zygote._answer(timeout)["code"])
            except subprocess.TimeoutExpired:
                raise subprocess.TimeoutExpired(f"driver pid {self.pid}", timeout or 0) from None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:  # not reaped yet: the pid is still the child's
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:  # it ended and the zygote reaped it just now: its code is on the way
                pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def communicate(self, timeout: float | None = None) -> tuple[bytes, bytes]:
        self.wait(timeout)
        return self.out.read_bytes(), self.err.read_bytes()


if __name__ == "__main__":
    raise SystemExit(serve(Path(sys.argv[1])))


@contextmanager
def module_zygote(driver: Path, folder: Path, registry: list[Zygote]) -> Iterator[Zygote]:
    """A test module's zygote, listed in ``registry`` while it lives (the module's helpers find it there)."""
    z = Zygote(driver, folder)
    registry.append(z)
    try:
        yield z
    finally:
        registry.remove(z)
        z.close()
