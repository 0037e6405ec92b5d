"""Prompt mode: the cycle happens in the user's own tree, where a person works. Nothing is stashed or reset.

The baseline is HEAD plus a snapshot of the dirty tree, all written as objects through temporary indexes
(the user's index and stash are never touched) and pinned by ``refs/gep/baseline/<event>``:

* ``index``: the user's index as it was (a commit on HEAD);
* ``snapshot``: the work tree as git sees it (tracked edits and untracked, not ignored files) on ``index``;
* ``raw``: the exact bytes of every path that already had uncommitted edits (eol conversions and filters
  are not applied, so a CRLF file comes back as CRLF), on ``snapshot``; the pin points here.

The change is the work tree against ``snapshot``. A path the person changed that already had uncommitted
edits at the baseline is *flagged*: it is not swallowed into the commit. Ignored files are fingerprinted
(size, mtime, mode) at the baseline, so a change to ``.env`` is seen; they are never committed.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from gep.core.errors import WorkspaceError
from gep.core.stored_path import StoredPath
from gep.git.change import Change, FileChange, changed_paths, tree_diff, untracked_changes
from gep.git.clone import check_event_id
from gep.git.entries import index_info
from gep.git.plumbing import NO_LOCKS, Git, enc, shown
from gep.git.refs import unpin
from gep.git.repo import GEP_DIR, Repo, identity_env, operation_in_progress
from gep.git.scan import scan, temp_dir

INPLACE = "inplace"
COPY_MAX_BYTES = 64 * 1024 * 1024  # a dirty file bigger than this is fingerprinted, not copied
IGNORED_MAX = 20_000  # ignored files fingerprinted at most (beyond: said so in the record)


class Fingerprint(BaseModel):
    path: str
    size: int
    mtime_ns: int
    mode: int


class InPlaceRecord(BaseModel):
    event_id: str
    workspace: StoredPath
    head: str
    head_ref: str | None
    index: str  # commit of the user's index at the baseline (parent: head)
    snapshot: str  # commit of the work tree as git sees it (parent: index)
    raw: str  # commit of the dirty paths' exact bytes (parent: snapshot); pinned
    dirty: list[str] = Field(default_factory=list)  # uncommitted at the baseline (index or files, untracked)
    unsaved: list[str] = Field(default_factory=list)  # dirty but too large or unreadable to copy
    ignored: list[Fingerprint] = Field(default_factory=list)
    ignored_complete: bool = True
    env_dirs: list[str] = Field(default_factory=list)
    # special files (a FIFO in place of MEMORY.md) and nested repositories there at the baseline: the person's,
    # never counted as the change's (issue 45, G06)
    special: list[str] = Field(default_factory=list)


class InPlaceChange(BaseModel):
    change: Change  # against the snapshot; ``tree`` is the work tree now
    flagged: list[str] = Field(default_factory=list)  # changed, but held uncommitted edits at the baseline

    @property
    def committable(self) -> list[FileChange]:
        held = set(self.flagged)
        return [f for f in self.change.committable if f.path not in held]


def record_path(repo: Repo, event_id: str) -> Path:
    return repo.engine_dir(INPLACE) / f"{event_id}.json"


def user_index(repo: Repo) -> Path:
    return repo.git_dir / "index"


def _index_tree(repo: Repo, head: str) -> str:
    with tempfile.TemporaryDirectory(prefix="index-", dir=temp_dir(repo)) as tmp:
        idx = Path(tmp) / "index"
        g = repo.git().with_(index=idx)
        if user_index(repo).is_file():
            shutil.copyfile(user_index(repo), idx)
        else:
            g.run("read-tree", head)
        res = g.run("write-tree", ok=True)
        if not res.ok:
            raise WorkspaceError(f"your index in {shown(repo.path)} has unresolved conflicts; resolve them first")
        return res.line()


def _hash_raw(g: Git, root: Path, regular: dict[str, str]) -> dict[str, tuple[str, str]]:
    """Write the exact bytes of regular files as blobs: rel -> mode; one git process for the lot (relative
    paths: the workspace path may hold a newline; names holding one, which ``--stdin-paths`` cannot carry,
    one by one)."""
    plain = [r for r in regular if "\n" not in r]
    shas = g.run("hash-object", "-w", "--no-filters", "--stdin-paths",
                 input=b"".join(enc(r) + b"\n" for r in plain)).text.split() if plain else []
    out = {r: (regular[r], sha) for r, sha in zip(plain, shas, strict=True)}
    for r in regular:
        if "\n" in r:
            out[r] = (regular[r], g.out("hash-object", "-w", "--no-filters", "--", str(root / r)))
    return out


def _raw_tree(repo: Repo, paths: Sequence[str], max_bytes: int) -> tuple[str, list[str]]:
    """A tree of the exact bytes of ``paths`` (those present), and the paths that could not be copied."""
    g = repo.git()
    entries: dict[str, tuple[str, str] | None] = {}
    regular: dict[str, str] = {}
    unsaved: list[str] = []
    for rel in paths:
        p = repo.path / rel
        try:
            st = os.lstat(p)
        except FileNotFoundError:
            continue  # deleted before the cycle: its baseline is "absent"
        except OSError:
            unsaved.append(rel)
            continue
        if stat.S_ISLNK(st.st_mode):
            sha = g.out("hash-object", "-w", "-t", "blob", "--no-filters", "--stdin", input=enc(os.readlink(p)))
            entries[rel] = ("120000", sha)
        elif stat.S_ISREG(st.st_mode) and st.st_size <= max_bytes and os.access(p, os.R_OK):
            regular[rel] = "100755" if st.st_mode & 0o111 else "100644"
        elif stat.S_ISREG(st.st_mode):
            unsaved.append(rel)
    entries.update(_hash_raw(g, repo.path, regular))
    with tempfile.TemporaryDirectory(prefix="raw-", dir=temp_dir(repo)) as tmp:
        gi = g.with_(index=Path(tmp) / "index")
        gi.run("read-tree", "--empty")
        if entries:
            gi.run("update-index", "-z", "--index-info", input=index_info(entries, repo.hexlen))
        return gi.out("write-tree"), unsaved


def fingerprint_ignored(repo: Repo, env_dirs: Sequence[str], limit: int = IGNORED_MAX) -> tuple[list[Fingerprint], bool]:
    specs = [f":(exclude,literal){d.strip('/')}" for d in [*env_dirs, GEP_DIR] if d.strip("/")]
    g = repo.git().with_(env=NO_LOCKS)
    found = g.paths("ls-files", "-o", "-i", "--exclude-standard", "-z", "--", ".", *specs)
    out: list[Fingerprint] = []
    for rel in found[:limit]:
        try:
            st = os.lstat(repo.path / rel)
        except OSError:
            continue
        out.append(Fingerprint(path=rel, size=st.st_size, mtime_ns=st.st_mtime_ns, mode=st.st_mode))
    return out, len(found) <= limit


def begin_in_place(repo: Repo, event_id: str, env_dirs: Sequence[str] = (),
                   copy_max_bytes: int = COPY_MAX_BYTES) -> InPlaceRecord:
    """Record the person's tree as it is (nothing of theirs is changed) and pin it."""
    check_event_id(event_id)
    busy = operation_in_progress(repo)
    if busy:
        raise WorkspaceError(f"{busy} is in progress in {shown(repo.path)}; finish or abort it first")
    g = repo.git()
    head, head_ref = repo.head(), repo.head_ref()
    ident = g.with_(env=identity_env(repo))  # a clone without user.email must still get its baseline saved
    index_tree = _index_tree(repo, head)
    snap = scan(repo, repo.path, base_tree=head, seed_index=user_index(repo), skip=env_dirs, all_untracked=False,
                baseline_rules=False)
    dirty = sorted(changed_paths(g, head, snap.tree, index_tree))
    raw_tree, unsaved = _raw_tree(repo, dirty, copy_max_bytes)
    c_index = ident.out("commit-tree", index_tree, "-p", head, input=b"gep: your index at the baseline\n")
    c_snap = ident.out("commit-tree", snap.tree, "-p", c_index, input=b"gep: your work tree at the baseline\n")
    c_raw = ident.out("commit-tree", raw_tree, "-p", c_snap, input=b"gep: exact bytes of your uncommitted files\n")
    g.run("update-ref", f"refs/gep/baseline/{event_id}", c_raw)
    ignored, complete = fingerprint_ignored(repo, env_dirs)
    rec = InPlaceRecord(event_id=event_id, workspace=repo.path, head=head, head_ref=head_ref, index=c_index,
                        snapshot=c_snap, raw=c_raw, dirty=dirty, unsaved=unsaved, ignored=ignored,
                        ignored_complete=complete, env_dirs=list(env_dirs), special=[r.path for r in snap.refused])
    path = record_path(repo, event_id)
    # ASCII JSON: a person's untracked file whose name is not UTF-8 is kept as an escape, not a failed cycle
    path.with_name(path.name + ".tmp").write_text(json.dumps(rec.model_dump(mode="json"), ensure_ascii=True),
                                                  encoding="utf-8")
    os.replace(path.with_name(path.name + ".tmp"), path)
    return rec


def load_in_place(repo: Repo, event_id: str) -> InPlaceRecord | None:
    try:
        return InPlaceRecord.model_validate(json.loads(record_path(repo, event_id).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None


def _ignored_changes(repo: Repo, rec: InPlaceRecord) -> list[FileChange]:
    now, _complete = fingerprint_ignored(repo, rec.env_dirs)
    before = {f.path: f for f in rec.ignored}
    after = {f.path: f for f in now}
    note = "ignored: never committed"
    out = untracked_changes(repo.path, [p for p in after if p not in before], "ignored", note)
    out += untracked_changes(repo.path, [p for p in after if p in before and after[p] != before[p]], "ignored",
                             note, status="modified")
    out += [FileChange(path=p, status="deleted", kind="ignored", note=note) for p in before if p not in after]
    return out


def in_place_change(repo: Repo, rec: InPlaceRecord) -> InPlaceChange:
    """The person's tree now against the snapshot; paths that were already dirty are flagged."""
    g = repo.git()
    base_tree = g.out("rev-parse", f"{rec.snapshot}^{{tree}}")
    sc = scan(repo, repo.path, base_tree=base_tree, seed_index=user_index(repo), skip=rec.env_dirs,
              all_untracked=False)
    files = tree_diff(g, base_tree, sc.tree)
    dirty = set(rec.dirty)
    flagged = [f.path for f in files if f.path in dirty]
    for f in files:
        if f.path in dirty:
            f.note = "had your uncommitted edits before the cycle: not committed"
    seen = {f.path for f in files}
    extra = untracked_changes(repo.path, sc.ignored, "ignored", "ignored by the baseline's rules: never committed")
    extra += [f for f in _ignored_changes(repo, rec) if f.path not in set(sc.ignored)]
    there = set(rec.special)
    extra += [c for r in sc.refused if r.path not in there
              for c in untracked_changes(repo.path, [r.path], "refused", r.why)]
    files += [f for f in extra if f.path not in seen]
    change = Change(base=rec.snapshot, tree=sc.tree, base_tree=base_tree, files=sorted(files, key=lambda f: f.path))
    return InPlaceChange(change=change, flagged=flagged)


def close_in_place(repo: Repo, rec: InPlaceRecord) -> None:
    """The cycle is over (committed or abandoned): drop the pin and the record."""
    unpin(repo, rec.event_id)
    record_path(repo, rec.event_id).unlink(missing_ok=True)

