"""Which programs a validation command may run, and with which arguments: a parser per program.

Prefix checks let glued and alternative spellings through (``python -mtimeit``, ``make "SHELL=..."``,
``npm exec -- node -e``). Here each allowed program's arguments are read the way that program reads
them, and refused when they run inline code, start a debugger, load code from outside the workspace or
write outside it. Every refusal names its rule: ``<why> [rule: <id>]``.

For every program: it is named, never a path (a path could point at anything) [program-path]; it is on
``settings.command_allowlist`` [allowlist]; every argument that is a path (absolute, ``~``, ``..``, or
through a symlink) lies inside the workspace, also inside an option value (``--junitxml=/x``,
``xml:/x``) or glued to a short option (``-f/x``) [path-outside]. Then per program:
- python: interpreter options one per word; ``-m`` only with ``settings.python_modules``, never a
  debugger or code runner; no ``-c``, no stdin; the module's own arguments as that program's.
- pytest: no ``--basetemp`` (it deletes that directory), no debugger, ``-p`` only ``no:<name>`` or a
  module in the workspace, ``-o`` only for harmless ini keys.
- ruff: the read/check subcommands only. mypy: no ``--install-types``.
- make: a Makefile in the workspace, no ``--eval``, no variable assignments, known options only.
- node: a script in the workspace, no inline code, no debugger. npm: ``npm test`` only. npx: never.
The sandbox (gep/validation/sandbox.py) is the boundary; this parser keeps the obvious doors shut and says why.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from gep.core.config import Settings

PYTHONS = re.compile(r"^python(\d+(\.\d+)?)?$")
ENV_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*=")
_VALUE_SPLIT = re.compile(r"[=:,]")
# python -m targets refused even when listed: they run their arguments as code or start a debugger
DEBUGGERS = frozenset("pdb ipdb pudb bdb".split())
CODE_RUNNERS = frozenset("timeit code codeop runpy cProfile profile trace idlelib IPython".split())


class Refused(Exception):
    def __init__(self, rule: str, why: str):
        super().__init__(f"{why} [rule: {rule}]")


@dataclass(frozen=True)
class _Ctx:
    settings: Settings
    work_tree: Path | None  # where the command runs (the clone, or the workspace), resolved; None: lexically


def check_argv(argv: Sequence[str], settings: Settings, work_tree: Path | None = None) -> str | None:
    """None when ``argv`` may run in ``work_tree``; otherwise why not, naming the rule."""
    try:
        _check(list(argv), _Ctx(settings, work_tree.resolve() if work_tree else None))
    except Refused as exc:
        return str(exc)
    return None


def _check(argv: list[str], ctx: _Ctx) -> None:
    if not argv:
        raise Refused("empty", "empty command")
    program, args = argv[0], argv[1:]
    if ENV_ASSIGN.match(program):
        raise Refused("env-assignment", "environment assignments before the program are not allowed")
    if "/" in program or "\\" in program:
        raise Refused("program-path", f"'{program}': name the program, not a path (it is looked up on PATH)")
    if program not in ctx.settings.command_allowlist:
        raise Refused("allowlist", f"program '{program}' is not on the allowlist "
                                   f"({', '.join(ctx.settings.command_allowlist)})")
    _rules_for(program)(args, ctx)  # the program's own rules first: their names say more
    for arg in args:
        _check_paths(arg, ctx)


def _rules_for(program: str) -> Callable[[list[str], _Ctx], None]:
    if PYTHONS.match(program):
        return _python
    return _PROGRAM_RULES.get(program, _no_more_rules)


def _no_more_rules(args: list[str], ctx: _Ctx) -> None:
    return None


# ------------------------------------------------------------------ paths


def _pieces(arg: str) -> list[str]:
    """The parts of an argument that may name a file: the word, an option's value and its ``:``/``,`` parts."""
    if arg.startswith("--"):
        value = arg.split("=", 1)[1] if "=" in arg else ""
    elif arg.startswith("-") and len(arg) > 2:
        value = arg[2:]  # a value glued to a short option (-f/x, -I../inc)
    elif arg.startswith("-"):
        value = ""
    else:
        value = arg
    return [p for p in [value, *_VALUE_SPLIT.split(value)] if p] if value else []


def inside(piece: str, ctx: _Ctx) -> bool:
    """Whether a path-like ``piece`` stays inside the workspace (lexically when it is unknown)."""
    if piece.startswith("~"):
        return False
    if ctx.work_tree is None:
        norm = os.path.normpath(piece)
        return not (piece.startswith("/") or norm == ".." or norm.startswith("../"))
    target = (ctx.work_tree / piece).resolve()
    return target == ctx.work_tree or ctx.work_tree in target.parents


def _check_paths(arg: str, ctx: _Ctx) -> None:
    for piece in _pieces(arg):
        suspicious = piece.startswith(("/", "~", "\\")) or ".." in PurePosixPath(piece).parts
        if (suspicious or ctx.work_tree is not None) and not inside(piece, ctx):
            raise Refused("path-outside", f"'{piece}' (in '{arg}') is outside the workspace")


def _value(args: list[str], i: int, flag: str) -> tuple[str, int]:
    """The value of option ``flag`` at ``args[i]`` (glued, after ``=``, or the next word) and the next index."""
    a = args[i]
    if a.startswith("--") and "=" in a:
        return a.split("=", 1)[1], i + 1
    if not a.startswith("--") and len(a) > len(flag):
        return a[len(flag):], i + 1
    if i + 1 >= len(args):
        raise Refused("missing-value", f"{flag} needs a value")
    return args[i + 1], i + 2


def _long_name(arg: str, known: Sequence[str], rule: str, program: str) -> str:
    """The long option ``arg`` names, abbreviations resolved as getopt/argparse do (unknown: refused)."""
    name = arg.split("=", 1)[0]
    if name in known:
        return name
    matches = [k for k in known if k.startswith(name)]
    if len(matches) == 1:
        return matches[0]
    raise Refused(rule, f"{program} option '{name}' is not one this engine knows to be safe")


def _denied_prefix(name: str, denied: Sequence[str]) -> str | None:
    """A denied long option ``name`` spells or abbreviates (argparse accepts unique prefixes)."""
    base = name.split("=", 1)[0]
    return next((d for d in denied if base == d or (len(base) >= 5 and d.startswith(base))), None)


# ------------------------------------------------------------------ python

_PY_FLAGS = frozenset("-b -bb -B -E -I -O -OO -P -q -R -s -S -u -v -V --version -h --help".split())


def _python(args: list[str], ctx: _Ctx) -> None:
    i = 0
    while i < len(args):
        a = args[i]
        if a == "-m":
            if i + 1 >= len(args):
                raise Refused("python-module", "python -m needs a module")
            return _python_module(args[i + 1], args[i + 2:], ctx)
        if a in _PY_FLAGS:
            i += 1
        elif a in ("-W", "-X"):
            i += 2
        elif a.startswith(("-W", "-X")):
            i += 1
        elif a.startswith("-") and not a.startswith("--") and "c" in a[1:]:
            raise Refused("python-inline", f"python {a} runs inline code")
        elif a.startswith("-m") or (a.startswith("-") and not a.startswith("--") and a.endswith("m")):
            raise Refused("python-glued", f"python {a}: write -m and the module as separate words (python -m <module>)")
        elif a == "-":
            raise Refused("python-stdin", "python - reads its program from stdin")
        elif a == "--":
            return _python_script(args[i + 1:], ctx)
        elif a.startswith("-"):
            raise Refused("python-option", f"python option '{a}' is not allowed (write interpreter options "
                                           "one per word, from: " + " ".join(sorted(_PY_FLAGS)) + " -W -X)")
        else:
            return _python_script(args[i:], ctx)
    if not any(a in ("-V", "--version", "-h", "--help") for a in args):
        raise Refused("python-stdin", "python without a script or -m reads its program from stdin")


def _python_script(args: list[str], ctx: _Ctx) -> None:
    if not args:
        raise Refused("python-stdin", "python without a script reads its program from stdin")
    if not inside(args[0], ctx):
        raise Refused("path-outside", f"script '{args[0]}' is outside the workspace")


def _python_module(module: str, rest: list[str], ctx: _Ctx) -> None:
    top = module.split(".", 1)[0]
    if top in DEBUGGERS:
        raise Refused("python-debugger", f"python -m {module} starts a debugger")
    if top in CODE_RUNNERS:
        raise Refused("python-code-runner", f"python -m {module} runs its arguments as code")
    if module not in ctx.settings.python_modules:
        raise Refused("python-module", f"python -m {module} is not allowed (modules: "
                                       f"{', '.join(ctx.settings.python_modules)}; setting python_modules)")
    rules = _PROGRAM_RULES.get(module)
    if rules is not None:
        rules(rest, ctx)


# ------------------------------------------------------------------ pytest, ruff, mypy

_PYTEST_DENIED = {"--basetemp": ("pytest-basetemp", "deletes and recreates that directory"),
                  "--pdb": ("pytest-debugger", "starts a debugger"), "--pdbcls": ("pytest-debugger", "loads a debugger"),
                  "--trace": ("pytest-debugger", "starts a debugger")}
_PYTEST_VALUE_LETTERS = "ckmoprWn"
# ini keys -o may set: none of them loads code or names a file (addopts, cache_dir, plugins ... would)
SAFE_INI = frozenset("""console_output_style log_cli log_cli_level log_level xfail_strict junit_family junit_logging
    junit_suite_name filterwarnings asyncio_mode asyncio_default_fixture_loop_scope empty_parameter_set_mark
    faulthandler_timeout timeout markers verbosity_assertions verbosity_test_cases""".split())


def _pytest(args: list[str], ctx: _Ctx) -> None:
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            return
        if a.startswith("--"):
            denied = _denied_prefix(a, list(_PYTEST_DENIED))
            if denied:
                rule, why = _PYTEST_DENIED[denied]
                raise Refused(rule, f"pytest {denied} {why}")
            if _denied_prefix(a, ["--override-ini"]):
                value, i = _value(args, i, a.split("=", 1)[0])
                _pytest_ini(value)
                continue
            i += 1
        elif a.startswith("-") and len(a) > 1:
            i = _pytest_short(args, i, ctx)
        else:
            i += 1


def _pytest_short(args: list[str], i: int, ctx: _Ctx) -> int:
    """A short option cluster (``-qx``, ``-pno:x``, ``-o key=v``): argparse reads letters until one takes a value."""
    a = args[i]
    for pos, letter in enumerate(a[1:], 1):
        if letter not in _PYTEST_VALUE_LETTERS:
            continue
        value, nxt = (a[pos + 1:], i + 1) if pos + 1 < len(a) else _value(args, i, a)
        if letter == "p":
            _pytest_plugin(value, ctx)
        elif letter == "o":
            _pytest_ini(value)
        elif letter == "c" and not inside(value, ctx):
            raise Refused("path-outside", f"pytest config '{value}' is outside the workspace")
        return nxt
    return i + 1


def _pytest_plugin(name: str, ctx: _Ctx) -> None:
    if name.startswith("no:"):
        return
    rel = name.replace(".", "/")
    if ctx.work_tree is not None and any((ctx.work_tree / p).is_file() for p in (f"{rel}.py", f"{rel}/__init__.py")):
        return
    raise Refused("pytest-plugin", f"pytest -p {name} loads a plugin from outside the workspace "
                                   "(only -p no:<name> or a module of the workspace)")


def _pytest_ini(value: str) -> None:
    key = value.split("=", 1)[0].strip()
    if key not in SAFE_INI:
        raise Refused("pytest-ini-override", f"pytest -o {key}=... is not allowed (it could set addopts, "
                                             f"cache_dir or plugins; allowed keys: {', '.join(sorted(SAFE_INI))})")


_RUFF_SUBCOMMANDS = frozenset("check format version rule linter config help".split())


def _ruff(args: list[str], ctx: _Ctx) -> None:
    words = [a for k, a in enumerate(args) if not a.startswith("-") and (k == 0 or args[k - 1] != "--config")]
    if not words:
        if any(a in ("--version", "-V", "--help", "-h") for a in args):
            return
        raise Refused("ruff-subcommand", "ruff needs a subcommand (check or format)")
    if words[0] not in _RUFF_SUBCOMMANDS:
        raise Refused("ruff-subcommand", f"ruff {words[0]} is not allowed (subcommands: "
                                         f"{', '.join(sorted(_RUFF_SUBCOMMANDS))})")


def _mypy(args: list[str], ctx: _Ctx) -> None:
    for a in args:
        if a.startswith("--") and _denied_prefix(a, ["--install-types"]):
            raise Refused("mypy-install-types", "mypy --install-types runs pip")


# ------------------------------------------------------------------ make

_MAKE_LONG = """--always-make --directory --debug --environment-overrides --eval --file --makefile --help
    --ignore-errors --include-dir --jobs --keep-going --load-average --check-symlink-times --just-print --dry-run
    --recon --old-file --assume-old --output-sync --print-data-base --question --no-builtin-rules
    --no-builtin-variables --silent --quiet --no-silent --stop --no-keep-going --touch --trace --version
    --print-directory --no-print-directory --what-if --new-file --assume-new --warn-undefined-variables
    --shuffle""".split()
_MAKE_LONG_VALUE = {"--directory": "C", "--file": "f", "--makefile": "f", "--include-dir": "I", "--old-file": "o",
                    "--assume-old": "o", "--what-if": "W", "--new-file": "W", "--assume-new": "W"}
_MAKE_FLAGS = set("bBdeikLnpqrRsStvw")
_MAKE_VALUE = set("CfIoW")  # take a value (glued or the next word)
_MAKE_OPTIONAL = set("jlO")  # take a glued value (or, for -j, a number as the next word)
MAKEFILES = ("GNUmakefile", "makefile", "Makefile")


def _make(args: list[str], ctx: _Ctx) -> None:
    files: list[str] = []
    directory = "."
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            i += 1
            continue
        if a.startswith("--"):
            name = _long_name(a, _MAKE_LONG, "make-option", "make")
            if name == "--eval":
                raise Refused("make-eval", "make --eval runs inline makefile code")
            letter = _MAKE_LONG_VALUE.get(name)
            value, i = _value(args, i, a.split("=", 1)[0]) if letter else ("", i + 1)
        elif a.startswith("-") and len(a) > 1:
            letter, value, i = _make_short(args, i)
        else:
            if "=" in a:
                raise Refused("make-variable", f"make {a.split('=', 1)[0]}=...: variable assignments override "
                                               "the Makefile (SHELL= runs any program) and are not allowed")
            letter, value, i = "", "", i + 1
        if letter == "f":
            files.append(value)
        elif letter == "C":
            directory = os.path.join(directory, value)
    _make_has_makefile(files, directory, ctx)


def _make_short(args: list[str], i: int) -> tuple[str, str, int]:
    a = args[i]
    for pos, letter in enumerate(a[1:], 1):
        if letter == "E":
            raise Refused("make-eval", "make -E (--eval) runs inline makefile code")
        if letter in _MAKE_VALUE:
            value, nxt = (a[pos + 1:], i + 1) if pos + 1 < len(a) else _value(args, i, a)
            return letter, value, nxt
        if letter in _MAKE_OPTIONAL:
            if pos + 1 == len(a) and letter == "j" and i + 1 < len(args) and args[i + 1].isdigit():
                return letter, args[i + 1], i + 2
            return letter, a[pos + 1:], i + 1
        if letter not in _MAKE_FLAGS:
            raise Refused("make-option", f"make option -{letter} is not one this engine knows to be safe")
    return "", "", i + 1


def _make_has_makefile(files: list[str], directory: str, ctx: _Ctx) -> None:
    for f in files:
        if not inside(os.path.join(directory, f), ctx):
            raise Refused("make-file-outside", f"make -f {f}: the makefile is outside the workspace")
    if ctx.work_tree is None or files:
        return
    if not any((ctx.work_tree / directory / name).is_file() for name in MAKEFILES):
        raise Refused("make-no-makefile", "make needs a Makefile in the workspace")
    for name in MAKEFILES:
        p = ctx.work_tree / directory / name
        if p.is_file() and not inside(os.path.join(directory, name), ctx):
            raise Refused("make-file-outside", f"{name} links outside the workspace")


# ------------------------------------------------------------------ node, npm, npx

_NODE_INLINE_LONG = ("--eval", "--print", "--input-type")
_NODE_DEBUG_LONG = ("--inspect", "--inspect-brk", "--inspect-wait", "--inspect-port", "--debug", "--debug-brk")


def _node(args: list[str], ctx: _Ctx) -> None:
    for a in args:
        if "data:" in a:  # --import/--loader/-r data:text/javascript,<code>
            raise Refused("node-inline", "node data: URLs run inline code")
        name = a.split("=", 1)[0]
        if name in _NODE_INLINE_LONG:
            raise Refused("node-inline", f"node {name} runs inline code")
        if name.startswith(_NODE_DEBUG_LONG):
            raise Refused("node-debugger", f"node {name} starts a debugger")
        if name == "--run":
            raise Refused("node-run", "node --run runs any package.json script")
        if a.startswith("-") and not a.startswith("--") and ("e" in a[1:] or "p" in a[1:] or "i" in a[1:]):
            raise Refused("node-inline", f"node {a} runs inline code or a REPL")
        if a == "-":
            raise Refused("node-stdin", "node - reads its program from stdin")
        if not a.startswith("-"):
            if a == "inspect":
                raise Refused("node-debugger", "node inspect starts a debugger")
            if not inside(a, ctx):
                raise Refused("path-outside", f"script '{a}' is outside the workspace")
            return
    if not any(a in ("--test", "--version", "-v", "--help", "-h") for a in args):
        raise Refused("node-stdin", "node without a script reads its program from stdin")


def _npm(args: list[str], ctx: _Ctx) -> None:
    words = [a for a in args if not a.startswith("-")]
    if not words and any(a in ("--version", "-v") for a in args):
        return
    if not words or words[0] not in ("test", "t", "tst"):
        shown = words[0] if words else "(nothing)"
        raise Refused("npm-subcommand", f"npm {shown} is not allowed: only npm test "
                                        "(npm run/exec run any script or package)")
    for a in args:
        name = a.split("=", 1)[0]
        if name in ("--script-shell", "--node-options", "--call", "-c"):
            raise Refused("npm-option", f"npm {name} runs a program of its own choosing")


def _npx(args: list[str], ctx: _Ctx) -> None:
    raise Refused("npx-exec", "npx (npm exec) runs any package's program, e.g. npx node -e <code>")


def _deno_bun(args: list[str], ctx: _Ctx) -> None:
    first = args[0] if args else ""
    if first in ("eval", "x", "exec", "repl", "") or first.split("=", 1)[0] in ("-e", "--eval", "-p", "--print"):
        raise Refused("node-inline", f"{first or 'no script'}: runs inline code or a REPL")


_PROGRAM_RULES: dict[str, Callable[[list[str], _Ctx], None]] = {
    "pytest": _pytest, "py.test": _pytest, "ruff": _ruff, "mypy": _mypy, "make": _make, "gmake": _make,
    "node": _node, "nodejs": _node, "npm": _npm, "npx": _npx, "deno": _deno_bun, "bun": _deno_bun,
}
