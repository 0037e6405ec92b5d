"""What a commit changed: its files, and the functions its hunks fall in (for crediting a fix to an error).

A Python file's changed lines are mapped to the functions (and classes) that enclose them, on both sides of
the diff (a line removed from ``add`` changed ``add``), by parsing the file with ``ast``; any other file
falls back to git's hunk header (the nearest line above that reads like a definition). Read-only: ``git show``
without external diff drivers or text conversion; a commit git cannot show gives None (no scope known).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from pydantic import BaseModel, Field

from gep.core.errors import WorkspaceError
from gep.git.plumbing import Git

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@ ?(.*)$")
_DEF_WORD = re.compile(r"\b(?:def|function|func|fn|sub|proc|class|struct|impl)\s+([A-Za-z_]\w*)")
_CALL_LIKE = re.compile(r"([A-Za-z_]\w*)\s*\(")


class FileChange(BaseModel):
    path: str  # relative to the repository's top
    functions: list[str] = Field(default_factory=list)  # enclosing functions and classes of the changed lines
    old_lines: list[int] = Field(default_factory=list)
    new_lines: list[int] = Field(default_factory=list)
    # the functions of the file before the change (name, first line, last line): a log's "file:line" is there
    old_spans: list[tuple[str, int, int]] = Field(default_factory=list)

    def function_at(self, line: int) -> str | None:
        """The innermost function at ``line`` of the file before the change."""
        inside = [s for s in self.old_spans if s[1] <= line <= s[2]]
        return max(inside, key=lambda s: s[1])[0] if inside else None


class ChangeScope(BaseModel):
    commit: str
    files: list[FileChange] = Field(default_factory=list)
    repo_files: list[str] = Field(default_factory=list)  # every file of the commit's tree (where errors can be)

    def touched(self, file: str | None, function: str | None) -> bool:
        """Whether the change touched ``function`` (in ``file`` when given), or ``file`` when no function."""
        for f in self.files:
            if file is not None and not same_file(f.path, file):
                continue
            if function is None or function in f.functions:
                return True
        return False

    def file(self, name: str) -> FileChange | None:
        return next((f for f in self.files if same_file(f.path, name)), None)


def same_file(repo_path: str, named: str) -> bool:
    """Whether a path a log names (absolute, relative, another checkout's) is the repository's ``repo_path``:
    the shorter one is a whole-component suffix of the other."""
    a = [p for p in repo_path.replace("\\", "/").split("/") if p not in ("", ".")]
    b = [p for p in named.replace("\\", "/").split("/") if p not in ("", ".")]
    n = min(len(a), len(b))
    return n > 0 and a[-n:] == b[-n:]


def enclosing(source: str, lines: list[int]) -> list[str]:
    """The functions and classes (their names) that enclose any of ``lines`` in Python ``source``."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    want = set(lines)
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            last = node.end_lineno or node.lineno
            if any(first <= n <= last for n in want) and node.name not in found:
                found.append(node.name)
    return found


def spans(source: str) -> list[tuple[str, int, int]]:
    """Every function of Python ``source``: (name, first line, last line)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    return [(n.name, n.lineno, n.end_lineno or n.lineno) for n in ast.walk(tree)
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def _header_function(header: str) -> str | None:
    m = _DEF_WORD.search(header) or _CALL_LIKE.search(header)
    return m.group(1) if m else None


def _parse_diff(text: str) -> list[tuple[str, str | None, list[int], list[int], list[str]]]:
    """(new path, old path, old changed lines, new changed lines, hunk headers) per file of a -U0 diff."""
    out: list[tuple[str, str | None, list[int], list[int], list[str]]] = []
    cur: tuple[str, str | None, list[int], list[int], list[str]] | None = None
    old_path: str | None = None
    for line in text.splitlines():
        if line.startswith("--- "):
            old_path = None if line[4:] == "/dev/null" else line[4:].removeprefix("a/")
        elif line.startswith("+++ "):
            new = line[4:]
            path = (old_path or "") if new == "/dev/null" else new.removeprefix("b/")
            cur = (path, old_path, [], [], [])
            out.append(cur)
        elif cur is not None and (m := _HUNK.match(line)):
            o, oc, n, nc = int(m[1]), int(m[2] or 1), int(m[3]), int(m[4] or 1)
            cur[2].extend(range(o, o + oc) if oc else [max(o, 1)])
            cur[3].extend(range(n, n + nc) if nc else [max(n, 1)])
            cur[4].append(m[5])
    return out


def change_scope(workspace: Path, commit: str) -> ChangeScope | None:
    """The files and functions ``commit`` changed against its first parent (None when git cannot say)."""
    g = Git(Path(workspace))
    opts = ("--no-ext-diff", "--no-textconv", "--no-color", "--no-renames", "-U0")
    try:
        parent = g.sha(f"{commit}^1")
        diff = (g.run("diff", *opts, parent, commit, "--", ok=True) if parent is not None
                else g.run("show", *opts, "--format=", "--end-of-options", commit, ok=True))
    except WorkspaceError:
        return None
    if not diff.ok:
        return None
    scope = ChangeScope(commit=commit)
    for path, old_path, old_lines, new_lines, headers in _parse_diff(diff.text):
        change = FileChange(path=path, old_lines=old_lines, new_lines=new_lines)
        if path.endswith(".py"):
            for rev, name, lines in ((commit, path, new_lines), (parent, old_path, old_lines)):
                shown = g.run("show", "--no-textconv", f"{rev}:{name}", ok=True) if rev and name else None
                if shown is not None and shown.ok:
                    change.functions += [f for f in enclosing(shown.text, lines) if f not in change.functions]
                    if rev == parent:
                        change.old_spans = spans(shown.text)
        else:
            change.functions = list(dict.fromkeys(f for h in headers if (f := _header_function(h))))
        scope.files.append(change)
    tree = g.run("ls-tree", "-r", "-z", "--name-only", "--end-of-options", commit, ok=True)
    scope.repo_files = [p for p in tree.text.split("\0") if p] if tree.ok else []
    return scope
