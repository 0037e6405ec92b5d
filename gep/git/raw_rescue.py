"""Saving a clone's change when the engine's own git cannot read it (a ``.gitattributes`` the change wrote
asks for ``working-tree-encoding=UTF-16`` on files that are not, a filter that is missing ...).

The change is read again through a throw-away git dir that borrows the user's objects and whose
``info/attributes`` (the highest precedence) switches every conversion off: the patch holds the files'
bytes as they are. When even that fails, the clone's files are moved to ``.gep/rescued/<event>/`` instead:
either way the change is never lost, and the clone can go."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from gep.core.errors import WorkspaceError
from gep.git.clone import _alternates_line
from gep.git.plumbing import Git
from gep.git.repo import Repo
from gep.git.rescue import RESCUED, write_patch
from gep.git.scan import temp_dir

NO_CONVERSION = "* -text -eol -crlf -filter -ident -working-tree-encoding\n"


def raw_patch(repo: Repo, clone: Path, base: str, event_id: str, skip: list[str]) -> Path | None:
    """``clone`` against ``base`` as a patch of raw bytes (None when they are equal)."""
    with tempfile.TemporaryDirectory(prefix="raw-", dir=temp_dir(repo)) as tmp:
        gd = Path(tmp) / ".git"
        Git(Path(tmp)).run("init", "-q", "--bare", f"--object-format={repo.object_format}", str(gd))
        (gd / "objects" / "info" / "alternates").write_text(_alternates_line(Path(tmp), repo), encoding="utf-8")
        (gd / "info").mkdir(exist_ok=True)
        (gd / "info" / "attributes").write_text(NO_CONVERSION)
        g = Git(clone, git_dir=gd, work_tree=clone, index=Path(tmp) / "index", where=str(clone))
        g.run("read-tree", base)
        g.run("add", "-A", "--", ".", *[f":(exclude,literal){p}" for p in skip])
        return write_patch(repo, event_id, base, g.out("write-tree"), g=g)


def move_aside(repo: Repo, clone: Path, event_id: str) -> Path:
    """The last resort: the clone's work tree (without its ``.git``) moved to ``.gep/rescued/<event>/``."""
    dest = repo.engine_dir(RESCUED) / event_id
    n = 1
    while os.path.lexists(dest):
        dest = dest.with_name(f"{event_id}~{n}")
        n += 1
    dest.mkdir(parents=True)
    for entry in os.listdir(clone):
        if entry != ".git":
            shutil.move(str(clone / entry), str(dest / entry))
    return dest


def rescue_unreadable(repo: Repo, clone: Path, base: str, event_id: str, skip: list[str]) -> Path | None:
    try:
        return raw_patch(repo, clone, base, event_id, skip)
    except (WorkspaceError, OSError):
        return move_aside(repo, clone, event_id)
