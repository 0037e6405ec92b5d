"""A gene's preconditions that the engine can check, checked before selection like the runnable check.

Preconditions are sentences written for the agent (seed 002). Two kinds say something the engine can check
on its own, and a gene whose precondition of either kind is false is left out of selection here, with the
reason (``meta.gene_pool.excluded``):

- files: a sentence that says files exist and names them (``at least one of the agent's instruction files
  exists: AGENTS.md, CLAUDE.md, USER.md, SOUL.md``; ``pyproject.toml exists``). "one of"/"any of"/"or":
  one of them must exist; otherwise all of them must.
- signals: ``signal: <name>``, ``signals: <a>, <b>`` or ``<a> or <b> signal present`` (one of them must be
  present now; a name ending in ``*`` is a prefix);
- absent signals: ``no [active] <a>[, <b>] signals ...`` (none of them may be present now; ``error`` names every
  error signal: log_error, errsig, recurring errors, test failures).

Everything else stays a sentence for the agent.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from gep.core.models import Gene

_FILE = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+\.[A-Za-z][\w]{0,9}|(?:[\w.-]+/)+)(?![\w/])")
_EXISTS = re.compile(r"\bexists?\b|\bpresent\b", re.I)
_ANY = re.compile(r"\b(?:one of|any of|either)\b|\bor\b", re.I)
_SIGNALS = re.compile(r"^\s*signals?\s*:\s*(.+)$", re.I)
_ABSENT = re.compile(r"^\s*no\s+(?:active\s+)?([a-z_][\w*]*(?:\s*(?:,|\bor\b)\s*[a-z_][\w*]*)*)\s+signals?\b", re.I)
_ERROR_SIGNALS = ("log_error", "errsig", "recurring_err", "test_failure")  # what "no error signals" rules out
_NAMED = re.compile(r"^\s*([a-z_]\w*(?:\s*(?:,|\bor\b)\s*[a-z_]\w*)*)\s+signals?\s+(?:is\s+|are\s+)?present\s*$", re.I)


def _files_problem(text: str, workspace: Path) -> str | None:
    if not _EXISTS.search(text) or _SIGNALS.match(text) or _NAMED.match(text) or _ABSENT.match(text):
        return None
    names = [m.group(1) for m in _FILE.finditer(text.split(":", 1)[-1] if ":" in text else text)]
    names = [n for n in names if not n.replace(".", "").isdigit()]
    if not names:
        return None
    present = [n for n in names if (workspace / n).exists()]
    if _ANY.search(text) or len(names) > 1 and "at least" in text.lower():
        return None if present else f"precondition not met: none of {', '.join(names)} exists"
    missing = [n for n in names if n not in present]
    return f"precondition not met: {', '.join(missing)} missing" if missing else None


def _signals_problem(text: str, signals: Sequence[str]) -> str | None:
    m = _SIGNALS.match(text) or _NAMED.match(text)
    if m is None:
        return None
    wanted = [w.strip() for w in re.split(r",|\bor\b", m.group(1)) if w.strip()]
    for w in wanted:
        if any(s.startswith(w[:-1]) if w.endswith("*") else s == w for s in signals):
            return None
    return f"precondition not met: no signal {' / '.join(wanted)}"


def _names(signal: str, wanted: str) -> bool:
    if wanted.lower() == "error":
        return signal.startswith(_ERROR_SIGNALS)
    if wanted.endswith("*"):
        return signal.startswith(wanted[:-1])
    return signal == wanted or signal.startswith(wanted + ":")


def _absent_problem(text: str, signals: Sequence[str]) -> str | None:
    m = _ABSENT.match(text)
    if m is None:
        return None
    wanted = [w.strip() for w in re.split(r",|\bor\b", m.group(1)) if w.strip()]
    present = sorted({s for s in signals for w in wanted if _names(s, w)})
    return f"precondition not met: {', '.join(present[:3])} present" if present else None


def unmet_precondition(gene: Gene, *, workspace: Path, signals: Sequence[str]) -> str | None:
    """Why ``gene`` cannot apply here now (its first checkable precondition that is false), or None."""
    for text in gene.preconditions:
        why = _signals_problem(text, signals) or _absent_problem(text, signals) or _files_problem(text, workspace)
        if why:
            return why
    return None


def unmet_preconditions(genes: Sequence[Gene], *, workspace: Path, signals: Sequence[str]) -> dict[str, str]:
    """Gene id -> why it is left out of selection here."""
    out = {g.id: why for g in genes if (why := unmet_precondition(g, workspace=workspace, signals=signals))}
    return out
