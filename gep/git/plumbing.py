"""Running git: one place that decides the environment, the safety options and the error message.

Every engine git command runs with hooks off (``core.hooksPath=/dev/null``: a cycle may have planted one,
and the reference-transaction hook would otherwise run on every ref update), no fsmonitor or untracked
cache (a temporary index must not talk to a daemon watching another tree), no automatic gc or maintenance
(the engine never runs gc in the user's repository), no signing prompt, and replace refs ignored
(``GIT_NO_REPLACE_OBJECTS``: a planted ``refs/replace/*`` cannot change what the engine reads).
Variables that would point git elsewhere (``GIT_DIR``, ``GIT_INDEX_FILE``, ...) are dropped from the
inherited environment; a command that needs another index or work tree says so explicitly.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gep.core import constants
from gep.core.errors import WorkspaceError

SAFE_CONFIG = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.untrackedCache=false",
    "core.safecrlf=false",
    "gc.auto=0",
    "maintenance.auto=false",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "advice.detachedHead=false",
)
# inherited variables that would redirect git to another repository, index or object store
_REDIRECTING = (
    "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR", "GIT_NAMESPACE", "GIT_PREFIX", "GIT_QUARANTINE_PATH", "GIT_REPLACE_REF_BASE",
    "GIT_SHALLOW_FILE", "GIT_CONFIG", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_LITERAL_PATHSPECS",
    "GIT_GLOB_PATHSPECS", "GIT_NOGLOB_PATHSPECS", "GIT_ICASE_PATHSPECS", "GIT_EXTERNAL_DIFF", "GIT_DIFF_OPTS",
    "GIT_TRACE", "GIT_TRACE2", "GIT_TRACE2_EVENT", "GIT_TRACE2_PERF", "GIT_OPTIONAL_LOCKS",
)
BATCH = 200  # paths per command line


def base_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _REDIRECTING and not k.startswith("GIT_CONFIG_KEY_")
           and not k.startswith("GIT_CONFIG_VALUE_")}
    env.update({"GIT_NO_REPLACE_OBJECTS": "1", "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", "GIT_PAGER": "cat"})
    if extra:
        env.update(extra)
    return env


def z(out: bytes) -> list[str]:
    """NUL-separated git output as paths (undecodable bytes kept through surrogateescape, as os does)."""
    return [os.fsdecode(p) for p in out.split(b"\0") if p]


def enc(path: str) -> bytes:
    return os.fsencode(path)


@dataclass
class Result:
    code: int
    out: bytes
    err: bytes

    @property
    def ok(self) -> bool:
        return self.code == 0

    @property
    def text(self) -> str:
        return os.fsdecode(self.out)

    def line(self) -> str:
        return self.text.strip()


@dataclass
class Git:
    """git bound to one repository; optionally another work tree and index (``GIT_WORK_TREE``,
    ``GIT_INDEX_FILE``) so the same object store can read a clone's files or build a tree aside."""

    cwd: Path
    git_dir: Path | None = None
    work_tree: Path | None = None
    index: Path | None = None
    env: dict[str, str] = field(default_factory=dict)
    where: str = ""

    def with_(self, *, work_tree: Path | None = None, index: Path | None = None,
              env: Mapping[str, str] | None = None) -> Git:
        return Git(self.cwd, self.git_dir, work_tree or self.work_tree, index or self.index,
                   {**self.env, **(env or {})}, self.where)

    def __post_init__(self) -> None:
        self.where = shown(self.where or self.cwd)

    def _env(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        env = base_env(self.env)
        if self.git_dir is not None:
            env["GIT_DIR"] = str(self.git_dir)
        if self.work_tree is not None:
            env["GIT_WORK_TREE"] = str(self.work_tree)
        if self.index is not None:
            env["GIT_INDEX_FILE"] = str(self.index)
        if extra:
            env.update(extra)
        return env

    def run(self, *args: str, input: bytes | None = None, ok: bool = False,
            env: Mapping[str, str] | None = None) -> Result:
        """Run ``git <args>``; raise a one-line WorkspaceError on failure unless ``ok``."""
        argv = ["git"]
        for item in SAFE_CONFIG:
            argv += ["-c", item]
        argv += list(args)
        try:
            proc = subprocess.run(argv, cwd=self.cwd, env=self._env(env), input=input, capture_output=True,
                                  check=False, timeout=constants.GIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:  # a hung filter, hook-like helper or network file system
            raise WorkspaceError(f"git {args[0] if args else ''} in {self.where} did not finish within "
                                 f"{constants.GIT_TIMEOUT_S} s") from None
        except OSError as exc:
            raise WorkspaceError(f"cannot run git in {self.where}: {exc.strerror}") from None
        res = Result(proc.returncode, proc.stdout, proc.stderr)
        if not ok and not res.ok:
            raise WorkspaceError(describe_failure(args, res, self.where))
        return res

    def out(self, *args: str, **kw: object) -> str:
        return self.run(*args, **kw).line()  # type: ignore[arg-type]

    def paths(self, *args: str, **kw: object) -> list[str]:
        return z(self.run(*args, **kw).out)  # type: ignore[arg-type]

    def config_values(self, keys: Sequence[str]) -> dict[str, str | None]:
        """The value ``git config --get`` gives for each of ``keys`` that is set (all scopes, includes followed),
        in one git call instead of one per key; None for a key set without a value (``[core] symlinks``, which
        a boolean reads as true)."""
        canon = {_canonical_key(k): k for k in keys}
        pattern = "^(" + "|".join(_ere_escape(c) for c in canon) + ")$"
        found: dict[str, str | None] = {}
        for item in self.run("config", "-z", "--get-regexp", pattern, ok=True).text.split("\0"):
            key, newline, value = item.partition("\n")
            if key in canon:
                found[canon[key]] = value if newline else None  # the last one wins, as with --get
        return found

    def sha(self, rev: str) -> str | None:
        """The object a revision names, or None (``rev^{commit}`` etc. work as in git)."""
        res = self.run("rev-parse", "-q", "--verify", "--end-of-options", rev, ok=True)
        return res.line() or None if res.ok else None


def _canonical_key(key: str) -> str:
    """How git names a config key in its listings: section and variable lowercased, a subsection as is."""
    section, _, rest = key.partition(".")
    sub, dot, var = rest.rpartition(".")
    return f"{section.lower()}.{sub}{dot}{var.lower()}"


def _ere_escape(text: str) -> str:
    return "".join("\\" + ch if ch in "\\.[](){}*+?|^$" else ch for ch in text)


def describe_failure(args: Sequence[str], res: Result, where: str) -> str:
    lines = [ln.strip() for ln in os.fsdecode(res.err).splitlines() if ln.strip()]
    for ln in lines:
        if "index.lock" in ln and ("exists" in ln or "File exists" in ln):
            lock = ln.split("'")[1] if ln.count("'") >= 2 else "index.lock"
            return (f"git {args[0]} failed in {where}: {lock} exists (another git command is running, or one "
                    f"was killed); if no git command is running, remove {lock}")
    useful = [ln for ln in lines if not ln.startswith("hint:")]
    detail = next((ln for ln in useful if ln.startswith(("fatal:", "error:"))), useful[0] if useful else "")
    return f"git {args[0]} failed in {where}: {detail or f'exit {res.code}'}"


def shown(path: object) -> str:
    """A path for a one-line message: as is, or with control characters escaped (a newline in a name)."""
    text = str(path)
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def shell_quote(text: str) -> str:
    """Quote for a command line a person pastes: shlex's quoting, or bash's $'...' when the text holds
    control characters (a newline inside '...' would split the line when shown)."""
    if text.isprintable():
        return shlex.quote(text)
    body = "".join(ch if ch.isprintable() and ch not in "\\'" else
                   {"\\": "\\\\", "'": "\\'"}.get(ch, repr(ch)[1:-1]) for ch in text)
    return f"$'{body}'"


def batched(paths: Sequence[str], n: int = BATCH) -> list[list[str]]:
    return [list(paths[i:i + n]) for i in range(0, len(paths), n)]


LITERAL = {"GIT_LITERAL_PATHSPECS": "1"}
NO_LOCKS = {"GIT_OPTIONAL_LOCKS": "0"}  # reading status must not rewrite the user's index
