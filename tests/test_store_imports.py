"""The store keeps typed values and never calls learning, selection or distillation code (issue 27).

Every import of a module of gep/store/ counts (top, deferred, under TYPE_CHECKING): it names the store itself
or a module of gep/core/. Reads the source; imports nothing. (tests/test_layering.py checks the same rule
with the whole layering contract; this one names the offending file and import directly.)
"""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT
from source_trees import nodes


def _allowed(target: str) -> bool:
    return target in ("gep", "gep.store", "gep.core") or target.startswith(("gep.store.", "gep.core."))


def _gep_imports(path: Path) -> set[str]:
    """Every gep module ``path`` imports (``from gep import x`` counts as gep.x)."""
    found: set[str] = set()
    for node in nodes(path):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if node.module in ("gep", "gep.store"):
                found.update(f"{node.module}.{a.name}" for a in node.names)
            else:
                found.add(node.module)
    return {t for t in found if t == "gep" or t.startswith("gep.")}


def test_the_store_imports_only_core_modules_and_itself() -> None:
    beyond = {(path.name, t) for path in sorted((ROOT / "gep" / "store").rglob("*.py"))
              for t in _gep_imports(path) if not _allowed(t)}
    assert beyond == set()


def test_the_check_sees_a_deferred_import_of_learning_code(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from gep.learning.memory_graph import summarize\n    from gep.core import constants as C\n")
    assert {t for t in _gep_imports(module) if not _allowed(t)} == {"gep.learning.memory_graph"}
