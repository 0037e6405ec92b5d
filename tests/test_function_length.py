"""No function of gep/ or flows/ longer than 60 lines (issue 46): a function that long does several jobs, and
a reader holds none of them at once.

A function's length is counted from its ``def`` line to its last line, docstring, comments and blank lines
included, decorators not (``end_lineno - lineno + 1`` of its ``ast`` node). A function nested in another
counts on its own and as part of the one it is in. The check reads the source with ``ast`` and imports nothing.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from source_trees import nodes

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 60
# Functions over the limit that other branches change right now, to split once those land (a test below fails
# when one is gone or fits: delete it here then).
TO_SPLIT: set[str] = set()


@functools.cache
def long_functions(root: Path, limit: int = MAX_LINES) -> list[str]:
    """``path:line name (N lines)`` for each function of gep/ and flows/ under ``root`` longer than ``limit``
    (read once per process and root: the tests only read it)."""
    found = []
    for folder in ("gep", "flows"):
        for path in sorted((root / folder).rglob("*.py")):
            for node in nodes(path):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    assert node.end_lineno is not None
                    length = node.end_lineno - node.lineno + 1
                    if length > limit:
                        found.append(f"{path.relative_to(root)}:{node.lineno} {node.name} ({length} lines)")
    return sorted(found)


def _key(line: str) -> str:
    """``gep/x.py:12 f (61 lines)`` -> ``gep/x.py f``: a function by its file and name, whatever its line."""
    where, name = line.split(" ")[:2]
    return f"{where.split(':')[0]} {name}"


def test_no_function_is_longer_than_60_lines() -> None:
    found = [f for f in long_functions(ROOT) if _key(f) not in TO_SPLIT]
    assert not found, f"split these functions (at most {MAX_LINES} lines each):\n" + "\n".join(found)


def test_the_functions_to_split_are_still_long() -> None:
    """A function of TO_SPLIT split (or gone) must leave the list, so that it cannot grow back unnoticed."""
    assert TO_SPLIT - {_key(f) for f in long_functions(ROOT)} == set()


def test_the_check_names_a_long_function(tmp_path: Path) -> None:
    def body(indent: int) -> str:  # 59 lines
        return "".join(f"{' ' * indent}x{i} = {i}\n" for i in range(59))

    (tmp_path / "gep" / "cli").mkdir(parents=True)
    (tmp_path / "flows").mkdir()
    (tmp_path / "gep" / "cli" / "fleet_cmd.py").write_text(  # fits: 60 lines and a decorator; run: 62
        f"import os\n\n\n@staticmethod\ndef fits():\n{body(4)}\n\n\nclass C:\n    async def run(self):\n"
        f"{body(8)}        x = 1\n        return x\n")
    (tmp_path / "flows" / "cycle.py").write_text(f"def outer():\n    def inner():\n{body(8)}{body(8)}    return inner\n")
    assert long_functions(tmp_path) == ["flows/cycle.py:1 outer (121 lines)", "flows/cycle.py:2 inner (119 lines)",
                                        "gep/cli/fleet_cmd.py:69 run (62 lines)"]
