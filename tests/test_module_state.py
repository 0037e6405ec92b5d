"""No module-level container of gep/ or flows/ is changed by a function (issue 46): what one cycle hands
another goes as a value (a parameter, a context variable, the store), never through a dict a module keeps.

A module-level container is a name bound at a module's top to a dict, list or set (a literal, a
comprehension, or ``dict()``/``list()``/``set()``/``defaultdict()``/``OrderedDict()``/``deque()``/
``Counter()``/a weak container). It is changed by item assignment or deletion (``X[k] = v``, ``X[k] += 1``,
``del X[k]``) or a mutating method (``X.append(...)``, ``.add``, ``.update``, ``.pop``, ``.clear``,
``.setdefault`` ...), in a function of its own module or anywhere in another module (imported with
``from m import X`` or reached as ``m.X``). Filling it at the top of its own module, where it is defined, is
building a constant. A ``global`` statement in any function is refused too. Caches go through functools
(lru_cache, cache); state that is the process's own (the locks it holds, its validation slots) is an object
whose methods own it, with a docstring that says why it is process-wide.

The check reads the source with ``ast`` and imports nothing.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from pathlib import Path

from source_trees import tree

ROOT = Path(__file__).resolve().parent.parent

CONSTRUCTORS = {"dict", "list", "set", "defaultdict", "OrderedDict", "deque", "Counter", "WeakValueDictionary",
                "WeakKeyDictionary", "WeakSet"}
LITERALS = (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)
MUTATORS = {"append", "extend", "insert", "add", "update", "pop", "popitem", "clear", "setdefault", "remove",
            "discard", "sort", "reverse", "appendleft", "extendleft", "popleft", "difference_update",
            "intersection_update", "symmetric_difference_update", "__setitem__", "__delitem__"}

# Module-level containers that a function may change, each with why it must be process-wide. Empty: the
# process-wide registries (gep/git/lock.py's held locks, gep/validation/slots.py's semaphores,
# gep/store/prune.py's hooks) are objects whose methods own their state, which this check does not flag.
ALLOWED: dict[str, str] = {}

Function = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _top_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """A module's top-level statements, those under a top-level if/try/with included."""
    for node in body:
        yield node
        if isinstance(node, ast.If | ast.With):
            yield from _top_statements(node.body)
            yield from _top_statements(getattr(node, "orelse", []))
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                yield from _top_statements(block)


def _is_container(value: ast.expr | None) -> bool:
    if isinstance(value, LITERALS):
        return True
    if isinstance(value, ast.Call):
        fn = value.func
        name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else ""
        return name in CONSTRUCTORS
    return False


def containers(tree: ast.Module) -> set[str]:
    """The names a module binds to a container at its top."""
    found: set[str] = set()
    for node in _top_statements(tree.body):
        if isinstance(node, ast.Assign) and _is_container(node.value):
            found |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and _is_container(node.value) and isinstance(node.target, ast.Name):
            found.add(node.target.id)
    return found


@functools.cache
def parsed() -> dict[str, tuple[ast.Module, str]]:
    """Each module of gep/ and flows/: its tree and its text."""
    found = {}
    for folder in ("gep", "flows"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            found[module_name(path)] = tree(path), path.read_text()
    return found


def _scopes(tree: ast.Module) -> list[tuple[Function, Function | None, list[ast.AST]]]:
    """Each function of ``tree``, the function it is nested in (None: at the module's top or in a class
    there), and its own nodes (not those of the functions nested in it): one walk, parents first."""
    found: dict[int, tuple[Function, Function | None, list[ast.AST]]] = {}
    stack: list[tuple[ast.AST, Function | None]] = [(child, None) for child in ast.iter_child_nodes(tree)]
    while stack:
        node, owner = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            found[id(node)] = (node, owner, [])
            inner: Function | None = node
        else:
            inner = owner
            if owner is not None:
                found[id(owner)][2].append(node)
        stack.extend((child, inner) for child in ast.iter_child_nodes(node))
    return list(found.values())


def _bound_names(fn: Function, nodes: list[ast.AST]) -> set[str]:
    """The names local to ``fn``: its parameters and what it assigns (not what it declares global)."""
    args = fn.args
    names = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg) if a}
    declared: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            names.add(node.id)
        elif isinstance(node, ast.Global | ast.Nonlocal):
            declared |= set(node.names)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
    return names - declared


def _changed(node: ast.AST) -> ast.expr | None:
    """The expression ``node`` changes in place (``X`` of ``X[k] = v`` or ``X.append(v)``), if any."""
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store | ast.Del):
        return node.value
    if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Subscript):
        return node.target.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
        return node.func.value
    return None


class Finder:
    """The changes of module-level containers in one module (its own, and other modules' it reaches)."""

    def __init__(self, module: str, tree: ast.Module, everyone: dict[str, set[str]], text: str | None = None) -> None:
        self.module, self.tree, self.everyone, self.text = module, tree, everyone, text
        self.names: dict[str, str] = {n: f"{module}.{n}" for n in everyone[module]}  # name -> its container
        self.modules: dict[str, str] = {}  # alias -> a module of gep/flows
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    if full in everyone:
                        self.modules[alias.asname or alias.name] = full
                    elif alias.name in everyone.get(node.module, ()):
                        self.names[alias.asname or alias.name] = full
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname and alias.name in everyone:
                        self.modules[alias.asname] = alias.name
        self.found: list[str] = []

    def _may_change(self) -> bool:
        """Whether the module's text has ``global`` or a name of a container followed by ``[`` or ``.``:
        the functions of a module without are not read (most modules; the check stays well under a second)."""
        if self.text is None or "global" in self.text:
            return True
        names = [*self.names, *self.modules]
        return bool(names) and re.search(rf"\b(?:{'|'.join(map(re.escape, names))})\s*[\[.]", self.text) is not None

    def _target(self, expr: ast.expr, local: set[str]) -> str | None:
        if isinstance(expr, ast.Name) and expr.id not in local:
            return self.names.get(expr.id)
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id not in local:
            module = self.modules.get(expr.value.id)
            if module is not None and expr.attr in self.everyone[module]:
                return f"{module}.{expr.attr}"
        return None

    def _say(self, node: ast.AST, what: str) -> None:
        self.found.append(f"{self.module}:{getattr(node, 'lineno', '?')} {what}")

    def scan(self) -> list[str]:
        for node in _top_statements(self.tree.body):  # another module's container, changed at import
            for sub in ([] if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                        else ast.walk(node)):
                target = _changed(sub)
                full = self._target(target, set()) if target is not None else None
                if full is not None and not full.startswith(f"{self.module}."):
                    self._say(sub, f"changes {full} (another module's container)")
        if not self._may_change():
            return self.found
        local: dict[int, set[str]] = {}
        for fn, owner, nodes in _scopes(self.tree):
            local[id(fn)] = _bound_names(fn, nodes) | (local[id(owner)] if owner is not None else set())
            for node in nodes:
                if isinstance(node, ast.Global):
                    self._say(node, f"declares global {', '.join(node.names)}")
                target = _changed(node)
                full = self._target(target, local[id(fn)]) if target is not None else None
                if full is not None:
                    self._say(node, f"changes {full} in a function")
        return self.found


@functools.cache
def all_changes() -> tuple[str, ...]:
    """Each change of a module-level container by a function, or of another module's, in gep/ and flows/,
    the allowed ones included (one scan for the two tests below)."""
    modules = parsed()
    everyone = {name: containers(tree) for name, (tree, _) in modules.items()}
    return tuple(line for name, (tree, text) in modules.items() for line in Finder(name, tree, everyone, text).scan())


def changes() -> list[str]:
    """The changes of :func:`all_changes` that ALLOWED does not allow."""
    return sorted(line for line in all_changes() if container(line) not in ALLOWED)


def container(line: str) -> str:
    """The container a line of :func:`changes` names (``gep.git.lock._HELD``), or the global declared."""
    return line.split(" ")[2]


def test_no_module_level_container_is_changed_by_a_function() -> None:
    assert not changes(), "module-level state changed by a function:\n" + "\n".join(changes())


def test_the_check_finds_each_kind_of_change() -> None:
    """Every form the check names is found, and a local of the same name, a constant built at the top of its
    module and a functools cache are not."""
    source = '''
import functools
from collections import defaultdict
SEEN = {}
LIST: list[int] = []
BAG = defaultdict(list)
TABLE = {"a": 1}
TABLE["b"] = 2
def f(x):
    SEEN[x] = 1
    LIST.append(x)
    del BAG[x]
    BAG[x] += [1]
def g():
    global COUNT
    COUNT = 1
def shadow(SEEN):
    SEEN[1] = 2
    LIST = []
    LIST.append(1)
    def inner():
        LIST.append(2)
    return inner
@functools.cache
def cached(x):
    return TABLE.get(x)
'''
    tree = ast.parse(source)
    other = ast.parse("from m import SEEN\nimport n as mod\nSEEN.add(1)\nmod.LIST.clear()\n"
                      "def h():\n    mod.BAG.update({})\n")
    everyone = {"m": containers(tree), "o": set(), "n": {"LIST", "BAG"}}
    assert everyone["m"] == {"SEEN", "LIST", "BAG", "TABLE"}
    lines = {line.split(":", 1)[1] for line in Finder("m", tree, everyone).scan()}
    assert lines == {"10 changes m.SEEN in a function", "11 changes m.LIST in a function",
                     "12 changes m.BAG in a function", "13 changes m.BAG in a function",
                     "15 declares global COUNT"}, lines
    lines = {line.split(":", 1)[1] for line in Finder("o", other, everyone).scan()}
    assert lines == {"3 changes m.SEEN (another module's container)", "4 changes n.LIST (another module's container)",
                     "6 changes n.BAG in a function"}, lines


def test_every_allowed_container_is_still_changed() -> None:
    """An allow-list entry whose container is gone or no longer changed is deleted here."""
    found = {container(line) for line in all_changes()}
    assert set(ALLOWED) <= found, set(ALLOWED) - found
