"""A cycle's own clone of the workspace under ``.gep/worktrees/<event>``, and its removal.

The clone has its own refs, index, stash, reflog, config and hooks, so nothing an agent does with git in
it reaches the user's repository; it borrows the user's objects through a *relative* alternates entry
(``git clone --shared`` writes an absolute one, which git cannot read when the workspace path holds a
newline, and which breaks when the workspace moves). Its files are checked out with the user's own git dir
(the user's eol settings and filters apply, so files come out as the user's checkout would), at the
baseline commit, detached, with a branch of the user's branch name at the same commit. The baseline and
every ref's object are pinned in the user's repository for the clone's life.

Beside the clone: ``<event>.index`` (the engine's copy of the clone's index as checked out: the seed for
fast scans, out of the agent's reach under the sandbox) and ``<event>.json`` (the record, so recovery
needs nothing else).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from gep.core.errors import WorkspaceError
from gep.core.stored_path import StoredPath
from gep.git.plumbing import Git, shown
from gep.git.refs import RefRecord, pin, read_refs, record_refs, unpin
from gep.git.repo import Repo

WORKTREES = "worktrees"
_EVENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,120}$")
# settings the clone needs so the agent's own git commands see files as the user's git does
_COPIED_CONFIG = ("core.autocrlf", "core.eol", "core.symlinks", "core.filemode", "core.ignorecase",
                  "core.precomposeunicode", "core.checkRoundtripEncoding", "core.excludesFile")


class EnvLink(BaseModel):
    path: str  # inside the clone
    target: str  # the user's folder


class CloneState(BaseModel):
    head_ref: str | None
    head: str | None
    refs: dict[str, str] = Field(default_factory=dict)


class CloneRecord(BaseModel):
    # the file keeps the key "clone" for the clone's folder: records written before read the same
    model_config = ConfigDict(validate_by_name=True, validate_by_alias=True, serialize_by_alias=True)

    event_id: str
    workspace: StoredPath
    clone_dir: StoredPath = Field(alias="clone")  # the cycle's isolated clone (a Path, stored as the string)
    baseline: str  # the user's HEAD commit when the cycle started
    base: str  # what the clone's change is measured against: the baseline, or the branch tip after a rebase
    branch: str | None  # refs/heads/<name> HEAD was on at the start; None when detached
    user_refs: RefRecord
    clone_state: CloneState
    env_links: list[EnvLink] = Field(default_factory=list)
    rebases: int = 0
    status: Literal["open", "landed", "kept", "discarded"] = "open"

    @property
    def path(self) -> Path:
        """The clone's folder (``clone_dir``), where the change is made."""
        return self.clone_dir


def check_event_id(event_id: str) -> str:
    if not _EVENT_ID.match(event_id) or event_id.endswith(".lock") or ".." in event_id:
        raise WorkspaceError(f"cycle id {event_id!r} cannot name a clone or a branch")
    return event_id


def worktrees_dir(repo: Repo) -> Path:
    return repo.engine_dir(WORKTREES)


def clone_paths(repo: Repo, event_id: str) -> tuple[Path, Path, Path]:
    """(clone directory, its seed index, its record file)."""
    d = worktrees_dir(repo)
    return d / event_id, d / f"{event_id}.index", d / f"{event_id}.json"


def save_record(repo: Repo, rec: CloneRecord) -> None:
    _clone, _index, path = clone_paths(repo, rec.event_id)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(rec.model_dump_json(indent=1), encoding="utf-8")
    os.replace(tmp, path)


def load_record(repo: Repo, event_id: str) -> CloneRecord | None:
    _clone, _index, path = clone_paths(repo, event_id)
    try:
        return CloneRecord.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None


def clone_git(rec: CloneRecord | Path) -> Git:
    """git on the clone's own repository (its config is the agent's to change: read refs only)."""
    path = rec.path if isinstance(rec, CloneRecord) else rec
    return Git(path, git_dir=path / ".git", where=str(path))


def _alternates_line(clone: Path, repo: Repo) -> str:
    rel = os.path.relpath(repo.common_dir / "objects", clone / ".git" / "objects")
    if "\n" in rel or rel.startswith('"'):  # git reads C-quoted alternates lines
        rel = '"' + rel.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    return rel + "\n"


def _init_clone(repo: Repo, clone: Path, index: Path, baseline: str, branch: str | None) -> None:
    clone.mkdir()
    Git(clone.parent, where=str(clone)).run("init", "-q", "--template=", f"--object-format={repo.object_format}",
                                            str(clone))
    info = clone / ".git" / "objects" / "info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "alternates").write_text(_alternates_line(clone, repo), encoding="utf-8")
    cg = clone_git(clone)
    user = repo.git()
    for key, value in user.config_values(_COPIED_CONFIG).items():
        cg.run("config", key, "true" if value is None else value)  # set without a value: true, as git reads it
    # checkout with the user's git dir: the user's eol settings, attributes and filters apply
    Git(clone, git_dir=repo.git_dir, work_tree=clone, index=index, where=str(clone)).run("read-tree", "-m", "-u",
                                                                                          baseline)
    shutil.copy2(index, clone / ".git" / "index")  # its mtime kept: see gep/git/scan.py
    cg.run("update-ref", "--no-deref", "HEAD", baseline)
    if branch:
        cg.run("update-ref", branch, baseline)
    exclude = repo.common_dir / "info" / "exclude"
    (clone / ".git" / "info").mkdir(exist_ok=True)
    (clone / ".git" / "info" / "exclude").write_bytes(exclude.read_bytes() if exclude.is_file() else b"")


def _env_links(repo: Repo, clone: Path, env_dirs: Sequence[str]) -> list[EnvLink]:
    """Symlinks in the clone to the user's environment folders the checks need (ignored, untracked)."""
    links: list[EnvLink] = []
    g = repo.git()
    for name in env_dirs:
        rel = name.strip().strip("/")
        parts = Path(rel).parts
        if not rel or Path(rel).is_absolute() or ".." in parts or ".git" in parts:
            continue
        src, dst = repo.path / rel, clone / rel
        if not src.is_dir() or src.is_symlink() or os.path.lexists(dst) or not dst.parent.is_dir():
            continue
        if g.run("ls-files", "-z", "--", rel, env={"GIT_LITERAL_PATHSPECS": "1"}).out:
            continue  # tracked: the clone has its own copy
        if not g.run("check-ignore", "-q", "--", rel, ok=True).ok:
            continue  # not ignored: not an environment folder
        os.symlink(src, dst)
        links.append(EnvLink(path=rel, target=str(src)))
    if links:
        with (clone / ".git" / "info" / "exclude").open("a", encoding="utf-8") as fh:
            fh.write("\n# gep: the user's environment folders, linked read-only\n")
            fh.writelines(f"/{link.path}\n" for link in links)
    return links


def read_clone_state(rec: CloneRecord | Path) -> CloneState:
    head_ref, head, refs = read_refs(clone_git(rec))
    return CloneState(head_ref=head_ref, head=head, refs=refs)


def open_clone(repo: Repo, event_id: str, env_dirs: Sequence[str] = ()) -> CloneRecord:
    """Record the user's refs, pin them and the baseline, make the clone. Nothing of the user's changes."""
    check_event_id(event_id)
    clone, index, _record = clone_paths(repo, event_id)
    if os.path.lexists(clone):
        raise WorkspaceError(f"a clone for cycle {event_id} already exists at {shown(clone)}; run `gep recover`")
    baseline, branch = repo.head(), repo.head_ref()
    refs = record_refs(repo)
    pin(repo, event_id, refs, extra={f"refs/gep/baseline/{event_id}": baseline})
    try:
        _init_clone(repo, clone, index, baseline, branch)
        links = _env_links(repo, clone, env_dirs)
        rec = CloneRecord(event_id=event_id, workspace=repo.path, clone_dir=clone, baseline=baseline,
                          base=baseline, branch=branch, user_refs=refs, clone_state=read_clone_state(clone),
                          env_links=links)
        save_record(repo, rec)
    except BaseException:
        remove_clone(repo, event_id)
        raise
    return rec


def force_remove(func: object, path: str, _exc: object) -> None:
    """rmtree's error handler (also gep eval's scratch): a directory an agent made read-only is made
    writable, then retried."""
    parent = os.path.dirname(path)
    for p in (parent, path):
        try:
            if not os.path.islink(p):
                os.chmod(p, os.lstat(p).st_mode | stat.S_IRWXU)
        except OSError:
            pass
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, onerror=force_remove)
    elif os.path.lexists(path):
        os.unlink(path)


def remove_clone(repo: Repo, event_id: str) -> bool:
    """Delete the clone, its index and record, and the cycle's pins. Links are removed, never followed."""
    clone, index, record = clone_paths(repo, event_id)
    existed = os.path.lexists(clone)
    if existed:
        shutil.rmtree(clone, onerror=force_remove)
    for p in (index, record, record.with_name(record.name + ".tmp")):
        if os.path.lexists(p):
            p.unlink()
    unpin(repo, event_id)
    return existed
