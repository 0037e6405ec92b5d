"""The layering contract of gep/ and flows/ (docs/ARCHITECTURE.md): imports point down, no module imports
itself back, and no two packages import each other (flows/ counts as one package, above gep's library and
below the CLI, so flows never imports gep.cli).

Every import counts: at the top of a module, deferred into a function, or under TYPE_CHECKING (a deferred
import hides a loop from Python, not from a reader). The check reads the source (ast) and imports nothing.
tools/relayout.py --check runs the same check on the flat layout, naming each module by where it will go.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Mapping
from pathlib import Path

from source_trees import nodes, tree

ROOT = Path(__file__).resolve().parent.parent

# Bottom first. A package may import its own modules and any package of a lower layer; never a peer of its own
# layer or anything above it. The modules directly in gep/ are named by their module name.
LAYERS: list[set[str]] = [
    {"core"},  # the vocabulary: models, records, settings, constants, errors, hashing, redaction, Claude client
    {"git", "store", "prefect_api", "fleet"},  # I/O edges, each on core alone
    {"validation", "signals"},  # running commands safely (in a scratch clone); what the workspace says
    {"learning"},  # memory graph, feedback, lessons, verified fixes, avoid-lists: over signals
    {"genes"},  # pool, eligibility, preconditions, selector, automatic and distilled genes, strategy, mutation
    {"mutators"},  # who makes the change: anthropic (with its tools and prompt), command, prompt
    {"eval"},  # `gep eval` on the user's history (the cycle runner passed in), the holdout's arithmetic
    {"assets", "report"},  # the reference's asset files in and out; `gep report`'s page
    {"cycle"},  # one cycle: context, pipeline, stages, tree, checks, solidify and delivery, outcomes, recovery
    {"api", "distill_run", "server", "fleet_progress", "workspace_setup"},  # library entry points beside the cycle
    {"sessions", "doctor"},  # the agent's own sessions: the Claude Code hooks, what an agent is told and whether it helped
    {"flows"},  # the Prefect flows around the engine (flows/, beside gep/): only the CLI imports them
    {"cli"},  # the command line
    {"entry", "__init__"},  # the console script, the public surface
]

# The store keeps typed values: it imports core/ and itself, nothing else of gep (issue 27).
STORE_MAY_IMPORT = {"core", "store"}

# Modules that still have a deferred import with no comment saying why (issue 27: imports stay at the top of a
# module except where a measured start-up cost needs them deferred, each such place with a comment). A module
# leaves this list when each of its deferred imports carries a comment; a test below fails when one is clean.
UNCOMMENTED_DEFERRED: set[str] = {
    "gep.api",
    "gep.cli.context_cmd",
    "gep.cli.feedback_cmd",
    "gep.cli.fleet_cmd",
    "gep.cli.genes_cmd",
    "gep.cli.history_cmd",
    "gep.cli.history_table",
    "gep.cli.lessons_cmd",
    "gep.cli.report_cmd",
    "gep.cli.root",
    "gep.cli.store_cmd",
    "gep.entry",
    "gep.fleet_progress",
    "gep.genes.distiller",
    "gep.mutators",
    "gep.mutators.anthropic_mutator",
    "gep.prefect_api",
    "gep.report.data",
    "gep.sessions.capture",
    "gep.store.base",
    "gep.store.copy",
    "gep.store.quick_read",
    "flows.fleet_launch",
    "flows.reporting",
    "flows.runtime",
    "flows.serve",
}

# Edges that break the contract today, to be removed (a test below fails when one is gone: delete it here).
KNOWN_DEBT: set[tuple[str, str]] = set()


def package_of(module: str) -> str:
    """``gep.store.full`` -> ``store``; ``gep.api`` -> ``api``; ``gep`` -> ``__init__``; ``flows.cycle`` and
    ``flows`` -> ``flows``."""
    parts = module.split(".")
    if parts[0] == "flows":
        return "flows"
    return parts[1] if len(parts) > 1 else "__init__"


def parsed(path: Path) -> ast.Module:
    """``path``'s syntax tree, parsed once per process (nine checks read the same ~200 files; tests/source_trees.py)."""
    return tree(path)


def modules(root: Path) -> dict[str, Path]:
    """Every module of gep/ and flows/ under ``root`` by its dotted name (``gep.store`` for its __init__)."""
    found = {}
    for path in sorted([*(root / "gep").rglob("*.py"), *(root / "flows").rglob("*.py")]):
        name = ".".join(path.relative_to(root).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


def import_graph(mods: Mapping[str, Path]) -> dict[str, set[str]]:
    """Each module -> the modules of ``mods`` it imports (``from pkg import mod`` names mod), at any depth."""
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        for node in nodes(path):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in mods else node.module
                           for a in node.names]
            else:
                continue
            graph[mod].update(t for t in targets if t in mods and t != mod)
    return graph


def layer_of(package: str) -> int:
    for i, layer in enumerate(LAYERS):
        if package in layer:
            return i
    raise AssertionError(f"gep/{package}: not in any layer of tests/test_layering.py (add it where it belongs)")


def violations(graph: Mapping[str, set[str]]) -> set[tuple[str, str]]:
    """(importer, imported) pairs that import a peer package of the same layer or a higher one, or that take
    the store beyond core/."""
    bad = set()
    for mod, targets in graph.items():
        src = package_of(mod)
        for target in targets:
            dst = package_of(target)
            if dst == src:
                continue
            if layer_of(dst) >= layer_of(src) or (src == "store" and dst not in STORE_MAY_IMPORT):
                bad.add((mod, target))
    return bad


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return sorted(found)


@functools.cache
def _graph(root: Path = ROOT) -> dict[str, set[str]]:
    return import_graph(modules(root))  # read once per process: the tests only read it


def package_graph(graph: Mapping[str, set[str]]) -> dict[str, set[str]]:
    """The module graph folded into packages: each package -> the other packages its modules import."""
    folded: dict[str, set[str]] = {}
    for mod, targets in graph.items():
        src = package_of(mod)
        folded.setdefault(src, set()).update(package_of(t) for t in targets if package_of(t) != src)
    for targets in list(folded.values()):
        for target in targets:
            folded.setdefault(target, set())
    return folded


def test_imports_point_down_the_layers() -> None:
    assert violations(_graph()) - KNOWN_DEBT == set()


def test_the_known_debt_is_still_there() -> None:
    """An edge fixed must leave KNOWN_DEBT too, so that it cannot come back unnoticed."""
    assert KNOWN_DEBT - violations(_graph()) == set()


def test_no_import_loops() -> None:
    assert cycles(_graph()) == []


def test_no_import_loops_between_packages() -> None:
    """Two packages whose modules import each other (flows.report_artifact -> gep.cli.report_cmd while
    gep.cli.root -> flows.cycle) are a loop even when no module imports itself back."""
    assert cycles(package_graph(_graph())) == []


def test_flows_is_read() -> None:
    graph = _graph()
    assert "flows.cycle" in graph and "gep.cycle.pipeline" in graph["flows.cycle"]


def test_the_store_imports_core_only() -> None:
    graph = _graph()
    beyond = {(m, t) for m, ts in graph.items() if package_of(m) == "store" for t in ts
              if package_of(t) not in STORE_MAY_IMPORT}
    assert beyond == set()


def test_only_the_cli_imports_flows_or_prefect() -> None:
    wrong = set()
    for mod, path in modules(ROOT).items():
        if package_of(mod) in ("cli", "flows"):
            continue
        for node in nodes(path):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            wrong.update((mod, n) for n in names if n.split(".")[0] in ("flows", "prefect"))
    assert wrong == set()


def test_at_most_20_modules_directly_in_gep() -> None:
    assert len(list((ROOT / "gep").glob("*.py"))) <= 20


def test_every_package_says_what_it_never_imports() -> None:
    for init in [*(ROOT / "gep").glob("*/__init__.py"), ROOT / "flows" / "__init__.py"]:
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert "never" in doc.lower(), f"{init.relative_to(ROOT)}: the docstring names no forbidden import"


def deferred_without_comment(path: Path) -> list[int]:
    """Lines of the imports inside a function body of ``path`` with no comment on the statement or on the
    line above it (the reason it is deferred: a measured start-up cost)."""
    lines = path.read_text().splitlines()
    found = []
    for func in nodes(path):
        if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(func):
            if isinstance(node, ast.Import | ast.ImportFrom):
                assert node.end_lineno is not None
                span = lines[max(node.lineno - 2, 0):node.end_lineno]
                if not any("#" in line for line in span):
                    found.append(node.lineno)
    return sorted(set(found))


@functools.cache
def _bare() -> frozenset[str]:
    """The modules of gep/ and flows/ with a deferred import that does not say why (read once for the two
    tests below)."""
    return frozenset(mod for mod, path in modules(ROOT).items() if deferred_without_comment(path))


def test_a_deferred_import_says_why() -> None:
    assert _bare() - UNCOMMENTED_DEFERRED == set()


def test_the_uncommented_list_is_still_needed() -> None:
    """A module whose deferred imports all say why must leave UNCOMMENTED_DEFERRED, so it stays so."""
    assert UNCOMMENTED_DEFERRED - _bare() == set()


def test_the_comment_check_finds_a_bare_deferred_import(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("import os\n\n\ndef f():\n    import json\n\n    # SQLAlchemy ~0.4 s: store-only commands skip it\n"
                    "    from gep.store import Store\n    import re  # measured: 5 ms\n    return json, Store, re\n")
    assert deferred_without_comment(path) == [5]


def one_letter_aliases(path: Path) -> list[int]:
    """Lines of ``path`` that import something under a one-letter name (``constants as C``): a reader cannot
    tell what ``C.X`` is (issue 27). tools/unalias.py rewrites them to the module's own name."""
    return sorted(node.lineno for node in nodes(path)
                  if isinstance(node, ast.Import | ast.ImportFrom)
                  and any(a.asname is not None and len(a.asname) == 1 for a in node.names))


def test_no_one_letter_import_aliases() -> None:
    found = [f"{path.relative_to(ROOT)}:{line}" for folder in ("gep", "flows")
             for path in sorted((ROOT / folder).rglob("*.py")) for line in one_letter_aliases(path)]
    assert found == [], "one-letter import aliases (rewrite them with `python3 tools/unalias.py`)"


def test_the_alias_check_finds_a_one_letter_alias(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("import os as o\nfrom gep.core import constants as C, models\n"
                    "from gep.cycle import pipeline as pl\n\n\ndef f():\n    from flows import cycle as F\n")
    assert one_letter_aliases(path) == [1, 2, 7]


def _tree(tmp_path: Path, files: dict[str, str]) -> dict[str, set[str]]:
    for rel, text in files.items():
        path = tmp_path / "gep" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return _graph(tmp_path)


def test_the_check_fails_when_a_lower_package_imports_a_higher_one(tmp_path: Path) -> None:
    graph = _tree(tmp_path, {"__init__.py": "", "core/__init__.py": "", "cycle/__init__.py": "",
                             "store/__init__.py": "", "cycle/stages.py": "from gep.core import models\n",
                             "core/models.py": "def f():\n    from gep.store.full import Store  # deferred\n",
                             "store/full.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                              "    from gep.cycle import stages\n"})
    assert violations(graph) == {("gep.core.models", "gep.store.full"), ("gep.store.full", "gep.cycle.stages")}
    assert cycles(graph) == [["gep.core.models", "gep.cycle.stages", "gep.store.full"]]


def test_the_check_fails_on_a_peer_import_and_on_a_loop(tmp_path: Path) -> None:
    graph = _tree(tmp_path, {"__init__.py": "", "store/__init__.py": "", "git/__init__.py": "",
                             "store/a.py": "import gep.git.b\n", "git/b.py": "from gep.store import a\n"})
    assert violations(graph) == {("gep.store.a", "gep.git.b"), ("gep.git.b", "gep.store.a")}
    assert cycles(graph) == [["gep.git.b", "gep.store.a"]]


def test_the_store_may_not_call_learning_even_from_below(tmp_path: Path) -> None:
    """learning/ is above the store, so this is also a layer break; the store rule names it on its own."""
    graph = _tree(tmp_path, {"__init__.py": "", "store/__init__.py": "", "learning/__init__.py": "",
                             "store/learned.py": "def f():\n    from gep.learning.feedback import fold\n",
                             "learning/feedback.py": "from gep.store import learned\n"})
    assert ("gep.store.learned", "gep.learning.feedback") in violations(graph)
    assert cycles(graph) == [["gep.learning.feedback", "gep.store.learned"]]


def test_the_real_tree_has_every_package_in_a_layer() -> None:
    for mod in modules(ROOT):
        layer_of(package_of(mod))


def _files(tmp_path: Path, files: dict[str, str]) -> dict[str, set[str]]:
    """The graph of a tree of ``files`` (paths from the repository's root) planted in ``tmp_path``."""
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return _graph(tmp_path)


def test_the_check_fails_when_flows_and_the_cli_import_each_other(tmp_path: Path) -> None:
    """The loop main had: no module imports itself back, but the packages do."""
    graph = _files(tmp_path, {"gep/__init__.py": "", "gep/cli/__init__.py": "", "flows/__init__.py": "",
                              "gep/cli/root.py": "def cycle():\n    from flows import cycle  # Prefect\n",
                              "gep/cli/report_cmd.py": "def write_page():\n    pass\n",
                              "flows/cycle.py": "import os\n",
                              "flows/report_artifact.py": "def _write():\n"
                                                          "    from gep.cli.report_cmd import write_page\n"})
    assert cycles(graph) == []
    assert cycles(package_graph(graph)) == [["cli", "flows"]]
    assert violations(graph) == {("flows.report_artifact", "gep.cli.report_cmd")}


def test_the_package_loop_check_fails_on_a_synthetic_graph() -> None:
    graph = {"gep.store.a": {"gep.core.b"}, "gep.core.b": set(), "gep.core.c": {"gep.git.d"},
             "gep.git.d": {"gep.store.e"}, "gep.store.e": {"gep.core.b"}, "flows.f": {"gep.api"}, "gep.api": set()}
    assert cycles(graph) == []
    assert cycles(package_graph(graph)) == [["core", "git", "store"]]
    assert cycles(package_graph({m: ts for m, ts in graph.items() if m != "gep.core.c"})) == []
