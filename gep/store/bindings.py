"""Where each workspace id is bound, per host, so that a shared store can tell a copy from the original.

gep/core/workspace_id.py binds an id to the folder, host and id-file inode where it lives. A copy made
before that record existed (an image built with an older gep, a template without ``workspace-home``) or at
the same path on another host carries no trace of it locally, so the store keeps each id's bindings as the
workspace's state (``workspace.bindings``: host -> inode and path) and applies the same rule:

- no binding yet, or one from this host (the local path rule already judged a move on this host): record;
- another host bound the same inode: the same file seen from two hosts (a network file system that fleet
  workers share, or a renamed host): the same workspace;
- only other hosts, each with another inode: a copy of their workspace. The caller gives it its own id.
"""

from __future__ import annotations

from pydantic import BaseModel
from sqlmodel import Session

from gep.core.workspace_id import WorkspaceIdentity, host_name
from gep.store.tables import StateRow
from gep.store.upsert import upsert

BINDINGS_KEY = "workspace.bindings"


class HostBinding(BaseModel):
    inode: int
    path: str


class IdBindings(BaseModel):
    hosts: dict[str, HostBinding] = {}


def read_bindings(s: Session, workspace_id: str) -> IdBindings:
    row = s.get(StateRow, (workspace_id, BINDINGS_KEY))
    try:
        return IdBindings.model_validate_json(row.data) if row is not None else IdBindings()
    except ValueError:
        return IdBindings()  # unreadable: bound afresh from here


def write_bindings(s: Session, workspace_id: str, bindings: IdBindings) -> None:
    upsert(s, StateRow, {"workspace_id": workspace_id, "key": BINDINGS_KEY}, {"data": bindings.model_dump_json()})


def is_current(bindings: IdBindings, identity: WorkspaceIdentity) -> bool:
    """Whether the store already holds this host's binding as it is (nothing to judge or write)."""
    mine = bindings.hosts.get(identity.host)
    return not identity.host or not identity.inode or \
        (mine is not None and (mine.inode, mine.path) == (identity.inode, identity.path))


def judge(bindings: IdBindings, identity: WorkspaceIdentity) -> str | None:
    """Where the original is when ``identity`` is a copy of another host's workspace; else None, with this
    host's binding recorded in ``bindings``."""
    if is_current(bindings, identity):
        return None
    others = {h: b for h, b in bindings.hosts.items() if h != identity.host}
    if identity.host in bindings.hosts or not others or any(b.inode == identity.inode for b in others.values()):
        bindings.hosts[identity.host] = HostBinding(inode=identity.inode, path=identity.path)
        return None
    host, bound = next(iter(others.items()))
    return f"{bound.path} on {host_name(host)}"
