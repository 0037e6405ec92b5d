"""The workspace as a git repository: baseline, lock, blast radius, rollback, commit, crash recovery.

One facade over GitPython. Its promises:

* Nothing the user had before a cycle is touched: tracked files are restored from the baseline commit,
  only files *created during the cycle* are removed (compared with the recorded baseline lists), and
  ignored entries that existed before (``.venv/``, build outputs) are never touched. No ``git clean``.
* Files git does not track are *kept*: the user's untracked files and git's own config, info/ files and
  hooks are copied (as blobs) at the baseline; a cycle that changes them fails, and rollback puts them
  back (the cycle's versions go to ``.gep/rescued/<event id>/``). The contents of ignored entries are
  not fingerprinted (a ``.venv/`` can be huge): a cycle that edits inside one is not detected.
* The user's own uncommitted work is never mixed into an engine commit: a dirty tree is refused, or
  (``--allow-dirty``) stashed before the cycle and re-applied byte-for-byte after it, whatever the outcome.
* Every commit or ref the engine would drop is kept under ``refs/gep/rescued/<event id>``.
* Crash recovery: a commit carrying ``GEP-Event: <id>`` *is* the proof that the cycle passed every check,
  so a cycle that died after committing is recorded as a success (from the outcome prepared before the
  commit); any other interrupted cycle is rolled back and recorded as ``interrupted``.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import stat
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Literal

import git
from pydantic import BaseModel, Field

from gep import constants as C
from gep.config import GEP_DIR, Settings
from gep.errors import PendingCycleError, WorkspaceError
from gep.models import BlastRadius, CycleRun, EvolutionEvent, KeptFile, Outcome, OutcomeStatus
from gep.sanitize import redact

if TYPE_CHECKING:
    from gep.store import Store

ENGINE_NAME = "gep"
ENGINE_EMAIL = "gep@localhost"
RESCUE_PREFIX = "refs/gep/rescued/"
LOCK_FILE = "cycle.lock"
_TRAILER_EVENT = re.compile(r"^GEP-Event:\s*(\S+)\s*$", re.MULTILINE)
_HELD_LOCKS: set[str] = set()  # workspaces whose lock this process holds
# Inside the git directory, what a cycle could use to run code later or hide files from git: config
# (aliases, core.fsmonitor, core.hooksPath, filters), attributes, excludes, and every hook.
GIT_WATCHED_FILES = ("config", "config.worktree", "info/exclude", "info/attributes")
GIT_WATCHED_DIRS = ("hooks",)
RESCUED_DIR = "rescued"  # .gep/rescued/<event id>/: what rollback took away from a kept file


class FileChange(BaseModel):
    path: str
    status: Literal["added", "modified", "deleted"]
    added: int = 0
    deleted: int = 0
    untracked: bool = False  # a new file git does not know yet


class BlastReport(BaseModel):
    """What a cycle changed relative to its baseline (the engine's own ``.gep/`` excluded)."""

    files: int = 0
    lines: int = 0
    bytes: int = 0  # bytes of added + deleted lines (whole files for binaries and new untracked files)
    changes: list[FileChange] = Field(default_factory=list)

    @property
    def changed_files(self) -> list[str]:
        return [c.path for c in self.changes]

    @property
    def radius(self) -> BlastRadius:
        return BlastRadius(files=self.files, lines=self.lines, bytes=self.bytes)


class KeptChange(BaseModel):
    """A kept file (see :class:`gep.models.KeptFile`) that is no longer as it was at the baseline."""

    key: str
    what: Literal["modified", "deleted", "added"]
    restorable: bool = True

    @property
    def in_git_dir(self) -> bool:
        return self.key.startswith("git:")

    @property
    def shown(self) -> str:
        return ".git/" + self.key[4:] if self.in_git_dir else self.key


class RecoveredRun(BaseModel):
    event_id: str
    head_sha: str  # the baseline the workspace was restored to (or the cycle's commit, see outcome)
    outcome: OutcomeStatus  # success (had committed), interrupted, or the final status already recorded
    commit: str | None = None
    rolled_back: bool = False
    user_changes_restored: bool = False


def _z(out: str) -> list[str]:
    return [p for p in out.split("\0") if p]


def _is_engine_path(rel: str) -> bool:
    return rel == GEP_DIR or rel == GEP_DIR + "/" or rel.startswith(GEP_DIR + "/")


def _ancestors(rel: str) -> list[str]:
    parts = PurePosixPath(rel.rstrip("/")).parts
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def _count_lines(path: Path) -> int:
    try:
        data = path.read_bytes()
    except OSError:
        return 0
    if not data or b"\0" in data[:8192]:
        return 0  # empty or binary
    return data.count(b"\n") + (0 if data.endswith(b"\n") else 1)


def _file_size(path: Path) -> int:
    try:
        return path.lstat().st_size
    except OSError:
        return 0


def diff_bytes(repo: Path, base: str, binaries: Sequence[str]) -> int:
    """Bytes of the lines added and deleted since ``base`` in the work tree (the engine's .gep excluded),
    streamed (a huge change is never held in memory); ``binaries`` count their whole current size."""
    cmd = ["git", "-C", str(repo), "diff", "-U0", "--no-color", "--no-ext-diff", "--no-textconv", "--no-renames", base,
           "--", ".", f":(exclude){GEP_DIR}"]
    total = 0
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as proc:
        assert proc.stdout is not None
        in_hunk = False
        for line in proc.stdout:
            if line.startswith(b"diff --git "):
                in_hunk = False
            elif line.startswith(b"@@"):
                in_hunk = True
            elif in_hunk and line[:1] in (b"+", b"-"):
                total += len(line) - 1 + (0 if line.endswith(b"\n") else 1)  # the line and its newline
    return total + sum(_file_size(repo / p) for p in binaries)


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` is a live (non-zombie) process."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


class Workspace:
    """A git working tree the engine evolves. Open with :meth:`open`."""

    def __init__(self, repo: git.Repo, path: Path):
        self.repo = repo
        self.path = path

    # ---------------------------------------------------------------- opening

    @classmethod
    def open(cls, path: Path | str) -> Workspace:
        p = Path(path).expanduser()
        if not p.exists():
            raise WorkspaceError(f"workspace {p} does not exist")
        if not p.is_dir():
            raise WorkspaceError(f"workspace {p} is not a directory")
        p = p.resolve()
        try:
            repo = git.Repo(p)
        except git.InvalidGitRepositoryError:
            try:
                top = git.Repo(p, search_parent_directories=True).working_tree_dir
            except git.InvalidGitRepositoryError:
                top = None
            if top:
                raise WorkspaceError(f"workspace {p} is inside the git repository {top}; "
                                     "point --workspace at the repository's top directory") from None
            raise WorkspaceError(f"workspace {p} is not a git repository (run `git init` and commit once)") from None
        except git.NoSuchPathError:
            raise WorkspaceError(f"workspace {p} does not exist") from None
        if repo.bare or repo.working_tree_dir is None:
            raise WorkspaceError(f"workspace {p} is a bare git repository; it needs a working tree")
        if Path(repo.working_tree_dir).resolve() != p:
            raise WorkspaceError(f"workspace {p} is not the top of its git repository ({repo.working_tree_dir})")
        if not repo.head.is_valid():
            raise WorkspaceError(f"workspace {p} has no commit yet; commit once before evolving it")
        return cls(repo, p)

    # ---------------------------------------------------------------- git plumbing

    def _git(self, *args: str, ok: bool = False, env: dict[str, str] | None = None) -> str:
        """Run git in the workspace; ``ok=True`` returns stdout whatever the exit status."""
        try:
            return str(self.repo.git.execute(["git", *args], with_exceptions=not ok, env=env,
                                             strip_newline_in_stdout=False))
        except git.GitCommandError as exc:
            detail = (exc.stderr or "").strip().splitlines()
            raise WorkspaceError(f"git {args[0]} failed in {self.path}: "
                                 f"{detail[-1] if detail else exc.status}") from None

    def head_sha(self) -> str:
        return self._git("rev-parse", "HEAD").strip()

    def current_branch(self) -> str | None:
        out = self._git("symbolic-ref", "-q", "--short", "HEAD", ok=True).strip()
        return out or None

    def _ref_sha(self, ref: str) -> str | None:
        out = self._git("rev-parse", "-q", "--verify", ref + "^{commit}", ok=True).strip()
        return out or None

    def untracked_files(self) -> list[str]:
        """Untracked, not ignored files (one entry per file), without ``.gep/``."""
        return sorted(p for p in _z(self._git("ls-files", "-o", "--exclude-standard", "-z"))
                      if not _is_engine_path(p))

    def ignored_entries(self) -> list[str]:
        """Ignored paths as git collapses them (``.venv/`` is one entry), without ``.gep/``."""
        out = self._git("ls-files", "-o", "-i", "--exclude-standard", "--directory", "-z")
        return sorted(p for p in _z(out) if not _is_engine_path(p))

    def empty_dirs(self) -> list[str]:
        out = self._git("ls-files", "-o", "--exclude-standard", "--directory", "-z")
        return sorted(p for p in _z(out) if p.endswith("/") and not _is_engine_path(p)
                      and (self.path / p).is_dir() and not any((self.path / p).iterdir()))

    def dirty_tracked_files(self) -> list[str]:
        """Tracked files with staged or unstaged changes (``.gep/`` excluded)."""
        records = _z(self._git("status", "--porcelain=v1", "-z", "--untracked-files=no", "--ignore-submodules"))
        out: list[str] = []
        skip = False
        for rec in records:
            if skip:  # the original path of a rename/copy
                skip = False
                continue
            xy, path = rec[:2], rec[3:]
            skip = "R" in xy or "C" in xy
            if not _is_engine_path(path):
                out.append(path)
        return sorted(set(out))

    def _operation_in_progress(self) -> str | None:
        gd = Path(self.repo.git_dir)
        for name, what in (("MERGE_HEAD", "a merge"), ("rebase-merge", "a rebase"), ("rebase-apply", "a rebase"),
                           ("CHERRY_PICK_HEAD", "a cherry-pick"), ("REVERT_HEAD", "a revert")):
            if (gd / name).exists():
                return what
        return None

    # ---------------------------------------------------------------- .gep and the lock

    @property
    def gep_dir(self) -> Path:
        return self.path / GEP_DIR

    def ensure_gep_dir(self) -> Path:
        """Create ``.gep/`` and keep it out of git (``.git/info/exclude``), so it is never committed."""
        self.gep_dir.mkdir(exist_ok=True)
        exclude = Path(self._git("rev-parse", "--git-path", "info/exclude").strip())
        if not exclude.is_absolute():
            exclude = self.path / exclude
        lines = exclude.read_text(encoding="utf-8").splitlines() if exclude.exists() else []
        if not any(ln.strip() in (".gep", ".gep/", "/.gep", "/.gep/") for ln in lines):
            exclude.parent.mkdir(parents=True, exist_ok=True)
            prefix = "" if not lines or exclude.read_bytes().endswith(b"\n") else "\n"
            with exclude.open("a", encoding="utf-8") as fh:
                fh.write(f"{prefix}/{GEP_DIR}/\n")
        return self.gep_dir

    @contextmanager
    def lock(self, timeout_s: float | None = None) -> Iterator[None]:
        """Hold the workspace's cycle lock; wait up to ``timeout_s`` for another cycle to finish."""
        timeout = C.LOCK_TIMEOUT_S if timeout_s is None else timeout_s
        path = self.ensure_gep_dir() / LOCK_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + timeout
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
                        raise WorkspaceError(f"another cycle is running on {self.path} (pid {holder}); "
                                             f"gave up after {timeout:g}s") from None
                    time.sleep(C.LOCK_POLL_S)
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            _HELD_LOCKS.add(str(self.path))
            try:
                yield
            finally:
                _HELD_LOCKS.discard(str(self.path))
                os.ftruncate(fd, 0)
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def holds_lock(self) -> bool:
        return str(self.path) in _HELD_LOCKS

    # ---------------------------------------------------------------- begin

    def _check_open_runs(self, store: Store) -> None:
        for run in store.open_runs():
            if Path(run.workspace).resolve() != self.path:
                continue
            if run.status == "awaiting_changes":
                raise PendingCycleError(f"cycle {run.event_id} is still awaiting changes on {self.path}: "
                                        f"finish it with `gep solidify --workspace {self.path}`")
            if run.status == "running":
                who = f"pid {run.pid}" if run.pid else "unknown pid"
                raise WorkspaceError(f"cycle {run.event_id} ({who}) is still recorded as running on {self.path}; "
                                     f"if it crashed, run `gep recover --workspace {self.path}`")

    def begin(self, *, event_id: str, store: Store, allow_dirty: bool = False) -> CycleRun:
        """Record the baseline (and stash the user's edits under ``allow_dirty``) before anything changes."""
        self.ensure_gep_dir()
        self._check_open_runs(store)
        busy = self._operation_in_progress()
        if busy:
            raise WorkspaceError(f"{busy} is in progress in {self.path}; finish or abort it first")
        dirty = self.dirty_tracked_files()
        if dirty and not allow_dirty:
            shown = ", ".join(dirty[:5]) + (f" (+{len(dirty) - 5} more)" if len(dirty) > 5 else "")
            raise WorkspaceError(f"uncommitted changes to tracked files in {self.path}: {shown}; "
                                 "commit or stash them, or pass --allow-dirty")
        stash_sha = None
        if dirty:
            # `stash create` makes the stash commit without touching the tree; `stash store` keeps it
            # visible in `git stash list` so it can never be lost, whatever happens next.
            msg = f"gep: your uncommitted changes before cycle {event_id}"
            stash_sha = self._git("stash", "create", msg).strip() or None
            if stash_sha:
                self._git("stash", "store", "-m", msg, stash_sha)
        run = CycleRun(event_id=event_id, workspace=str(self.path), head_sha=self.head_sha(),
                       branch=self.current_branch(), untracked=self.untracked_files(),
                       ignored=self.ignored_entries(), empty_dirs=self.empty_dirs(), stash_sha=stash_sha,
                       stage="started", status="running", pid=os.getpid(), kept=self.capture_kept(),
                       kept_recorded=True)
        store.save_run(run)
        if stash_sha:
            # the user's edits are safe in the stash: the cycle starts from the clean baseline commit
            self._git("reset", "-q", "--hard", run.head_sha)
            run.stage = "stashed"
            store.save_run(run)
        return run

    # ---------------------------------------------------------------- what changed

    def blast_radius(self, run: CycleRun, settings: Settings | None = None) -> BlastReport:
        """Files changed since the baseline (tracked and new untracked) and added+deleted lines."""
        changes: dict[str, FileChange] = {}
        status = _z(self._git("diff", "--name-status", "-z", "--no-renames", "--no-ext-diff", run.head_sha))
        for code, path in zip(status[::2], status[1::2], strict=False):
            if _is_engine_path(path):
                continue
            kind: Literal["added", "modified", "deleted"] = (
                "added" if code.startswith("A") else "deleted" if code.startswith("D") else "modified")
            changes[path] = FileChange(path=path, status=kind)
        binaries: list[str] = []
        for rec in _z(self._git("diff", "--numstat", "-z", "--no-renames", "--no-ext-diff", run.head_sha)):
            added, deleted, path = (rec.split("\t", 2) + ["", ""])[:3]
            if path in changes:
                changes[path].added = int(added) if added.isdigit() else 0
                changes[path].deleted = int(deleted) if deleted.isdigit() else 0
                if added == "-":
                    binaries.append(path)
        size = diff_bytes(self.path, run.head_sha, binaries) if changes else 0
        before = set(run.untracked)
        for path in self.untracked_files():
            if path not in before and path not in changes:
                changes[path] = FileChange(path=path, status="added", added=_count_lines(self.path / path),
                                           untracked=True)
                size += _file_size(self.path / path)
        ordered = sorted(changes.values(), key=lambda c: c.path)
        return BlastReport(files=len(ordered), lines=sum(c.added + c.deleted for c in ordered), bytes=size,
                           changes=ordered)

    def diff_snapshot(self, run: CycleRun, limit: int = C.DIFF_SNAPSHOT_CHARS) -> str:
        """The cycle's change as a (redacted) unified diff, at most ``limit`` characters."""
        parts = [self._git("diff", "--no-color", "--no-ext-diff", "--no-renames", run.head_sha, "--", ".",
                           f":(exclude){GEP_DIR}")]
        size = len(parts[0])
        before = set(run.untracked)
        for path in self.untracked_files():
            if size > limit:
                break
            if path in before:
                continue
            piece = self._git("diff", "--no-index", "--no-color", "--no-ext-diff", "--", "/dev/null", path, ok=True)
            parts.append(piece)
            size += len(piece)
        text = redact("".join(p if p.endswith("\n") or not p else p + "\n" for p in parts))
        if len(text) > limit:
            text = text[:limit] + "\n... [TRUNCATED]"
        return text

    def user_stashed_paths(self, run: CycleRun) -> list[str]:
        """Paths holding the user's stashed edits (``--allow-dirty``): a cycle must not touch them."""
        return self._stash_paths(run.stash_sha) if run.stash_sha else []

    def _stash_paths(self, w: str) -> list[str]:
        paths = set(_z(self._git("diff", "--name-only", "-z", "--no-renames", f"{w}^1", w)))
        paths |= set(_z(self._git("diff", "--name-only", "-z", "--no-renames", f"{w}^1", f"{w}^2")))
        return sorted(paths)

    # ---------------------------------------------------------------- kept files (untracked, .git/ internals)

    def _git_paths(self) -> dict[str, Path]:
        """Where the watched files live. Directories are taken in the common git dir, not through
        ``--git-path`` (which follows core.hooksPath out of the git directory)."""
        args: list[str] = []
        for n in GIT_WATCHED_FILES:
            args += ["--git-path", n]
        lines = self._git("rev-parse", *args, "--git-common-dir").splitlines()
        paths = [Path(line.strip()) for line in lines]
        paths = [p if p.is_absolute() else self.path / p for p in paths]
        out = dict(zip(GIT_WATCHED_FILES, paths, strict=False))
        out.update({d: paths[-1] / d for d in GIT_WATCHED_DIRS})
        return out

    def _kept_path(self, key: str, git_paths: dict[str, Path]) -> Path:
        if not key.startswith("git:"):
            return self.path / key
        rest = key[4:]
        for d in GIT_WATCHED_DIRS:
            if rest.startswith(d + "/"):
                return git_paths[d] / rest[len(d) + 1:]
        return git_paths[rest]

    def _watched(self, git_paths: dict[str, Path]) -> dict[str, Path]:
        """Files git does not track that a cycle must leave as they were: the untracked files (``.gep/``
        excluded) and git's config, info/ files and hooks."""
        out = {rel: self.path / rel for rel in self.untracked_files() if not rel.endswith("/")}
        for n in GIT_WATCHED_FILES:
            p = git_paths[n]
            if p.is_file() or p.is_symlink():
                out[f"git:{n}"] = p
        for d in GIT_WATCHED_DIRS:
            base = git_paths[d]
            if base.is_dir() and not base.is_symlink():
                for dirpath, _dirs, names in os.walk(base):
                    for name in names:
                        p = Path(dirpath, name)
                        out[f"git:{d}/{p.relative_to(base).as_posix()}"] = p
        return out

    def _hash_files(self, paths: Sequence[Path], *, write: bool) -> list[str]:
        """Blob ids of ``paths`` (raw bytes, no filters); ``write`` stores the blobs in the object store."""
        if not paths:
            return []
        argv = ["git", "hash-object", *(["-w"] if write else []), "--no-filters", "--stdin-paths"]
        proc = subprocess.run(argv, cwd=self.path, input="".join(f"{p}\n" for p in paths).encode(),
                              capture_output=True, check=False)
        shas = proc.stdout.decode().split()
        if proc.returncode != 0 or len(shas) != len(paths):
            detail = proc.stderr.decode(errors="replace").strip().splitlines()
            raise WorkspaceError(f"git hash-object failed in {self.path}: {detail[-1] if detail else proc.returncode}")
        return shas

    def capture_kept(self) -> list[KeptFile]:
        """The kept files as they are now, small ones copied into the object store (so rollback can restore
        them byte for byte), the rest fingerprinted."""
        git_paths = self._git_paths()
        found: list[tuple[KeptFile, Path]] = []
        for key, p in self._watched(git_paths).items():
            try:
                st = p.lstat()
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode):
                found.append((KeptFile(key=key, kind="symlink", target=os.readlink(p)), p))
            elif stat.S_ISREG(st.st_mode):
                found.append((KeptFile(key=key, kind="large", mode=stat.S_IMODE(st.st_mode), size=st.st_size,
                                       mtime_ns=st.st_mtime_ns), p))
        budget = C.KEPT_TOTAL_MAX_BYTES
        to_copy: list[tuple[KeptFile, Path]] = []
        for kf, p in sorted(found, key=lambda fp: fp[0].size):  # small files first within the budget
            if (kf.kind == "large" and kf.size <= min(C.KEPT_FILE_MAX_BYTES, budget) and "\n" not in str(p)
                    and os.access(p, os.R_OK)):
                budget -= kf.size
                kf.kind = "file"
                to_copy.append((kf, p))
        for (kf, _p), sha in zip(to_copy, self._hash_files([p for _kf, p in to_copy], write=True), strict=True):
            kf.sha = sha
        return sorted((kf for kf, _p in found), key=lambda kf: kf.key)

    def kept_changes(self, run: CycleRun) -> list[KeptChange]:
        """Kept files the cycle modified or deleted, and files it added inside the git directory."""
        if not run.kept_recorded:
            return []
        git_paths = self._git_paths()
        out: list[KeptChange] = []
        to_hash: list[tuple[KeptFile, Path]] = []
        for kf in run.kept:
            p = self._kept_path(kf.key, git_paths)
            try:
                st = p.lstat()
            except OSError:
                out.append(KeptChange(key=kf.key, what="deleted", restorable=kf.kind != "large"))
                continue
            if kf.kind == "symlink":
                changed = not stat.S_ISLNK(st.st_mode) or os.readlink(p) != kf.target
            elif not stat.S_ISREG(st.st_mode) or stat.S_IMODE(st.st_mode) != kf.mode:
                changed = True
            elif kf.kind == "large":
                changed = (st.st_size, st.st_mtime_ns) != (kf.size, kf.mtime_ns)
            else:
                to_hash.append((kf, p))
                continue
            if changed:
                out.append(KeptChange(key=kf.key, what="modified", restorable=kf.kind != "large"))
        hashable = [(kf, p) for kf, p in to_hash if "\n" not in str(p)]
        for (kf, _p), sha in zip(hashable, self._hash_files([p for _kf, p in hashable], write=False), strict=True):
            if sha != kf.sha:
                out.append(KeptChange(key=kf.key, what="modified"))
        known = {kf.key for kf in run.kept}
        for key in self._watched(git_paths):
            if key.startswith("git:") and key not in known:
                out.append(KeptChange(key=key, what="added"))
        return sorted(out, key=lambda c: c.key)

    def _move_to_rescue(self, run: CycleRun, change: KeptChange, p: Path) -> None:
        """Keep what rollback takes away (the cycle's version) under ``.gep/rescued/<event id>/``."""
        dest = self.gep_dir / RESCUED_DIR / run.event_id / change.shown
        dest.parent.mkdir(parents=True, exist_ok=True)
        n = 0
        while dest.exists() or dest.is_symlink():
            n += 1
            dest = dest.with_name(f"{dest.name.split('~')[0]}~{n}")
        shutil.move(str(p), str(dest))

    def restore_kept(self, run: CycleRun) -> list[str]:
        """Put every changed kept file back as it was at the baseline; remove files added to the git
        directory. The cycle's versions are moved to ``.gep/rescued/<event id>/``, never deleted."""
        changes = self.kept_changes(run)
        if not changes:
            return []
        git_paths = self._git_paths()
        baseline = {kf.key: kf for kf in run.kept}
        restored: list[str] = []
        for change in changes:
            p = self._kept_path(change.key, git_paths)
            kf = baseline.get(change.key)
            if not change.restorable or (kf is not None and kf.kind == "file" and not kf.sha):
                continue  # no copy was kept: leave the file as it is (the violation says so)
            if change.what != "deleted":
                self._move_to_rescue(run, change, p)
            if kf is not None:
                p.parent.mkdir(parents=True, exist_ok=True)
                if kf.kind == "symlink":
                    os.symlink(kf.target or "", p)
                else:
                    blob = subprocess.run(["git", "cat-file", "blob", kf.sha or ""], cwd=self.path,
                                          capture_output=True, check=False)
                    if blob.returncode != 0:
                        continue
                    p.write_bytes(blob.stdout)
                    os.chmod(p, kf.mode)
                    os.utime(p, ns=(kf.mtime_ns, kf.mtime_ns))
            restored.append(change.shown)
        return restored

    def remove_new_untracked(self, run: CycleRun, before: set[str]) -> list[str]:
        """Remove untracked files that appeared since ``before`` was listed (what validation left behind)."""
        removed: list[str] = []
        for rel in self.untracked_files():
            target = self.path / rel
            if rel in before or rel.endswith("/"):
                continue
            if target.is_symlink() or target.is_file():
                target.unlink()
                removed.append(rel)
        self._prune_dirs(run, removed)
        return removed

    def fingerprints(self, paths: Sequence[str]) -> dict[str, str]:
        """Blob id of each workspace file (``-`` when missing, ``link:<target>`` for a symlink)."""
        out: dict[str, str] = {}
        regular: list[str] = []
        for rel in paths:
            p = self.path / rel
            if p.is_symlink():
                out[rel] = "link:" + os.readlink(p)
            elif p.is_file() and "\n" not in rel:
                regular.append(rel)
            else:
                out[rel] = "-"
        out.update(zip(regular, self._hash_files([self.path / r for r in regular], write=False), strict=True))
        return out

    # ---------------------------------------------------------------- rollback

    def _rescue(self, run: CycleRun, sha: str, suffix: str = "") -> None:
        self._git("update-ref", f"{RESCUE_PREFIX}{run.event_id}{suffix}", sha)

    def _restore_head(self, run: CycleRun) -> None:
        """HEAD back on the baseline branch at the baseline commit; anything dropped is kept in a rescue ref."""
        if run.branch:
            ref = f"refs/heads/{run.branch}"
            tip = self._ref_sha(ref)
            if tip and tip != run.head_sha:
                self._rescue(run, tip)
            if tip != run.head_sha:
                self._git("update-ref", ref, run.head_sha)
            if self.current_branch() != run.branch:
                head = self._ref_sha("HEAD")
                if head and head not in (run.head_sha, tip):
                    self._rescue(run, head, "-head")
                self._git("symbolic-ref", "HEAD", ref)
        else:
            head = self._ref_sha("HEAD")
            if head != run.head_sha:
                if head:
                    self._rescue(run, head)
                self._git("update-ref", "--no-deref", "HEAD", run.head_sha)

    def rollback(self, run: CycleRun) -> list[str]:
        """Undo the cycle: tracked files back to the baseline, kept files (the user's untracked files, git's
        config and hooks) restored, files it created removed. Returns what changed.

        Never ``git clean`` and never ``reset --hard`` over the cycle's index: the index is first reset to
        the baseline (the working tree untouched), so a file the cycle staged is just untracked again and
        is judged against the baseline lists like any other.
        """
        self._restore_head(run)
        self._git("reset", "-q", "--mixed", run.head_sha)  # index = baseline; working tree untouched
        touched: list[str] = []
        changed = [p for p in _z(self._git("diff", "--name-only", "-z", "--no-renames", run.head_sha))
                   if not _is_engine_path(p)]
        for i in range(0, len(changed), 200):
            self._git("checkout-index", "-f", "-q", "--", *changed[i:i + 200])
        touched += changed
        touched += self.restore_kept(run)
        removed = self._remove_created(run)
        touched += removed
        self._prune_dirs(run, removed)
        return touched

    def _baseline_dirs(self, run: CycleRun) -> set[str]:
        keep: set[str] = set()
        for entry in [*run.untracked, *run.ignored, *run.empty_dirs]:
            keep.update(_ancestors(entry))
            if entry.endswith("/"):
                keep.add(entry.rstrip("/"))
        return keep

    def _remove_created(self, run: CycleRun) -> list[str]:
        removed: list[str] = []
        before = set(run.untracked)
        for rel in self.untracked_files():
            if rel in before:
                continue
            target = self.path / rel
            if target.is_symlink() or target.is_file():
                target.unlink()
                removed.append(rel)
            elif rel.endswith("/") and target.is_dir():  # a nested repository the cycle created
                shutil.rmtree(target)
                removed.append(rel)
        # Ignored entries created during the cycle (build output, caches). Triple-guarded so nothing
        # that existed before is touched: listed at baseline (itself or an ancestor), containing a
        # baseline entry, or older than the cycle -> left alone.
        old_ignored = {e.rstrip("/") for e in run.ignored}
        baseline_all = {e.rstrip("/") for e in [*run.ignored, *run.untracked, *run.empty_dirs]}
        started = _parse_ts(run.started_at)
        for entry in self.ignored_entries():
            rel = entry.rstrip("/")
            if rel in old_ignored or any(a in old_ignored for a in _ancestors(rel)):
                continue
            if any(b == rel or b.startswith(rel + "/") for b in baseline_all):
                continue
            target = self.path / rel
            if not _all_newer(target, started):
                continue
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            elif target.exists() or target.is_symlink():
                target.unlink()
            removed.append(entry)
        return removed

    def _prune_dirs(self, run: CycleRun, removed: Sequence[str]) -> None:
        """Remove directories left empty by the rollback, unless they existed at the baseline."""
        keep = self._baseline_dirs(run)
        candidates: set[str] = set()
        for rel in removed:
            candidates.update(_ancestors(rel))
        for entry in self.empty_dirs():  # empty directories the cycle created
            if entry not in run.empty_dirs:
                candidates.add(entry.rstrip("/"))
                candidates.update(_ancestors(entry))
        for rel in sorted(candidates, key=lambda d: d.count("/"), reverse=True):
            if rel in keep or _is_engine_path(rel) or rel == ".git" or rel.startswith(".git/"):
                continue
            d = self.path / rel
            try:
                if d.is_dir() and not d.is_symlink() and not any(d.iterdir()):
                    d.rmdir()
            except OSError:
                pass

    # ---------------------------------------------------------------- the user's stashed edits

    def _stash_applied(self, sha: str) -> bool:
        """Whether the working tree and index already hold the stashed edits (a re-run after a crash)."""
        paths = self._stash_paths(sha)
        if not paths:
            return True
        literal = {"GIT_LITERAL_PATHSPECS": "1"}
        try:
            self.repo.git.execute(["git", "diff", "--quiet", "--no-ext-diff", sha, "--", *paths], env=literal)
            self.repo.git.execute(["git", "diff", "--quiet", "--cached", "--no-ext-diff", f"{sha}^2", "--", *paths],
                                  env=literal)
        except git.GitCommandError:
            return False
        return True

    def _drop_stash_entry(self, sha: str) -> None:
        entries = self._git("stash", "list", "--format=%H", ok=True).split()
        if sha in entries:
            self._git("stash", "drop", "-q", f"stash@{{{entries.index(sha)}}}", ok=True)

    def restore_user_changes(self, run: CycleRun) -> bool:
        """Re-apply the edits stashed by :meth:`begin` (staged ones staged again). Idempotent."""
        if not run.stash_sha:
            return False
        if not self._stash_applied(run.stash_sha):
            try:
                self.repo.git.execute(["git", "stash", "apply", "--index", "-q", run.stash_sha])
            except git.GitCommandError:
                raise WorkspaceError(f"could not re-apply your uncommitted changes in {self.path}; they are safe "
                                     f"in the stash: run `git stash apply --index {run.stash_sha}`") from None
        self._drop_stash_entry(run.stash_sha)
        return True

    # ---------------------------------------------------------------- commit

    def check_branch(self, run: CycleRun, branch: str | None) -> str | None:
        """None if the cycle can be committed on ``branch``; else why not."""
        if not branch or branch == run.branch:
            return None
        try:
            self.repo.git.execute(["git", "check-ref-format", "--branch", branch])
        except git.GitCommandError:
            return f"'{branch}' is not a valid branch name"
        tip = self._ref_sha(f"refs/heads/{branch}")
        if tip and tip != run.head_sha:
            return (f"branch '{branch}' exists and does not point at the cycle's baseline {run.head_sha[:12]}; "
                    "check it out before the cycle or pick another name")
        return None

    def _identity_env(self) -> dict[str, str] | None:
        name = self._git("config", "--get", "user.name", ok=True).strip()
        email = self._git("config", "--get", "user.email", ok=True).strip()
        if name and email:
            return None
        return {"GIT_AUTHOR_NAME": ENGINE_NAME, "GIT_AUTHOR_EMAIL": ENGINE_EMAIL,
                "GIT_COMMITTER_NAME": ENGINE_NAME, "GIT_COMMITTER_EMAIL": ENGINE_EMAIL}

    def commit(self, run: CycleRun, *, message: str, branch: str | None = None,
               files: Sequence[str] | None = None) -> str:
        """One commit of exactly the cycle's changed files (never the user's own work). Returns its sha."""
        paths = list(files) if files is not None else self.blast_radius(run).changed_files
        paths = [p for p in paths if not _is_engine_path(p)]
        if not paths:
            raise WorkspaceError(f"nothing to commit in {self.path}")
        problem = self.check_branch(run, branch)
        if problem:
            raise WorkspaceError(problem)
        head = self.head_sha()
        if head != run.head_sha:  # the mutator committed on its own: fold its commits into ours
            self._rescue(run, head, "-mutator")
        if branch and branch != self.current_branch():
            if self._ref_sha(f"refs/heads/{branch}"):
                self._git("symbolic-ref", "HEAD", f"refs/heads/{branch}")
            else:
                self._git("update-ref", f"refs/heads/{branch}", run.head_sha, "")
                self._git("symbolic-ref", "HEAD", f"refs/heads/{branch}")
        self._git("reset", "-q", "--mixed", run.head_sha)  # index = baseline: only our paths get staged
        literal = {"GIT_LITERAL_PATHSPECS": "1"}
        for i in range(0, len(paths), 200):
            self._git("add", "-A", "--", *paths[i:i + 200], env=literal)
        # no hooks at all (a cycle could have planted one; --no-verify alone still runs prepare-commit-msg
        # and post-commit), no signing prompt
        self._git("-c", "core.hooksPath=/dev/null", "-c", "commit.gpgsign=false", "commit", "-q", "--no-verify",
                  "--cleanup=whitespace", "-m", message, env=self._identity_env())
        return self.head_sha()

    def find_cycle_commit(self, run: CycleRun, branch: str | None = None) -> str | None:
        """The commit carrying ``GEP-Event: <run.event_id>`` made after the baseline, if any."""
        refs = ["HEAD"] + ([f"refs/heads/{branch}"] if branch else [])
        for ref in refs:
            if not self._ref_sha(ref):
                continue
            log = self._git("log", f"-n{C.RECOVERY_LOG_DEPTH}", "--format=%H%x1f%B%x1e",
                            f"{run.head_sha}..{ref}", ok=True)
            for rec in log.split("\x1e"):
                if "\x1f" not in rec:
                    continue
                sha, body = rec.strip("\n").split("\x1f", 1)
                if run.event_id in _TRAILER_EVENT.findall(body):
                    return sha.strip()
        return None

    # ---------------------------------------------------------------- crash recovery

    def is_stale(self, run: CycleRun) -> bool:
        """A running record whose process is gone (or any, when this process holds the workspace lock)."""
        return self.holds_lock() or run.pid is None or not pid_alive(run.pid)

    def recover_run(self, run: CycleRun, store: Store, settings: Settings | None = None) -> RecoveredRun:
        """Finish one interrupted cycle: record success if it had committed, else roll back as interrupted."""
        prepared = run.pending.solidify
        commit = self.find_cycle_commit(run, prepared.branch if prepared else None)
        stored = store.get_event(run.event_id)
        rolled_back = False
        if commit:
            _record_committed(store, run, stored, commit)
            outcome, head = OutcomeStatus.success, commit
        elif stored is not None and stored.outcome.status in FINAL_STATUSES:
            # the final outcome was written before the crash: finish the rollback, keep the record
            if stored.outcome.status != OutcomeStatus.success:
                self.rollback(run)
                rolled_back = True
            outcome, head = OutcomeStatus(stored.outcome.status), run.head_sha
        else:
            blast = self.blast_radius(run)
            self.rollback(run)
            rolled_back = True
            event = stored or EvolutionEvent(id=run.event_id)
            event.meta.at = event.meta.at or run.started_at
            event.outcome = Outcome(status=OutcomeStatus.interrupted, score=0.0)
            event.blast_radius = blast.radius
            event.meta.failure_reasons = ["interrupted"]
            event.meta.interrupted_at_stage = run.stage
            event.meta.empty_cycle = blast.files == 0
            event.meta.recovery = "the cycle died before it finished; rolled back by recovery"
            store.add_event(event)
            outcome, head = OutcomeStatus.interrupted, run.head_sha
        restored = self.restore_user_changes(run)
        store.close_run(run.event_id)
        return RecoveredRun(event_id=run.event_id, head_sha=head, outcome=outcome, commit=commit,
                            rolled_back=rolled_back, user_changes_restored=restored)


FINAL_STATUSES = {OutcomeStatus.success, OutcomeStatus.failed, OutcomeStatus.empty, OutcomeStatus.abandoned,
                  OutcomeStatus.interrupted}


def _record_committed(store: Store, run: CycleRun, stored: EvolutionEvent | None, commit: str) -> None:
    """The cycle committed before it died: its commit proves every check passed, so record the success it
    had prepared (event and capsule), with the commit's sha."""
    from gep.hashing import compute_asset_id

    prepared = run.pending.solidify
    event = prepared.event.model_copy(deep=True) if prepared else stored or EvolutionEvent(id=run.event_id)
    event.outcome = Outcome(status=OutcomeStatus.success, score=C.SUCCESS_SCORE)
    event.meta.commit = commit
    if event.meta.empty_cycle is None:
        event.meta.empty_cycle = False
    event.meta.recovery = "the cycle committed before it died; outcome recorded by recovery"
    if prepared and prepared.capsule:
        capsule = prepared.capsule.model_copy(deep=True)
        capsule.commit = commit
        capsule.asset_id = None
        capsule.asset_id = compute_asset_id(capsule.to_asset())
        store.upsert_capsule(capsule)
        event.capsule_id = capsule.id
    store.add_event(event)


def _parse_ts(ts: str) -> float:
    from datetime import datetime

    try:
        return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return time.time()


def _all_newer(target: Path, since: float) -> bool:
    """Whether every file under ``target`` was modified after ``since`` (i.e. plausibly created by the cycle)."""
    slack = since - 2.0  # filesystem timestamp granularity
    try:
        if target.is_symlink() or target.is_file():
            return target.lstat().st_mtime >= slack
        for dirpath, _dirs, names in os.walk(target):
            for n in names:
                if Path(dirpath, n).lstat().st_mtime < slack:
                    return False
        return True
    except OSError:
        return False


def recover(*, workspace: Path, store: Store, settings: Settings, force: bool = False) -> list[RecoveredRun]:
    """Restore the workspace after crashed cycles and record them (see :meth:`Workspace.recover_run`).

    Runs awaiting changes (prompt mode) are left alone: they belong to ``gep solidify``. Call this while
    holding :meth:`Workspace.lock`; then every "running" record is stale, since a live cycle would hold
    the lock. Without the lock only runs whose process is gone are recovered, unless ``force``.
    """
    ws = Workspace.open(workspace)
    out: list[RecoveredRun] = []
    for run in store.open_runs():
        if run.status != "running" or Path(run.workspace).resolve() != ws.path:
            continue
        if force or ws.is_stale(run):
            out.append(ws.recover_run(run, store, settings))
    return out
