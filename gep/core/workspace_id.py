"""A workspace's stable identity, so that a store shared by a fleet keeps each workspace's rows apart.

The id is a UUID created on first use and kept in the repository's git common directory
(``<git-common-dir>/gep/workspace-id``): not in the work tree (never committed, survives deleting ``.gep/``),
the same for every worktree of the repository, and it moves with the repository when the folder is moved
or renamed. The path and a readable name (the folder's name) are kept beside it in the store's
``workspaces`` table and updated when the path changes. A folder that is not the top of a git repository
keeps its id in ``.gep/workspace-id`` instead.

A copy (``cp -r`` of a workspace, a template per agent, a backup restored beside its original) carries the
id file too, so the id is bound to where it lives: ``workspace-home`` beside it records the folder holding
the id file (the git common dir). Found elsewhere, the id is the original's only if that folder no longer
holds it (the repository was moved or renamed: the history follows); while the original still holds the
same id, this is a copy, and it gets an id of its own (``WorkspaceIdentity.copied_from`` says so). An id
from before this record (no ``workspace-home``) is kept and bound where it is found.

A copy at the same path on another machine (a container image or a template used by two agents, a backup
restored on a second host) passes that test, so the binding also names the host (``host_identity``: the
hostname and ``/etc/machine-id``; containers from one image may share the machine-id, not the hostname) and
the id file's inode, which no copy carries (``cp``, ``tar``, ``rsync`` and image layers make new files):

- on the host that made the binding, the path rule above decides (a move or rename on one host, a backup
  restored in place, a move to another disk: the history follows);
- on another host, the id is the same workspace only when the id file is the same file (same inode): a
  network file system that several hosts (fleet workers) mount, or this machine after its hostname changed;
  a different file is a copy brought from that host, and it gets its own id;
- a shared store (gep/store/bindings.py) keeps each id's binding per host and applies the same rule, so a
  copy made before the local binding existed (no ``workspace-home`` in the image) is found there too.
Every worktree of a repository reads one id file, so worktrees never look like copies.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path
from typing import NamedTuple

from pydantic import BaseModel

from gep.core.config import gep_dir
from gep.core.errors import WorkspaceError

ID_FILE = "workspace-id"
HOME_FILE = "workspace-home"  # beside the id: the folder the id belongs to (a copy is found elsewhere)
# variables that would point git at another repository than the folder asked about
_GIT_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY")


class WorkspaceIdentity(BaseModel):
    id: str
    path: str
    name: str
    copied_from: str | None = None  # set when this workspace was found to be a copy and got its own id
    host: str = ""  # host_identity() where it was read
    inode: int = 0  # the id file's inode: a copy has another one


class _Binding(NamedTuple):
    """What ``workspace-home`` records: the folder holding the id, and (since issue 32) host and inode."""

    folder: Path
    host: str | None
    inode: int | None


def host_identity() -> str:
    """This machine as an id binding names it: ``hostname/machine-id`` (the hostname alone when no
    machine-id can be read). Tests replace it to play two hosts."""
    machine = ""
    for source in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        try:
            machine = Path(source).read_text(encoding="ascii").strip()[:32]
        except (OSError, UnicodeDecodeError):
            continue
        if machine:
            break
    host = socket.gethostname() or "localhost"
    return f"{host}/{machine}" if machine else host


def host_name(host: str) -> str:
    """The readable part of a ``host_identity``."""
    return host.split("/", 1)[0]


def workspace_identity(workspace: Path | str) -> WorkspaceIdentity:
    """The id of ``workspace`` (created on first use), its resolved path and readable name."""
    path = Path(workspace).expanduser().resolve()
    if not path.is_dir():
        raise WorkspaceError(f"workspace {path} is not a directory")
    file = id_file(path)
    wid = _read_or_create(file)
    host = host_identity()
    original = _copied_from(file, wid, host)
    if original is not None:
        wid = _announce_copy(path, _fresh_id(file), original)
    _bind(file, host)
    return WorkspaceIdentity(id=wid, path=str(path), name=path.name or str(path), copied_from=original,
                             host=host, inode=_inode(file))


def give_own_identity(identity: WorkspaceIdentity, original: str) -> WorkspaceIdentity:
    """``identity`` found to be a copy of ``original`` by the store (gep/store/bindings.py): a new id,
    kept in its id file and bound here, said on stderr."""
    path = Path(identity.path)
    file = id_file(path)
    wid = _announce_copy(path, _fresh_id(file), original)
    _bind(file, identity.host)
    return identity.model_copy(update={"id": wid, "copied_from": original, "inode": _inode(file)})


def _announce_copy(path: Path, wid: str, original: str) -> str:
    print(f"gep: {path} is a copy of the workspace at {original}: it gets its own identity "
          f"{wid} (its history starts here; the original's stays with the original)", file=sys.stderr)
    return wid


def _inode(file: Path) -> int:
    try:
        return file.stat().st_ino
    except OSError:
        return 0


def _workspace_of(home: Path) -> Path:
    """The workspace a folder holding an id belongs to: ``<ws>/.git/gep`` or ``<ws>/.gep`` -> ``<ws>``."""
    up = home.parent
    return up.parent if up.name == ".git" else up


def _read_binding(file: Path) -> _Binding | None:
    """The binding recorded beside ``file``: folder, then host and inode (absent in a record from before)."""
    try:
        lines = file.with_name(HOME_FILE).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    if not lines or not Path(lines[0].strip()).is_absolute():
        return None
    host = lines[1].strip() or None if len(lines) > 1 else None
    inode = int(lines[2]) if len(lines) > 2 and lines[2].strip().isdigit() else None
    return _Binding(Path(lines[0].strip()), host, inode)


def _copied_from(file: Path, wid: str, host: str) -> str | None:
    """Where the workspace this id belongs to is, when ``file`` is a copy of it: on this host, that folder
    still holds the same id; from another host, ``file`` is another file than the one bound there."""
    bound = _read_binding(file)
    if bound is None:
        return None  # an id from before the record: bound where it is found (the store checks it too)
    if bound.host is not None and bound.host != host:
        if bound.inode is None or bound.inode == _inode(file):
            return None  # the same file seen from another host (a network file system), or a renamed host
        return f"{_workspace_of(bound.folder)} on {host_name(bound.host)}"
    here = file.parent.resolve()
    if bound.folder == here:
        return None
    try:
        theirs = (bound.folder / ID_FILE).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None  # the original is gone: a move (or a rename); the history follows
    return str(_workspace_of(bound.folder)) if theirs == wid else None


def _fresh_id(file: Path) -> str:
    """A new id for a copy, replacing the original's in the copy's file."""
    tmp = file.with_name(f".{ID_FILE}.{os.getpid()}.{uuid.uuid4().hex[:8]}")
    wid = str(uuid.uuid4())
    try:
        tmp.write_text(wid + "\n", encoding="utf-8")
        os.replace(tmp, file)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise WorkspaceError(f"cannot give the copied workspace its own id in {file}: {exc.strerror or exc}") from None
    return wid


def _bind(file: Path, host: str) -> None:
    """Record the folder, host and inode the id belongs to (best effort: a read-only repository works)."""
    home = file.with_name(HOME_FILE)
    record = f"{file.parent.resolve()}\n{host}\n{_inode(file)}\n"
    try:
        if home.read_text(encoding="utf-8") == record:
            return
    except (OSError, UnicodeDecodeError):
        pass
    tmp = file.with_name(f".{HOME_FILE}.{os.getpid()}.{uuid.uuid4().hex[:8]}")
    try:
        tmp.write_text(record, encoding="utf-8")
        os.replace(tmp, home)
    except OSError:
        tmp.unlink(missing_ok=True)


def id_file(path: Path) -> Path:
    """Where the id of the workspace at ``path`` (resolved) is kept."""
    common = _git_common_dir(path)
    return (common / "gep" if common else gep_dir(path)) / ID_FILE


def _git_common_dir(path: Path) -> Path | None:
    """The git common dir when ``path`` is the top of a git work tree, else None."""
    env = {k: v for k, v in os.environ.items() if k not in _GIT_ENV}
    try:
        out = subprocess.run(["git", "-C", str(path), "rev-parse", "--show-toplevel", "--git-common-dir"],
                             capture_output=True, text=True, env=env, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = out.stdout.splitlines()
    if out.returncode != 0 or len(lines) < 2 or Path(lines[0]).resolve() != path:
        return None
    common = Path(lines[1])
    return (common if common.is_absolute() else path / common).resolve()


def _read_or_create(file: Path) -> str:
    try:
        return _parse(file, file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        pass
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkspaceError(f"cannot read the workspace id {file}: {exc}") from None
    # Two processes may create it at once: each writes its own file and links it into place; the link
    # fails for all but one, and those read the winner's id.
    tmp = file.with_name(f".{ID_FILE}.{os.getpid()}.{uuid.uuid4().hex[:8]}")
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(str(uuid.uuid4()) + "\n", encoding="utf-8")
        try:
            os.link(tmp, file)
        except FileExistsError:
            pass
        return _parse(file, file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise WorkspaceError(f"cannot create the workspace id {file}: {exc.strerror or exc}") from None
    finally:
        tmp.unlink(missing_ok=True)


def _parse(file: Path, content: str) -> str:
    try:
        return str(uuid.UUID(content.strip()))
    except ValueError:
        raise WorkspaceError(f"{file} does not hold a workspace id (a UUID); restore it, or delete it to "
                             "start this workspace's history afresh") from None
