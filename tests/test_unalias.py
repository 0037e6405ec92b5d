"""tools/unalias.py: one-letter import aliases become readable names, safely and only once."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "tools" / "unalias.py"


@pytest.fixture(scope="module")
def unalias() -> ModuleType:
    spec = importlib.util.spec_from_file_location("unalias", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["unalias"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


BEFORE = '''\
from typing import TypeVar

from gep.core import constants as C, models
from gep.cycle import stages as S

F = TypeVar("F")
NOTE = "é"; LIMIT = C.MAX


def run(stages: list[str]) -> int:
    return len(stages) + S.count(C.MAX) + len(f"{C.NAME!r}")


def cycle(fn: F) -> F:
    from flows import cycle as F
    import gep.cli.history_cmd as H

    return F.RECORDED.get(H.name) or fn
'''

AFTER = '''\
from typing import TypeVar

from gep.core import constants, models
from gep.cycle import stages as cycle_stages

F = TypeVar("F")
NOTE = "é"; LIMIT = constants.MAX


def run(stages: list[str]) -> int:
    return len(stages) + cycle_stages.count(constants.MAX) + len(f"{constants.NAME!r}")


def cycle(fn: F) -> F:
    from flows import cycle as flows_cycle
    from gep.cli import history_cmd

    return flows_cycle.RECORDED.get(history_cmd.name) or fn
'''


def test_aliases_become_names_that_shadow_nothing(unalias: ModuleType) -> None:
    """``stages`` is a parameter and ``cycle`` a function, so those two get their package's prefix; the TypeVar
    F outside the function that imports a module as F is left alone."""
    new, problems = unalias.rewrite(BEFORE)
    assert problems == []
    assert new == AFTER


def test_a_second_run_changes_nothing(unalias: ModuleType) -> None:
    assert unalias.rewrite(AFTER) == (AFTER, [])
    assert unalias.remaining(AFTER) == []


def test_a_letter_bound_by_something_else_is_left_for_a_person(unalias: ModuleType) -> None:
    source = "from gep.core import constants as C\n\n\ndef f():\n    return C.X\n\n\nC = 3\n"
    new, problems = unalias.rewrite(source)
    assert new == source
    assert problems == ["'C' is also bound by something other than its import"]


def test_one_file_two_modules_of_one_leaf_name(unalias: ModuleType) -> None:
    source = ("def f():\n    from gep.store import schema as S\n    return S.A\n\n\n"
              "def g():\n    from gep.report import schema as T\n    return T.B\n")
    new, problems = unalias.rewrite(source)
    assert problems == []
    assert "from gep.store import schema\n    return schema.A" in new
    assert "from gep.report import schema as report_schema\n    return report_schema.B" in new


def test_the_command_rewrites_then_checks_clean(tmp_path: Path) -> None:
    pkg = tmp_path / "gep"
    pkg.mkdir()
    (pkg / "m.py").write_text("from gep.core import constants as C\n\nX = C.MAX\n")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, str(SCRIPT), *args, "gep"], cwd=tmp_path, capture_output=True,
                              text=True, check=False)

    check = run("--check")
    assert check.returncode == 1
    assert "gep/m.py:1: one-letter alias: from gep.core import constants as C" in check.stdout
    assert run().returncode == 0
    assert (pkg / "m.py").read_text() == "from gep.core import constants\n\nX = constants.MAX\n"
    assert run("--check").returncode == 0
