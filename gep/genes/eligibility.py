"""Which genes can be selected here: validation that can run in this workspace, and genes not retired.

A gene whose validation cannot run here would only ever fail (an imported Node gene's
``node scripts/validate-modules.js`` in a Python workspace), so it is left out of selection with a reason
(``not runnable here: node not found``). A command can run here when it passes the safe runner's checks,
its program resolves on the PATH the runner uses, and the files it names exist in the workspace: a
script (``python x.py``, ``node scripts/x.js``), test paths (``python -m pytest tests/foo.py``), other
path-like arguments, ``package.json`` and its script for ``npm test``/``npm run X``, the Makefile and its
target for ``make X``. Modules (``python -m mypy``) are not imported to check they exist: that would run code.
The gene itself is never changed (its commands stay as imported, so exports are lossless).

Retiring takes a gene out of selection for good, with a reason, reversibly; the gene stays in the store
and in exports. Call :func:`selectable_genes` before ``select_gene_and_capsule`` and pass its ``excluded``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Literal, Protocol

from pydantic import BaseModel, Field

from gep.core import constants
from gep.core.config import Settings
from gep.core.errors import GepError
from gep.core.learned import GeneStatus as GeneStatus
from gep.core.learned import GeneStatusChange as GeneStatusChange
from gep.core.models import Gene
from gep.core.safe_files import Unreadable, read_text_capped
from gep.validation.runner import check_command, resolve_program

__all__ = [
    "GenePool",
    "GeneRunnability",
    "GeneStatus",
    "GeneStatusChange",
    "GeneStatusError",
    "GeneStatusRepository",
    "InMemoryGeneStatuses",
    "command_problem",
    "gene_runnability",
    "restore_gene",
    "retire_gene",
    "runner_check",
    "selectable_genes",
]

NOT_RUNNABLE = "not runnable here: "
_PYTHONS = re.compile(r"^python(\d+(\.\d+)?)?$")
_GLOB = re.compile(r"[*?\[]")
_PATH_SUFFIX = re.compile(r"\.(py|pyi|js|mjs|cjs|ts|tsx|json|toml|cfg|ini|sh|ya?ml|txt|md|rst)$", re.IGNORECASE)
# options whose next argument names a file the command writes (it need not exist beforehand)
_OUTPUT_OPTIONS = frozenset({"-o", "--output", "--output-file", "--junitxml", "--junit-xml", "--basetemp",
                             "--html", "--report-log", "--log-file", "--cov-report", "--json-report-file",
                             "--cache-dir"})
_PYTEST_VALUE_SHORT = frozenset("kmpcoWrn")
_PYTEST_VALUE_LONG = frozenset({"--rootdir", "--ignore", "--ignore-glob", "--deselect", "--confcutdir", "--tb",
                                "--maxfail", "--durations", "--import-mode", "--capture", "--color", "--log-level",
                                "--override-ini", "--cov", "--cov-config", "--timeout", "--dist", *_OUTPUT_OPTIONS})
_NODE_VALUE_OPTIONS = frozenset({"-r", "--require", "--import", "--loader", "--experimental-loader", "-C",
                                 "--conditions", "--title"})
_NPM_SCRIPT_COMMANDS = {"test": "test", "t": "test", "tst": "test", "stop": "stop", "restart": "restart"}
_MAKEFILES = ("GNUmakefile", "makefile", "Makefile")
_MAKE_RULE = re.compile(r"^([^\s#:=][^:=#]*?)\s*::?(?!=)", re.MULTILINE)


class GeneStatusError(GepError):
    """A retire/restore request that cannot be done (unknown gene, no reason, not retired)."""


# ------------------------------------------------------------------ one command


def runner_check(cmd: str, settings: Settings, workspace: Path | None = None) -> str | None:
    """The safe runner's verdict on ``cmd`` (None: allowed)."""
    return check_command(cmd, settings, cwd=workspace)


def _exists(workspace: Path, arg: str) -> bool:
    return (workspace / arg).exists()


def _missing(workspace: Path, args: Sequence[str]) -> str | None:
    for a in args:
        if a and not _GLOB.search(a) and not _exists(workspace, a):
            return f"{a} not found in the workspace"
    return None


def _looks_like_path(arg: str) -> bool:
    if arg.startswith("-") or "://" in arg or arg.startswith("no:") or "=" in arg:
        return False
    return "/" in arg or _PATH_SUFFIX.search(arg) is not None


def _path_args(args: Sequence[str]) -> list[str]:
    """Path-like arguments that must exist: not option values the command writes to."""
    out: list[str] = []
    for i, a in enumerate(args):
        if i > 0 and args[i - 1] in _OUTPUT_OPTIONS:
            continue
        if _looks_like_path(a):
            out.append(a)
    return out


def _pytest_paths(args: Sequence[str]) -> list[str]:
    """pytest's positional arguments (test files, directories, ``file::test`` node ids), option values skipped."""
    out: list[str] = []
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a.startswith("--"):
            skip = "=" not in a and a in _PYTEST_VALUE_LONG
        elif a.startswith("-") and len(a) > 1:
            letters = a[1:]
            # ``-k expr`` takes the next argument; ``-kexpr`` and ``-qk expr`` as clusters do the same
            value_at = next((j for j, ch in enumerate(letters) if ch in _PYTEST_VALUE_SHORT), None)
            skip = value_at is not None and value_at == len(letters) - 1
        else:
            out.append(a.split("::", 1)[0])
    return out


def _python_target(args: Sequence[str]) -> tuple[Literal["module", "script", "none"], str, list[str]]:
    """What a python command runs: ``-m module`` or a script, and the arguments that follow it."""
    i = 0
    while i < len(args):
        a = args[i]
        if a == "-m" or (a.startswith("-") and not a.startswith("--") and a[1:].endswith("m")):
            return ("module", args[i + 1], list(args[i + 2:])) if i + 1 < len(args) else ("none", "", [])
        if a.startswith("-m") and len(a) > 2:
            return "module", a[2:], list(args[i + 1:])
        if a == "-" or not a.startswith("-"):
            return ("none", "", []) if a == "-" else ("script", a, list(args[i + 1:]))
        if a in ("-W", "-X", "--check-hash-based-pycs"):
            i += 1
        i += 1
    return "none", "", []


def _python_problem(workspace: Path, args: Sequence[str]) -> str | None:
    kind, target, rest = _python_target(args)
    if kind == "script":
        return _missing(workspace, [target])
    if kind == "module":
        return _missing(workspace, _pytest_paths(rest) if target == "pytest" else _path_args(rest))
    return None


def _node_problem(workspace: Path, args: Sequence[str]) -> str | None:
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a.startswith("-"):
            skip = a in _NODE_VALUE_OPTIONS
            continue
        # node resolves ``scripts/x`` to scripts/x.js, .mjs, .cjs or a folder's index.js
        candidates = [a, a + ".js", a + ".mjs", a + ".cjs", os.path.join(a, "index.js")]
        return None if any(_exists(workspace, c) for c in candidates) else f"{a} not found in the workspace"
    return None


def _npm_problem(workspace: Path, args: Sequence[str]) -> str | None:
    if any(a == "--prefix" or a.startswith("--prefix=") for a in args):
        return None  # runs in another folder: not followed
    positional = [a for a in args if not a.startswith("-")]
    if not positional or positional[0] in ("exec", "x"):
        return None
    pkg = workspace / "package.json"
    if not pkg.is_file():
        return "package.json not found in the workspace"
    sub = positional[0]
    script = _NPM_SCRIPT_COMMANDS.get(sub)
    if sub in ("run", "run-script", "rum", "urn"):
        script = positional[1] if len(positional) > 1 else None
    if script is None:
        return None
    try:
        scripts = json.loads(read_text_capped(pkg, constants.BUILD_FILE_MAX_BYTES)).get("scripts") or {}
    except Unreadable as exc:  # a FIFO or a device in its place would block or fill the memory
        return f"package.json not read: {exc.reason}"
    except (ValueError, UnicodeDecodeError, AttributeError, OSError):
        return "package.json is not a valid JSON object"
    return None if isinstance(scripts, dict) and script in scripts else f"package.json has no script '{script}'"


def _npx_problem(workspace: Path, args: Sequence[str], env: Mapping[str, str]) -> str | None:
    if any(a in ("-p", "--package") or a.startswith("--package=") for a in args):
        return None  # names its package explicitly: npx fetches it on purpose
    tool = next((a for a in args if not a.startswith("-")), None)
    if tool is None or "@" in tool or _exists(workspace, os.path.join("node_modules", ".bin", tool)):
        return None
    if resolve_program(tool, env) is not None:
        return None
    return f"{tool} not installed (node_modules/.bin/{tool}; npx would download it)"


def _make_problem(workspace: Path, args: Sequence[str]) -> str | None:
    folder, makefile, targets = workspace, None, []
    it = iter(args)
    for a in it:
        if a in ("-C", "--directory"):
            folder = folder / next(it, "")
        elif a.startswith("--directory="):
            folder = folder / a.split("=", 1)[1]
        elif a in ("-f", "--file", "--makefile"):
            makefile = next(it, "")
        elif a.startswith(("--file=", "--makefile=")):
            makefile = a.split("=", 1)[1]
        elif not a.startswith("-") and "=" not in a:
            targets.append(a)
    path = folder / makefile if makefile else next((folder / m for m in _MAKEFILES if (folder / m).is_file()), None)
    if path is None or not path.is_file():
        return f"{makefile or 'Makefile'} not found in the workspace"
    try:
        text = read_text_capped(path, constants.BUILD_FILE_MAX_BYTES, errors="replace")
    except Unreadable as exc:  # a FIFO, a device, too large
        return f"{path.name} not read: {exc.reason}"
    except OSError as exc:
        return f"{path.name} cannot be read ({exc.strerror})"
    if re.search(r"^\s*-?include\s", text, re.MULTILINE) or "%" in text:
        return None  # rules may come from elsewhere or from patterns: not second-guessed
    defined = {name for m in _MAKE_RULE.finditer(text) for name in m.group(1).split()}
    defined |= {name for m in re.finditer(r"^\.PHONY\s*:(.*)$", text, re.MULTILINE) for name in m.group(1).split()}
    missing = [t for t in targets if t not in defined]
    return f"make target '{missing[0]}' not defined in {path.name}" if missing else None


def _program_found(program: str, workspace: Path, env: Mapping[str, str]) -> bool:
    if os.sep in program:  # a path: relative to the workspace, where the runner starts it
        path = Path(program) if os.path.isabs(program) else workspace / program
        return path.is_file() and os.access(path, os.X_OK)
    return resolve_program(program, env) is not None


def command_problem(cmd: str, *, workspace: Path, settings: Settings, env: Mapping[str, str]) -> str | None:
    """Why ``cmd`` cannot run in ``workspace`` (None: it can). ``env`` is the environment the runner uses
    (``gep.validation.runner.command_env()``): its PATH decides which programs exist."""
    reason = runner_check(cmd, settings, workspace)
    if reason is not None:
        return f"blocked by the runner: {reason}"
    argv = shlex.split(cmd)
    program, args = argv[0], argv[1:]
    base = os.path.basename(program)
    if not _program_found(program, workspace, env):
        return f"{base} not found"
    if _PYTHONS.match(base):
        return _python_problem(workspace, args)
    if base in ("pytest", "py.test"):
        return _missing(workspace, _pytest_paths(args))
    if base in ("node", "nodejs"):
        return _node_problem(workspace, args)
    if base == "npm":
        return _npm_problem(workspace, args)
    if base == "npx":
        return _npx_problem(workspace, args, env)
    if base in ("make", "gmake"):
        return _make_problem(workspace, args)
    return _missing(workspace, _path_args(args))


# ------------------------------------------------------------------ one gene


class GeneRunnability(BaseModel):
    gene_id: str
    runnable: bool
    reason: str | None = None  # "not runnable here: node not found"
    command: str | None = None  # the first command that cannot run


def gene_runnability(gene: Gene, *, workspace: Path, settings: Settings, env: Mapping[str, str],
                     seen: dict[str, str | None] | None = None) -> GeneRunnability:
    """Whether every validation command of ``gene`` can run in ``workspace`` (a gene with none can).
    ``seen``: the answers for commands already checked (genes share commands: a pool of 2,000 imported
    genes took 1.8 s checking the same few commands over and over)."""
    seen = {} if seen is None else seen
    for cmd in gene.validation:
        if cmd not in seen:
            seen[cmd] = command_problem(cmd, workspace=workspace, settings=settings, env=env)
        problem = seen[cmd]
        if problem is not None:
            return GeneRunnability(gene_id=gene.id, runnable=False, reason=NOT_RUNNABLE + problem, command=cmd)
    return GeneRunnability(gene_id=gene.id, runnable=True)


# ------------------------------------------------------------------ retired genes


class GeneStatusRepository(Protocol):
    """Where gene statuses persist (the store implements it; :class:`InMemoryGeneStatuses` for tests)."""

    def get_gene_status(self, gene_id: str) -> GeneStatus | None: ...

    def list_gene_statuses(self) -> list[GeneStatus]: ...

    def save_gene_status(self, status: GeneStatus) -> None: ...


class InMemoryGeneStatuses:
    def __init__(self) -> None:
        self._rows: dict[str, GeneStatus] = {}

    def get_gene_status(self, gene_id: str) -> GeneStatus | None:
        row = self._rows.get(gene_id)
        return row.model_copy(deep=True) if row else None

    def list_gene_statuses(self) -> list[GeneStatus]:
        return [r.model_copy(deep=True) for r in self._rows.values()]

    def save_gene_status(self, status: GeneStatus) -> None:
        self._rows[status.gene_id] = status.model_copy(deep=True)


def retire_gene(repo: GeneStatusRepository, gene_id: str, *, reason: str, now: datetime,
                known_ids: Collection[str]) -> GeneStatus:
    """Take ``gene_id`` out of selection for good (until restored). ``known_ids``: the genes that exist."""
    reason = " ".join(reason.split())
    if gene_id not in known_ids:
        raise GeneStatusError(f"no gene with id '{gene_id}'")
    if not reason:
        raise GeneStatusError("retiring a gene needs a reason (--reason TEXT)")
    status = repo.get_gene_status(gene_id) or GeneStatus(gene_id=gene_id)
    if status.retired:
        raise GeneStatusError(f"gene '{gene_id}' is already retired ({status.reason})")
    status.history.append(GeneStatusChange(action="retire", reason=reason, at=now))
    status.retired, status.reason, status.changed_at = True, reason, now
    repo.save_gene_status(status)
    return status


def restore_gene(repo: GeneStatusRepository, gene_id: str, *, now: datetime, reason: str | None = None) -> GeneStatus:
    """Put a retired gene back into selection; the retirement stays in its history."""
    status = repo.get_gene_status(gene_id)
    if status is None or not status.retired:
        raise GeneStatusError(f"gene '{gene_id}' is not retired")
    status.history.append(GeneStatusChange(action="restore", reason=reason, at=now))
    status.retired, status.reason, status.changed_at = False, None, now
    repo.save_gene_status(status)
    return status


# ------------------------------------------------------------------ the pool selection draws from


class GenePool(BaseModel):
    genes: list[Gene]  # selectable, in the given order
    excluded: dict[str, str] = Field(default_factory=dict)  # gene id -> why it is not selectable
    runnability: dict[str, GeneRunnability] = Field(default_factory=dict)


def selectable_genes(genes: Sequence[Gene], *, statuses: Sequence[GeneStatus], workspace: Path,
                     settings: Settings, env: Mapping[str, str]) -> GenePool:
    """The genes selection may draw from here: not retired, validation runnable in ``workspace``."""
    retired = {s.gene_id: s for s in statuses if s.retired}
    pool: list[Gene] = []
    excluded: dict[str, str] = {}
    checks: dict[str, GeneRunnability] = {}
    seen: dict[str, str | None] = {}
    for g in genes:
        checks[g.id] = r = gene_runnability(g, workspace=workspace, settings=settings, env=env, seen=seen)
        if g.id in retired:
            excluded[g.id] = f"retired: {retired[g.id].reason}"
        elif not r.runnable:
            excluded[g.id] = r.reason or NOT_RUNNABLE.strip()
        else:
            pool.append(g)
    return GenePool(genes=pool, excluded=excluded, runnability=checks)
