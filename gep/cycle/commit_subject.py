"""A commit subject that says what changed when nobody wrote one: the files and the functions the diff
touches ("Update stats.py: mean()"), never the gene's template text (the intent and gene are trailers)."""

from __future__ import annotations

import re
from collections.abc import Sequence

FILES_NAMED = 2
FUNCTIONS_NAMED = 3
# a hunk header's context (git names the enclosing function there) or an added definition
_DEF = re.compile(r"\b(?:def|class|function|func|fn|sub)\s+([A-Za-z_][\w.]*)")
_CALLABLE = re.compile(r"([A-Za-z_][\w.]*)\s*\(")


def functions_changed(diff: str) -> list[str]:
    """The functions changed lines sit in: the nearest definition above each one, from the hunk header's
    context (git names the enclosing function there) or the hunk's own lines."""
    found: list[str] = []
    current: str | None = None
    for line in diff.splitlines():
        if line.startswith(("+++", "---", "diff ", "index ")):
            current = None
            continue
        if line.startswith("@@"):
            context = line.split("@@", 2)[-1]
            m = _DEF.search(context) or _CALLABLE.search(context)
            current = m.group(1) if m else None
            continue
        if m := _DEF.search(line[1:] if line[:1] in " +-" else line):
            current = m.group(1)
        if line[:1] in "+-" and current and current not in found:
            found.append(current)
    return found


def diff_subject(paths: Sequence[str], diff: str) -> str:
    """"Update a.py, b.py and 2 more files: f(), g()" from the changed paths and the unified diff."""
    if not paths:
        return ""
    names = list(paths[:FILES_NAMED])
    files = ", ".join(names) + (f" and {len(paths) - FILES_NAMED} more files" if len(paths) > FILES_NAMED else "")
    funcs = functions_changed(diff)[:FUNCTIONS_NAMED]
    return f"Update {files}" + (": " + ", ".join(f"{f}()" for f in funcs) if funcs else "")
