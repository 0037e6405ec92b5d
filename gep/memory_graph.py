"""Memory graph: what happened when a gene was used in a similar signal situation.

The reference keeps a separate ``memory_graph.jsonl``; here the graph is computed from the recorded
EvolutionEvents themselves (the store is the one source of truth). Pure: events, signals, genes and ``now``
in, a :class:`MemoryAdvice` out.

Fields read from each event:
  - ``signals``                    the situation the cycle saw
  - ``genes_used[0]``              the gene it used (events without one are skipped)
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
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from pydantic import BaseModel, Field

from gep import constants as C
from gep.models import EvolutionEvent, Gene

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


_WIN_PATH = re.compile(r"[a-z]:\\[^ \n\r\t]+", re.IGNORECASE)
_UNIX_PATH = re.compile(r"/[^ \n\r\t]+")
_HEX = re.compile(r"\b0x[0-9a-f]+\b", re.IGNORECASE | re.ASCII)
_NUM = re.compile(r"\b\d+\b", re.ASCII)
_WS = re.compile(r"\s+")


def normalize_error_signature(text: str) -> str | None:
    """Paths, hex and numbers replaced so that the same error reads the same across runs."""
    s = str(text or "").strip()
    if not s:
        return None
    s = s.lower()
    s = _WIN_PATH.sub("<path>", s)
    s = _UNIX_PATH.sub("<path>", s)
    s = _HEX.sub("<hex>", s)
    s = _NUM.sub("<n>", s)
    s = _WS.sub(" ", s)
    return s[:220]


def normalize_signals(signals: Iterable[str]) -> list[str]:
    """``errsig:<text>`` becomes ``errsig_norm:<hash of the normalised text>``; blanks are dropped."""
    out: list[str] = []
    for raw in signals:
        s = str(raw or "").strip()
        if not s:
            continue
        if s.startswith("errsig:"):
            norm = normalize_error_signature(s[len("errsig:"):])
            if norm:
                out.append(f"errsig_norm:{stable_hash(norm)}")
            continue
        out.append(s)
    return out


def compute_signal_key(signals: Iterable[str]) -> str:
    """The reference's signal key: normalised, de-duplicated, sorted, joined with ``|``."""
    # JavaScript sorts strings by UTF-16 code units (differs from code points above U+FFFF)
    uniq = sorted(set(normalize_signals(signals)), key=lambda x: x.encode("utf-16-be", errors="surrogatepass"))
    return "|".join(uniq) or NONE_KEY


def is_control_signal(signal: str) -> bool:
    """Signals the engine emits about its own history (bans, streaks, forcing), not about the workspace."""
    return str(signal).strip().lower().startswith(C.CONTROL_SIGNAL_PREFIXES)


def situation_signals(signals: Iterable[str]) -> list[str]:
    """The signals that describe the workspace: control signals removed."""
    return [s for s in signals if not is_control_signal(s)]


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


def parse_at(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        ts = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return ts if ts.tzinfo else ts.replace(tzinfo=UTC)


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
    """"success", "failed", "empty", or None when the event has no usable outcome."""
    status = event.outcome.status
    if status not in OUTCOME_STATUSES:
        return None
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
    # decayed, similarity-weighted evidence in similar situations (empties count as failures)
    evidence_success: float = 0.0
    evidence_fail: float = 0.0
    # Beta(alpha, beta) posterior: 1 + evidence, plus one pseudo-observation from the gene's record in other
    # situations while this one has little evidence of its own
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


# ------------------------------------------------------------------ advice


class _Edge:
    __slots__ = ("success", "fail", "empty", "last")

    def __init__(self) -> None:
        self.success = 0
        self.fail = 0
        self.empty = 0
        self.last: datetime | None = None

    def add(self, kind: str, at: datetime | None) -> None:
        if kind == "success":
            self.success += 1
        elif kind == "failed":
            self.fail += 1
        else:
            self.empty += 1
        if at is not None and (self.last is None or at > self.last):
            self.last = at

    @property
    def total(self) -> int:
        return self.success + self.fail + self.empty

    def value(self, now: datetime, half_life: float) -> float:
        return laplace(self.success, self.total) * decay_weight(self.last, now, half_life)


def memory_advice(
    *,
    events: Sequence[EvolutionEvent],
    signals: Sequence[str],
    genes: Sequence[Gene],
    now: datetime,
) -> MemoryAdvice:
    """Per-gene outcome statistics for the current signals, a preferred gene and low-success bans."""
    current = situation_signals(signals)
    cur_key = compute_signal_key(current)
    gene_ids = [g.id for g in genes]
    wanted = set(gene_ids)

    sim_by_key: dict[str, float] = {cur_key: 1.0}
    edges: dict[tuple[str, str], _Edge] = {}
    priors: dict[str, _Edge] = {}
    ev_s: dict[str, float] = {}
    ev_f: dict[str, float] = {}
    prior_s: dict[str, float] = {}
    prior_f: dict[str, float] = {}
    other_s: dict[str, float] = {}
    other_f: dict[str, float] = {}

    for ev in events:
        if not ev.genes_used:
            continue
        gid = ev.genes_used[0]
        kind = outcome_kind(ev)
        if gid not in wanted or kind is None:
            continue
        sig = situation_signals(ev.signals)
        key = compute_signal_key(sig)
        if key not in sim_by_key:
            sim_by_key[key] = jaccard(current, sig)
        sim = sim_by_key[key]
        at = event_time(ev)

        priors.setdefault(gid, _Edge()).add(kind, at)
        w_prior = decay_weight(at, now, C.GENE_PRIOR_HALF_LIFE_DAYS)
        if kind == "success":
            prior_s[gid] = prior_s.get(gid, 0.0) + w_prior
        else:
            prior_f[gid] = prior_f.get(gid, 0.0) + w_prior

        if sim < C.SIGNAL_KEY_JACCARD_MIN:
            w_other = decay_weight(at, now, C.EDGE_HALF_LIFE_DAYS)
            if kind == "success":
                other_s[gid] = other_s.get(gid, 0.0) + w_other
            else:
                other_f[gid] = other_f.get(gid, 0.0) + w_other
            continue
        edges.setdefault((key, gid), _Edge()).add(kind, at)
        w = sim * decay_weight(at, now, C.EDGE_HALF_LIFE_DAYS)
        if kind == "success":
            ev_s[gid] = ev_s.get(gid, 0.0) + w
        else:
            ev_f[gid] = ev_f.get(gid, 0.0) + w

    similar = sorted(
        (SimilarKey(key=k, similarity=round(s, 4)) for k, s in sim_by_key.items() if s >= C.SIGNAL_KEY_JACCARD_MIN),
        key=lambda x: -x.similarity,
    )

    stats: list[GeneStats] = []
    banned: list[str] = []
    reasons: dict[str, str] = {}
    for gid in dict.fromkeys(gene_ids):
        st = GeneStats(gene_id=gid)
        for (key, g), edge in edges.items():
            if g != gid:
                continue
            st.best = max(st.best, edge.value(now, C.EDGE_HALF_LIFE_DAYS) * sim_by_key[key])
            st.attempts = max(st.attempts, edge.total)
            st.successes += edge.success
            st.failures += edge.fail
            st.empties += edge.empty
        if gid in priors:
            st.prior = priors[gid].value(now, C.GENE_PRIOR_HALF_LIFE_DAYS)
            st.prior_attempts = priors[gid].total
        st.score = st.best + st.prior * 0.12 if st.best > 0 else st.prior * 0.4

        s, f = ev_s.get(gid, 0.0), ev_f.get(gid, 0.0)
        ps, pf = prior_s.get(gid, 0.0), prior_f.get(gid, 0.0)
        st.evidence_success, st.evidence_fail = round(s, 6), round(f, 6)
        a, b = 1.0 + s, 1.0 + f
        os_, of_ = other_s.get(gid, 0.0), other_f.get(gid, 0.0)
        if os_ + of_ > 0 and s + f < C.MEMORY_BAN_MIN_EVIDENCE:
            other_p = laplace(os_, os_ + of_)
            a += C.GENE_PRIOR_PSEUDO_COUNT * other_p
            b += C.GENE_PRIOR_PSEUDO_COUNT * (1.0 - other_p)
        st.alpha, st.beta = round(a, 6), round(b, 6)
        st.expected = round(a / (a + b), 6)
        stats.append(st)

        edge_n = ev_s.get(gid, 0.0) + ev_f.get(gid, 0.0)
        edge_p = laplace(ev_s.get(gid, 0.0), edge_n)
        prior_n = ps + pf
        if edge_n >= C.MEMORY_BAN_MIN_EVIDENCE and edge_p < C.MEMORY_BAN_P:
            banned.append(gid)
            reasons[gid] = f"memory: expected success {edge_p:.2f} over {edge_n:.1f} weighted attempts " \
                           f"in similar situations"
        elif edge_n < C.MEMORY_BAN_MIN_EVIDENCE and prior_n >= C.PRIOR_BAN_MIN_EVIDENCE \
                and laplace(ps, prior_n) < C.PRIOR_BAN_P:
            banned.append(gid)
            reasons[gid] = f"memory: expected success {laplace(ps, prior_n):.2f} over {prior_n:.1f} " \
                           f"weighted attempts in any situation"

    ranked = sorted((st for st in stats if st.score > 0), key=lambda st: -st.score)
    preferred = ranked[0].gene_id if ranked else None
    explanation: list[str] = []
    if preferred:
        explanation.append(f"memory_prefer:{preferred}")
    if banned:
        explanation.append("memory_ban:" + ",".join(banned[:6]))
    return MemoryAdvice(signal_key=cur_key, similar_keys=similar, preferred_gene_id=preferred,
                        banned_gene_ids=banned, ban_reasons=reasons, genes=stats, explanation=explanation)
