#!/usr/bin/env python3
"""Move gep/ from its flat layout into packages by job (issue 27), and rewrite every reference to a moved module.

Run from a repository root:

    python3 relayout.py                      # move the modules (git mv), write package docstrings, rewrite references
    python3 relayout.py --rewrite-only F...  # only rewrite references in the files given (a branch's new files)

Idempotent: a second run moves nothing and rewrites nothing. Modules the mapping does not name (added by other
branches) stay where they are; their references to moved modules are rewritten all the same.

What is rewritten, in *.py under gep/ flows/ tests/ bench/ examples/ tools/ (not this script) and in docs/*.md,
README.md, pyproject.toml, Makefile:
- ``from gep import x [as y]`` and ``from gep.pkg import x`` where x is a moved module, split into one
  ``from gep.new import leaf as x`` each (the local name is kept, so the code below needs no change);
- ``from gep.x import y``, ``import gep.x [as y]`` and every dotted text ``gep.x`` / ``gep.x.attr`` (mock and
  monkeypatch targets, docs) to the new dotted name; relative imports are resolved and rewritten the same way;
- path text ``gep/x.py`` to the new path, and ``gep/commands/`` to ``gep/cli/``.
Text that already names a new module (``gep.learning.lessons``) is left alone: this is what makes a second run
and a file already on the new layout safe. Four old modules become package names (gep.assets, gep.cli,
gep.learning, gep.signals): a bare ``import gep.signals`` is taken for the old module. Afterwards, when ruff is
on PATH, ``ruff check --select I --fix`` puts the rewritten import blocks back in order.

Plain python3, standard library only.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

# old dotted name -> new dotted name. Packages: what goes there, what it never imports (PACKAGES below).
MAPPING: dict[str, str] = {
    # core/: the vocabulary every layer speaks; imports nothing of gep outside core/
    "gep.constants": "gep.core.constants",
    "gep.errors": "gep.core.errors",
    "gep.config": "gep.core.config",
    "gep.models": "gep.core.models",
    "gep.records": "gep.core.records",
    "gep.hashing": "gep.core.hashing",
    "gep.sanitize": "gep.core.sanitize",
    "gep.inputs": "gep.core.safe_files",
    "gep.workspace_id": "gep.core.workspace_id",
    "gep.prebuild": "gep.core.prebuild",
    "gep.json_safe": "gep.core.json_safe",
    "gep.asset_json": "gep.core.asset_json",
    "gep.salvage": "gep.core.salvage",
    "gep.claude": "gep.core.claude",
    "gep.safe_regex": "gep.core.safe_regex",
    "gep.deadline": "gep.core.deadline",
    "gep.learning_switch": "gep.core.learning_switch",
    "gep.request": "gep.core.request",
    "gep.event_ids": "gep.core.event_ids",
    "gep.child_wait": "gep.core.child_wait",
    "gep.learned": "gep.core.learned",
    "gep.behavior_signal": "gep.core.behavior_signal",
    # store/: renamed where a name said another package's job
    "gep.store.learning": "gep.store.learned",
    "gep.store.memory": "gep.store.graph_history",
    "gep.store.quick": "gep.store.quick_read",
    "gep.store.pool": "gep.store.retirements",
    # git/
    "gep.git.recovery": "gep.git.crash_repair",
    "gep.change_scope": "gep.git.change_scope",
    # signals/: what the workspace says, read and turned into signals
    "gep.sources": "gep.signals.sources",
    "gep.signals": "gep.signals.rules",
    "gep.behavior": "gep.signals.behavior",
    "gep.behavior_rules": "gep.signals.behavior_cues",
    "gep.behavior_files": "gep.signals.behavior_log",
    "gep.llm_signals": "gep.signals.claude_pass",
    # learning/: what outcomes and people taught
    "gep.memory_graph": "gep.learning.memory_graph",
    "gep.feedback": "gep.learning.feedback",
    "gep.memory": "gep.learning.lessons",
    "gep.resolved": "gep.learning.resolved",
    "gep.verdicts": "gep.learning.human_verdicts",
    "gep.approval": "gep.learning.approval",
    "gep.problem_key": "gep.learning.problem_key",
    "gep.attribution": "gep.learning.attribution",
    "gep.fix_credit": "gep.learning.fix_credit",
    "gep.problem_memory": "gep.learning.lessons_by_problem",
    "gep.live": "gep.learning.live_problems",
    "gep.avoid": "gep.learning.avoid",
    "gep.agent_context": "gep.learning.agent_context",
    "gep.injections": "gep.learning.injections",
    "gep.context_cache": "gep.learning.context_cache",
    # validation/: running commands safely
    "gep.runner": "gep.validation.runner",
    "gep.sandbox": "gep.validation.sandbox",
    "gep.allowlist": "gep.validation.allowlist",
    "gep.canary": "gep.validation.canary",
    "gep.verdict": "gep.validation.report_verdict",
    "gep.scratch": "gep.validation.scratch",
    # genes/: what a cycle may try
    "gep.genepool": "gep.genes.pool",
    "gep.selector": "gep.genes.selector",
    "gep.runnable": "gep.genes.eligibility",
    "gep.autogene": "gep.genes.automatic",
    "gep.distill": "gep.genes.distiller",
    "gep.personality": "gep.genes.personality",
    "gep.strategy": "gep.genes.strategy",
    "gep.mutation": "gep.genes.mutation",
    "gep.preconditions": "gep.genes.preconditions",
    # mutators/: who makes the change
    "gep.tools": "gep.mutators.tools",
    "gep.prompt": "gep.mutators.gep_prompt",
    # assets/: the reference's files in and out
    "gep.assets": "gep.assets.gene_files",
    "gep.asset_files": "gep.assets.files",
    "gep.learning_assets": "gep.assets.learned",
    "gep.retired": "gep.assets.retired",
    # report/: `gep report`'s page, computed (data) and drawn (html)
    "gep.report_data": "gep.report.data",
    "gep.report_html": "gep.report.html",
    # cycle/: one cycle, from request to recorded outcome
    "gep.context": "gep.cycle.context",
    "gep.pipeline": "gep.cycle.pipeline",
    "gep.stages": "gep.cycle.stages",
    "gep.solidify": "gep.cycle.solidify",
    "gep.delivering": "gep.cycle.commit_change",
    "gep.outcomes": "gep.cycle.outcomes",
    "gep.recovery": "gep.cycle.recovery",
    "gep.abandon": "gep.cycle.abandon",
    "gep.budget": "gep.cycle.budget",
    "gep.fixes": "gep.cycle.fixes",
    "gep.learning": "gep.cycle.record_learning",
    "gep.behavior_stage": "gep.cycle.collect_behavior",
    "gep.tree": "gep.cycle.tree",
    "gep.checks": "gep.cycle.checks",
    "gep.validate": "gep.cycle.validate",
    "gep.unsafe_entries": "gep.cycle.unsafe_entries",
    "gep.interrupt": "gep.cycle.interrupt",
    "gep.cycle_state": "gep.cycle.state",
    "gep.commit_subject": "gep.cycle.commit_subject",
    # sessions/: the agent's own sessions: the Claude Code hooks (capture, session start), what an agent is told
    "gep.capture": "gep.sessions.capture",
    "gep.session_context": "gep.sessions.session_start",
    # cli/: one module per command group
    "gep.cli": "gep.cli.root",
    "gep.commands": "gep.cli",
    "gep.commands.feedback_cmd": "gep.cli.feedback_cmd",
    "gep.commands.fleet_cmd": "gep.cli.fleet_cmd",
    "gep.commands.genes_cmd": "gep.cli.genes_cmd",
    "gep.commands.lessons_cmd": "gep.cli.lessons_cmd",
    "gep.commands.store_cmd": "gep.cli.store_cmd",
    "gep.commands.context_cmd": "gep.cli.context_cmd",
    "gep.commands.report_cmd": "gep.cli.report_cmd",
    "gep.history_view": "gep.cli.history_cmd",
    "gep.history_table": "gep.cli.history_table",
    "gep.prefect_console": "gep.cli.prefect_console",
    "gep.workspace_arg": "gep.cli.workspace_arg",
    "gep.prefect_link": "gep.cli.prefect_link",
    # gep/ keeps: __init__ (the public surface), entry (console script), api, distill_run, fleet,
    # prefect_api, server
    "gep.distilling": "gep.distill_run",
}

# the modules that stay directly in gep/ (at most 20 may; tests/test_layering.py counts)
TOP_LEVEL = {"__init__", "entry", "api", "distill_run", "fleet", "fleet_progress", "prefect_api", "server"}
# the packages gep/ holds after the move
KNOWN_PACKAGES = {"core", "store", "git", "signals", "learning", "validation", "genes", "mutators", "assets",
                  "report", "cycle", "sessions", "cli"}
# files installed after the move (tools/house/post/<path> -> <path>): the layering contract, the floor plan
POST_FILES = ("tests/test_layering.py", "docs/ARCHITECTURE.md")
POST_DIR = Path(__file__).resolve().parent / "house" / "post"


def _map_new_commands() -> None:
    """A command module another branch added under gep/commands/ goes to gep/cli/ under its own name."""
    folder = Path("gep/commands")
    if folder.is_dir():
        for path in folder.glob("*.py"):
            if path.name != "__init__.py":
                MAPPING.setdefault(f"gep.commands.{path.stem}", f"gep.cli.{path.stem}")


_map_new_commands()

# old packages whose modules all moved: their __init__.py (a docstring only) is removed
RETIRED_PACKAGES = {"gep.commands": "gep.cli"}

PACKAGES: dict[str, str] = {
    "gep.core": (
        "The vocabulary every part of gep speaks: models, records, settings, constants, errors, hashing,\n"
        "redaction, JSON, safe regular expressions, the safe way to read others' files, workspace identity, the\n"
        "learned values the store keeps, the one Claude client factory.\n\n"
        "Never imports any other package of gep: everything else imports this."),
    "gep.signals": (
        "What the workspace says, read and turned into signals: bounded, redacted tails of logs, memory and\n"
        "transcripts (sources), the seed-002 rules (rules), behavioural signals (seed 000) and their daily\n"
        "files, the Claude pass (seed 001).\n\n"
        "Imports core/ only; never the store, git, validation, learning, genes, mutators or a cycle."),
    "gep.learning": (
        "What outcomes and people taught: the memory graph, feedback scores with decay (seed 003), lessons\n"
        "(seed 004) and lessons by problem, verified fixes, avoid-lists, failure attribution, live problems,\n"
        "people's verdicts and approval.\n\n"
        "Imports core/, signals/ and validation/ (a report's verdict); never the store (folding and scoring\n"
        "are given to it from here), genes, mutators, assets or a cycle."),
    "gep.validation": (
        "Running a command safely: the allowlist parser, the one runner, the bubblewrap sandbox, the scratch\n"
        "clone a command runs in, the canary, and whether a report is a verdict on the change.\n\n"
        "Imports core/ and git/ only; never the store, signals, genes, learning, mutators or a cycle."),
    "gep.genes": (
        "What a cycle may try: the gene pool and which genes can run here (eligibility, preconditions), the\n"
        "selector, automatic and distilled genes, personality, strategy, the mutation.\n\n"
        "Imports core/, git/, the store, validation/, signals/ and learning/; never mutators/, assets/, a cycle\n"
        "or the CLI."),
    "gep.assets": (
        "The reference implementation's asset files and what a workspace learned, exported and imported.\n\n"
        "Imports the packages below it (core, store, signals, learning, genes); never report/, a cycle or the\n"
        "CLI."),
    "gep.report": (
        "`gep report`'s page: what it shows, computed from a workspace's store (data), and the one\n"
        "self-contained HTML file drawn from it (html).\n\n"
        "Imports the packages below it (core, store, learning, genes); never assets/, a cycle or the CLI."),
    "gep.cli": (
        "The ``gep`` command line: the root app and the cycle commands (root), then one module per command\n"
        "group (``*_cmd``). Errors are one line on stderr and a non-zero exit, never a traceback.\n\n"
        "The top: may import every package of gep, never the console script (entry). Store-only commands\n"
        "never import Prefect or SQLAlchemy."),
    "gep.cycle": (
        "One evolution cycle, from the request to a recorded outcome: the context (resources), the pipeline\n"
        "(the one stage list), the stages, the cycle's tree, checks, validation, solidify and delivery,\n"
        "outcomes, crash recovery, the deadline and Ctrl-C.\n\n"
        "May import every package below it; never api, sessions/, the CLI, flows/ or Prefect."),
    "gep.sessions": (
        "The agent's own sessions: the Claude Code hooks (``gep capture`` on each prompt, the context at\n"
        "session start), what an agent is told (agent_context, its cache) and whether it helped (injections).\n\n"
        "May import every package below it and gep.api; never the CLI, flows/ or Prefect."),
}


# packages that exist before the move, whose docstring must also say what they never imports (the layering
# test checks every package's): the sentence is added at the end of the docstring when it names nothing
PACKAGE_NOTES: dict[str, str] = {
    "gep.store": "Imports core/ only: it keeps typed values and never calls learning, selection or distillation\n"
                 "logic (folding and scoring happen above it and are handed down).",
    "gep.mutators": "Imports core/, git/, validation/, signals/, learning/ and genes/; never assets/, report/, a\n"
                    "cycle or the CLI.",
    "gep.git": "Imports core/ only; never the store, validation, signals, learning, genes or a cycle.",
}


def add_package_notes() -> list[Path]:
    """The PACKAGE_NOTES sentence at the end of each package docstring that names no forbidden import."""
    noted: list[Path] = []
    for package, note in PACKAGE_NOTES.items():
        init = Path(*package.split(".")) / "__init__.py"
        if not init.is_file():
            continue
        text = init.read_text()
        tree = ast.parse(text)
        doc = ast.get_docstring(tree) or ""
        if "never" in doc.lower() or not tree.body or not isinstance(tree.body[0], ast.Expr):
            continue
        end = tree.body[0].end_lineno
        assert end is not None
        lines = text.splitlines(keepends=True)
        close = lines[end - 1]
        quote = close.rstrip().rstrip("\"'")
        if quote.strip():  # the docstring closes on a line with text: put the note after that text
            lines[end - 1] = quote + "\n\n" + note + "\n" + close[len(quote):].lstrip()
        else:
            lines[end - 1] = "\n" + note + "\n" + close
        init.write_text("".join(lines))
        git("add", str(init))
        noted.append(init)
    return noted


# textual patches a move needs, applied after it (file on the new layout, text before, text after): idempotent
PATCHES: list[tuple[str, str, str]] = [
    # the seed genes folder is beside gep/, one level further up from gep/assets/
    ("gep/assets/gene_files.py", 'Path(__file__).resolve().parent.parent / "genes"',
     'Path(__file__).resolve().parents[2] / "genes"'),
]


def _module_path(name: str) -> Path:
    return Path(*name.split(".")).with_suffix(".py")


def _existing_file(name: str) -> Path | None:
    """The file an (old) dotted module name lives in now, if any: a module file, or a package's __init__."""
    path = _module_path(name)
    if path.is_file():
        return path
    init = Path(*name.split(".")) / "__init__.py"
    return init if init.is_file() else None


NEW_NAMES: set[str] = set(MAPPING.values()) | set(PACKAGES) | {"gep.cli", "gep.store", "gep.git", "gep.mutators"}
NEW_PACKAGES: set[str] = {n.rsplit(".", 1)[0] for n in MAPPING.values() if n.count(".") > 1} | set(PACKAGES)


def _is_new(dotted: str) -> bool:
    return dotted in NEW_NAMES or dotted in NEW_PACKAGES


# ---------------------------------------------------------------------------------------------------- moving


def git(*args: str) -> None:
    subprocess.run(["git", *args], check=True)


def move_modules() -> list[Path]:
    """git mv every module the mapping names that is still at its old place; the new files."""
    moved: list[Path] = []
    for old, new in MAPPING.items():
        if old in RETIRED_PACKAGES:
            continue
        src = _module_path(old)
        dst = _module_path(new)
        if not src.is_file() or dst.exists():
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        git("mv", str(src), str(dst))
        moved.append(dst)
    for old in RETIRED_PACKAGES:
        folder = Path(*old.split("."))
        init = folder / "__init__.py"
        if init.is_file() and not [p for p in folder.iterdir() if p.name not in ("__init__.py", "__pycache__")]:
            git("rm", "-q", str(init))
            shutil.rmtree(folder, ignore_errors=True)
    return moved


def write_package_inits() -> list[Path]:
    """A package docstring for every new package that has none yet."""
    written: list[Path] = []
    for package in sorted(NEW_PACKAGES):
        init = Path(*package.split(".")) / "__init__.py"
        if init.exists() or not init.parent.is_dir():
            continue
        doc = PACKAGES.get(package)
        if doc is None:
            continue
        init.write_text(f'"""{doc}\n"""\n')
        git("add", str(init))
        written.append(init)
    return written


def check_no_shadowing() -> None:
    """An old module that becomes a package must have no top-level name equal to one of the package's new
    modules, or ``gep.learning.x`` would be ambiguous on the old layout. Checked while the old file exists."""
    for old in MAPPING:
        path = _module_path(old)
        if not path.is_file() or old not in NEW_PACKAGES:
            continue
        names = set()
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        clash = {n for n in names if f"{old}.{n}" in NEW_NAMES}
        if clash:
            sys.exit(f"relayout: {path} defines {sorted(clash)}, also new modules of package {old}")


def apply_patches() -> list[Path]:
    patched: list[Path] = []
    for name, before, after in PATCHES:
        path = Path(name)
        if path.is_file() and before in (text := path.read_text()):
            path.write_text(text.replace(before, after))
            git("add", name)
            patched.append(path)
    return patched


# ---------------------------------------------------------------------------------------------------- rewriting

_OLD_ALTERNATION = "|".join(re.escape(o) for o in sorted(MAPPING, key=len, reverse=True))
_DOTTED = re.compile(rf"(?<![\w.])({_OLD_ALTERNATION})(?![\w])((?:\.\w+)*)")
_OLD_PATHS = {str(_module_path(o)): str(_module_path(n)) for o, n in MAPPING.items() if o not in RETIRED_PACKAGES}
_OLD_PATHS.update({f"{o.replace('.', '/')}/": f"{n.replace('.', '/')}/" for o, n in RETIRED_PACKAGES.items()})
_PATH = re.compile(r"(?<![\w/.])(" + "|".join(re.escape(p) for p in sorted(_OLD_PATHS, key=len, reverse=True))
                   + r")(?![\w])")


def _dotted_sub(match: re.Match[str]) -> str:
    old, tail = match.group(1), match.group(2)
    parts = tail.split(".")[1:]
    # already a new name (gep.learning.lessons, gep.cli.genes_cmd ...): leave it
    for i in range(len(parts), 0, -1):
        if _is_new(".".join([old, *parts[:i]])):
            return match.group(0)
    # the longest old name wins: gep.commands.genes_cmd before gep.commands
    for i in range(len(parts), 0, -1):
        longer = ".".join([old, *parts[:i]])
        if longer in MAPPING:
            return MAPPING[longer] + "".join("." + p for p in parts[i:])
    return MAPPING[old] + tail


def rewrite_text(text: str) -> str:
    text = _DOTTED.sub(_dotted_sub, text)
    return _PATH.sub(lambda m: _OLD_PATHS[m.group(1)], text)


def _package_of(path: Path) -> str | None:
    parts = path.with_suffix("").parts
    if "gep" not in parts:
        return None
    dotted = list(parts[parts.index("gep"):])
    return ".".join(dotted if path.name == "__init__.py" else dotted[:-1])


def _alias(name: str, asname: str | None) -> str:
    return f"{name} as {asname}" if asname else name  # `X as X` (an explicit re-export) stays


def _rewrite_import_from(node: ast.ImportFrom, path: Path) -> list[str] | None:
    """New statements for one ``from X import ...`` that names moved modules; None when it needs no change."""
    module = node.module or ""
    if node.level:
        package = _package_of(path)
        if package is None:
            return None
        base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
        module = ".".join(base + ([module] if module else []))
    if not (module == "gep" or module.startswith("gep.")):
        return None
    kept: list[str] = []  # new modules (or package members) under their own package: as they are
    moved: list[str] = []  # names of an old module that moved: from its new place
    split: list[str] = []  # moved modules imported by name: one statement each, the local name kept
    for alias in node.names:
        full = f"{module}.{alias.name}"
        if full in MAPPING:  # the old meaning first: `from gep import signals` is the old module
            parent, leaf = MAPPING[full].rsplit(".", 1)
            local = alias.asname or (alias.name if alias.name != leaf else None)
            split.append(f"from {parent} import {_alias(leaf, local)}")
        elif _is_new(full) or module not in MAPPING:
            kept.append(_alias(alias.name, alias.asname))
        else:
            moved.append(_alias(alias.name, alias.asname))
    target = rewrite_text(module)
    if not split and not node.level and (target == module or not moved):
        return None
    lines = [f"from {module} import {', '.join(kept)}"] if kept else []
    lines += [f"from {target} import {', '.join(moved)}"] if moved else []
    return lines + split


def rewrite_python(text: str, path: Path) -> str:
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return rewrite_text(text)
    lines = text.splitlines(keepends=True)
    spans: list[tuple[int, int, list[str] | None]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert node.end_lineno is not None
            spans.append((node.lineno, node.end_lineno, _rewrite_import_from(node, path)))
    protected = {n for start, end, _ in spans for n in range(start, end + 1)}
    out: list[str] = []
    starts = {start: (end, new) for start, end, new in spans}
    i = 1
    while i <= len(lines):
        if i in starts:
            end, new = starts[i]
            if new is None:
                out.extend(lines[i - 1:end])
            else:
                first = lines[i - 1]
                indent = first[: len(first) - len(first.lstrip())]
                # comments in the statement (a noqa for E402 ...) go on every statement it becomes
                notes = "".join(f"  {line[line.index('#'):].rstrip()}" for line in lines[i - 1:end] if "#" in line)
                out.extend(f"{indent}{stmt}{notes}\n" for stmt in new)
            i = end + 1
            continue
        line = lines[i - 1]
        out.append(line if i in protected else rewrite_text(line))
        i += 1
    return "".join(out)


def reference_files() -> list[Path]:
    files: list[Path] = []
    for top in ("gep", "flows", "tests", "bench", "examples", "tools"):
        if Path(top).is_dir():
            files += [p for p in sorted(Path(top).rglob("*.py")) if ".venv" not in p.parts
                      and p.name != "relayout.py" and not p.resolve().is_relative_to(POST_DIR)]
    files += sorted(Path("docs").glob("*.md")) if Path("docs").is_dir() else []
    files += [Path(n) for n in ("README.md", "pyproject.toml", "Makefile") if Path(n).is_file()]
    return files


def rewrite_files(files: list[Path]) -> list[Path]:
    changed: list[Path] = []
    for path in files:
        text = path.read_text()
        new = rewrite_python(text, path) if path.suffix == ".py" else rewrite_text(text)
        if new != text:
            path.write_text(new)
            changed.append(path)
    py = [str(p) for p in changed if p.suffix == ".py"]
    ruff = shutil.which("ruff")
    if py and ruff:
        subprocess.run([ruff, "check", "-q", "--select", "I", "--fix", *py], check=False)
    elif py:
        print("relayout: ruff not on PATH; run `ruff check --select I --fix` on the rewritten files", file=sys.stderr)
    return changed


def unplaced_modules() -> list[str]:
    """Modules directly in gep/ (and folders) the mapping does not place: added by a branch since."""
    lost = [f"gep/{p.name}" for p in sorted(Path("gep").glob("*.py"))
            if p.stem not in TOP_LEVEL and f"gep.{p.stem}" not in MAPPING and p.stem not in KNOWN_PACKAGES]
    lost += [f"gep/{p.name}/" for p in sorted(Path("gep").iterdir()) if p.is_dir() and p.name != "__pycache__"
             and p.name not in KNOWN_PACKAGES and f"gep.{p.name}" not in MAPPING]
    return lost


def stop_if_unplaced() -> None:
    lost = unplaced_modules()
    if lost:
        sys.exit("relayout: stopped, nothing moved: the mapping does not place "
                 + ", ".join(lost) + ".\nAdd each to MAPPING in tools/relayout.py (or to TOP_LEVEL, at most "
                 "20 modules directly in gep/), and its package to the layers of tools/house/post/tests/"
                 "test_layering.py if new.")


def install_post_files() -> list[Path]:
    """The layering contract and the floor plan of the new layout, copied into place."""
    installed: list[Path] = []
    for rel in POST_FILES:
        src, dst = POST_DIR / rel, Path(rel)
        if src.is_file() and (not dst.is_file() or dst.read_bytes() != src.read_bytes()):
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)
            git("add", rel)
            installed.append(dst)
    return installed


def _layering_module():  # type: ignore[no-untyped-def]
    import importlib.util

    post = POST_DIR / "tests" / "test_layering.py"  # removed once the move was applied: the installed test
    path = post if post.is_file() else Path(__file__).resolve().parent.parent / "tests" / "test_layering.py"
    spec = importlib.util.spec_from_file_location("post_layering", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_flat() -> int:
    """The layering contract on the flat layout, each module named by where the mapping puts it."""
    layering = _layering_module()
    root = Path.cwd()
    flat = layering.modules(root)
    new = {m: MAPPING.get(m, m) for m in flat}
    new["gep.commands"] = "gep.cli"
    graph = {new[m]: {new[t] for t in ts} for m, ts in layering.import_graph(flat).items()}
    problems = 0
    for lost in unplaced_modules():
        print(f"unplaced: {lost}")
        problems += 1
    for mod in graph:
        try:
            layering.layer_of(layering.package_of(mod))
        except AssertionError as exc:
            print(f"no layer: {exc}")
            return 1
    old = {v: k for k, v in new.items()}
    for src, dst in sorted(layering.violations(graph)):
        print(f"upward: {old[src]} -> {old[dst]}   ({src} -> {dst})")
        problems += 1
    for group in layering.cycles(graph):
        print(f"loop of {len(group)}: " + " ".join(old[m].removeprefix("gep.") for m in group))
        problems += 1
    top = [m for m in graph if m.count(".") == 1 and m.split(".")[1] not in KNOWN_PACKAGES] + ["gep"]
    print(f"relayout --check: {problems} problem(s); {len(top)} module(s) would sit directly in gep/")
    return 1 if problems else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rewrite-only", nargs="+", metavar="FILE", help="only rewrite references in these files")
    parser.add_argument("--check", action="store_true",
                        help="move nothing: the layering contract on the flat layout, by where modules will go")
    args = parser.parse_args()
    if not Path("gep/__init__.py").is_file():
        print("relayout: run me from the repository root (no gep/__init__.py here)", file=sys.stderr)
        return 2
    if args.rewrite_only:
        changed = rewrite_files([Path(f) for f in args.rewrite_only])
        print(f"relayout: {len(changed)} file(s) rewritten")
        return 0
    if args.check:
        return check_flat()
    stop_if_unplaced()
    check_no_shadowing()
    moved = move_modules()
    inits = write_package_inits()
    patched = apply_patches() + add_package_notes()
    changed = rewrite_files(reference_files())
    if changed:
        git("add", *[str(p) for p in changed])
    post = install_post_files()
    print(f"relayout: {len(moved)} module(s) moved, {len(inits)} package(s) created, "
          f"{len(changed)} file(s) rewritten, {len(patched)} patched, {len(post)} post-move file(s) installed")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("GIT_PAGER", "cat")
    sys.exit(main())
