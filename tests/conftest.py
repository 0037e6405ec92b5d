"""Shared fixtures. Every test runs with an isolated HOME for Prefect and no analytics."""

from __future__ import annotations

import atexit
import gc
import os
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_reach import E2E_FIXTURES, E2E_MARKERS, reaches_e2e
from heavy_first import heavy_first
from input_traps import deep, memory_cap  # noqa: F401 - fixtures for the input-trap tests

# Started in the background of a script (`(bash .ci/run &)`, GNU time), the suite inherits SIGINT ignored, and
# so would every worker, `gep serve` and flow run it starts: the Ctrl-C tests then wait on processes that cannot
# hear Ctrl-C. A handler here resets it, and the processes started from here get SIGINT's default again.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

_PREFECT_HOME = tempfile.mkdtemp(prefix="gep-test-prefect-")
atexit.register(shutil.rmtree, _PREFECT_HOME, True)
os.environ.setdefault("PREFECT_HOME", _PREFECT_HOME)
# this machine's key (gep/core/machine_key.py) kept in a temporary state folder, not the developer's home
_STATE_HOME = tempfile.mkdtemp(prefix="gep-test-state-")
atexit.register(shutil.rmtree, _STATE_HOME, True)
os.environ.setdefault("XDG_STATE_HOME", _STATE_HOME)
os.environ["DO_NOT_TRACK"] = "1"
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
os.environ.pop("ANTHROPIC_API_KEY", None)
os.environ.pop("GEP_DATABASE_URL", None)
# CI's machine has no global git identity: neither may the tests (a missing identity must not break a cycle)
os.environ["GIT_CONFIG_GLOBAL"] = os.devnull
os.environ["GIT_CONFIG_NOSYSTEM"] = "1"
# readline (loaded with pytest) exports COLUMNS=80 and LINES behind os.environ's back, so every child run
# without env= believed it printed to an 80-column terminal; a test that means a terminal width sets COLUMNS
for _name in ("COLUMNS", "LINES"):
    if _name not in os.environ:
        os.unsetenv(_name)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "workspace"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``e2e`` what runs end to end (tests/e2e_reach.py: found from its fixtures and the helpers it
    calls); `make check` leaves those out."""
    for item in items:
        fixtures = getattr(item, "_fixtureinfo", None)
        defs = [d.func for ds in (fixtures.name2fixturedefs.values() if fixtures else ()) for d in ds]
        if E2E_FIXTURES.intersection(getattr(item, "fixturenames", ())) or \
                any(item.get_closest_marker(m) for m in E2E_MARKERS) or \
                reaches_e2e([getattr(item, "function", None), *defs]):
            item.add_marker(pytest.mark.e2e)
    # `make check` (-m "not e2e") orders the files by their quick tests' weight alone
    heavy_first(items, e2e="not e2e" not in (config.option.markexpr or ""))


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collecting imported (gep, Prefect, the anthropic SDK: most of a worker's heap) is left out of the
    garbage collector's later passes, as a `gep` process does once started (gep/core/collector.py): ~5% of the
    CPU of the in-process tests."""
    gc.freeze()


def git(cwd: Path, *args: str) -> str:
    """Run git in ``cwd`` with a fixed identity; return stdout."""
    env = {**os.environ, "GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "test@example.invalid",
           "GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "test@example.invalid"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def init_repo(path: Path, files: dict[str, str] | None = None) -> Path:
    """A real git repository at ``path`` with ``files`` committed (at least one commit)."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.name", "Test")
    git(path, "config", "user.email", "test@example.invalid")
    for rel, content in (files or {"README.md": "hello\n"}).items():
        p = path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(content)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


@pytest.fixture
def outside() -> Iterator[Path]:
    """A folder outside the workspace and outside /tmp (a sandbox's /tmp is private anyway)."""
    d = Path(tempfile.mkdtemp(prefix="gep-outside-", dir="/var/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A socket on the host that a sandboxed attack tries to reach (the network must be cut)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(5)
    s.settimeout(0.5)
    yield s
    s.close()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A small committed git repository."""
    return init_repo(tmp_path / "repo")


@pytest.fixture
def example_ws(tmp_path: Path) -> Path:
    """A committed copy of the bundled example workspace (real bug, error log, MEMORY.md)."""
    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLE, ws)
    return init_repo(ws, {})


def prefect_db_template(factory: pytest.TempPathFactory) -> Path:
    """Where the session's Prefect servers share a migrated database: one folder for all xdist workers."""
    base = factory.getbasetemp()
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "prefect-template" / "prefect.db"


@pytest.fixture(scope="session")
def live_prefect(tmp_path_factory: pytest.TempPathFactory):
    """A real `prefect server start` on 127.0.0.1 shared by the end-to-end tests (see tests/live_prefect.py)."""
    from live_prefect import LiveServer

    with LiveServer(tmp_path_factory.mktemp("prefect-live"), template=prefect_db_template(tmp_path_factory)) as server:
        yield server
