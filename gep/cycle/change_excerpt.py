"""A change in a few lines, from its diff: what a later agent is told was tried (issue 41, point 4).

Stored with the cycle's event (``meta.change_excerpt``) when its change is checked, so a failed change, which
is discarded, can still be named later: in the lessons, the avoid-list, the SessionStart context and beside a
person's feedback. The form is ``calc.py mean(): - return sum(xs) / len(xs) | + return 0``: the file, the
functions its changed lines sit in, then its changed lines (blank ones skipped), each cut: all of them when there
are at most :data:`LINES`, else the first added lines of code and the counts.
"""

from __future__ import annotations

from gep.core.sanitize import redact
from gep.cycle.commit_subject import functions_changed

LINES = 4
LINE_CHARS = 70
CHARS = 300


def _cut(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3].rstrip() + "..."


def _files(diff: str) -> list[str]:
    out: list[str] = []
    for line in diff.splitlines():
        if line.startswith("+++ ") or line.startswith("--- "):
            path = line[4:].strip()
            path = path[2:] if path.startswith(("a/", "b/")) else path
            if path != "/dev/null" and path not in out:
                out.append(path)
    return out


def _chosen(changed: list[str]) -> list[str]:
    """All changed lines of a small change, in order; of a larger one its first added lines of code (what was
    put in says more than what was taken out), with the counts."""
    if len(changed) <= LINES:
        return changed
    added = [c for c in changed if c.startswith("+")]
    removed = len(changed) - len(added)
    code = [c for c in added if not c[2:].lstrip().startswith(_PROSE)] or added or changed
    return [*code[:LINES - 1], f"(-{removed} +{len(added)} lines)"]


_PROSE = ("#", '"""', "'''", "//", "/*", "*")


def change_excerpt(diff: str) -> str:
    """The change of a unified ``diff`` in one short line ("" for no diff)."""
    if not diff.strip():
        return ""
    changed = [f"{line[0]} {_cut(line[1:], LINE_CHARS)}" for line in diff.splitlines()
               if line[:1] in "+-" and not line.startswith(("+++", "---")) and line[1:].strip()]
    files = _files(diff)
    where = ", ".join(files[:2]) + (f" (+{len(files) - 2} files)" if len(files) > 2 else "")
    funcs = functions_changed(diff)[:2]
    head = where + (" " + ", ".join(f"{f}()" for f in funcs) if funcs else "")
    return _cut(redact(head + ": " + " | ".join(_chosen(changed))), CHARS)
