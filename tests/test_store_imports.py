"""The store keeps typed values and never calls learning, selection or distillation code (issue 27).

Every import of a module of gep/store/ counts (top, deferred, under TYPE_CHECKING): it names the store itself
or a core module, as tools/relayout.py's MAPPING places them (gep.core.*). Reads the source; imports nothing.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

from conftest import ROOT


def _core_modules() -> set[str]:
    spec = importlib.util.spec_from_file_location("relayout", ROOT / "tools" / "relayout.py")
    assert spec is not None and spec.loader is not None
    relayout = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(relayout)
    return {old for old, new in relayout.MAPPING.items() if new.startswith("gep.core.")}


def _allowed(target: str, core: set[str]) -> bool:
    return target in ("gep", "gep.store") or target.startswith(("gep.store.", "gep.core.")) or target in core


def _gep_imports(path: Path) -> set[str]:
    """Every gep module ``path`` imports (``from gep import x`` counts as gep.x)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if node.module in ("gep", "gep.store"):
                found.update(f"{node.module}.{a.name}" for a in node.names)
            else:
                found.add(node.module)
    return {t for t in found if t == "gep" or t.startswith("gep.")}


def test_the_store_imports_only_core_modules_and_itself() -> None:
    core = _core_modules()
    assert {"gep.models", "gep.learned", "gep.behavior_signal"} <= core
    beyond = {(path.name, t) for path in sorted((ROOT / "gep" / "store").rglob("*.py"))
              for t in _gep_imports(path) if not _allowed(t, core)}
    assert beyond == set()


def test_the_check_sees_a_deferred_import_of_learning_code(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from gep.memory_graph import summarize\n    from gep import constants as C\n")
    core = _core_modules()
    assert {t for t in _gep_imports(module) if not _allowed(t, core)} == {"gep.memory_graph"}
