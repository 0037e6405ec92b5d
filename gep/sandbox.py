"""Confinement of the commands a cycle runs: validation, the canary and the model's ``run_validation``.

Those commands execute code the model or an agent wrote (pytest imports a ``conftest.py``), so the
allowlist is no boundary by itself. Under bubblewrap (``bwrap``) each command gets:

- the tree under check writable; its git metadata (``<tree>/.git``) and the engine's state dir (``.gep/``,
  apart from a worktree under it that is the tree) read-only; the rest of the file system read-only, with
  the credential files of $HOME hidden;
- a private ``/tmp`` (a size-capped tmpfs) and an empty ``/run`` (no host service sockets);
- no network, a new PID namespace (its ``/proc`` shows its own processes only, never the engine's
  environment), new IPC/UTS/cgroup namespaces, no capabilities, its own session;
- an environment of the variables a check needs (``command_environment``: scrubbed, then a name allowlist);
- limits (``Limits``): memory and processes through a writable cgroup v1 controller, else RLIMIT_AS and
  nothing for processes (RLIMIT_NPROC counts every process of the user, and never binds root); time and
  output are enforced by the runner (timeout + process-group kill, byte cap).

Bind order matters: ``--tmpfs /tmp`` comes before any bind under /tmp (it would hide them), and binds are
applied parents first, so a read-only ``<tree>/.git`` lands on top of the writable tree and a writable
worktree under ``.gep/worktrees/`` on top of the read-only ``.gep/``.

Policy (``validation_refusal``): setting ``sandbox`` is "auto" (bwrap when installed), "bwrap" (required)
or "none" (the user's explicit choice). Without bwrap, a change made by a model or an agent is not
validated unless the user chose "none"; a person's change may run unconfined.
"""

from __future__ import annotations

import atexit
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from gep.config import GEP_DIR, Settings
from gep.sanitize import scrub_env

SandboxKind = Literal["bwrap", "none"]
ChangeOrigin = Literal["model", "agent", "person"]

TMP_SIZE_BYTES = 512 * 1024 * 1024  # the private /tmp; its pages count against the memory cgroup too
SANDBOX_TMP = "/tmp"
# Roots a sandbox replaces with an empty tmpfs: anything the command needs from them is bound back.
HIDDEN_ROOTS = ("/tmp", "/run")
# Under $HOME: where credentials usually live. Hidden (an empty dir, or /dev/null for a file).
CREDENTIAL_PATHS = (
    ".ssh", ".aws", ".azure", ".gnupg", ".docker", ".kube", ".netrc", ".npmrc", ".pypirc", ".pgpass",
    ".my.cnf", ".git-credentials", ".vault-token", ".terraform.d", ".prefect", ".anthropic", ".claude",
    ".config/gcloud", ".config/gh", ".config/anthropic", ".config/hub", ".local/share/keyrings",
)
# Variables a check may need; everything else (API keys, GEP_*, PREFECT_*, MAKEFLAGS ...) stays out.
PASSED_ENV = frozenset(
    """PATH HOME USER LOGNAME LANG LANGUAGE TZ TERM NO_COLOR FORCE_COLOR CI TMPDIR TEMP TMP VIRTUAL_ENV
    PYTHONPATH PYTHONHASHSEED PYTHONUTF8 PYTHONIOENCODING PYTHONWARNINGS PYTHONDEVMODE NODE_PATH NODE_ENV
    SOURCE_DATE_EPOCH""".split()
)


class SandboxUnavailable(Exception):
    """bwrap was required but cannot be used."""


def find_bwrap() -> str | None:
    """A bubblewrap that works here, or None (tests replace this to simulate a machine without it)."""
    path = shutil.which("bwrap")
    return path if path is not None and _bwrap_works(path) else None


@lru_cache(maxsize=4)
def _bwrap_works(path: str) -> bool:
    """Whether bwrap can make its namespaces here (some containers forbid them): one probe per process."""
    noop = [shutil.which("true") or sys.executable, *([] if shutil.which("true") else ["-c", ""])]
    try:
        probe = subprocess.run([path, "--ro-bind", "/", "/", "--unshare-all", "--cap-drop", "ALL", "--die-with-parent",
                                "--", *noop], capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return probe.returncode == 0


def validation_refusal(origin: ChangeOrigin | None, settings: Settings) -> str | None:
    """Why a change of this origin may not be validated on this machine, or None when it may.

    The solidify step calls it with the change's origin; ``Sandbox.resolve`` applies it to every command."""
    if settings.sandbox == "none" or find_bwrap() is not None:
        return None
    if settings.sandbox == "bwrap":
        return 'sandbox = "bwrap" but bubblewrap (bwrap) is not installed'
    if origin in ("model", "agent"):
        return (f"bubblewrap (bwrap) is not installed, and a change made by {'a model' if origin == 'model' else 'an agent'}"
                ' is not validated unconfined: install bubblewrap, or set sandbox = "none" in gep.toml to accept the risk')
    return None


def find_state_dir(tree: Path) -> Path | None:
    """The engine's state dir for ``tree``: ``<tree>/.gep``, or the ``.gep`` a worktree lies under."""
    tree = tree.resolve()
    if (tree / GEP_DIR).is_dir():
        return tree / GEP_DIR
    return next((p for p in tree.parents if p.name == GEP_DIR), None)


def command_environment(env: Mapping[str, str], extra_names: Sequence[str] = ()) -> dict[str, str]:
    """What a command sees: ``env`` without credentials (by name or value), then only the names it needs."""
    wanted = set(extra_names)
    return {k: v for k, v in scrub_env(env).items() if k in PASSED_ENV or k.startswith("LC_") or k in wanted}


def _under(path: Path, root: str) -> bool:
    return path == Path(root) or Path(root) in path.parents


def _hidden(path: Path) -> bool:
    return any(_under(path, r) for r in HIDDEN_ROOTS)


def _prefix(exe: Path) -> Path:
    """What to bind for an executable: its environment (``venv/``) when it lives in a ``bin/`` folder."""
    return exe.parent.parent if exe.parent.name == "bin" else exe.parent


def _git_metadata(tree: Path) -> list[Path]:
    """``<tree>/.git`` and, when it points elsewhere (a worktree's ``gitdir:``, alternates), those too."""
    dot_git = tree / ".git"
    if not dot_git.exists():
        return []
    out = [dot_git]
    git_dir = dot_git
    if dot_git.is_file():
        text = dot_git.read_text(encoding="utf-8", errors="replace").strip()
        if text.startswith("gitdir:"):
            git_dir = (tree / text.removeprefix("gitdir:").strip()).resolve()
            out.append(git_dir)
            common = git_dir / "commondir"
            if common.is_file():
                out.append((git_dir / common.read_text(encoding="utf-8").strip()).resolve())
    alternates = git_dir / "objects" / "info" / "alternates"
    if alternates.is_file():
        out += [Path(line).resolve() for line in alternates.read_text(encoding="utf-8").splitlines()
                if line.strip() and not line.startswith("#")]
    return [p for p in out if p.exists()]


class Sandbox(BaseModel):
    """How the commands of one validation run are confined."""

    kind: SandboxKind
    tree: Path
    state_dir: Path | None = None
    refusal: str | None = None  # set: the runner blocks every command with this reason
    readonly: list[Path] = []  # more folders to show read-only (a clone's links to the user's .venv ...)

    @classmethod
    def resolve(cls, tree: Path, settings: Settings, *, origin: ChangeOrigin | None = None,
                state_dir: Path | None = None) -> Sandbox:
        """The sandbox ``settings`` ask for on this machine; ``origin`` applies ``validation_refusal``."""
        refusal = validation_refusal(origin, settings)  # sandbox = "bwrap" without bwrap: refused for everyone
        kind: SandboxKind = "bwrap" if settings.sandbox != "none" and find_bwrap() is not None else "none"
        tree = tree.resolve()
        return cls(kind=kind, tree=tree, state_dir=state_dir.resolve() if state_dir else find_state_dir(tree),
                   refusal=refusal)

    def wrap(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str]) -> list[str]:
        """``argv`` (its program an absolute path) as a bwrap command line; ``argv`` itself when kind is none."""
        if self.kind == "none":
            return list(argv)
        bwrap = find_bwrap()
        if bwrap is None:
            raise SandboxUnavailable("bubblewrap (bwrap) is not installed")
        head = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                "--size", str(TMP_SIZE_BYTES), "--tmpfs", SANDBOX_TMP, "--tmpfs", "/run"]
        mounts: list[tuple[Path, list[str]]] = [(self.tree, ["--bind", str(self.tree), str(self.tree)])]
        readonly = [*_git_metadata(self.tree), *([self.state_dir] if self.state_dir else [])]
        readonly += [p.resolve() for p in self.readonly if _hidden(p.resolve())]  # elsewhere / is read-only already
        readonly += self._hidden_needs(argv[0], env)
        for p in readonly:
            if p.exists() and p != self.tree:
                mounts.append((p, ["--ro-bind", str(p), str(p)]))
        mounts += _credential_masks(env.get("HOME"))
        mounts.sort(key=lambda m: len(m[0].parts))  # parents first: a deeper mount lands on top
        tail = ["--unshare-all", "--cap-drop", "ALL", "--die-with-parent", "--new-session",
                "--chdir", str(cwd.resolve()), "--", *argv]
        return [*head, *(a for _, args in mounts for a in args), *tail]

    def _hidden_needs(self, program: str, env: Mapping[str, str]) -> list[Path]:
        """Executables and environments under /tmp or /run the command needs (the tmpfs would hide them)."""
        found = [_prefix(Path(program).resolve())]
        found += [_prefix(Path(p).resolve() / "x") for p in env.get("PATH", "").split(os.pathsep) if p]
        if env.get("VIRTUAL_ENV"):
            found.append(Path(env["VIRTUAL_ENV"]).resolve())
        roots = {Path(r) for r in HIDDEN_ROOTS}
        return [p for p in dict.fromkeys(found)
                if _hidden(p) and p not in roots and p.exists() and not _under(p, str(self.tree))]


_EMPTY: list[Path] = []


def _empty_file() -> Path:
    """An empty read-only file to bind over credential files (a bound /dev/null cannot be opened: nodev)."""
    if not _EMPTY or not _EMPTY[0].is_file() or _EMPTY[0].stat().st_size:
        fd, name = tempfile.mkstemp(prefix="gep-empty-")
        os.close(fd)
        os.chmod(name, 0o444)
        atexit.register(Path(name).unlink, True)
        _EMPTY[:] = [Path(name)]
    return _EMPTY[0]


def _credential_masks(home: str | None) -> list[tuple[Path, list[str]]]:
    if not home or not Path(home).is_absolute() or _hidden(Path(home)):
        return []
    out: list[tuple[Path, list[str]]] = []
    for rel in CREDENTIAL_PATHS:
        p = Path(home) / rel
        if p.is_symlink() or not p.exists():
            continue
        out.append((p, ["--tmpfs", str(p)] if p.is_dir() else ["--ro-bind", str(_empty_file()), str(p)]))
    return out


def sandbox_env(env: Mapping[str, str]) -> dict[str, str]:
    """The environment inside bwrap: temp and cache dirs in the private /tmp (the home is read-only)."""
    out = {k: v for k, v in env.items() if k not in ("TEMP", "TMP")}
    out["TMPDIR"] = SANDBOX_TMP
    out["XDG_CACHE_HOME"] = f"{SANDBOX_TMP}/.cache"
    return out


# ------------------------------------------------------------------ resource limits

_CGROUP_ROOT = Path("/sys/fs/cgroup")
_STALE_CGROUP_S = 600


def _v1_cgroup_base(controller: str) -> Path | None:
    """This process's cgroup of a v1 ``controller`` (where a child group can be made), or None."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) == 3 and controller in parts[1].split(","):
            for mount in (_CGROUP_ROOT / parts[1], _CGROUP_ROOT / controller):
                base = mount / parts[2].lstrip("/")
                if (base / "cgroup.procs").is_file():
                    return base
    return None


def _drop_stale(base: Path) -> None:
    """Empty ``gep-*`` groups a killed engine left behind (best effort)."""
    for d in base.glob("gep-*"):
        try:
            if d.stat().st_mtime < time.time() - _STALE_CGROUP_S and not (d / "cgroup.procs").read_text().strip():
                d.rmdir()
        except OSError:
            continue


def _make_cgroup(controller: str, limit_file: str, value: int) -> Path | None:
    base = _v1_cgroup_base(controller)
    if base is None:
        return None
    _drop_stale(base)
    group = base / f"gep-{uuid.uuid4().hex[:12]}"
    try:
        group.mkdir()
        (group / limit_file).write_text(str(value))
    except OSError:
        try:
            group.rmdir()
        except OSError:
            pass
        return None
    return group


class Limits:
    """Memory and process limits of one command (cgroup v1 when writable, else rlimits); ``applied`` says
    which took effect. Use as a context manager; ``preexec`` runs in the child before exec."""

    def __init__(self, settings: Settings, *, timeout_s: float):
        self.applied = [f"time {timeout_s:g}s (process group killed)", f"output {settings.max_output_bytes} bytes"]
        self.groups: list[Path] = []
        self._rlimits: list[tuple[int, int]] = []
        mem = settings.sandbox_memory_mb
        if mem:
            group = _make_cgroup("memory", "memory.limit_in_bytes", mem * 1024 * 1024)
            if group is not None:
                self.groups.append(group)
                self.applied.append(f"memory {mem} MiB (cgroup memory)")
            else:
                self._rlimits.append((resource.RLIMIT_AS, mem * 1024 * 1024))
                self.applied.append(f"memory {mem} MiB (RLIMIT_AS, address space)")
        procs = settings.sandbox_max_processes
        if procs:
            group = _make_cgroup("pids", "pids.max", procs)
            if group is not None:
                self.groups.append(group)
                self.applied.append(f"processes {procs} (cgroup pids)")
            else:
                self.applied.append("processes: not limited (no writable pids cgroup; RLIMIT_NPROC counts every "
                                    "process of the user and does not bind root)")
        self._procs_files = [str(g / "cgroup.procs") for g in self.groups]

    def __enter__(self) -> Limits:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def preexec(self) -> None:
        """In the forked child: join the groups (its descendants follow) and set the rlimits."""
        pid = str(os.getpid()).encode()
        for path in self._procs_files:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, pid)
            finally:
                os.close(fd)
        for which, value in self._rlimits:
            resource.setrlimit(which, (value, value))

    def kill_all(self) -> None:
        """SIGKILL whatever is still in the groups (a daemon that left the process group too)."""
        for group in self.groups:
            for _ in range(100):
                try:
                    pids = [int(p) for p in (group / "cgroup.procs").read_text().split()]
                except (OSError, ValueError):
                    break
                if not pids:
                    break
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
                time.sleep(0.01)

    def close(self) -> None:
        self.kill_all()
        for group in self.groups:
            for _ in range(50):
                try:
                    group.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)  # the last killed tasks are still being torn down
        self.groups = []
