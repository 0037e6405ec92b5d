"""The hand-off from a command to the cycle's flow run in this process: what the command opened and checked,
as a value.

`gep cycle`, `gep solidify` and gep mcp's cycle check the request before Prefect starts
(``check_cycle`` in gep/cycle/context.py): the repository is opened, gep.toml read, the workspace's store
opened (each open runs the migrations) and its identity worked out. The flow run the command then starts in
this process takes that over instead of doing it again: the command sets :data:`HANDOFF` around the flow
call (:func:`handing_off`), a context variable the flow run reads (it runs in this thread, or in a worker
thread with a copy of this context). The hand-off also carries the agent command whose redacted form is all
Prefect records (the run's parameters). A flow run started anywhere else (a worker, `gep serve`'s runner)
finds no hand-off and opens what it needs itself.

The outcome comes back in the flow run's final state. When Prefect fails after the cycle recorded it (the
server went away), the command reads it from the store it opened, by the id the cycle noted on the hand-off
(``recorded``): the command owns that store and closes it after the run.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from gep.core.config import CONFIG_FILE, Settings
from gep.core.request import CycleRequest
from gep.core.sanitize import redact_command
from gep.git import Repo
from gep.store import Store


def toml_stamp(workspace: Path) -> tuple[int, ...] | None:
    """gep.toml's inode, size and mtime: what tells that it changed since it was read."""
    try:
        st = (workspace / CONFIG_FILE).stat()
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def request_key(request: CycleRequest, resume: bool) -> tuple[object, ...]:
    """What the settings and the check of ``request`` depend on; finishing reads gep.toml without the
    request's choices."""
    chosen_fields = () if resume else (request.mutator, request.strategy, request.agent_cmd, request.branch,
                                       request.llm_signals)
    return (request.workspace.expanduser().resolve(), resume, *chosen_fields)


@dataclass(frozen=True)
class Opened:
    """What ``check_cycle`` opened for one request: the repository, its settings (read from gep.toml as it was
    at ``stamp``) and the workspace's store, scoped to its identity. Open until :meth:`close`."""

    key: tuple[object, ...]
    repo: Repo
    settings: Settings
    store: Store
    stamp: tuple[int, ...] | None

    def serves(self, request: CycleRequest, resume: bool) -> bool:
        """Whether a cycle of ``request`` may take this over: the same request, gep.toml unchanged since (the
        run may have waited for another cycle's slot meanwhile)."""
        return self.key == request_key(request, resume) and self.stamp == toml_stamp(self.repo.path)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Opened:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


class Handoff:
    """What a command hands the flow run it starts in this process (see the module's docstring)."""

    def __init__(self, opened: Opened | None = None, agent_cmd: str | None = None) -> None:
        self.opened = opened
        shown = shown_agent_cmd(agent_cmd)
        self.agent_cmds = {shown: agent_cmd} if agent_cmd and shown and shown != agent_cmd else {}
        self.recorded: str | None = None  # the event the cycle recorded, noted by the flow run

    def opened_for(self, request: CycleRequest, resume: bool) -> Opened | None:
        return self.opened if self.opened is not None and self.opened.serves(request, resume) else None


HANDOFF: ContextVar[Handoff | None] = ContextVar("gep_handoff", default=None)


@contextmanager
def handing_off(opened: Opened | None = None, agent_cmd: str | None = None) -> Iterator[Handoff]:
    """Hand ``opened`` and the real ``agent_cmd`` to the flow runs started in this block (this context)."""
    handoff = Handoff(opened, agent_cmd)
    token = HANDOFF.set(handoff)
    try:
        yield handoff
    finally:
        HANDOFF.reset(token)


def shown_agent_cmd(cmd: str | None) -> str | None:
    """``cmd`` as it may be recorded (a flow run's parameters, which Prefect keeps): redacted."""
    return redact_command(cmd) if cmd else cmd


def real_agent_cmd(cmd: str | None) -> str | None:
    """The command line the hand-off of this context carries for ``cmd`` (its redacted form), else ``cmd``."""
    handoff = HANDOFF.get()
    return handoff.agent_cmds.get(cmd, cmd) if handoff is not None and cmd else cmd
