"""Confinement of the commands a cycle runs: validation, the canary and the model's ``run_validation``.

Those commands execute code the model or an agent wrote (pytest imports a ``conftest.py``), so the
allowlist is no boundary by itself. Under bubblewrap (``bwrap``) each command gets:

- a root that shows only the system's folders (``SYSTEM_DIRS``: ``/usr``, ``/bin``, ``/lib*``, ``/etc``, ``/sys``,
  and the package stores ``/nix/store`` and ``/gnu/store``, read-only), the tree under check (writable:
  in fact its throw-away copy, gep/validation/scratch.py, bound where the tree is), the tree's git metadata and the
  environments the command runs from (read-only). Of folders that hold both tools and people's data
  (``/opt``, ``/srv``, ``/snap``, ``/mnt``, ``/home``, ``/var`` ...) only those environments are shown: the
  tool root behind each PATH folder (``/opt/python/bin`` -> ``/opt/python``; never a top-level folder nor a
  git repository), the program's, the virtualenv and its base Python, and the files ``/usr/local/bin`` links
  to (or their tool roots). In the home a tool folder brings only what it needs, never its dot-folder whole
  (``~/.cargo/bin``: not ``~/.cargo/credentials.toml``), and no folder inside a git repository other than the
  workspace is shown (but a virtualenv). The user's home is an empty tmpfs; the workspace's ignored files,
  other repositories and the engine's state are not there at all, wherever they live;
- a private ``/tmp`` (a size-capped tmpfs) and an empty ``/run`` (no host service sockets);
- no network, a new PID namespace (its ``/proc`` shows its own processes only, never the engine's
  environment), new IPC/UTS/cgroup namespaces, no capabilities, its own session;
- an environment of the variables a check needs (``command_environment``: scrubbed, then a name allowlist);
- limits (``Limits``): memory and processes through a writable cgroup v1 controller, else RLIMIT_AS and
  nothing for processes (RLIMIT_NPROC counts every process of the user, and never binds root); time and
  output are enforced by the runner (timeout + process-group kill, byte cap).

Bind order matters: mounts are applied parents first, so the tree lands inside the home's tmpfs when it
lives there, and a read-only ``<tree>/.git`` lands on top of the writable tree.

Policy (``validation_refusal``): setting ``sandbox`` is "auto" (bwrap when installed), "bwrap" (required)
or "none" (the user's explicit choice). Without bwrap, a change made by a model or an agent is not
validated unless the user chose "none"; a person's change may run unconfined.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from gep.core.config import GEP_DIR, Settings
from gep.core.sanitize import scrub_env

SandboxKind = Literal["bwrap", "none"]
ChangeOrigin = Literal["model", "agent", "person"]

TMP_SIZE_BYTES = 512 * 1024 * 1024  # the private /tmp; its pages count against the memory cgroup too
SANDBOX_TMP = "/tmp"
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
    # the names first: scrubbing checks every value against the secret rules (~0.1 ms a variable)
    return scrub_env({k: v for k, v in env.items() if k in PASSED_ENV or k.startswith("LC_") or k in wanted})


def _under(path: Path, root: str) -> bool:
    """Whether ``path`` is ``root`` or lies in it (as ``Path(root) in path.parents``, on the normalised strings:
    a validation asks this thousands of times)."""
    p, r = str(path), str(Path(root))
    if not (p.startswith("/") and r.startswith("/")) or p.startswith("//") or r.startswith("//"):
        return path == Path(root) or Path(root) in path.parents  # relative, or POSIX's "//": pathlib's rules
    return p == r or p.startswith(r if r.endswith("/") else r + "/")


def _prefix(exe: Path) -> Path:
    """What to bind for an executable: its environment (``venv/``) when it lives in a ``bin/`` folder."""
    return exe.parent.parent if exe.parent.name == "bin" else exe.parent


# Dot-folders of a home that hold credentials or a person's settings and data, never tools to bind whole.
_HOME_PRIVATE = {".ssh", ".aws", ".gnupg", ".config", ".cache", ".docker", ".kube", ".azure", ".gcloud",
                 ".password-store", ".mozilla", ".thunderbird", ".local", ".git", ".gep"}
# What in a home holds credentials: never shown, whatever names it (PATH, PYTHONPATH, a /usr/local/bin link).
_HOME_CREDENTIALS = {".ssh", ".aws", ".gnupg", ".docker", ".kube", ".azure", ".gcloud", ".password-store", ".netrc",
                     ".git-credentials", ".pgpass", ".npmrc", ".pypirc", ".gem/credentials", ".cargo/credentials",
                     ".cargo/credentials.toml", ".pulumi/credentials.json", ".fly/config.yml"}
# What a tool whose PATH folder is ``~/<dot>/bin`` needs besides it, as paths in the home: its install folders,
# never its dot-folder whole (``~/.cargo/credentials.toml``, ``~/.gem/credentials``, ``~/.pulumi/credentials.json``,
# ``~/.fly/config.yml`` sit beside them). rustup's proxies in ``~/.cargo/bin`` run toolchains in ``~/.rustup``.
_HOME_TOOL_PARTS = {
    ".cargo": (".cargo/registry", ".cargo/git", ".rustup/toolchains", ".rustup/settings.toml",
               ".rustup/update-hashes"),
    ".gem": (".gem/ruby", ".gem/specs"),
    ".pulumi": (".pulumi/plugins",),
    ".volta": (".volta/tools",),
    ".bun": (".bun/install/global",),
}
# Folders of a version manager's root (beside its ``shims``): its shims exec them.
_MANAGER_PARTS = ("libexec", "versions", "plugins", "installs", "lib", "bin", "shims", "share", "version",
                  ".tool-versions")


def _manager_parts(root: Path) -> list[Path]:
    """What a version manager's shims exec (``~/.pyenv/libexec``, ``versions`` ...), never its root whole;
    nothing when ``root`` has none of a manager's folders (``~/src/dotfiles/shims``)."""
    if not any((root / n).is_dir() for n in ("libexec", "versions", "installs")):
        return []
    return [root / n for n in _MANAGER_PARTS if (root / n).exists()]


def _home_tools(found: Sequence[Path], home: Path) -> list[Path]:
    """What the PATH folders found in the home run from (its tmpfs hides the rest), never a whole dot-folder.

    A PATH folder is shown itself; a ``bin`` deeper in a dot-folder brings its tool root
    (``~/.nvm/versions/node/v20/bin`` -> ``.../v20``); one right in a dot-folder brings the install folders
    ``_HOME_TOOL_PARTS`` names; a version manager's ``shims`` the folders of its root they exec
    (``~/.pyenv/libexec``, ``versions``; asdf, rbenv, nodenv alike). Python's user site-packages
    (``pip install --user``) is code the command runs from too."""
    out: list[Path] = []
    for p in found:
        if home not in p.parents:
            continue
        top = home / p.relative_to(home).parts[0]
        if top.name in _HOME_PRIVATE:
            continue
        if p.name == "shims" and p.parent != home:
            out += _manager_parts(p.parent)
        elif top.name.startswith(".") and p.parent == top:
            out += [home / part for part in _HOME_TOOL_PARTS.get(top.name, ())]
        elif top.name.startswith(".") and p.name in ("bin", "sbin"):
            out.append(p.parent)
    out += sorted((home / ".local" / "lib").glob("python*/site-packages"))
    return out


def _repository_of(p: Path, stop: Sequence[Path]) -> Path | None:
    """The git repository ``p`` lies in (``p`` itself or a parent holding ``.git``), or None; the search ends at
    the folders of ``stop`` (the workspace), which are no other repository."""
    for d in (p, *p.parents):
        if d in stop:
            return None
        if len(d.parts) > 1 and os.path.lexists(d / ".git"):
            return d
    return None


def _in_virtualenv(p: Path) -> bool:
    """Whether ``p`` is a virtualenv or lies in one (``pyvenv.cfg``): an environment, shown even in a repository."""
    return any((d / "pyvenv.cfg").is_file() for d in (p, *list(p.parents)[:3]))


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
    env_dirs: list[str] = []  # environment folders (ignored) the throw-away copy links to, read-only
    scratch: Path | None = None  # the throw-away copy of ``tree`` the commands really run in (gep/validation/scratch.py)
    # the untracked files the copy holds (prompt mode: those the change would commit); None: all git does not ignore
    untracked: list[str] | None = None

    @classmethod
    def resolve(cls, tree: Path, settings: Settings, *, origin: ChangeOrigin | None = None,
                state_dir: Path | None = None) -> Sandbox:
        """The sandbox ``settings`` ask for on this machine; ``origin`` applies ``validation_refusal``."""
        refusal = validation_refusal(origin, settings)  # sandbox = "bwrap" without bwrap: refused for everyone
        kind: SandboxKind = "bwrap" if settings.sandbox != "none" and find_bwrap() is not None else "none"
        tree = tree.resolve()
        return cls(kind=kind, tree=tree, state_dir=state_dir.resolve() if state_dir else find_state_dir(tree),
                   refusal=refusal, env_dirs=list(settings.env_dirs))

    def host_cwd(self, cwd: Path) -> Path:
        """Where a command started in ``cwd`` really runs: in the throw-away copy when there is one."""
        if self.scratch is None:
            return cwd
        try:
            return self.scratch / cwd.resolve().relative_to(self.tree)
        except ValueError:
            return cwd

    def wrap(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str]) -> list[str]:
        """``argv`` (its program an absolute path) as a bwrap command line; ``argv`` itself when kind is none.

        The root is empty but for the system's folders (read-only): the user's home is an empty tmpfs, and
        of the rest only the tree under check (its throw-away copy, bound where the tree is), its git
        metadata and the environments the command runs from are bound back."""
        if self.kind == "none":
            return list(argv)
        bwrap = find_bwrap()
        if bwrap is None:
            raise SandboxUnavailable("bubblewrap (bwrap) is not installed")
        head = [bwrap, "--dev", "/dev", "--proc", "/proc", "--size", str(TMP_SIZE_BYTES), "--tmpfs", SANDBOX_TMP,
                "--tmpfs", "/run", *_system_binds()]
        # (depth, rank, args): parents first, and at one depth the home's tmpfs before what is bound into it
        mounts: list[tuple[int, int, list[str]]] = []
        for masked in self._masked(env):
            mounts.append((len(masked.parts), 0, ["--tmpfs", str(masked)]))
        src = self.scratch or self.tree
        mounts.append((len(self.tree.parts), 1, ["--bind", str(src), str(self.tree)]))
        for p in dict.fromkeys([*_git_metadata(self.tree), *self._needs(argv[0], env)]):
            if p != self.tree and p.exists():
                # -try: a tool removed between now and bwrap's start (an uninstall, another test's helper
                # linked from /usr/local/bin) is left out, instead of failing the command with "Can't find"
                mounts.append((len(p.parts), 2, ["--ro-bind-try", str(p), str(p)]))
        mounts.sort(key=lambda m: (m[0], m[1]))
        tail = ["--remount-ro", "/", "--unshare-all", "--cap-drop", "ALL", "--die-with-parent", "--new-session",
                "--chdir", str(cwd.resolve()), "--", *argv]
        return [*head, *(a for *_, args in mounts for a in args), *tail]

    def _masked(self, env: Mapping[str, str]) -> list[Path]:
        """The user's folders shown as an empty tmpfs: the home (as named and as resolved) always, and the
        workspace when it lies in a folder the root shows (``/opt/app``): its ignored files and the engine's
        state are then hidden too, whatever the paths (issue 32). Never ``/`` nor a system folder itself."""
        found: list[Path] = []
        home = env.get("HOME")
        if home and Path(home).is_absolute():
            found += [Path(home), Path(home).resolve()]
        if self.state_dir is not None and _system(self.state_dir.parent):
            found.append(self.state_dir.parent)
        return [p for p in dict.fromkeys(found) if not any(_under(Path(d), str(p)) for d in ("/", *SYSTEM_DIRS))]

    def _needs(self, program: str, env: Mapping[str, str]) -> list[Path]:
        """What the command runs from, outside the system's folders: its program's environment, the PATH
        folders, the virtualenv and its base Python, PYTHONPATH/NODE_PATH, the linked environment folders.
        Never the home, the workspace or a folder holding them (that would show the user's data), never a
        folder in a git repository other than the workspace's (but a virtualenv, a version manager's parts)."""
        # the program as named (a venv's bin/python when no python is on PATH) and where its link leads
        found = [_prefix(Path(program).absolute()), _prefix(Path(program).resolve())]
        listed: list[Path] = []
        for name in ("PATH", "PYTHONPATH", "NODE_PATH"):
            listed += [Path(p).resolve() for p in env.get(name, "").split(os.pathsep) if p and Path(p).is_absolute()]
        home = Path(env["HOME"]).resolve() if env.get("HOME") and Path(env["HOME"]).is_absolute() else None
        # outside the home (whose tool roots _home_tools picks, never a private dot-folder): each bin's root
        found += listed + [r for p in listed if home is None or home not in p.parents for r in _tool_root(p)]
        linked = _linked_tools(env.get("PATH", ""))
        if env.get("VIRTUAL_ENV"):
            found.append(Path(env["VIRTUAL_ENV"]).resolve())
        engine = [p.resolve() for p in self.readonly]  # the environment folders the engine linked (its choice)
        found += linked + engine
        found += [b for p in found if (b := _venv_base(p)) is not None]
        if home is not None:
            found += _home_tools([*found[:2], *listed], home)
        trusted = {*engine, *linked, *(m for p in listed if p.name == "shims" for m in _manager_parts(p.parent))}
        return [p for p in dict.fromkeys(found) if p.exists() and self._may_show(p, env, trusted)]

    def _may_show(self, p: Path, env: Mapping[str, str], trusted: set[Path]) -> bool:
        """Whether a folder (or file) a command runs from may be bound: not in the tree, a system folder
        (unless masked: ``/opt/me/.venv``), a folder holding the home or the workspace, a dot-folder of the
        home whole, nor a folder in a repository other than the workspace's."""
        home = [Path(h) for h in (env.get("HOME"),) if h and Path(h).is_absolute()]
        work = [self.tree] + ([self.state_dir.parent] if self.state_dir is not None else [])
        if _under(p, str(self.tree)) or len(p.parts) <= 2 or any(k == p or p in k.parents for k in home + work):
            return False
        if _system(p) and not any(_under(p, str(m)) for m in self._masked(env)):
            return False
        if any(_under(p, str(h / c)) or _under(h / c, str(p)) for h in {*home, *(x.resolve() for x in home)}
               for c in _HOME_CREDENTIALS):
            return False  # a credential, or a folder holding one
        if home and p.parent in (home[0], home[0].resolve()) and p.name.startswith(".") \
                and not (p / "pyvenv.cfg").is_file():  # a virtualenv made as ~/.venv is an environment
            return False  # a dot-folder of the home whole (~/.cargo: its credentials.toml is beside bin/)
        # the home being a repository (dotfiles kept in ~) does not count: it is hidden but for what is bound
        stop = [*work, *home, *(h.resolve() for h in home)]
        return p in trusted or _in_virtualenv(p) or _repository_of(p, stop) is None


# Shown whole: the system's own folders, and the package stores (content-addressed builds, world-readable by
# design, where a tool needs its whole closure). /opt, /srv, /snap, /mnt, /home, /var ... are not: they hold
# other repositories and people's data next to tools, so only the environments a command runs from are bound.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/sys", "/nix/store",
               "/gnu/store")
_LINK_DIRS = ("/usr/local/bin", "/usr/local/sbin")  # where an administrator links tools kept in /opt
_MAX_LINKS = 2000


def _tool_root(folder: Path) -> list[Path]:
    """What to bind for a PATH folder: the tool's root for a ``bin`` folder (``/opt/python/bin`` ->
    ``/opt/python``: its ``lib/`` is there too), unless that root is a top-level folder or a repository.
    A version manager's ``shims`` bring the parts of its root they exec (pyenv, rbenv, nodenv, asdf: its
    ``libexec`` and ``versions``), even though those install as git checkouts: without them every shim
    exits 127 (pyenv's root outside the home the sandbox hides, e.g. a HOME changed for a service)."""
    root = folder.parent
    if len(root.parts) <= 2:
        return [folder]
    if folder.name == "shims":
        return [folder, *_manager_parts(root)]
    if folder.name in ("bin", "sbin") and not (root / ".git").exists():
        return [root]
    return [folder]


def _linked_tools(path: str) -> list[Path]:
    """What the links in ``/usr/local/bin`` (when on PATH) lead to outside the shown folders: the tool root
    of a program in a ``bin`` folder (``/opt/tool/bin/x`` -> ``/opt/tool``) when it is in no repository,
    else the linked file alone (a script at a repository's root shows that script, not the repository)."""
    out: list[Path] = []
    for d in _LINK_DIRS:
        if d not in path.split(os.pathsep) or not os.path.isdir(d):
            continue
        with os.scandir(d) as entries:
            for n, entry in enumerate(entries):
                if n >= _MAX_LINKS:
                    break
                if not entry.is_symlink() or _system(target := Path(entry.path).resolve()):
                    continue
                roots = _tool_root(target.parent) if target.parent.name in ("bin", "sbin") else []
                out += [r for r in roots if r != target.parent and _repository_of(r, ()) is None] or [target]
    return out


def _system(p: Path) -> bool:
    return any(_under(p, d) for d in SYSTEM_DIRS)


@lru_cache(maxsize=1)
def _system_binds() -> tuple[str, ...]:
    """The system's folders, read-only (a merged-/usr link stays a link)."""
    out: list[str] = []
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            out += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            out += ["--ro-bind", d, d]
    return tuple(out)


def _venv_base(p: Path) -> Path | None:
    """The base Python of a virtualenv ``p`` (or of the venv ``p`` is the bin folder of), from pyvenv.cfg."""
    for root in (p, p.parent):
        cfg = root / "pyvenv.cfg"
        if cfg.is_file():
            for line in cfg.read_text(encoding="utf-8", errors="replace").splitlines():
                key, _, value = line.partition("=")
                if key.strip() == "home" and value.strip():
                    return _prefix(Path(value.strip()).resolve() / "python")
    return None


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
