"""Memory graph: what happened when a gene was used in a similar signal situation.

The reference keeps a separate ``memory_graph.jsonl``; here the graph is computed from the recorded
EvolutionEvents themselves (the store is the one source of truth). Pure: events, signals, genes and ``now``
in, a :class:`MemoryAdvice` out.

Fields read from each event:
  - ``signals``                    the situation the cycle saw
  - ``gene_id``                    the gene it used (events without one are skipped)
  - ``outcome.status``/``.score``  success / failed / empty (other statuses carry no outcome and are skipped)
  - ``meta.at``                       when it ran (ISO-8601; a missing or bad timestamp counts as "now": no decay)
  - ``meta.empty_cycle`` and ``blast_radius`` (through ``EvolutionEvent.is_empty_cycle``): a "success"
    that changed nothing counts as empty, not as a success (reference issue #562: a gene that never changes
    anything was credited with 593 "successes" and took 99.7% of the selections).

Semantics kept from the reference: the signal key (errsig normalisation, FNV-1a hash, sorted, ``|``-joined),
Laplace-smoothed success probability ``(s+1)/(n+2)``, exponential half-life decay (30 days for signal→gene
edges, 45 days for gene priors), similar situations at Jaccard >= 0.34, the combined score used to name a
preferred gene, and the thresholds of the two low-success bans.

Deliberate differences:
  - Empty cycles count against a gene (see above).
  - Control signals (``ban_gene:…``, ``consecutive_failure_streak_…``, ``force_…``) describe the engine's own
    history, not the workspace; they are left out when comparing situations so that a streak counter going
    from 4 to 5 does not make the same situation look new.
  - Bans are decided on decayed evidence (each outcome weighs ``0.5 ** (age / half_life)``), so old failures
    fade toward "unknown" instead of the reference's ``p * decay(last)`` which turns an old *good* record
    into a ban once it is a few half-lives old. The bans also apply under drift (the reference lifts them).
  - Recency by outcomes, not only by time (issues 15 and 41): selection's evidence is each problem family's
    discounted record (gep/learning/family_record.py): in a family, every outcome of any gene fades all the
    genes' records there by ``FAMILY_DISCOUNT``, so a gene the family stopped picking, or that stopped working
    there, loses its old record as the family moves on, and keeps its record in other families. A time
    half-life alone lets fifty old successes outweigh ten fresh failures for weeks when cycles run hourly. The
    stored summaries keep each gene's newest ``EVIDENCE_WINDOW`` outcomes (older ones faded by
    ``EVIDENCE_RETENTION``): where a family's record starts for folded history (only the newest
    ``MEMORY_GRAPH_EVENTS`` events are never folded, so this reaches a family seldom picked lately). The
    reference-semantics fields (attempts, best, prior, score) keep the whole record.
  - Selection ranks genes for the problem a cycle leads with (:func:`lead_problem`: the first error its signals
    name, the one the prompt puts first and the agent works on), and a try that fixed nothing counts on that
    problem, not on every error that happened to be live (issue 41, kinds suite: keyed on three live errors, the
    record on the one being worked on weighed nothing, Jaccard 1/3 < 0.34).
  - A problem's kind (issue 41, families suite): two errors of one exception class and message shape in
    different functions (``KeyError: 'region' in app.a.f``, ``KeyError: 'currency' in app.b.g``) share no
    signal, so what a gene did on one reached the other only through its record everywhere (the next function
    got the last gene that worked anywhere). A gene's record on the other problems of the lead problem's kind
    now counts in its posterior at ``KIND_EVIDENCE_WEIGHT`` an outcome, below the problem's own; those
    problems leave the record everywhere, which is no longer the prior of a gene with a record on the kind (its
    failures on other kinds do not pull back what it did on this one); bans rest on the problem's own evidence.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from datetime import datetime

from pydantic import BaseModel, Field

from gep.core import constants
from gep.core.learned import MemoryHistory as MemoryHistory
from gep.core.learned import SituationSummary as SituationSummary
from gep.core.learned import parse_at as parse_at
from gep.core.models import EvolutionEvent, Gene
from gep.learning.attribution import is_host_failure
from gep.learning.family_record import FamilyOutcome, Records, family_records
from gep.learning.problem_key import (
    SPECIFIC,
    error_kinds,
    learning_key,
    outcome_signals,
    problem_identity,
    specific_identities,
)
from gep.learning.problem_key import normalize_error_signature as normalize_error_signature  # named here too

NONE_KEY = "(none)"
OUTCOME_STATUSES = {"success", "failed", "empty"}


# ------------------------------------------------------------------ signal keys (as the reference)


def stable_hash(text: str) -> str:
    """FNV-1a over UTF-16 code units, 8 hex digits (the reference's ``stableHash``)."""
    h = 2166136261
    data = text.encode("utf-16-le", errors="surrogatepass")
    for i in range(0, len(data), 2):
        h ^= data[i] | (data[i + 1] << 8)
        h = (h * 16777619) & 0xFFFFFFFF
    return f"{h:08x}"


def normalize_signals(signals: Iterable[str]) -> list[str]:
    """``errsig:<text>`` becomes ``errsig_norm:<hash of its learning key>``; blanks are dropped. The key is ours
    (gep/learning/problem_key.py): timestamps, ids, pids and durations out, so each occurrence of one error is one
    situation; the reference hashes ``normalize_error_signature`` alone."""
    out: list[str] = []
    for raw in signals:
        s = str(raw or "").strip()
        if not s:
            continue
        if s.startswith("errsig:"):
            norm = _errsig_norm(s)
            if norm:
                out.append(norm)
            continue
        out.append(s)
    return out


@functools.lru_cache(maxsize=8192)
def _errsig_norm(signal: str) -> str | None:
    """``errsig_norm:<hash>`` of one ``errsig:`` signal. Cached: every summary of the graph normalises each event's
    errors again (a dozen regular expressions each), and a history repeats the same few errors."""
    norm = learning_key(signal[len("errsig:"):])
    return f"errsig_norm:{stable_hash(norm)}" if norm else None


def compute_signal_key(signals: Iterable[str]) -> str:
    """The reference's signal key: normalised, de-duplicated, sorted, joined with ``|``."""
    # JavaScript sorts strings by UTF-16 code units (differs from code points above U+FFFF)
    uniq = sorted(set(normalize_signals(signals)), key=lambda x: x.encode("utf-16-be", errors="surrogatepass"))
    return "|".join(uniq) or NONE_KEY


def is_control_signal(signal: str) -> bool:
    """Signals the engine emits about its own history (bans, streaks, forcing), not about the workspace."""
    return str(signal).strip().lower().startswith(constants.CONTROL_SIGNAL_PREFIXES)


def situation_signals(signals: Iterable[str]) -> list[str]:
    """The signals that describe the workspace: control signals removed."""
    return [s for s in signals if not is_control_signal(s)]


def problem_signals(signals: Iterable[str]) -> list[str]:
    """A situation by the problem it names: its specific signals by identity (an error by its learning key, a
    request), or, when it names none, all its workspace signals. What the graph keys outcomes and compares
    situations on, so that the generic signals a cycle happened to be triggered by do not decide which problem
    its outcome says something about."""
    situation = sorted(set(normalize_signals(situation_signals([str(s) for s in signals]))))
    return sorted(specific_identities(situation)) or situation


def _lead(signals: Iterable[str]) -> tuple[str, str] | None:
    """The first workspace signal naming a specific problem: (as written, normalised); None when none does."""
    for raw in situation_signals([str(s) for s in signals]):
        norm = normalize_signals([raw])
        if norm and norm[0].startswith(SPECIFIC):
            return raw, norm[0]
    return None


def lead_problem(signals: Iterable[str]) -> list[str]:
    """The situation selection ranks genes for: the first problem the signals name (the one the prompt leads with
    and the agent works on), else the whole situation (:func:`problem_signals`). A situation naming three errors
    is not "similar" to any one of them (Jaccard 1/3), so keyed on all of them, what was learned about the problem
    being worked on did not count, and a gene's record on another error of the set steered the pick."""
    situation = situation_signals([str(s) for s in signals])
    lead = _lead(situation)
    return [problem_identity(lead[1])] if lead else problem_signals(situation)


def lead_kinds(signals: Iterable[str]) -> list[str]:
    """The kind of the problem :func:`lead_problem` picks, when it is an error line naming an exception class
    (gep/learning/problem_key.py ``error_kind``), else none."""
    lead = _lead(signals)
    return error_kinds([lead[0]]) if lead else []


def jaccard(a: Iterable[str], b: Iterable[str]) -> float:
    """Jaccard similarity of two signal lists after normalisation (1 when both are empty, as the reference)."""
    sa, sb = set(normalize_signals(a)), set(normalize_signals(b))
    if not sa and not sb:
        return 1.0
    if not sa or not sb:
        return 0.0
    inter = len(sa & sb)
    return inter / (len(sa) + len(sb) - inter)


# ------------------------------------------------------------------ time


def event_time(event: EvolutionEvent) -> datetime | None:
    return parse_at(event.meta.at)


def decay_weight(at: datetime | None, now: datetime, half_life_days: float) -> float:
    """``0.5 ** (age / half_life)``; 1 for unknown times and for the future (as the reference)."""
    if at is None or half_life_days <= 0:
        return 1.0
    age_days = (now - at).total_seconds() / 86400.0
    if not math.isfinite(age_days) or age_days <= 0:
        return 1.0
    return 0.5 ** (age_days / half_life_days)


def laplace(success: float, total: float) -> float:
    return (success + 1.0) / (total + 2.0)


# ------------------------------------------------------------------ outcomes


def outcome_kind(event: EvolutionEvent) -> str | None:
    """"success", "failed", "empty", or None when the event has no usable outcome. A committed fix whose
    trigger came back (``meta.fix_verdict`` "did_not_hold", as gep.genes.selector.judged counts it) failed:
    folded summaries must count it as selection does."""
    status = event.outcome.status
    if status not in OUTCOME_STATUSES or is_host_failure(event):  # a host failure judges no gene
        return None
    if status == "success" and event.meta.fix_verdict == "did_not_hold":
        return "failed"
    if status == "success" and event.is_empty_cycle:
        return "empty"
    return status


# ------------------------------------------------------------------ models


class SimilarKey(BaseModel):
    key: str
    similarity: float


class GeneStats(BaseModel):
    """What the memory graph knows about one gene in the current situation."""

    gene_id: str
    # reference semantics (per similar signal key): attempts = most outcomes on one key, best = max p*decay*sim
    attempts: int = 0
    best: float = 0.0
    prior: float = 0.0  # gene->outcome p*decay over every situation (45-day half-life)
    prior_attempts: int = 0
    score: float = 0.0  # the reference's combined score (names the preferred gene)
    # raw counts in similar situations
    successes: int = 0
    failures: int = 0
    empties: int = 0
    # decayed, similarity-weighted evidence in similar situations from each family's discounted record
    # (gep/learning/family_record.py; empties count as failures)
    evidence_success: float = 0.0
    evidence_fail: float = 0.0
    # the same, from problems of the same kind (error class and message shape) that are not similar, weighed by
    # KIND_EVIDENCE_WEIGHT: what a gene did on a KeyError in one function, for a KeyError in another
    kind_success: float = 0.0
    kind_fail: float = 0.0
    # Beta(alpha, beta) posterior: 1 + evidence + kind evidence, plus one pseudo-observation from the gene's record
    # in other situations while this one has little evidence of its own and none of its kind
    alpha: float = 1.0
    beta: float = 1.0
    expected: float = 0.5  # posterior mean alpha / (alpha + beta); 0.5 with no evidence at all

    @property
    def evidence(self) -> float:
        return self.evidence_success + self.evidence_fail


class MemoryAdvice(BaseModel):
    signal_key: str
    similar_keys: list[SimilarKey] = Field(default_factory=list)
    preferred_gene_id: str | None = None
    banned_gene_ids: list[str] = Field(default_factory=list)
    ban_reasons: dict[str, str] = Field(default_factory=dict)
    genes: list[GeneStats] = Field(default_factory=list)
    explanation: list[str] = Field(default_factory=list)

    def stats(self, gene_id: str) -> GeneStats:
        for g in self.genes:
            if g.gene_id == gene_id:
                return g
        return GeneStats(gene_id=gene_id)


# ------------------------------------------------------------------ situation summaries


def _situation(ev: EvolutionEvent) -> tuple[list[str], str, str, datetime | None, list[str]] | None:
    """(problem signals, gene, outcome kind, time, the problem's error kinds) of an event the memory graph learns from, else None. The
    problem is the one the outcome counts on (gep/learning/problem_key.py ``outcome_signals``: a committed fix's
    judged or credited errors, else the first problem of the trigger signals: :func:`lead_problem`), so a fix
    made in a ``perf_bottleneck`` cycle teaches about the error it fixed, not about ``perf_bottleneck``."""
    if ev.gene_id is None:
        return None
    kind = outcome_kind(ev)
    about = outcome_signals(ev)
    if kind is None or about is None:
        return None
    credit = ev.meta.fix_credit
    credited = credit is not None and (bool(credit.judged) or ev.meta.fix_verdict is None)
    # a change credited with errors counts on each; a try that fixed nothing, on the problem it worked on
    if credited:
        return problem_signals(about), ev.gene_id, kind, event_time(ev), error_kinds(situation_signals(about))
    return lead_problem(about), ev.gene_id, kind, event_time(ev), lead_kinds(about)


def _fade(summary: SituationSummary, factor: float) -> None:
    summary.faded_success *= factor
    summary.faded_fail *= factor
    summary.faded_undated_success *= factor
    summary.faded_undated_fail *= factor


def _to_faded(summary: SituationSummary, ok: bool, at: datetime | None, ref: datetime | None, weight: float) -> None:
    """An outcome leaving the window, with ``weight`` (its fade) times its decay as of ``ref``."""
    if at is None:
        if ok:
            summary.faded_undated_success += weight
        else:
            summary.faded_undated_fail += weight
        return
    w = weight * decay_weight(at, ref or at, constants.EDGE_HALF_LIFE_DAYS)
    if ok:
        summary.faded_success += w
    else:
        summary.faded_fail += w


def _add_outcome(summary: SituationSummary, kind: str, at: datetime | None, ref: datetime | None) -> None:
    ok = kind == "success"
    if kind == "success":
        summary.success += 1
    elif kind == "failed":
        summary.failed += 1
    else:
        summary.empty += 1
    summary.recent.append((ok, at.isoformat() if at is not None else None))
    if len(summary.recent) > constants.EVIDENCE_WINDOW:
        _fade(summary, constants.EVIDENCE_RETENTION)
        old_ok, old_at = summary.recent.pop(0)
        _to_faded(summary, old_ok, parse_at(old_at), ref, constants.EVIDENCE_RETENTION)
    if at is None:
        summary.undated_success += ok
        summary.undated_fail += not ok
        return
    last = parse_at(summary.last_at)
    if last is None or at > last:
        summary.last_at = at.isoformat()
    w_edge, w_prior = decay_weight(at, ref or at, constants.EDGE_HALF_LIFE_DAYS), \
        decay_weight(at, ref or at, constants.GENE_PRIOR_HALF_LIFE_DAYS)
    if ok:
        summary.edge_success += w_edge
        summary.prior_success += w_prior
    else:
        summary.edge_fail += w_edge
        summary.prior_fail += w_prior


def summarize(events: Iterable[EvolutionEvent], ref: datetime | None = None) -> list[SituationSummary]:
    """One summary per (situation, gene) of the events that carry an outcome, in order of first appearance.

    ``ref``: the time the decayed sums are as of; default the newest event time (events stamped after
    ``ref`` weigh 1, as events in the future do for :func:`decay_weight`)."""
    seen = [(ev, s) for ev in events if (s := _situation(ev)) is not None]
    if ref is None:
        dated = [at for _, (_, _, _, at, _) in seen if at is not None]
        ref = max(dated) if dated else None
    out: dict[tuple[str, str], SituationSummary] = {}
    for _, (problem, gid, kind, at, kinds) in seen:
        key = compute_signal_key(problem)
        summary = out.get((key, gid))
        if summary is None:
            summary = out[(key, gid)] = SituationSummary(key=key, signals=problem, gene_id=gid,
                                                         ref_at=ref.isoformat() if ref else None)
        summary.kinds = list(dict.fromkeys([*summary.kinds, *kinds]))
        _add_outcome(summary, kind, at, ref)
    return list(out.values())


def merge_summaries(a: SituationSummary, b: SituationSummary) -> SituationSummary:
    """One summary of what ``a`` and ``b`` (same situation and gene) folded, as of the later reference."""
    ra, rb = parse_at(a.ref_at), parse_at(b.ref_at)
    ref = max((r for r in (ra, rb) if r is not None), default=None)
    lasts = [t for t in (parse_at(a.last_at), parse_at(b.last_at)) if t is not None]
    out = SituationSummary(key=a.key, signals=a.signals, gene_id=a.gene_id, success=a.success + b.success,
                           failed=a.failed + b.failed, empty=a.empty + b.empty,
                           last_at=max(lasts).isoformat() if lasts else None,
                           ref_at=ref.isoformat() if ref else None,
                           undated_success=a.undated_success + b.undated_success,
                           undated_fail=a.undated_fail + b.undated_fail, recent=[],
                           kinds=list(dict.fromkeys([*a.kinds, *b.kinds])))
    for s, r in ((a, ra), (b, rb)):
        edge = decay_weight(r, ref, constants.EDGE_HALF_LIFE_DAYS) if ref and r else 1.0
        prior = decay_weight(r, ref, constants.GENE_PRIOR_HALF_LIFE_DAYS) if ref and r else 1.0
        out.edge_success += s.edge_success * edge
        out.edge_fail += s.edge_fail * edge
        out.prior_success += s.prior_success * prior
        out.prior_fail += s.prior_fail * prior
    _merge_windows(out, a, b, ra, rb, ref)
    return out


def _merge_windows(out: SituationSummary, a: SituationSummary, b: SituationSummary, ra: datetime | None,
                   rb: datetime | None, ref: datetime | None) -> None:
    """``out``'s window: ``b``'s outcomes came after all of ``a``'s, so each of ``a``'s has ``b.total`` more
    newer outcomes; those of ``a``'s window that end up beyond the window fade in."""
    retention, n_b = constants.EVIDENCE_RETENTION, b.total
    for s, r, fade in ((a, ra, retention ** n_b), (b, rb, 1.0)):
        edge = decay_weight(r, ref, constants.EDGE_HALF_LIFE_DAYS) if ref and r else 1.0
        out.faded_success += s.faded_success * edge * fade
        out.faded_fail += s.faded_fail * edge * fade
        out.faded_undated_success += s.faded_undated_success * fade
        out.faded_undated_fail += s.faded_undated_fail * fade
    kept: list[tuple[bool, str | None]] = []
    for i, (ok, at) in enumerate(a.recent):
        newer = len(a.recent) - 1 - i + n_b
        if newer < constants.EVIDENCE_WINDOW:
            kept.append((ok, at))
        else:
            _to_faded(out, ok, parse_at(at), ref, retention ** (newer - constants.EVIDENCE_WINDOW + 1))
    out.recent = kept + list(b.recent)


class SummaryFold:
    """The memory graph's summary arithmetic, as the store's ``MemoryFold`` (gep/store/graph_history.py) takes it: the
    store keeps summaries, and the callers that fold (the cycle, `gep store prune`) give it this."""

    def summarize(self, events: Iterable[EvolutionEvent], ref: datetime | None) -> list[SituationSummary]:
        return summarize(events, ref)

    def merge(self, a: SituationSummary, b: SituationSummary) -> SituationSummary:
        return merge_summaries(a, b)


MEMORY_FOLD = SummaryFold()


def window_evidence(summary: SituationSummary, now: datetime) -> tuple[float, float]:
    """Decayed successes and failures (empties count as failures) of a summary's outcomes as selection weighs
    them: the window's outcomes in full, the older ones faded (see ``EVIDENCE_WINDOW``)."""
    edge = decay_weight(parse_at(summary.ref_at), now, constants.EDGE_HALF_LIFE_DAYS)
    s = summary.faded_success * edge + summary.faded_undated_success
    f = summary.faded_fail * edge + summary.faded_undated_fail
    for ok, at in summary.recent:
        w = decay_weight(parse_at(at), now, constants.EDGE_HALF_LIFE_DAYS)
        if ok:
            s += w
        else:
            f += w
    return s, f


# ------------------------------------------------------------------ advice


class _Edge:
    """What the summaries of one situation (or of every situation, for a gene's prior) say as of ``now``."""

    __slots__ = ("success", "fail", "empty", "last", "edge_s", "edge_f", "prior_s", "prior_f")

    def __init__(self) -> None:
        self.success = self.fail = self.empty = 0
        self.last: datetime | None = None
        self.edge_s = self.edge_f = self.prior_s = self.prior_f = 0.0

    def add(self, s: SituationSummary, now: datetime) -> None:
        self.success += s.success
        self.fail += s.failed
        self.empty += s.empty
        last = parse_at(s.last_at)
        if last is not None and (self.last is None or last > self.last):
            self.last = last
        ref = parse_at(s.ref_at)
        edge = decay_weight(ref, now, constants.EDGE_HALF_LIFE_DAYS)
        prior = decay_weight(ref, now, constants.GENE_PRIOR_HALF_LIFE_DAYS)
        self.edge_s += s.edge_success * edge + s.undated_success
        self.edge_f += s.edge_fail * edge + s.undated_fail
        self.prior_s += s.prior_success * prior + s.undated_success
        self.prior_f += s.prior_fail * prior + s.undated_fail

    @property
    def total(self) -> int:
        return self.success + self.fail + self.empty

    def value(self, now: datetime, half_life: float) -> float:
        return laplace(self.success, self.total) * decay_weight(self.last, now, half_life)


class _Graph:
    """The summaries of the wanted genes grouped by situation, with each situation's similarity."""

    def __init__(self, summaries: Iterable[SituationSummary], current: Sequence[str], wanted: set[str],
                 now: datetime, records: Records, kinds: Sequence[str] = ()) -> None:
        """``current``: the situation's problem signals (:func:`problem_signals`), ``kinds``: its error kinds
        (:func:`lead_kinds`). A summary folded before outcomes were keyed by problem keeps its whole situation:
        it is compared by the problem that names."""
        self.now = now
        self.records = records
        self.kinds = set(kinds)
        self.same_kind: set[str] = set()  # dissimilar situations whose errors are of the current problem's kind
        self.sim_by_key: dict[str, float] = {compute_signal_key(current): 1.0}
        self.edges: dict[tuple[str, str], _Edge] = {}
        self.priors: dict[str, _Edge] = {}
        self.other: dict[str, _Edge] = {}  # dissimilar situations, per gene
        for s in summaries:
            if s.gene_id not in wanted:
                continue
            if s.key not in self.sim_by_key:
                self.sim_by_key[s.key] = jaccard(current, problem_signals(s.signals))
            self.priors.setdefault(s.gene_id, _Edge()).add(s, now)
            similar = self.sim_by_key[s.key] >= constants.SIGNAL_KEY_JACCARD_MIN
            if not similar and self.kinds & set(s.kinds):
                self.same_kind.add(s.key)  # counts through kind_evidence, not in the global prior
                continue
            target = self.edges.setdefault((s.key, s.gene_id), _Edge()) if similar \
                else self.other.setdefault(s.gene_id, _Edge())
            target.add(s, now)

    def similar_keys(self) -> list[SimilarKey]:
        return sorted((SimilarKey(key=k, similarity=round(s, 4)) for k, s in self.sim_by_key.items()
                       if s >= constants.SIGNAL_KEY_JACCARD_MIN), key=lambda x: -x.similarity)

    def evidence(self, gid: str) -> tuple[float, float]:
        """Similarity-weighted successes and failures of ``gid`` in the families similar to the current one (each
        family's discounted record: priors from similar problems)."""
        s = f = 0.0
        for key, genes in self.records.items():
            sim = self.sim_by_key.get(key, 0.0)
            if gid in genes and sim >= constants.SIGNAL_KEY_JACCARD_MIN:
                s += sim * genes[gid][0]
                f += sim * genes[gid][1]
        return s, f

    def kind_evidence(self, gid: str) -> tuple[float, float]:
        """``gid``'s discounted record on the other problems of the current problem's kind, weighed below the
        problem's own (``KIND_EVIDENCE_WEIGHT`` an outcome): a strategy that fixed a ``KeyError`` in one function
        is the better bet for the next function raising one, not for a ``ValueError``."""
        s = f = 0.0
        for key in self.same_kind:
            rec = self.records.get(key, {}).get(gid)
            if rec is not None:
                s += constants.KIND_EVIDENCE_WEIGHT * rec[0]
                f += constants.KIND_EVIDENCE_WEIGHT * rec[1]
        return s, f


def _gene_stats(graph: _Graph, gid: str, now: datetime) -> GeneStats:
    st = GeneStats(gene_id=gid)
    for (key, g), edge in graph.edges.items():
        if g != gid:
            continue
        st.best = max(st.best, edge.value(now, constants.EDGE_HALF_LIFE_DAYS) * graph.sim_by_key[key])
        st.attempts = max(st.attempts, edge.total)
        st.successes += edge.success
        st.failures += edge.fail
        st.empties += edge.empty
    prior = graph.priors.get(gid)
    if prior is not None:
        st.prior = prior.value(now, constants.GENE_PRIOR_HALF_LIFE_DAYS)
        st.prior_attempts = prior.total
    st.score = st.best + st.prior * 0.12 if st.best > 0 else st.prior * 0.4
    s, f = graph.evidence(gid)
    st.evidence_success, st.evidence_fail = round(s, 6), round(f, 6)
    ks, kf = graph.kind_evidence(gid)
    st.kind_success, st.kind_fail = round(ks, 6), round(kf, 6)
    a, b = 1.0 + s + ks, 1.0 + f + kf
    other = graph.other.get(gid)
    # the record everywhere is the prior of a gene with little record here and none on the problem's kind: a
    # gene that fixed this kind elsewhere is not pulled back by its failures on other kinds
    if other is not None and other.edge_s + other.edge_f > 0 and s + f < constants.MEMORY_BAN_MIN_EVIDENCE \
            and ks + kf == 0:
        other_p = laplace(other.edge_s, other.edge_s + other.edge_f)
        a += constants.GENE_PRIOR_PSEUDO_COUNT * other_p
        b += constants.GENE_PRIOR_PSEUDO_COUNT * (1.0 - other_p)
    st.alpha, st.beta = round(a, 6), round(b, 6)
    st.expected = round(a / (a + b), 6)
    return st


def _ban_reason(graph: _Graph, gid: str) -> str | None:
    """Why ``gid`` is banned for the situation (low decayed success here, or everywhere), else None."""
    s, f = graph.evidence(gid)
    edge_n, edge_p = s + f, laplace(s, s + f)
    prior = graph.priors.get(gid)
    ps, prior_n = (prior.prior_s, prior.prior_s + prior.prior_f) if prior else (0.0, 0.0)
    if edge_n >= constants.MEMORY_BAN_MIN_EVIDENCE and edge_p < constants.MEMORY_BAN_P:
        return f"memory: expected success {edge_p:.2f} over {edge_n:.1f} weighted attempts in similar situations"
    if edge_n < constants.MEMORY_BAN_MIN_EVIDENCE and prior_n >= constants.PRIOR_BAN_MIN_EVIDENCE \
            and laplace(ps, prior_n) < constants.PRIOR_BAN_P:
        return f"memory: expected success {laplace(ps, prior_n):.2f} over {prior_n:.1f} " \
               f"weighted attempts in any situation"
    return None


def _family_records(summaries: Sequence[SituationSummary], events: Sequence[EvolutionEvent],
                    now: datetime) -> Records:
    """Each problem family's discounted record per gene (gep/learning/family_record.py): the folded summaries'
    windowed evidence first, then the events' outcomes in order."""
    start = [(s.key, s.gene_id, *window_evidence(s, now)) for s in summaries]
    outcomes = []
    for ev in events:
        if (sit := _situation(ev)) is not None:
            problem, gid, kind, at, _ = sit
            outcomes.append(FamilyOutcome(compute_signal_key(problem), gid, kind == "success",
                                          decay_weight(at, now, constants.EDGE_HALF_LIFE_DAYS)))
    return family_records(start, outcomes)


def memory_advice(
    *,
    events: Sequence[EvolutionEvent],
    signals: Sequence[str],
    genes: Sequence[Gene],
    now: datetime,
    summaries: Sequence[SituationSummary] = (),
) -> MemoryAdvice:
    """Per-gene outcome statistics for the current signals, a preferred gene and low-success bans.

    ``summaries`` stand for events folded earlier (a :class:`MemoryHistory`'s), ``events`` for the ones
    after them: the advice is the same as from all of those events given one by one."""
    current = lead_problem(signals)
    gene_ids = list(dict.fromkeys(g.id for g in genes))
    records = _family_records(summaries, events, now)
    graph = _Graph([*summaries, *summarize(events, ref=now)], current, set(gene_ids), now, records,
                   lead_kinds(signals))
    stats = [_gene_stats(graph, gid, now) for gid in gene_ids]
    reasons = {gid: r for gid in gene_ids if (r := _ban_reason(graph, gid)) is not None}
    banned = list(reasons)
    ranked = sorted((st for st in stats if st.score > 0), key=lambda st: -st.score)
    preferred = ranked[0].gene_id if ranked else None
    explanation: list[str] = []
    if preferred:
        explanation.append(f"memory_prefer:{preferred}")
    if banned:
        explanation.append("memory_ban:" + ",".join(banned[:6]))
    return MemoryAdvice(signal_key=compute_signal_key(current), similar_keys=graph.similar_keys(),
                        preferred_gene_id=preferred, banned_gene_ids=banned, ban_reasons=reasons, genes=stats,
                        explanation=explanation)
