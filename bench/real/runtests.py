"""Runs a task's tests by node id without pytest's start-up (a tenth of a second instead of seconds).

``python runtests.py [--pythonpath DIR] NODE_ID...`` in a task's folder: each node id is
``path/test_x.py::test_f`` (or ``--all path/test_x.py``: all of its tests), ``path/test_x.py::TestC::test_m`` (a ``unittest.TestCase`` or a plain class) or a
parametrized test (every parameter set is run). Prints ``PASSED id`` or ``FAILED id - ErrorType: message`` and
the traceback, like a nightly job's log, and exits 1 when any test fails. Tests that ask for pytest fixtures
are not supported (the tasks of bench/real/tasks.json have none).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import re
import sys
import traceback
import unittest
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any


def load(path: Path) -> ModuleType:
    """The test module, imported as its package's module when its folder is a package (relative imports)."""
    parts = [path.stem]
    folder = path.parent
    while (folder / "__init__.py").exists():
        parts.insert(0, folder.name)
        folder = folder.parent
    sys.path.insert(0, str(folder.resolve()))
    return importlib.import_module(".".join(parts))


class TestCaseFailed(AssertionError):
    """A unittest.TestCase's failure or error, with the error line its traceback ends in."""


def _error_line(tb: str) -> str:
    """The traceback's exception line (``KeyError: 'x'``), not the diff lines an assertEqual adds after it."""
    lines = tb.strip().splitlines()
    hits = [line for line in lines if re.match(r"^[\w.]+(Error|Exception|Exit|Failed)\b", line)]
    return hits[-1] if hits else lines[-1]


def _frames(exc: BaseException) -> str:
    """The traceback without this runner's frames, paths relative to the task's folder."""
    text = "".join(traceback.format_exception(exc))
    text = text.replace(str(Path.cwd()) + "/", "")
    keep, skip = [], False
    for line in text.splitlines():
        if line.startswith("  File "):
            skip = "runtests.py" in line
        if not skip:
            keep.append(line)
    return "\n".join(keep)


def _param_sets(fn: Callable[..., Any]) -> list[dict[str, Any]]:
    """The keyword sets of pytest.mark.parametrize marks (the cross product when stacked)."""
    sets: list[dict[str, Any]] = [{}]
    for mark in getattr(fn, "pytestmark", []):
        if mark.name != "parametrize":
            continue
        names, values = mark.args[0], mark.args[1]
        names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
        rows = []
        for v in values:
            v = getattr(v, "values", v)  # pytest.param(...)
            rows.append(dict(zip(names, v if len(names) > 1 else [v], strict=False)))
        sets = [{**s, **r} for s in sets for r in rows]
    return sets


def run_node(module: ModuleType, names: list[str]) -> None:
    """Runs one node; raises what the test raised."""
    obj: Any = module
    for n in names[:-1]:
        obj = getattr(obj, n)
    if isinstance(obj, type) and issubclass(obj, unittest.TestCase):
        result = unittest.TestResult()
        obj(names[-1]).run(result)
        for _, tb in result.errors + result.failures:
            raise TestCaseFailed(_error_line(tb) + "\n" + tb)
        return
    if isinstance(obj, type):
        obj = obj()
        if hasattr(obj, "setup_method"):
            obj.setup_method(getattr(obj, names[-1]))
    fn = getattr(obj, names[-1])
    for kwargs in _param_sets(fn):
        fn(**kwargs)


def _test_class(obj: Any, module: ModuleType) -> bool:
    """A class pytest would collect: a TestCase, or a Test* class, defined in this module."""
    if not isinstance(obj, type) or obj.__module__ != module.__name__:
        return False
    return issubclass(obj, unittest.TestCase) or obj.__name__.startswith("Test")


def collect(path: Path) -> list[str]:
    """Every test node of a test file: its test functions and the test methods of its Test classes."""
    module = load(path)
    nodes = []
    for name, obj in vars(module).items():
        if name.startswith("test") and callable(obj) and not isinstance(obj, type):
            nodes.append(f"{path}::{name}")
        elif _test_class(obj, module):
            nodes += [f"{path}::{name}::{m}" for m in dir(obj) if m.startswith("test") and callable(getattr(obj, m))]
    return nodes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pythonpath", default=".")
    ap.add_argument("--all", type=Path, help="run every test of this file (besides the nodes given)")
    ap.add_argument("--skip", action="append", default=[], help="a node id not to run (repeatable)")
    ap.add_argument("--only", action="append", default=[], help="with --all: run the nodes that start so")
    ap.add_argument("--quiet", action="store_true", help="print failures and the count only")
    ap.add_argument("nodes", nargs="*")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(Path(args.pythonpath).resolve()))
    found = collect(args.all) if args.all else []
    if args.only:
        found = [n for n in found if n.startswith(tuple(args.only))]
    nodes = list(args.nodes) + found
    nodes = [n for n in nodes if n not in set(args.skip)]
    failed = 0
    for node in nodes:
        path, *names = node.split("::")
        try:
            run_node(load(Path(path)), names)
            if not args.quiet:
                print(f"PASSED {node}")
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - whatever the test raises (pytest.fail too) is its failure
            if type(exc).__name__ == "Skipped":  # pytest.skip: not a failure
                print(f"SKIPPED {node}")
                continue
            failed += 1
            first = str(exc).splitlines()[0] if str(exc) else ""
            kind = "" if isinstance(exc, TestCaseFailed) else f"{type(exc).__name__}: "
            print(f"FAILED {node} - {kind}{first}")
            print(_frames(exc) if not isinstance(exc, TestCaseFailed) else str(exc).split("\n", 1)[1].replace(str(Path.cwd()) + "/", "").rstrip())
    print(f"{failed} failed, {len(nodes) - failed} passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
