"""What worked on similar problems elsewhere in the workspace (issue 28), for the prompt's lesson section.

The same-problem lessons (gep/learning/lessons_by_problem.py) say what was tried on this very error. An error
seen for the first time has none, though the workspace may have fixed its kind before: a ``ZeroDivisionError``
in another function, another error in the same file. So, after the same-problem entries and within the same
character budget, the prompt names the approaches that worked on demonstrably similar problems.

"Similar" is decided on the error lines, never on the generic signals around them (they make unrelated errors
look alike): a fix whose verdict is ``verified`` (its problem stayed away after the commit), judged on an
error line (gep/learning/problem_key.py ``outcome_signals``), is shown for a current error line when the two
are different problems (their learning keys differ) and

* they are of one error family: the same exception class (``ZeroDivisionError``, ``KeyError``, ...) named in
  both lines; or
* they are in one file: a file the current line names (a path, ``file.py:12``, a traceback frame, a dotted
  name such as ``app.billing.total_invoice``) is a file the fix changed (or, when the fix's files are not
  known, one its error line named).

Newest fix first, one per problem, at most ``SIMILAR_LIMIT``. Pure: events in, prompt lines out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import PurePosixPath

from gep.core.models import EvolutionEvent
from gep.core.sanitize import redact
from gep.learning.fix_credit import sites_in
from gep.learning.problem_key import learning_key, outcome_signals

SIMILAR_LIMIT = 3
LINE_CHARS = 360
_ERROR_KINDS = ("errsig:", "recurring_errsig")
_COUNT = re.compile(r"^recurring_errsig(?:\(\d+x\))?:")
_FAMILY = re.compile(r"\b([A-Z][A-Za-z0-9_]*(?:Error|Exception|Timeout|Exit|Interrupt|Warning))\b")


def _text(signal: str) -> str:
    return _COUNT.sub("", signal.removeprefix("errsig:"))


def error_lines(signals: Sequence[str]) -> list[str]:
    """The error lines among signals (``errsig:`` and ``recurring_errsig``), as written."""
    return [_text(s) for s in signals if s.startswith(_ERROR_KINDS)]


def family(line: str) -> str | None:
    """The error family of a line: the last exception class it names (the one raised, after any wrapper)."""
    names = _FAMILY.findall(line)
    return names[-1] if names else None


def _stem(path: str) -> str | None:
    stem = PurePosixPath(path.replace("\\", "/")).stem
    return stem if stem and stem != "__init__" else None


def files_named(line: str) -> set[str]:
    """The files (by stem) a line names: paths and frames, and the module of a dotted name (``a.billing.f``:
    ``billing``)."""
    out: set[str] = set()
    for site in sites_in(line):
        if site.file:
            out.add(_stem(site.file) or "")
        elif site.dotted and site.dotted.count(".") >= 1:
            out.add(site.dotted.split(".")[-2])
    return {x for x in out if x}


def similar_reason(now_line: str, fixed_line: str, fixed_files: set[str]) -> str | None:
    """Why a fix of ``fixed_line`` is a similar problem's (None: it is not, or it is the same problem)."""
    if learning_key(now_line) == learning_key(fixed_line):
        return None
    fam = family(now_line)
    if fam is not None and fam == family(fixed_line):
        return f"also a {fam}"
    # the files the fix changed, when known: a line's logger (``app.users:``) names its package too, and every
    # error of the package shared it ("same file: app" for unrelated problems)
    shared = sorted(files_named(now_line) & (fixed_files or files_named(fixed_line)))
    return f"same file: {shared[0]}" if shared else None


def changed_stems(event: EvolutionEvent) -> set[str]:
    """The files (by stem) a change touched, when recorded."""
    return {s for f in (event.meta.changed_files or []) if (s := _stem(f))}


def _clip(text: str, n: int) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= n else flat[: n - 3].rstrip() + "..."


def similar_fixes(events: Sequence[EvolutionEvent], signals: Sequence[str],
                  approach: Callable[[EvolutionEvent], str] = lambda e: "",
                  limit: int = SIMILAR_LIMIT) -> list[str]:
    """Prompt lines naming the verified fixes of problems similar to the error lines in ``signals``."""
    now_lines = error_lines(signals)
    if not now_lines or limit <= 0:
        return []
    out: list[str] = []
    seen: set[str] = set()
    for e in sorted(events, key=lambda e: e.meta.at or "", reverse=True):
        if e.meta.fix_verdict != "verified" or not e.genes_used:
            continue
        fixed = error_lines(outcome_signals(e) or [])
        files = changed_stems(e)
        for line in fixed:
            key = learning_key(line) or line
            why = next((w for n in now_lines if (w := similar_reason(n, line, files))), None)
            if why is None or key in seen:
                continue
            seen.add(key)
            out.append(_line(e, line, why, approach(e)))
            break
        if len(out) >= limit:
            break
    return out


def _line(e: EvolutionEvent, fixed: str, why: str, approach: str) -> str:
    touched = f" Touched: {', '.join((e.meta.changed_files or [])[:3])}." if e.meta.changed_files else ""
    how = f" Approach: {_clip(approach, 240)}" if approach.strip() else ""
    text = (f"worked on a similar problem ({why}): {e.gene_id}'s fix of [{_clip(fixed, 120)}] held."
            f"{touched}{how}")
    return _clip(redact(text), LINE_CHARS)
