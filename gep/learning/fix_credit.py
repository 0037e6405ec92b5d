"""Which problems a committed change addressed: the errors whose code it touched, not the cycle's triggers.

A cycle is triggered by whatever signals the logs gave (often generic ones: ``perf_bottleneck``,
``log_error``); the change it makes may fix an error it was never told about, or touch a helper far from the
error it was told to fix. So a fix's verdict follows the errors whose location the change touched:

* an error's location is read from its line and the traceback above it: Python frames (``File "x.py", line
  3, in add``), ``file.py:12: in f`` and ``file.py:12`` (pytest, logging's ``%(filename)s:%(lineno)d``), a
  JavaScript frame, a JSON line's ``funcName``/``pathname``/``lineno``/``module`` fields, a dotted name of the
  repository's code (``app.billing.total_invoice``), and a failing test's node id (``tests/test_m.py::test_add``);
* the change touched an error when it changed that function (or, with only a file and a line, the function
  that held the line before the change; with only a file, the file) in one of the repository's files;
* a failing test counts as made to pass when this cycle's validation ran pytest and passed.

Then the fix addresses: the trigger errors it touched or whose location nobody can tell (as before), and any
other live error it touched (credited to it); a trigger error it did not touch is *missed*: the change is
not a fix of it (no "verified" from it; it coming back means the change did not help). Pure, but for reading.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from pydantic import BaseModel, Field

from gep.git.change_scope import ChangeScope, same_file
from gep.learning.resolved import is_addressable, is_specific, line_shows, normalized_line, signal_identity

_CODE_EXT = r"(?:py|pyw|js|mjs|cjs|ts|tsx|jsx|go|rb|rs|java|kt|c|cc|cpp|h|hpp|cs|php|swift|scala|sh|ex|exs)"
_PY_FRAME = re.compile(r'File "([^"]+)", line (\d+)(?:, in ([\w<>.]+))?')
_TEST_NODE = re.compile(r"([\w./\\-]+\.py)::(?:\w+::)?(\w+)")
_JS_FRAME = re.compile(r"\bat (?:[\w.$<>]+\.)?([\w$]+) \(([^()\s]+?\." + _CODE_EXT + r"):(\d+)(?::\d+)?\)")
_FILE_LINE = re.compile(r"([\w./\\-]+\." + _CODE_EXT + r"):(\d+)(?::\d+)?:?(?: in ([\w<>]+))?")
_DOTTED = re.compile(r"\b([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)\b")
_ERROR_WORD = re.compile(r"error\s*:|exception\s*:|\[error|\berror\b|traceback|\bfailed\b|\bfatal\b", re.I)
_FRAMES_BACK = 40  # lines above an error line that may hold its traceback


class ErrorSite(BaseModel):
    file: str | None = None
    function: str | None = None
    line: int | None = None
    dotted: str | None = None  # a dotted name, resolved against the repository's files
    test: bool = False  # a failing test's node id


class LiveError(BaseModel):
    signal: str  # as the seed's signals name it (errsig:<line>)
    sites: list[ErrorSite] = Field(default_factory=list)


class Credit(BaseModel):
    addressed: list[str] = Field(default_factory=list)  # what the fix's verdict follows
    missed: list[str] = Field(default_factory=list)  # trigger errors the change did not touch
    credited: list[str] = Field(default_factory=list)  # errors that did not trigger the cycle, touched by it
    # of the addressed, the failing tests the change's own validation ran again (pytest) and passed: a check
    # that failed, re-run after the fix and passing, is evidence the fix held (gep/learning/resolved.py)
    rerun: list[str] = Field(default_factory=list)


# ------------------------------------------------------------------ where an error happened


def _json_site(text: str) -> ErrorSite | None:
    start = text.find("{")
    if start < 0:
        return None
    try:
        record = json.loads(text[start:])
    except ValueError:
        return None
    if not isinstance(record, dict):
        return None
    low = {str(k).lower(): v for k, v in record.items()}
    func = next((low[k] for k in ("funcname", "func", "function") if isinstance(low.get(k), str)), None)
    path = next((low[k] for k in ("pathname", "filename", "file") if isinstance(low.get(k), str)), None)
    line = low.get("lineno") if isinstance(low.get("lineno"), int) else None
    if func is None and path is None:
        return None
    return ErrorSite(file=path, function=func if func != "<module>" else None, line=line)


def sites_in(text: str) -> list[ErrorSite]:
    """The locations one line names."""
    out = [ErrorSite(file=m[1], line=int(m[2]), function=m[3] if m[3] and m[3] != "<module>" else None)
           for m in _PY_FRAME.finditer(text)]
    out += [ErrorSite(file=m[1], function=m[2], test=True) for m in _TEST_NODE.finditer(text)]
    out += [ErrorSite(file=m[2], line=int(m[3]), function=m[1]) for m in _JS_FRAME.finditer(text)]
    if not out:
        out += [ErrorSite(file=m[1], line=int(m[2]), function=m[3]) for m in _FILE_LINE.finditer(text)]
    site = _json_site(text)
    if site is not None:
        out.append(site)
    out += [ErrorSite(dotted=m[1]) for m in _DOTTED.finditer(text) if not _FILE_LINE.fullmatch(m[1] + ":1")]
    return out


def sites_with_context(lines: Sequence[str], i: int) -> list[ErrorSite]:
    """The locations of the error on ``lines[i]``: its own, and the traceback frames right above it."""
    sites = sites_in(lines[i])
    for j in range(i - 1, max(-1, i - 1 - _FRAMES_BACK), -1):
        above = lines[j]
        frames = sites_in(above) if ("File \"" in above or above.lstrip().startswith("at ")) else []
        if frames:
            sites += frames
        elif not (above.startswith((" ", "\t")) or above.startswith("Traceback") or not above.strip()):
            break  # the traceback ends at the line before it (another record)
    return sites


def live_errors(lines: Sequence[str], max_chars: int = 260) -> list[LiveError]:
    """The errors ``lines`` (a log's, oldest first) show, one per identity (the latest occurrence's sites)."""
    found: dict[str, LiveError] = {}
    for i, text in enumerate(lines):
        if not _ERROR_WORD.search(text) or text.lstrip().startswith(("File \"", "at ", "Traceback")):
            continue
        signal = "errsig:" + " ".join(text.split())[:max_chars]
        ident = signal_identity(signal)
        if ident is not None:
            found.pop(ident, None)
            found[ident] = LiveError(signal=signal, sites=sites_with_context(lines, i))
    return list(found.values())


# ------------------------------------------------------------------ did the change touch it


def _module_file(dotted: str, repo_files: Sequence[str]) -> tuple[str, str | None] | None:
    """(file, function) a dotted name means in the repository: ``a.b.f`` is ``a/b.py``'s ``f``, or ``a/b/f.py``."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        stem = "/".join(parts[:cut])
        for cand in (stem + ".py", stem + "/__init__.py"):
            hit = next((f for f in repo_files if f == cand or (cut > 1 and same_file(f, cand))), None)
            if hit is not None:
                rest = parts[cut:]
                return hit, rest[-1] if rest else None
    return None


def _in_repo(site: ErrorSite, scope: ChangeScope) -> ErrorSite | None:
    """The site as a place in the repository's code, None when it is elsewhere (a library's frame)."""
    if site.dotted is not None:
        where = _module_file(site.dotted, scope.repo_files)
        return None if where is None else ErrorSite(file=where[0], function=where[1])
    if site.file is None:
        return site if site.function else None
    path = next((f for f in scope.repo_files if same_file(f, site.file)), None)
    return None if path is None else site.model_copy(update={"file": path})


def _touched(site: ErrorSite, scope: ChangeScope, tests_passed: bool) -> bool:
    if site.test:
        return tests_passed
    change = scope.file(site.file) if site.file else None
    if site.file is not None and change is None:
        return False
    function = site.function
    if function is None and site.line is not None and change is not None:
        function = change.function_at(site.line)
        if function is None:  # module-level code: the change touched that very line, or not
            return site.line in change.old_lines
    return scope.touched(site.file, function)


def touches(sites: Sequence[ErrorSite], scope: ChangeScope, tests_passed: bool) -> bool | None:
    """Whether the change touched the error at ``sites`` (None: none of them is in the repository's code)."""
    here = [s for site in sites if (s := _in_repo(site, scope)) is not None]
    if not here:
        return None
    # a file named alone (a logger's module) says less than a function or line named in the same file
    precise = {s.file for s in here if s.function or s.line is not None}
    here = [s for s in here if s.function or s.line is not None or s.test or s.file not in precise]
    return any(_touched(s, scope, tests_passed) for s in here)


def _trigger_sites(signal: str, errors: Sequence[LiveError]) -> list[ErrorSite]:
    ident = signal_identity(signal)
    sites = sites_in(signal.partition(":")[2])
    for e in errors:
        if ident is not None and line_shows(ident, normalized_line(e.signal.removeprefix("errsig:"))):
            sites += e.sites
    return sites


def credit_change(triggers: Sequence[str], errors: Sequence[LiveError], scope: ChangeScope | None,
                  *, tests_passed: bool = False, settled: Sequence[str] = ()) -> Credit:
    """What a change addressed (see the module doc). ``errors``: the live errors when it was committed;
    ``settled``: signals already resolved (not credited again); no ``scope``: the triggers, as before."""
    addressable = list(dict.fromkeys(s for s in triggers if is_addressable(s)))
    if scope is None:
        return Credit(addressed=addressable)
    out = Credit()
    for s in addressable:
        sites = _trigger_sites(s, errors) if is_specific(s) else []
        hit = touches(sites, scope, tests_passed) if is_specific(s) else True
        (out.missed if hit is False else out.addressed).append(s)
        if hit and tests_passed and any(x.test for x in sites):
            out.rerun.append(s)
    seen = {signal_identity(s) for s in [*addressable, *settled]}
    for e in errors:
        ident = signal_identity(e.signal)
        if ident not in seen and touches(e.sites, scope, tests_passed):
            out.addressed.append(e.signal)
            out.credited.append(e.signal)
            if tests_passed and any(x.test for x in e.sites):
                out.rerun.append(e.signal)
            seen.add(ident)
    return out
