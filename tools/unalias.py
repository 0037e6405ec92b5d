#!/usr/bin/env python3
"""Rewrite one-letter import aliases (``from gep.core import constants as C``, then ``C.X``) to readable names.

Run from a repository root:

    python3 tools/unalias.py                 # rewrite *.py under gep/ flows/ tests/ bench/ examples/
    python3 tools/unalias.py PATH...         # only these files or directories
    python3 tools/unalias.py --check [PATH...]  # write nothing; exit 1 when a one-letter alias remains

An import whose local name is one letter binds the imported name itself instead (``from gep.core import
constants``; ``import flows.cycle as F`` becomes ``from flows import cycle``) and every use of the letter in the
file is renamed (``constants.X``). Module objects stay module objects, so ``monkeypatch.setattr(constants, ...)``
still patches what the code reads. When that name is already taken in the file (a local variable, a parameter,
a function, another import, a builtin) the file gets ``<parent>_<leaf>`` instead (``core_constants``).

A file is left alone, named on stderr, and the exit code is 2 when the rename is not certain to mean the same:
the letter is also bound by something other than that import (an assignment, a parameter, a different import).
Each rewrite is proved before it is written: the new text must parse to the old tree with only those names
changed. Idempotent: a second run finds no alias and changes nothing. Afterwards, when ruff is on PATH (or next
to this python), ``ruff check --select I --fix`` puts the rewritten import blocks back in order.

Plain python3 (3.10+: import aliases carry positions), standard library only.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import copy
import keyword
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_PATHS = ("gep", "flows", "tests", "bench", "examples")
BUILTIN_NAMES = set(dir(builtins))


def is_short(alias: ast.alias) -> bool:
    return alias.asname is not None and len(alias.asname) == 1 and alias.asname.isalpha()


def target_of(node: ast.Import | ast.ImportFrom, alias: ast.alias) -> str:
    """What an alias binds, as a dotted name (relative imports keep their dots)."""
    if isinstance(node, ast.Import):
        return alias.name if alias.asname else alias.name.split(".")[0]
    return "." * node.level + (f"{node.module}." if node.module else "") + alias.name


@dataclass
class Names:
    """Every name of a file: what each is bound to (a dotted import target, or None for anything else)."""

    bound: dict[str, set[str | None]] = field(default_factory=dict)
    loaded: set[str] = field(default_factory=set)

    def bind(self, name: str, target: str | None = None) -> None:
        self.bound.setdefault(name, set()).add(target)


def names_of(*roots: ast.AST) -> Names:
    names = Names()
    for node in (n for root in roots for n in ast.walk(root)):
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                names.loaded.add(node.id)
            else:
                names.bind(node.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                if alias.name != "*":
                    local = alias.asname or (alias.name.split(".")[0] if isinstance(node, ast.Import) else alias.name)
                    names.bind(local, target_of(node, alias))
        elif isinstance(node, ast.arg):
            names.bind(node.arg)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.bind(node.name)
        elif isinstance(node, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and node.name:
            names.bind(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            names.bind(node.rest)
        elif isinstance(node, ast.Global | ast.Nonlocal):
            for name in node.names:
                names.bind(name)
    return names


def free_for(name: str, target: str, names: Names, taken: dict[str, str]) -> bool:
    """Whether ``name`` may stand for ``target`` in this file: unused, or bound only to the same import."""
    if not name.isidentifier() or keyword.iskeyword(name) or name in BUILTIN_NAMES:
        return False
    if taken.get(name, target) != target:
        return False
    if name in names.bound:
        return names.bound[name] == {target}
    return name not in names.loaded


Scope = ast.Module | ast.FunctionDef | ast.AsyncFunctionDef


@dataclass
class Unit:
    """One letter renamed in one region: the whole file (imported at module level) or one function's body."""

    letter: str
    new: str
    region: list[ast.AST]


def owners(tree: ast.Module) -> dict[int, ast.AST]:
    """id(import statement) -> the module or function whose body binds its names (a class for a class body)."""
    found: dict[int, ast.AST] = {}

    def visit(node: ast.AST, owner: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                found[id(child)] = owner
            scoped = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda)
            visit(child, child if scoped else owner)

    visit(tree, tree)
    return found


def regions(tree: ast.Module, letter: str) -> tuple[list[Scope], str | None]:
    """Where ``letter`` is imported: the module (then the whole file is one region) or the outermost functions."""
    owner_of = owners(tree)
    places = [owner_of[id(n)] for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)
              and any(is_short(a) and a.asname == letter for a in n.names)]
    if any(isinstance(p, ast.ClassDef) for p in places):
        return [], f"{letter!r} is imported in a class body (a class attribute others may read)"
    if any(p is tree for p in places):
        return [tree], None
    functions = [p for p in places if isinstance(p, ast.FunctionDef | ast.AsyncFunctionDef)]
    inner = {id(n) for f in functions for n in ast.walk(f) if n is not f}
    outer = [f for f in functions if id(f) not in inner]
    return list({id(f): f for f in outer}.values()), None


def region_nodes(scope: Scope) -> list[ast.AST]:
    """What a rename covers: a whole module, or a function's body (its annotations, defaults and decorators
    are read in the scope around it)."""
    return [scope] if isinstance(scope, ast.Module) else list(scope.body)


def plan(tree: ast.Module) -> tuple[list[Unit], list[str]]:
    """The renames of the file, and why any letter cannot be renamed."""
    units: list[Unit] = []
    taken: dict[str, str] = {}
    problems: list[str] = []
    file_names = names_of(tree)
    letters = sorted({a.asname for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)
                      for a in n.names if is_short(a) and a.asname})
    for letter in letters:
        scopes, problem = regions(tree, letter)
        problems.extend([problem] if problem else [])
        for scope in scopes:
            where = "" if isinstance(scope, ast.Module) else f" in {scope.name}()"
            nodes = region_nodes(scope)
            params = [] if isinstance(scope, ast.Module) else [scope.args]  # a parameter named so binds it too
            bound = names_of(*params, *nodes).bound[letter]
            targets = sorted(t for t in bound if t is not None)
            if None in bound or len(targets) > 1:
                problems.append(f"{letter!r}{where} is also bound by something other than its import"
                                if None in bound else f"{letter!r}{where} stands for {', '.join(targets)}")
                continue
            parts = targets[0].lstrip(".").split(".")
            choices = [parts[-1]] + ([f"{parts[-2]}_{parts[-1]}"] if len(parts) > 1 else [])
            new = next((c for c in choices if free_for(c, targets[0], file_names, taken)), None)
            if new is None:
                problems.append(f"{letter!r}{where} ({targets[0]}): {', '.join(choices)} are all taken in this file")
                continue
            taken[new] = targets[0]
            units.append(Unit(letter, new, nodes))
    return units, problems


def import_text(node: ast.Import | ast.ImportFrom, alias: ast.alias, new: str) -> tuple[ast.Import, str] | None:
    """For ``import a.b as X`` alone on its line: the whole statement ``from a import b [as new]``."""
    if not isinstance(node, ast.Import) or len(node.names) != 1 or "." not in alias.name:
        return None
    if node.lineno != node.end_lineno:
        return None
    module, leaf = alias.name.rsplit(".", 1)
    suffix = "" if new == leaf else f" as {new}"
    return node, f"from {module} import {leaf}{suffix}"


def alias_text(alias: ast.alias, new: str) -> str:
    """``constants as C`` -> ``constants``; ``stages as S`` -> ``stages as cycle_stages`` when ``stages`` is taken."""
    return alias.name if new == alias.name else f"{alias.name} as {new}"


Edit = tuple[int, int, int, int, str]  # start line, start col, end line, end col (utf-8 bytes), new text


Where = tuple[str, int, int]  # ("name" or "alias", line, column): a node the rename touches


def touched(units: list[Unit]) -> dict[Where, str]:
    """Each Name of a renamed letter in its region, and each of its one-letter import aliases -> the new name."""
    found: dict[Where, str] = {}
    for unit in units:
        for node in (n for root in unit.region for n in ast.walk(root)):
            if isinstance(node, ast.Name) and node.id == unit.letter:
                found["name", node.lineno, node.col_offset] = unit.new
            elif isinstance(node, ast.Import | ast.ImportFrom):
                for alias in node.names:
                    if is_short(alias) and alias.asname == unit.letter:
                        found["alias", alias.lineno, alias.col_offset] = unit.new
    return found


def edits_for(tree: ast.AST, renames: dict[Where, str]) -> list[Edit]:
    edits: list[Edit] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and ("name", node.lineno, node.col_offset) in renames:
            assert node.end_lineno is not None and node.end_col_offset is not None
            new = renames["name", node.lineno, node.col_offset]
            edits.append((node.lineno, node.col_offset, node.end_lineno, node.end_col_offset, new))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                new = renames.get(("alias", alias.lineno, alias.col_offset), "")
                if not new:
                    continue
                whole = import_text(node, alias, new)
                span: ast.Import | ast.alias = whole[0] if whole else alias
                text = whole[1] if whole else alias_text(alias, new)
                assert span.end_lineno is not None and span.end_col_offset is not None
                edits.append((span.lineno, span.col_offset, span.end_lineno, span.end_col_offset, text))
    return edits


def apply(source: str, edits: list[Edit]) -> str:
    """Apply edits (AST positions count utf-8 bytes) from the last to the first, so earlier ones stay valid."""
    lines = [line.encode() for line in source.splitlines(keepends=True)]
    for start, scol, end, ecol, text in sorted(edits, reverse=True):
        head, tail = lines[start - 1][:scol], lines[end - 1][ecol:]
        lines[start - 1:end] = [head + text.encode() + tail]
    return b"".join(lines).decode()


class Expected(ast.NodeTransformer):
    """The old tree with only the planned names changed: what the new text must parse to."""

    def __init__(self, renames: dict[Where, str]) -> None:
        self.renames = renames

    def visit_Name(self, node: ast.Name) -> ast.Name:
        node.id = self.renames.get(("name", node.lineno, node.col_offset), node.id)
        return node

    def visit_Import(self, node: ast.Import) -> ast.AST:
        for alias in node.names:
            new = self.renames.get(("alias", alias.lineno, alias.col_offset), "")
            if not new:
                continue
            if import_text(node, alias, new):
                module, leaf = alias.name.rsplit(".", 1)
                return ast.ImportFrom(module=module, names=[ast.alias(leaf, None if new == leaf else new)], level=0)
            alias.asname = None if new == alias.name else new
        return node

    def visit_ImportFrom(self, node: ast.ImportFrom) -> ast.ImportFrom:
        for alias in node.names:
            new = self.renames.get(("alias", alias.lineno, alias.col_offset), "")
            if new:
                alias.asname = None if new == alias.name else new
        return node


def rewrite(source: str, path: str = "<file>") -> tuple[str, list[str]]:
    """The source with its one-letter aliases renamed, and the problems that kept any of them."""
    tree = ast.parse(source, path)
    units, problems = plan(tree)
    if not units:
        return source, problems
    renames = touched(units)
    new = apply(source, edits_for(tree, renames))
    expected = Expected(renames).visit(copy.deepcopy(tree))
    if ast.dump(ast.parse(new, path)) != ast.dump(expected):
        return source, [*problems, "the rewritten text would not parse to the same program (left unchanged)"]
    return new, problems


def remaining(source: str) -> list[tuple[int, str]]:
    """(line, statement) of every one-letter alias in ``source``."""
    found = []
    lines = source.splitlines()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import | ast.ImportFrom) and any(is_short(a) for a in node.names):
            found.append((node.lineno, lines[node.lineno - 1].strip()))
    return sorted(found)


def python_files(paths: list[str]) -> list[Path]:
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files.extend(f for f in sorted(p.rglob("*.py")) if ".venv" not in f.parts)
        elif p.suffix == ".py" and p.exists():
            files.append(p)
    return files


def sort_imports(changed: list[Path]) -> None:
    ruff = shutil.which("ruff") or shutil.which("ruff", path=str(Path(sys.executable).parent))
    if not changed:
        return
    if ruff:
        subprocess.run([ruff, "check", "-q", "--select", "I", "--fix", *map(str, changed)], check=False)
    else:
        print("unalias: ruff not on PATH; run `ruff check --select I --fix` on the rewritten files", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", default=list(DEFAULT_PATHS))
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when an alias remains")
    args = parser.parse_args(argv)
    changed: list[Path] = []
    status = 0
    for path in python_files(args.paths):
        source = path.read_text()
        if args.check:
            for line, text in remaining(source):
                print(f"{path}:{line}: one-letter alias: {text}")
                status = 1
            continue
        new, problems = rewrite(source, str(path))
        for problem in problems:
            print(f"unalias: {path}: {problem}; rename it by hand", file=sys.stderr)
            status = 2
        if new != source:
            path.write_text(new)
            changed.append(path)
    if not args.check:
        sort_imports(changed)
        print(f"unalias: {len(changed)} file(s) rewritten")
    return status


if __name__ == "__main__":
    sys.exit(main())
