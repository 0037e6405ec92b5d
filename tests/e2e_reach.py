"""Which tests are end to end, found from what they use (tests/conftest.py marks them ``e2e``).

A test is end to end when it, a fixture it requests, or a helper of the test suite that either calls (followed
through the test modules' own functions) starts a real process of Python (``sys.executable``, the ``gep``
console script, a driver script) or a browser, runs a whole cycle (``run_cycle``) or a Prefect flow, or uses one of the
servers in ``E2E_FIXTURES``. Found from the code, so a new test is marked the day it is written."""

from __future__ import annotations

import functools
import os
import sys
import types
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parent
_VENV_BIN = Path(sys.executable).parent
_THIS = Path(__file__).resolve()

# fixtures that are end to end by what they are: servers, PostgreSQL, a cycle in the example workspace
E2E_FIXTURES = frozenset({"live_prefect", "prefect_server", "server", "fleet", "pg_url", "example_ws",
                          "venv_python_first", "_venv_python"})
# names whose use starts a Python process, a whole cycle or a browser: `sys.executable`, gep's pipeline, a flow's
# harness, a Prefect server of the test's own (tests/live_prefect.py), headless Chromium (tests/test_report.py)
E2E_NAMES = frozenset({"executable", "run_cycle", "prefect_test_harness", "LiveServer", "chromium"})
# markers of tests that run on a server: the PostgreSQL cases of the store tests (tests/store_backends.py)
E2E_MARKERS = frozenset({"postgres"})


def _names(code: types.CodeType) -> set[str]:
    """Global and attribute names a code object and its nested functions use."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def _is_ours(value: object) -> bool:
    """A function defined in a file of tests/ (helpers are followed; gep's own code is not, nor this file's:
    its own checks name what they look for). Only functions and methods are asked for their code: a lazy
    module's ``__getattr__`` would import on the question (it cost a second of every worker's collection)."""
    if not isinstance(value, (types.FunctionType, types.MethodType)):
        return False
    return _in_tests(value.__code__.co_filename)


@functools.cache
def _in_tests(filename: str) -> bool:
    path = Path(filename).resolve()
    return path.parent == TESTS and path != _THIS


def _starts_something(value: object) -> bool:
    """A global that is a Prefect flow, the path of the ``gep`` console script (a Path or an absolute path
    string) or of a ``.py`` driver, or the venv's bin folder (``BIN / "gep"``)."""
    if type(value).__module__.startswith("prefect") and type(value).__name__ == "Flow":
        return True
    if isinstance(value, str) and os.path.isabs(value) and os.path.basename(value) == "gep":
        return True
    return isinstance(value, Path) and (value.name == "gep" or value.suffix == ".py" or value == _VENV_BIN)


def reaches_e2e(funcs: Iterable[Callable[..., Any]]) -> bool:
    """Whether any of ``funcs`` (a test and its fixtures) reaches an end-to-end entry point."""
    seen: set[types.CodeType] = set()
    todo = [f for f in funcs if _is_ours(f)]
    while todo:
        func = todo.pop()
        code = func.__code__
        if code in seen:
            continue
        seen.add(code)
        names = _names(code)
        if names & E2E_NAMES:
            return True
        glb = getattr(func, "__globals__", {})
        for name in names:
            value = glb.get(name)
            if _starts_something(value):
                return True
            if _is_ours(value):
                todo.append(value)  # type: ignore[arg-type]
    return False
