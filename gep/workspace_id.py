"""A workspace's stable identity, so that a store shared by a fleet keeps each workspace's rows apart.

The id is a UUID created on first use and kept in the repository's git common directory
(``<git-common-dir>/gep/workspace-id``): not in the work tree (never committed, survives deleting ``.gep/``),
the same for every worktree of the repository, and it moves with the repository when the folder is moved
or renamed. The path and a readable name (the folder's name) are kept beside it in the store's
``workspaces`` table and updated when the path changes. A folder that is not the top of a git repository
keeps its id in ``.gep/workspace-id`` instead.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

from pydantic import BaseModel

from gep.config import gep_dir
from gep.errors import WorkspaceError

ID_FILE = "workspace-id"
# variables that would point git at another repository than the folder asked about
_GIT_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY")


class WorkspaceIdentity(BaseModel):
    id: str
    path: str
    name: str


def workspace_identity(workspace: Path | str) -> WorkspaceIdentity:
    """The id of ``workspace`` (created on first use), its resolved path and readable name."""
    path = Path(workspace).expanduser().resolve()
    if not path.is_dir():
        raise WorkspaceError(f"workspace {path} is not a directory")
    wid = _read_or_create(id_file(path))
    return WorkspaceIdentity(id=wid, path=str(path), name=path.name or str(path))


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
