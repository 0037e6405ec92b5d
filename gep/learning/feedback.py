"""Gene usefulness from feedback signals (seed 003), per signal situation and globally.

Every gene starts at 0.5. A signal moves a score by ``weight x confidence x 0.1`` (clamped to [0, 1]):
``used`` +1.0, ``ignored`` -0.5, ``helpful`` +1.5, ``not_helpful`` -1.0. Between signals a score decays
toward 0.5 by 5% a week: ``0.5 + (s - 0.5) x 0.95 ** (days / 7)``.

Scores are context-aware as in the seed: each signal carries the signal situation of the cycle it judges,
so a gene has one score per situation and one global score. A lookup for the current signals uses the
closest stored situation (the memory graph's rule: Jaccard over normalised situation signals,
>= ``SIGNAL_KEY_JACCARD_MIN``) and falls back to the global score.

Pure: signals and ``now`` in, scores out; the stored signals are the one source of truth (scores are a fold
over them in time order). Signals come from cycles (``implicit_signal``: a verified fix is ``used``, a fix
that did not hold, a cycle that ended empty or abandoned, or one whose change failed its checks and was rolled
back (its change abandoned, see docs/learning.md) is ``ignored``, a person's revert of a GEP commit
is ``not_helpful``) and from people (``explicit_signal``). ``find_reverts`` is the one I/O function here: it
reads a repository's history for people's reverts of GEP commits.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, Protocol

from pydantic import BaseModel, Field

from gep.core import constants
from gep.core.errors import GepError
from gep.core.learned import FeedbackKind as FeedbackKind
from gep.core.learned import FeedbackSignal as FeedbackSignal
from gep.core.learned import Observation as Observation
from gep.core.sanitize import redact
from gep.learning.memory_graph import compute_signal_key, jaccard, normalize_signals, situation_signals

NEUTRAL = 0.5
STEP = 0.1  # delta = weight x confidence x STEP
WEEKLY_RETENTION = 0.95  # what is left of a score's distance from neutral after a week without signals
NOTE_CHARS = 2_000
USEFULNESS_WEIGHT = constants.USEFULNESS_WEIGHT  # settings.usefulness_weight


class FeedbackError(GepError):
    """Feedback that cannot be recorded (no gene to score, an unknown kind)."""


WEIGHTS: dict[FeedbackKind, float] = {
    FeedbackKind.used: 1.0,
    FeedbackKind.ignored: -0.5,
    FeedbackKind.helpful: 1.5,
    FeedbackKind.not_helpful: -1.0,
}


# The implicit mapping. A fix that did not hold is "ignored" at the seed's cap on ignore confidence (0.6).
IMPLICIT: dict[Observation, tuple[FeedbackKind, float]] = {
    Observation.fix_verified: (FeedbackKind.used, 0.9),
    Observation.fix_did_not_hold: (FeedbackKind.ignored, 0.6),
    Observation.ended_empty: (FeedbackKind.ignored, 0.5),
    Observation.ended_abandoned: (FeedbackKind.ignored, 0.5),
    Observation.rolled_back: (FeedbackKind.ignored, 0.5),
    Observation.reverted: (FeedbackKind.not_helpful, 1.0),
}


# ------------------------------------------------------------------ arithmetic (the seed's)


def score_delta(kind: FeedbackKind, confidence: float) -> float:
    return WEIGHTS[kind] * confidence * STEP


def clamp01(x: float) -> float:
    return min(1.0, max(0.0, x))


def decayed(score: float, days: float) -> float:
    """``0.5 + (score - 0.5) x 0.95 ** (days / 7)``; no decay for negative or zero ages."""
    return NEUTRAL + (score - NEUTRAL) * WEEKLY_RETENTION ** (max(0.0, days) / 7.0)


def _days(a: datetime, b: datetime) -> float:
    return (b - a).total_seconds() / 86400.0


class SignalCounts(BaseModel):
    used: int = 0
    ignored: int = 0
    helpful: int = 0
    not_helpful: int = 0

    def add(self, kind: FeedbackKind) -> None:
        setattr(self, kind.value, getattr(self, kind.value) + 1)

    @property
    def total(self) -> int:
        return self.used + self.ignored + self.helpful + self.not_helpful


class Score(BaseModel):
    """A running score: its value at ``updated_at`` (the last signal), and what made it."""

    value: float = NEUTRAL
    updated_at: datetime | None = None
    counts: SignalCounts = Field(default_factory=SignalCounts)

    def apply(self, signal: FeedbackSignal) -> None:
        """Decay to the signal's time, then move by its delta (signals must come in time order)."""
        base = self.value if self.updated_at is None else decayed(self.value, _days(self.updated_at,
                                                                                    signal.created_at))
        self.value = clamp01(base + score_delta(signal.kind, signal.confidence))
        if self.updated_at is None or signal.created_at > self.updated_at:
            self.updated_at = signal.created_at
        self.counts.add(signal.kind)

    def at(self, now: datetime) -> float:
        return self.value if self.updated_at is None else decayed(self.value, _days(self.updated_at, now))


def fold(signals: Iterable[FeedbackSignal]) -> Score:
    """The score a sequence of signals leaves, applied in time order (ties by id)."""
    score = Score()
    for s in sorted(signals, key=lambda s: (s.created_at, s.id)):
        score.apply(s)
    return score


# ------------------------------------------------------------------ context-aware lookup


class Usefulness(BaseModel):
    gene_id: str
    score: float = NEUTRAL
    scope: Literal["situation", "global", "none"] = "none"
    situation_key: str | None = None
    similarity: float = 0.0
    signals: int = 0  # how many signals the score rests on
    not_helpful: int = 0  # of them, people's not_helpful (their verdicts and their reverts)
    helpful: int = 0  # of them, people's helpful (only people give it)

    @property
    def person_against(self) -> bool:
        """People said this gene's changes here did not help more often than that they did, and the score has
        not come back to neutral since (verified fixes raise it; it fades back by 5% a week)."""
        return self.not_helpful > self.helpful and self.score < NEUTRAL


class _Situation(BaseModel):
    key: str
    signals: list[str]
    score: Score = Field(default_factory=Score)


class FeedbackIndex:
    """Per-gene global and per-situation scores, built once from the stored signals."""

    def __init__(self, signals: Iterable[FeedbackSignal] = ()):
        self.global_scores: dict[str, Score] = {}
        self.situations: dict[str, dict[str, _Situation]] = {}
        for s in sorted(signals, key=lambda s: (s.created_at, s.id)):
            self.add(s)

    def add(self, s: FeedbackSignal) -> None:
        """One more signal, no older than those already in (a long-running caller's incremental update)."""
        self.global_scores.setdefault(s.gene_id, Score()).apply(s)
        by_key = self.situations.setdefault(s.gene_id, {})
        key = compute_signal_key(s.situation)
        if key not in by_key:
            by_key[key] = _Situation(key=key, signals=list(s.situation))
        by_key[key].score.apply(s)

    def __len__(self) -> int:
        return sum(sc.counts.total for sc in self.global_scores.values())

    def usefulness(self, gene_id: str, signals: Sequence[str], now: datetime) -> Usefulness:
        """The score of the closest stored situation of this gene, else its global score, else 0.5."""
        current = situation_key_signals(signals)
        best: tuple[float, int, datetime, _Situation] | None = None
        for sit in self.situations.get(gene_id, {}).values():
            sim = jaccard(current, sit.signals)
            if sim < constants.SIGNAL_KEY_JACCARD_MIN:
                continue
            assert sit.score.updated_at is not None
            rank = (sim, sit.score.counts.total, sit.score.updated_at, sit)
            if best is None or rank[:3] > best[:3]:
                best = rank
        if best is not None:
            sit = best[3]
            return Usefulness(gene_id=gene_id, score=round(sit.score.at(now), 6), scope="situation",
                              situation_key=sit.key, similarity=round(best[0], 4),
                              signals=sit.score.counts.total, not_helpful=sit.score.counts.not_helpful,
                              helpful=sit.score.counts.helpful)
        glob = self.global_scores.get(gene_id)
        if glob is None:
            return Usefulness(gene_id=gene_id)
        return Usefulness(gene_id=gene_id, score=round(glob.at(now), 6), scope="global", signals=glob.counts.total,
                          not_helpful=glob.counts.not_helpful, helpful=glob.counts.helpful)


def situation_key_signals(signals: Iterable[str]) -> list[str]:
    """A situation as feedback keeps it: control signals out, errsig normalised, de-duplicated, sorted."""
    return sorted(set(normalize_signals(situation_signals([str(s) for s in signals]))))


# ------------------------------------------------------------------ stats view


class SituationStats(BaseModel):
    situation_key: str
    situation: list[str]
    score: float
    counts: SignalCounts
    last_signal_at: datetime | None


class GeneFeedbackStats(BaseModel):
    gene_id: str
    score: float
    counts: SignalCounts
    last_signal_at: datetime | None
    situations: list[SituationStats] = Field(default_factory=list)


def feedback_stats(signals: Iterable[FeedbackSignal], now: datetime) -> list[GeneFeedbackStats]:
    """Per gene (by id): the global score now, each situation's score now, counts, last signal time."""
    index = FeedbackIndex(signals)
    out: list[GeneFeedbackStats] = []
    for gene_id in sorted(index.global_scores):
        glob = index.global_scores[gene_id]
        sits = sorted(index.situations.get(gene_id, {}).values(), key=lambda s: s.key)
        out.append(GeneFeedbackStats(
            gene_id=gene_id, score=round(glob.at(now), 6), counts=glob.counts, last_signal_at=glob.updated_at,
            situations=[SituationStats(situation_key=s.key, situation=s.signals, score=round(s.score.at(now), 6),
                                       counts=s.score.counts, last_signal_at=s.score.updated_at) for s in sits]))
    return out


# ------------------------------------------------------------------ signals from cycles and people


def _signal_id(*parts: str) -> str:
    return "fb_" + hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:20]


def implicit_signal(*, event_id: str, gene_id: str | None, signals: Sequence[str], observation: Observation,
                    at: datetime, ref: str = "") -> FeedbackSignal | None:
    """The signal a cycle outcome implies about the gene an event used (None: no gene, nothing implied).

    The id depends only on the event, the observation and ``ref`` (a revert's sha), so recording the same
    observation twice adds nothing."""
    if not gene_id or observation not in IMPLICIT:
        return None
    kind, confidence = IMPLICIT[observation]
    return FeedbackSignal(id=_signal_id(event_id, gene_id, observation.value, ref), gene_id=gene_id,
                          event_id=event_id, kind=kind, confidence=confidence, origin=observation,
                          situation=situation_key_signals(signals), created_at=at)


def outcome_observation(status: str, empty: bool) -> Observation | None:
    """A finished cycle's own observation: ended empty (a "success" that changed nothing too), abandoned, or
    rolled back (it failed with a change made: the change was checked, failed and discarded, so it is abandoned
    for usefulness; a failure before any change says more about the agent or the machine than about the gene)."""
    if status == "abandoned":
        return Observation.ended_abandoned
    if status == "failed" and not empty:
        return Observation.rolled_back
    if status == "empty" or (status == "success" and empty):
        return Observation.ended_empty
    return None


def explicit_signal(*, event_id: str, gene_id: str | None, signals: Sequence[str], kind: str,
                    at: datetime, note: str | None = None, author: str | None = None) -> FeedbackSignal:
    """A person's ``helpful`` / ``not_helpful`` on an event (the note is redacted and bounded). The id depends on
    the event and the person (``author``) only: a person's verdict on an event counts once."""
    if kind not in (FeedbackKind.helpful.value, FeedbackKind.not_helpful.value):
        raise FeedbackError(f"feedback must be 'helpful' or 'not_helpful', not '{kind}'")
    if not gene_id:
        raise FeedbackError(f"event {event_id} used no gene: there is nothing to give feedback on")
    clean = redact(note.strip())[:NOTE_CHARS] if note and note.strip() else None
    # one verdict per person and event (issue 45, C05): ten identical `gep feedback X not_helpful` count once
    return FeedbackSignal(id=_signal_id(event_id, gene_id, "person", author or ""),
                          gene_id=gene_id, event_id=event_id, kind=FeedbackKind(kind), confidence=1.0,
                          origin=Observation.person, situation=situation_key_signals(signals), note=clean,
                          author=redact(author) if author else None, created_at=at)


# ------------------------------------------------------------------ persistence


class FeedbackRepository(Protocol):
    """Where signals are kept (the store backs it with a table; ``InMemoryFeedback`` in tests)."""

    def add_feedback(self, signal: FeedbackSignal) -> bool:
        """Append a signal; False (and nothing written) when its id is already there."""
        ...

    def list_feedback(self, gene_id: str | None = None) -> list[FeedbackSignal]:
        """Signals, oldest first."""
        ...


class InMemoryFeedback:
    def __init__(self) -> None:
        self._rows: dict[str, FeedbackSignal] = {}

    def add_feedback(self, signal: FeedbackSignal) -> bool:
        if signal.id in self._rows:
            return False
        self._rows[signal.id] = signal.model_copy(deep=True)
        return True

    def list_feedback(self, gene_id: str | None = None) -> list[FeedbackSignal]:
        rows = [r for r in self._rows.values() if gene_id is None or r.gene_id == gene_id]
        return sorted(rows, key=lambda r: (r.created_at, r.id))


# ------------------------------------------------------------------ reverts of GEP commits (git I/O)

_TRAILER_EVENT = re.compile(r"^GEP-Event:\s*(\S+)\s*$", re.MULTILINE)
_REVERTS_COMMIT = re.compile(r"\bThis reverts commit ([0-9a-f]{7,40})\b", re.IGNORECASE)
_REC, _FIELD = "\x1e", "\x1f"
REVERT_SCAN_DEPTH = 500


class RevertFound(BaseModel):
    """A person's commit that reverts a GEP commit."""

    revert_sha: str
    reverted_sha: str
    event_id: str
    how: Literal["message", "exact_undo"]  # "This reverts commit <sha>" with the diff reversed, or the exact inverse
    author: str
    committed_at: datetime
    subject: str


class _Commit(BaseModel):
    sha: str
    at: datetime
    author: str
    body: str
    changes: frozenset[tuple[str, str, str, str, str]]  # (path, old mode, new mode, old blob, new blob)

    @property
    def event_id(self) -> str | None:
        found = _TRAILER_EVENT.findall(self.body)
        return found[-1] if found else None

    def undoes(self, other: _Commit) -> bool:
        inverse = frozenset((p, nm, om, nb, ob) for p, om, nm, ob, nb in other.changes)
        return bool(self.changes) and self.changes == inverse


def _git(repo: Path, *args: str) -> str:
    try:
        proc = subprocess.run(["git", *args], cwd=repo, capture_output=True, check=False)
    except OSError as exc:
        raise FeedbackError(f"cannot run git in {repo}: {exc.strerror or exc}") from None
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise FeedbackError(f"git {args[0]} failed in {repo}: {err[0] if err else 'exit ' + str(proc.returncode)}")
    return proc.stdout.decode("utf-8", "replace")


def _parse_log(text: str) -> list[_Commit]:
    commits: list[_Commit] = []
    for rec in text.split(_REC)[1:]:
        head, _, raw = rec.rpartition(_FIELD)
        sha, ts, author, body = head.split(_FIELD, 3)
        changes = set()
        for line in raw.splitlines():
            if not line.startswith(":") or "\t" not in line:
                continue
            meta, path = line[1:].split("\t", 1)
            om, nm, ob, nb, _status = meta.split(" ")[:5]
            changes.add((path, om, nm, ob, nb))
        commits.append(_Commit(sha=sha, at=datetime.fromtimestamp(int(ts), UTC), author=author, body=body,
                               changes=frozenset(changes)))
    return commits


def _patch_id(repo: Path, old: str, new: str) -> str | None:
    """git's id of the diff ``old..new`` (line numbers and whitespace aside), None for an empty diff."""
    try:
        diff = subprocess.run(["git", "diff", "--no-renames", "--no-ext-diff", "--no-textconv", "--binary", old, new,
                               "--"], cwd=repo, capture_output=True, check=False)
        if diff.returncode != 0 or not diff.stdout:
            return None
        ids = subprocess.run(["git", "patch-id", "--stable"], cwd=repo, input=diff.stdout, capture_output=True,
                             check=False)
    except OSError:
        return None
    words = ids.stdout.decode("ascii", "replace").split()
    return words[0] if ids.returncode == 0 and words else None


def _reverted_by(repo: Path, target: _Commit, later: Sequence[_Commit]) -> tuple[_Commit, str] | None:
    """The first later commit (oldest first) that git shows reverting ``target``, and how: its changes are the
    exact inverse of the target's, or it says "This reverts commit <sha>" and its diff is the target's diff
    reversed (git's patch id). A message alone is no revert (issue 45, C05)."""
    undo: str | None = None
    for c in later:
        if any(target.sha.startswith(ref.lower()) for ref in _REVERTS_COMMIT.findall(c.body)):
            undo = undo or _patch_id(repo, target.sha, f"{target.sha}^") or "-"
            if _patch_id(repo, f"{c.sha}^", c.sha) == undo:
                return c, "message"
        if c.undoes(target):
            return c, "exact_undo"
    return None


def find_reverts(repo: Path, *, since: str | None = None, until: str = "HEAD",
                 depth: int = REVERT_SCAN_DEPTH) -> list[RevertFound]:
    """Reverts of GEP commits (those with a ``GEP-Event`` trailer) made in ``since..until``.

    A revert is a commit that is not itself a GEP commit and either changes exactly the inverse of the GEP
    commit's changes (blob for blob, mode for mode), or says "This reverts commit <sha>" (``git revert``; an
    abbreviated sha is enough) and its diff is the GEP commit's diff reversed (``git patch-id``). A revert that was itself reverted later does not count.
    The GEP commits are looked for in the last ``depth`` commits before ``until``."""
    log = _git(Path(repo), "log", f"-n{max(1, depth)}", "--no-renames", "--no-abbrev", "--raw",
               f"--format={_REC}%H{_FIELD}%ct{_FIELD}%an{_FIELD}%B{_FIELD}", until, "--")
    newest_first = _parse_log(log)
    in_range = {c.sha for c in newest_first}
    if since:
        in_range = set(_git(Path(repo), "rev-list", f"{since}..{until}", "--").split())
    oldest_first = list(reversed(newest_first))
    found: list[RevertFound] = []
    for i, gep in enumerate(oldest_first):
        event_id = gep.event_id
        if event_id is None:
            continue
        later = [c for c in oldest_first[i + 1:] if c.event_id is None]
        hit = _reverted_by(Path(repo), gep, later)
        if hit is None or hit[0].sha not in in_range:
            continue
        revert, how = hit
        after = later[[c.sha for c in later].index(revert.sha) + 1:]
        if _reverted_by(Path(repo), revert, after) is not None:
            continue  # reverted back: the person kept the change after all
        found.append(RevertFound(revert_sha=revert.sha, reverted_sha=gep.sha, event_id=event_id,
                                 how=how, author=revert.author, committed_at=revert.at,
                                 subject=(revert.body.strip().splitlines() or [""])[0][:200]))
    return found


def revert_signal(revert: RevertFound, *, gene_id: str | None, signals: Sequence[str]) -> FeedbackSignal | None:
    """``not_helpful`` (confidence 1.0) for the reverted event's gene, dated at the revert."""
    sig = implicit_signal(event_id=revert.event_id, gene_id=gene_id, signals=signals,
                          observation=Observation.reverted, at=revert.committed_at, ref=revert.revert_sha)
    if sig is not None:
        sig.author = redact(revert.author)
        sig.note = redact(revert.subject) or None
    return sig
