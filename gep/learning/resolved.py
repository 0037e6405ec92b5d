"""Verified fixes: an error a committed fix addressed does not drive repair again from old log lines.

When a cycle's change is committed, :func:`resolution_for_commit` records what it addressed: the trigger
signals that name a problem (``errsig:``, ``recurring_errsig``, feature and improvement requests, and the
generic ``log_error``, ``recurring_error``, ``perf_bottleneck``, ...), the commit and its time, and the size
of every log and transcript file at that moment (``gep.signals.sources.file_marks``).

Later, :func:`check_resolutions` reads the files line by line (``gep.signals.sources.collect_tails``). A line was
written *before* a fix when it carries a timestamp (its own, or in a log that of the timestamped line it
continues) no later than the commit, or, without one, when it lies in the bytes the file already had at the
commit (the file has only grown since). Every other line is *new*. Then, per signal of the cycle:

* resolved: a fix addressed it and it occurs in no new line (for a generic signal: the signal extraction run
  over the new lines alone does not emit it). It is dropped from the signals and listed with its commit.
* live again: it occurs in a new line. It is kept, and the fix did not hold.

An error signature is compared without the line's leading timestamp and with numbers, hex and paths
normalised (the memory graph's ``normalize_error_signature``), so the same error at another time matches.
When an error signature is dropped, an error signature of the new lines (a different, new error) takes its
place. A fix is judged once something ran after it: **verified** when its specific triggers (or its generic ones
when it had no specific one) occur in no new line *and* the code that failed wrote new lines since (the log
that showed the error grew past where the commit marked it; for a problem no old line names, any log grew;
or, with nothing new yet, every problem it is judged on is a failing test its own validation ran again and
passed); **did_not_hold** as soon as one comes back. Until then it stays pending ("committed, not yet judged"): the
same old lines with nothing new prove nothing. A verified fix whose trigger comes back later turns
did_not_hold then.

**A problem that changed shape is not fixed.** A change that swallows an exception makes its error line go,
and the function then logs something else: a warning that it "returned no result", another error. So a fix
also does not hold when a log line written after it, at warning or error level, names a function the change
touched (``Resolution.touched``) and no line before the commit had that text: the problem moved, it did not
go (when two fixes touched the function and the line is new to both, the newer change is judged on it). The verdict lists that line (``errsig:<line>``) among its live signals, and while the new lines of this
cycle (``recent``) still show it, it drives repair like the error it replaced (it is not in the log rules'
error signals: a warning carries no error word).

Pure: signals, resolutions and file tails in.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from gep.core.learned import SPECIFIC_PREFIXES as SPECIFIC_PREFIXES
from gep.core.learned import FixStatus as FixStatus
from gep.core.learned import Resolution as Resolution
from gep.core.learned import is_specific as is_specific
from gep.learning.problem_key import learning_key
from gep.signals.rules import PLATEAU, extract_signals
from gep.signals.sources import FileMark, FileTail, TailLine, render_transcript

GENERIC = frozenset({"log_error", "recurring_error", "perf_bottleneck", "capability_gap", "unsupported_input_type"})
ERROR_KINDS = ("errsig:", "recurring_errsig")  # replaced by the new lines' own when dropped
EMPTY_FALLBACK = PLATEAU  # what extract_signals says when nothing is left

# where the verdict on a fix is kept in its event's meta ("verified" | "did_not_hold"): selection counts a fix
# that did not hold as a failure, since success means the problem went away
FIX_VERDICT_KEY = "fix_verdict"

_LEAD_TIME = re.compile(r"^\s*\[?\d{4}-\d{2}-\d{2}[T ][\d:.,]+\s?(?:Z|UTC|[+-]\d{2}:?\d{2})?\]?\s*")
_COUNT = re.compile(r"^recurring_errsig\(\d+x\):")
# a line that reports a problem: its level (text or a JSON field) or an error word
_PROBLEM_LINE = re.compile(r"\b(?:warn(?:ing)?|error|critical|fatal|exception|traceback)\b", re.I)
_NAME_MIN = 4  # shorter function names ("get", "run") name too many unrelated lines
_SIGNAL_CHARS = 260  # an errsig signal's line, as the log rules clip it
_SNIPPET_HEAD = 40


class ResolvedSignal(BaseModel):
    """A signal that a fix addressed (for the event's meta: resolved, or live again)."""

    signal: str
    event_id: str
    commit_sha: str
    committed_at: datetime


class FixVerdict(BaseModel):
    event_id: str
    gene_id: str | None = None
    commit_sha: str
    verdict: Literal["verified", "did_not_hold"]
    live_signals: list[str] = Field(default_factory=list)
    judged: list[str] = Field(default_factory=list)  # the problems (signals) the verdict is about
    new_lines: int = 0  # lines the code that failed wrote since the commit
    # what showed it held: new lines without the problem, or (none yet) its failing test re-run and passing
    evidence: Literal["new_lines", "rerun"] = "new_lines"


class ResolutionCheck(BaseModel):
    signals: list[str]  # the signals that drive this cycle
    resolved: list[ResolvedSignal] = Field(default_factory=list)
    live_again: list[ResolvedSignal] = Field(default_factory=list)
    verdicts: list[FixVerdict] = Field(default_factory=list)
    updated: list[Resolution] = Field(default_factory=list)  # resolutions whose status changed: store them


# ------------------------------------------------------------------ signal identity


def is_addressable(signal: str) -> bool:
    return signal.startswith(SPECIFIC_PREFIXES) or signal in GENERIC


def _norm(text: str) -> str:
    return learning_key(_LEAD_TIME.sub("", text, count=1)) or ""


def signal_identity(signal: str) -> str | None:
    """What stays the same when the same problem shows again: the kind plus its normalised text."""
    if signal.startswith("errsig:"):
        return "errsig:" + _norm(signal[len("errsig:"):])
    if signal.startswith("recurring_errsig"):
        return "recurring_errsig:" + _norm(_COUNT.sub("", signal))
    for prefix in SPECIFIC_PREFIXES[2:]:
        if signal.startswith(prefix):
            return prefix + _norm(signal[len(prefix):])
    return signal if signal in GENERIC else None


def _occurs(identity: str, line: str) -> bool:
    """Whether a (normalised) line shows the problem ``identity`` names."""
    kind, _, text = identity.partition(":")
    if not text:
        return False
    if kind == "errsig":
        # the signature is a whole line (clipped): the line agrees with all of it, or its first 200 characters
        k = min(len(line), len(text))
        return k >= min(len(text), 200) and line[:k] == text[:k]
    if kind == "recurring_errsig":
        return text in line
    return text[:_SNIPPET_HEAD] in line or (len(line) >= 20 and line in text)  # a snippet around a request


def normalized_line(text: str) -> str:
    """A line as problem identities are compared with it: leading timestamp dropped, numbers and paths normalised."""
    return _norm(text)


def line_shows(identity: str, line: str) -> bool:
    """Whether a line (:func:`normalized_line`) shows the problem ``identity`` (:func:`signal_identity`) names."""
    return _occurs(identity, line)


# ------------------------------------------------------------------ old and new lines


def resolution_for_commit(*, event_id: str, gene_id: str | None, signals: Sequence[str], commit_sha: str,
                          committed_at: datetime, files: Sequence[FileMark], missed: Sequence[str] = (),
                          credited: Sequence[str] = (), rerun: Sequence[str] = (),
                          touched: Sequence[str] = (), touched_files: Sequence[str] = ()) -> Resolution | None:
    """The record to keep when a cycle's change is committed (None when it addressed no problem).
    ``signals``: what it addressed (gep/learning/fix_credit.py: the errors it touched; else its trigger signals)."""
    addressed = list(dict.fromkeys(s for s in signals if is_addressable(s)))
    if not addressed and not missed:
        return None
    return Resolution(event_id=event_id, gene_id=gene_id, signals=addressed, commit_sha=commit_sha,
                      committed_at=committed_at, files=list(files), missed=list(missed), credited=list(credited),
                      rerun=[s for s in rerun if s in addressed], touched=list(touched),
                      touched_files=list(touched_files))


def _is_old(line: TailLine, tail: FileTail, res: Resolution, marks: dict[str, FileMark]) -> bool:
    if line.at is not None:
        return line.at <= res.committed_at
    mark = marks.get(tail.path)
    # only an appended-to file keeps its old bytes where they were (a rewritten one is new throughout)
    return mark is not None and not tail.rewritten_since(mark) and line.start < mark.size


class _NewText(BaseModel):
    lines: list[str]  # normalised new lines (transcripts rendered), for matching signatures
    log: str  # the new lines of logs and memory logs, for signal extraction
    transcript: str

    def signals(self) -> list[str]:
        if not self.log.strip() and not self.transcript.strip():
            return []
        return extract_signals(recent_session_transcript=self.transcript, today_log=self.log)


def _new_text(tails: Sequence[FileTail], res: Resolution) -> _NewText:
    marks = {m.path: m for m in res.files}
    norm: list[str] = []
    log: list[str] = []
    transcript: list[str] = []
    for tail in tails:
        for line in tail.lines:
            if _is_old(line, tail, res, marks):
                continue
            if tail.kind == "transcript":
                shown = render_transcript(line.text)
                transcript.append(shown)
                norm.extend(_norm(x) for x in shown.split("\n") if x.strip())
            else:
                log.append(line.text)
                norm.append(_norm(line.text))
    return _NewText(lines=norm, log="\n".join(log), transcript="\n".join(x for x in transcript if x))


# ------------------------------------------------------------------ the check


class _Seen(BaseModel):
    res: Resolution
    identities: dict[str, str]  # signal -> identity, for the signals the fix addressed
    missed: dict[str, str]  # signal -> identity, for the trigger errors the change did not touch
    live: set[str]  # identities that occur in lines written after the commit
    new_lines: int
    reshaped: dict[str, str] = Field(default_factory=dict)  # identity -> line: the problem in another shape


def _names_touched(res: Resolution) -> re.Pattern[str] | None:
    names = sorted({f for f in res.touched if len(f) >= _NAME_MIN and f.isidentifier()})
    if not names:
        return None
    return re.compile(r"(?<!\w)(?:" + "|".join(map(re.escape, names)) + r")(?!\w)")


def _reshaped(tails: Sequence[FileTail], res: Resolution, known: Iterable[str]) -> dict[str, str]:
    """The problem lines (warning or error) of the logs, written after the commit, that name a function the
    change touched and whose text no line before the commit had: identity -> the latest such line. ``known``:
    the fix's own problems (their coming back is judged as such, not as a new shape)."""
    names = _names_touched(res)
    if names is None:
        return {}
    marks = {m.path: m for m in res.files}
    known = [k for k in known if k not in GENERIC]
    old: set[str] = set()
    new: dict[str, str] = {}
    for tail in tails:
        if tail.kind == "transcript":
            continue
        for line in tail.lines:
            if not _PROBLEM_LINE.search(line.text) or not names.search(line.text):
                continue
            ident = signal_identity(_as_signal(line.text))
            if ident is None:
                continue
            if _is_old(line, tail, res, marks):
                old.add(ident)
            elif not any(_occurs(k, _norm(line.text)) for k in known):
                new.pop(ident, None)
                new[ident] = line.text
    return {i: t for i, t in new.items() if i not in old}


def _seen(res: Resolution, tails: Sequence[FileTail], current: set[str]) -> _Seen:
    new = _new_text(tails, res)
    ids = {s: i for s in res.signals if (i := signal_identity(s)) is not None}
    missed = {s: i for s in res.missed if (i := signal_identity(s)) is not None}
    live = {i for i in [*ids.values(), *missed.values()]
            if i not in GENERIC and any(_occurs(i, line) for line in new.lines)}
    # generic signals cost a signal extraction over the new lines: only when they matter now
    generic = [i for i in ids.values() if i in GENERIC and (res.status == "pending" or i in current)]
    if generic:
        emitted = set(new.signals())
        live |= {i for i in generic if i in emitted}
    reshaped = _reshaped(tails, res, [*ids.values(), *missed.values()]) if res.status != "did_not_hold" else {}
    return _Seen(res=res, identities=ids, missed=missed, live=live, new_lines=len(new.lines), reshaped=reshaped)


def _verdict(seen: _Seen, tails: Sequence[FileTail]) -> FixVerdict | None:
    """Judged on the specific problems it addressed, else on the trigger errors it missed (it can only have
    failed them: a change that did not touch an error is no fix of it), else on its generic triggers. Verified
    only with evidence that something ran since (:func:`_evidence`); without it the fix stays pending."""
    res = seen.res
    specific = {s: i for s, i in seen.identities.items() if is_specific(s)}
    judged = specific or seen.missed or seen.identities
    live = [s for s, i in judged.items() if i in seen.live]
    live += [_as_signal(line) for line in seen.reshaped.values()]  # the problem in another shape
    ran = seen.new_lines
    evidence: Literal["new_lines", "rerun"] = "new_lines"
    if live and res.status != "did_not_hold":
        verdict: Literal["verified", "did_not_hold"] = "did_not_hold"
    elif not live and res.status == "pending" and not (seen.missed and not specific):
        ran = _evidence(tails, res, judged.values())
        if not ran and not set(judged) <= set(res.rerun):
            return None  # nothing ran since the commit: committed, not yet judged
        evidence = "new_lines" if ran else "rerun"
        verdict = "verified"
    else:
        return None
    return FixVerdict(event_id=res.event_id, gene_id=res.gene_id, commit_sha=res.commit_sha, verdict=verdict,
                      live_signals=live, judged=list(judged), new_lines=ran, evidence=evidence)


def _as_signal(line: str) -> str:
    """A log line as the log rules would name the error it shows (``errsig:<line>``, clipped)."""
    return "errsig:" + " ".join(line.split())[:_SIGNAL_CHARS]


def _normed(tail: FileTail, line: TailLine) -> list[str]:
    if tail.kind != "transcript":
        return [_norm(line.text)]
    return [_norm(x) for x in render_transcript(line.text).split("\n") if x.strip()]


def _evidence(tails: Sequence[FileTail], res: Resolution, identities: Iterable[str]) -> int:
    """How many lines the code that failed wrote since the commit: the new lines of the files whose older
    lines show a judged problem (a log, or the transcript of a session that reported it); when no file does (a
    generic problem, a log rotated since), of any log."""
    marks = {m.path: m for m in res.files}
    specific = [i for i in identities if i not in GENERIC]
    new: dict[str, int] = {}
    sources: set[str] = set()
    for tail in tails:
        for line in tail.lines:
            if not _is_old(line, tail, res, marks):
                new[tail.path] = new.get(tail.path, 0) + 1
            elif specific and tail.path not in sources and any(
                    _occurs(i, x) for x in _normed(tail, line) for i in specific):
                sources.add(tail.path)
    if sources:
        return sum(new.get(p, 0) for p in sources)
    return sum(n for t in tails if t.kind != "transcript" and (n := new.get(t.path, 0)))


def _ref(signal: str, res: Resolution) -> ResolvedSignal:
    return ResolvedSignal(signal=signal, event_id=res.event_id, commit_sha=res.commit_sha,
                          committed_at=res.committed_at)


def check_resolutions(signals: Sequence[str], resolutions: Sequence[Resolution], tails: Sequence[FileTail],
                      now: datetime, recent: str = "") -> ResolutionCheck:
    """Drop the signals fixes resolved, keep those that came back, and judge each fix (see the module doc).

    ``resolutions``: the recent ones (say the last 20), any order; those that did not hold are ignored but for
    the new shape of their problem. ``recent``: the log lines this cycle reads (written since it last looked):
    a problem in a new shape that still shows there is added to the signals."""
    active = sorted((r for r in resolutions if r.status != "did_not_hold"), key=lambda r: r.committed_at)
    current = {i for s in signals if (i := signal_identity(s)) is not None}
    seen = [_seen(r, tails, current) for r in active]
    out = ResolutionCheck(signals=[])
    dropped_error = False
    for s in signals:
        ident = signal_identity(s)
        addressing = [x for x in seen if ident is not None and ident in x.identities.values()]
        if not addressing:
            out.signals.append(s)
            continue
        latest = addressing[-1]  # the newest fix of it decides: an occurrence before it was its trigger
        if ident in latest.live:
            out.signals.append(s)
            out.live_again.append(_ref(s, latest.res))
        else:
            out.resolved.append(_ref(s, latest.res))
            dropped_error = dropped_error or s.startswith(ERROR_KINDS)
    if dropped_error and seen:
        _add_new_errors(out, seen[-1].res, tails)
    if not out.signals and signals:
        out.signals.append(EMPTY_FALLBACK)
    _newest_claims(seen)
    for x in seen:
        verdict = _verdict(x, tails)
        if verdict is not None:
            out.verdicts.append(verdict)
            update: dict[str, object] = {"status": verdict.verdict, "checked_at": now}
            if x.reshaped:
                update["reshaped"] = list(x.reshaped)
            out.updated.append(x.res.model_copy(update=update))
    _add_reshaped(out, [*(r for r in resolutions if r.status == "did_not_hold"), *out.updated], recent)
    return out


def _newest_claims(seen: Sequence[_Seen]) -> None:
    """A new line that names a function two fixes touched is about the newer change (it wrote the code the line
    comes from): the older fix is not judged on it. ``seen``: oldest first."""
    claimed: set[str] = set()
    for x in reversed(seen):
        x.reshaped = {i: line for i, line in x.reshaped.items() if i not in claimed}
        claimed |= set(x.reshaped)


def _add_reshaped(out: ResolutionCheck, resolutions: Sequence[Resolution], recent: str) -> None:
    """A problem a fix only moved (a new line naming the function it changed) drives repair while the lines
    this cycle reads show it: the log rules do not name it when it carries no error word."""
    shapes = {i for r in resolutions for i in r.reshaped}
    if not shapes or not recent.strip():
        return
    have = {signal_identity(s) for s in out.signals}
    for line in reversed(recent.splitlines()):  # the latest occurrence names it
        signal = _as_signal(line)
        ident = signal_identity(signal)
        if ident in shapes and ident not in have:
            out.signals.append(signal)
            have.add(ident)
    if len(out.signals) > 1 and EMPTY_FALLBACK in out.signals:
        out.signals.remove(EMPTY_FALLBACK)


def _add_new_errors(out: ResolutionCheck, newest: Resolution, tails: Sequence[FileTail]) -> None:
    """New lines (after the newest fix) name an error of their own: it drives repair instead."""
    resolved = {signal_identity(r.signal) for r in out.resolved}
    have = {signal_identity(s) for s in out.signals}
    for s in _new_text(tails, newest).signals():
        if s.startswith(ERROR_KINDS) and signal_identity(s) not in resolved | have:
            out.signals.append(s)
            have.add(signal_identity(s))
