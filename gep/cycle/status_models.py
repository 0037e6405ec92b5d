"""What `gep status` and MCP's gep_status answer, as models light to import (pydantic alone): the cycle
waiting for someone, commits kept off the branch, the server, the last outcome (filled by gep/cycle/status.py).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from gep.core.stored_path import StoredPath


class PendingCycle(BaseModel):
    event_id: str
    id: str  # as people type it
    state: Literal["awaiting_review", "awaiting_changes", "running", "dead"]
    stage: str = ""
    since: str = ""
    about: str = ""  # what it waits for, in a few words
    commands: list[str] = Field(default_factory=list)


class KeptCommit(BaseModel):
    event_id: str
    id: str
    branch: str
    commit: str | None = None
    dirty: list[str] = Field(default_factory=list)  # the person's edits in its files: commit or stash first
    command: str  # the gep command that lands it


class ServerState(BaseModel):
    running: bool
    api_url: str | None = None
    ui_url: str | None = None
    note: str = ""


class LastOutcome(BaseModel):
    event_id: str
    id: str
    outcome: str
    fix: str = "-"  # verified | did not hold | not yet judged | -
    intent: str = "-"
    gene: str = "-"
    at: str | None = None


class WorkspaceStatus(BaseModel):
    workspace: StoredPath
    pending: list[PendingCycle] = Field(default_factory=list)
    kept: list[KeptCommit] = Field(default_factory=list)
    server: ServerState | None = None
    last: LastOutcome | None = None

    def lines(self) -> list[str]:
        """The status as a person reads it, each line within 80 columns (but for long paths and ids)."""
        out = [f"workspace: {self.workspace}"]
        if self.server is not None:
            s = self.server
            out.append(f"server: running at {s.ui_url or s.api_url}" if s.running else
                       f"server: {s.note or 'not running (the next `gep cycle` starts it)'}")
        if self.last is None:
            out.append("last cycle: none yet")
        else:
            x = self.last
            fix = f", fix {x.fix}" if x.fix != "-" else ""
            out.append(f"last cycle: {x.id} {x.outcome}{fix} ({x.intent}, {x.gene.removeprefix('gene_')})")
        if not self.pending:
            out.append("pending: nothing waits for you")
        for p in self.pending:
            out.append(f"pending: {p.id} {p.about}")
            out += [f"  {c}" for c in p.commands]
        for k in self.kept:
            out.append(f"kept: {k.id} on {k.branch}, not merged")
            if k.dirty:
                out.append(f"  commit or stash your edits to {', '.join(k.dirty[:3])} first")
            out.append(f"  land it: {k.command}")
        return out
