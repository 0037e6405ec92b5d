"""Docs that cannot drift (issue 46): every module a package's docstring or docs/ARCHITECTURE.md names exists,
every module of gep/ and flows/ is named in one of them, and every package of gep/ has its row in
docs/ARCHITECTURE.md (as pydantic-ai's docs-parity test checks its docs against its code).

How a module is named, the one convention this test reads (the source with ``ast``: it imports nothing):

- By its file name with ``.py``. In a package's ``__init__.py`` docstring a bare ``name.py`` names the module
  beside it (``gep/store/__init__.py`` saying ``codec.py`` names gep/store/codec.py; gep/__init__.py's names
  gep/name.py, flows/__init__.py's flows/name.py). In docs/ARCHITECTURE.md a bare ``name.py`` names a module
  directly in gep/ (``api.py``).
- By a path with a slash, in either place: from gep/ when its first folder is a package of gep/
  (``cycle/context.py``), else from the repository's root (``gep/store/codec.py``, ``flows/cycle.py``,
  ``tests/test_store.py``).
- A word without ``.py`` (``the pipeline``, ``(data)``, ``gep.api``) names nothing and is not checked; nor is a
  glob (``*_cmd.py``), nor a path under a dot-folder (``.gep/x.py``, a workspace's file).

A module counts as named when its own package's docstring or docs/ARCHITECTURE.md names it (another package's
docstring citing it is checked for existence but does not list it). ``__init__.py`` files are their package.
A package of gep/ is named in docs/ARCHITECTURE.md as ``name/`` (its row of the layer table).

Beyond those two places, every path of this repository that a module of gep/ or flows/ cites in a docstring or
a comment (``tests/test_store_schema.py``, ``gep/store/codec.py``) exists, but for a node id
(``tests/test_m.py::test_add``) and the few that name a file of a user's workspace (WORKSPACE_EXAMPLES).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARCHITECTURE = "docs/ARCHITECTURE.md"
CODE = ("gep", "flows")

# a path of this repository that code cites: from one of its top folders, ending in .py or .md
REPO_PATH = re.compile(r"(?<![\w./-])((?:gep|flows|tests|bench|tools|docs|examples)/[\w./-]*\w\.(?:py|md))(?![\w/]|::)")
# cited paths that are a user's workspace's files in an example, not this repository's
WORKSPACE_EXAMPLES = {"tests/foo.py"}  # gep/genes/eligibility.py: ``python -m pytest tests/foo.py``
# a path ending in .py; not part of a longer path, a dot-folder or a glob (``.gep/x.py``, ``*_cmd.py``)
PY_PATH = re.compile(r"(?<![\w./*~<>-])((?:[\w-]+/)*[\w-]+\.py)(?![\w/])")


def package_doc(init: Path) -> str:
    return ast.get_docstring(ast.parse(init.read_text(), str(init))) or ""


def resolve(root: Path, name: str, beside: Path) -> Path:
    """The file ``name`` (as the text wrote it) means: a bare name is in ``beside``; a path is from gep/ when
    its first folder is a package of gep/ (``genes/pool.py``, though the root has a genes/ folder too), else
    from the repository's root."""
    if "/" not in name:
        return beside / name
    return root / "gep" / name if (root / "gep" / name.split("/")[0]).is_dir() else root / name


def mentions(root: Path) -> Iterator[tuple[str, str, Path]]:
    """Each (where, the name as written, the file it means) in the package docstrings and ARCHITECTURE.md."""
    for folder in CODE:
        for init in sorted((root / folder).rglob("__init__.py")):
            where = f"{init.relative_to(root)}'s docstring"
            for match in PY_PATH.finditer(package_doc(init)):
                yield where, match.group(1), resolve(root, match.group(1), init.parent)
    doc = root / ARCHITECTURE
    for number, line in enumerate(doc.read_text().splitlines(), 1) if doc.is_file() else ():
        for match in PY_PATH.finditer(line):
            yield f"{ARCHITECTURE}:{number}", match.group(1), resolve(root, match.group(1), root / "gep")


def missing(root: Path) -> list[str]:
    """A line for each module named that does not exist (once per place that names it)."""
    return list(dict.fromkeys(f"{where} names {name}: {path.relative_to(root)} does not exist"
                              for where, name, path in mentions(root) if not path.is_file()))


def unnamed(root: Path) -> list[str]:
    """A line for each module of gep/ and flows/ that neither its package's docstring nor ARCHITECTURE.md
    names, saying where to name it."""
    named = {path for where, _, path in mentions(root)
             if where.startswith(ARCHITECTURE) or path.parent == root / where.split("/__init__.py")[0]}
    lines = []
    for folder in CODE:
        for module in sorted((root / folder).rglob("*.py")):
            if module.name == "__init__.py" or module in named:
                continue
            rel = module.relative_to(root)
            in_gep = module.relative_to(root / "gep") if rel.parts[0] == "gep" else rel
            lines.append(f"{rel} is named nowhere: add {module.name} to {rel.parent}/__init__.py's docstring "
                         f"(or {in_gep} to {ARCHITECTURE})")
    return lines


def packages_without_a_row(root: Path) -> list[str]:
    doc = (root / ARCHITECTURE).read_text() if (root / ARCHITECTURE).is_file() else ""
    return [f"gep/{init.parent.name}/ has no row in {ARCHITECTURE} (name it there as `{init.parent.name}/`)"
            for init in sorted((root / "gep").glob("*/__init__.py"))
            if not re.search(rf"(?<![\w/.-]){re.escape(init.parent.name)}/", doc)]


def cited_but_missing(root: Path) -> list[str]:
    """A line for each path of this repository a module of gep/ or flows/ cites that does not exist."""
    return [f"{module.relative_to(root)}:{number} cites {match.group(1)}: it does not exist"
            for folder in CODE for module in sorted((root / folder).rglob("*.py"))
            for number, line in enumerate(module.read_text().splitlines(), 1)
            for match in REPO_PATH.finditer(line)
            if match.group(1) not in WORKSPACE_EXAMPLES and not (root / match.group(1)).exists()]


def test_every_module_named_exists() -> None:
    found = missing(ROOT)
    assert not found, "\n".join(found)


def test_every_module_is_named() -> None:
    found = unnamed(ROOT)
    assert not found, "\n".join(found)


def test_every_package_has_its_row_in_the_architecture() -> None:
    found = packages_without_a_row(ROOT)
    assert not found, "\n".join(found)


def test_every_path_the_code_cites_exists() -> None:
    found = cited_but_missing(ROOT)
    assert not found, "\n".join(found)


def _plant(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


def test_the_check_finds_a_missing_and_an_unnamed_module(tmp_path: Path) -> None:
    root = _plant(tmp_path, {
        "gep/__init__.py": '"""The library: api.py."""\n', "gep/api.py": "", "gep/entry.py": "",
        "gep/store/__init__.py": '"""Persistence: full.py, memory.py, *_cmd.py, gep/core/ids.py; never the CLI;\n'
                                 'the database in <workspace>/.gep/gep.py (a workspace file, not checked);\n'
                                 '(memory.py again)."""\n',
        "gep/store/full.py": "", "gep/store/rows.py": "", "gep/store/quick.py": "",
        "gep/core/__init__.py": '"""The vocabulary (models, hashing)."""\n', "gep/core/ids.py": "",
        "gep/core/models.py": "", "flows/__init__.py": '"""Flows: cycle.py."""\n', "flows/cycle.py": "",
        "flows/serve.py": "", "tests/test_store.py": "",
        ARCHITECTURE: "| 1 | `store/` | `store/quick.py`, `entry.py` |\n| 0 | `core/` | `core/hashing.py` "
                      "(tests/test_store.py, tests/test_gone.py) |\n"})
    assert missing(root) == [
        "gep/store/__init__.py's docstring names memory.py: gep/store/memory.py does not exist",
        "docs/ARCHITECTURE.md:2 names core/hashing.py: gep/core/hashing.py does not exist",
        "docs/ARCHITECTURE.md:2 names tests/test_gone.py: tests/test_gone.py does not exist"]
    assert unnamed(root) == [
        "gep/core/ids.py is named nowhere: add ids.py to gep/core/__init__.py's docstring "
        "(or core/ids.py to docs/ARCHITECTURE.md)",
        "gep/core/models.py is named nowhere: add models.py to gep/core/__init__.py's docstring "
        "(or core/models.py to docs/ARCHITECTURE.md)",
        "gep/store/rows.py is named nowhere: add rows.py to gep/store/__init__.py's docstring "
        "(or store/rows.py to docs/ARCHITECTURE.md)",
        "flows/serve.py is named nowhere: add serve.py to flows/__init__.py's docstring "
        "(or flows/serve.py to docs/ARCHITECTURE.md)"]
    assert packages_without_a_row(root) == []
    (root / "gep" / "eval").mkdir()
    (root / "gep" / "eval" / "__init__.py").write_text('"""Evaluation."""\n')
    assert packages_without_a_row(root) == ["gep/eval/ has no row in docs/ARCHITECTURE.md (name it there as "
                                            "`eval/`)"]


def test_the_check_finds_a_cited_path_that_does_not_exist(tmp_path: Path) -> None:
    root = _plant(tmp_path, {"tests/test_inputs_cycle.py": "", "gep/core/config.py": (
        "# Ranges (tests/test_inputs_settings.py checks that each field has one; tests/test_inputs_cycle.py)\n"
        '"""A node id: tests/test_m.py::test_add; an example: pytest tests/foo.py; a workspace file:\n'
        '.gep/tests/x.py; docs/GONE.md."""\n')})
    assert cited_but_missing(root) == [
        "gep/core/config.py:1 cites tests/test_inputs_settings.py: it does not exist",
        "gep/core/config.py:3 cites docs/GONE.md: it does not exist"]
