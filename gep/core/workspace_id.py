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
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

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


def workspace_identity(workspace: Path | str) -> WorkspaceIdentity:
    """The id of ``workspace`` (created on first use), its resolved path and readable name."""
    path = Path(workspace).expanduser().resolve()
    if not path.is_dir():
        raise WorkspaceError(f"workspace {path} is not a directory")
    file = id_file(path)
    wid = _read_or_create(file)
    original = _copied_from(file, wid)
    if original is not None:
        wid = _fresh_id(file)
        print(f"gep: {path} is a copy of the workspace at {original}: it gets its own identity "
              f"{wid} (its history starts here; the original's stays with the original)", file=sys.stderr)
    _bind(file)
    return WorkspaceIdentity(id=wid, path=str(path), name=path.name or str(path),
                             copied_from=str(original) if original else None)


def _workspace_of(home: Path) -> Path:
    """The workspace a folder holding an id belongs to: ``<ws>/.git/gep`` or ``<ws>/.gep`` -> ``<ws>``."""
    up = home.parent
    return up.parent if up.name == ".git" else up


def _copied_from(file: Path, wid: str) -> Path | None:
    """The folder this id belongs to when ``file`` is a copy of it (that folder still holds the same id)."""
    try:
        home = Path(file.with_name(HOME_FILE).read_text(encoding="utf-8").strip())
    except (OSError, UnicodeDecodeError):
        return None  # an id from before the record: bound where it is found
    here = file.parent.resolve()
    if not home.is_absolute() or home == here:
        return None
    try:
        theirs = (home / ID_FILE).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None  # the original is gone: a move (or a rename); the history follows
    return _workspace_of(home) if theirs == wid else None


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


def _bind(file: Path) -> None:
    """Record the folder the id belongs to (best effort: a read-only repository keeps working)."""
    home, here = file.with_name(HOME_FILE), str(file.parent.resolve())
    try:
        if home.read_text(encoding="utf-8").strip() == here:
            return
    except (OSError, UnicodeDecodeError):
        pass
    tmp = file.with_name(f".{HOME_FILE}.{os.getpid()}.{uuid.uuid4().hex[:8]}")
    try:
        tmp.write_text(here + "\n", encoding="utf-8")
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
