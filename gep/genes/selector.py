"""Gene and capsule selection.

Pure: genes, capsules, failed capsules, signals and recent events in (the cycle loads them from the store),
plus an injected ``rng`` and ``now``; a :class:`Selection` out whose ``decision`` is stored in the event's
``meta.selector``. The same inputs and the same seeded RNG give the same selection, so a cycle can be replayed.

Success means the problem went away: a committed fix whose trigger came back at the next cycle
(``meta.fix_verdict == "did_not_hold"``, see gep/learning/resolved.py) counts as a failure in everything below.

How a gene is chosen:
  1. Match: each ``signals_match`` pattern that matches a signal scores 1 (``/body/flags`` regex, default flag
     i; ``a|b|c`` case-insensitive alternatives; otherwise a case-insensitive substring). ``gene_distilled_*``
     scores x0.8. Control signals only ever match a pattern equal to their whole text, so
     ``ban_gene:gene_gep_repair_from_errors`` no longer matches the pattern ``error`` as it does in the reference.
     Behavioural signals (``user_correction:<summary>``, ...) match by their name or as a whole, never by the
     words of their summary.
  2. Bans, which hold whatever the drift: ``ban_gene:<id>`` in the current signals or in a recent event's
     signals (for ``settings.ban_cycles`` cycles after that event); failed capsules (>= 0.6 overlap with the
     current situation, twice for one gene within the last ``ban_cycles`` cycles and with no success of the
     gene in such a situation since, unless the gene's record here says it mostly succeeds: expected success
     over 0.5 on a window's worth of outcomes, since two failed checks in a row happen to a gene that passes 85%
     of the time once in 44 pairs, and its record already counts them); low-success bans from the memory graph;
     and the failed-capsule rule applied to committed fixes that did not hold (their checks passed, so they
     left no failed capsule; these ban whatever the record, as a fix that stops holding must turn the picks).
  3. Rank the remaining candidates by memory-graph expected success (0.5 when nothing is known: a Beta
     posterior from each problem family's discounted record, gep/learning/family_record.py, the families similar
     to this one weighted by their similarity, the gene's record elsewhere as a prior), then by match
     score, then by gene order. A distilled gene is made of its source genes' successes: until it has a record
     of its own (``MEMORY_BAN_MIN_EVIDENCE`` outcomes in similar situations), it takes the rank of its best
     matching source gene and goes first among equals, so a refinement is tried where its source would have been; then its
     own record decides. With feedback scores (gep/learning/feedback.py, seed 003) the rank is
     ``(1 - w) x expected + w x usefulness`` with ``w = settings.usefulness_weight`` (0.3), usefulness being
     the gene's feedback score in the closest stored situation, else its global score, else 0.5. A gene nobody
     has used yet would rank under every judged incumbent at that 0.5 (the seed's filter bubble): while
     usefulness counts, it gets a trial, ranked with the best judged gene that has a record here (a window's
     worth of outcomes), until it has ``EVIDENCE_WINDOW`` outcomes, its record here is worse than unknown (two
     more failures than successes), or a person said it did not help.
  3b. A person's word: a candidate people called not helpful in this situation more often than helpful (their
     verdicts and reverts), whose feedback score is still under neutral, is left out while another candidate
     remains, so neither drift nor the dominance cap below brings it back (issue 41: with the blend alone,
     the cap handed the picks back to the gene a person had rejected). A later helpful, or verified fixes that
     lift its score, let it in again.
  3c. The error the cycle leads with (its first error line: the one the prompt puts first and the agent works on,
     with the ``log_error`` / ``recurring_error`` flags the rules gave it): a candidate none of whose patterns
     match it, matching only the cycle's other signals (a generic ``perf_bottleneck`` beside an error), is left
     out while a candidate matching it remains, unless its record here says it succeeds more often than not.
     Without it, one failed or empty try of the repair gene on an error
     (expected success 0.33) ranked it under a gene nothing is known about (0.5) that matched only a slow-response
     warning, and the agent was sent to the error with a performance strategy (issue 41, bench/evolution.py dev
     seeds 1-3: 51 of full's picks on cycles that led with an error went to ``gene_perf_bottleneck``; the plain
     engine, ranking by match, none). Drift and the dominance cap choose among the candidates that remain.
  4. Drift: with probability ``p`` the pick is stochastic among the top ``max(2, ceil(n * intensity))``
     candidates: one draw from each candidate's Beta posterior (blended with its usefulness as in 3), the
     highest wins (uniform when nothing is known, as the reference's random drift). Otherwise the top one. The
     seed's intensity is ``1/sqrt(pool size)``; ``p`` is that intensity times the chance that the runner-up
     is really better than the leader (normal approximation of their posteriors): half the seed's drift while
     the top two are a toss-up (nothing known, or equal records), less as their records tell them apart
     (issue 41: a fixed 0.32 spent a third of all cycles drifting, also where the leader was plainly better, and
     a greedy learner drifting 0.1 did better; each family's discounted record, step 3, keeps the posteriors
     wider than a whole history, and twice that chance drifted too often with it). A requested drift keeps the seed's intensity (+0.3). Drift and
     the dominance cap stay in force with feedback: the seed warns that a heavy usefulness weight makes a filter
     bubble where other genes never get a chance.
  5. Dominance: when two or more candidates remain, a gene that already holds ``dominance_share`` of the last
     ``dominance_window`` selections yields to the best-ranked candidate that does not.
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from pydantic import BaseModel

from gep.core import constants
from gep.core.config import Settings
from gep.core.learning_switch import learning_switch
from gep.core.models import Capsule, EvolutionEvent, FailedCapsule, Gene, Outcome, OutcomeStatus
from gep.core.records import CandidateScore, GeneBan, SelectorDecision
from gep.core.safe_regex import SafePattern, UnsafePattern
from gep.genes.patterns import compile_regex, pattern_refusal, regex_parts
from gep.learning.avoid import AvoidList
from gep.learning.feedback import FeedbackIndex
from gep.learning.memory_graph import (
    GeneStats,
    MemoryAdvice,
    SituationSummary,
    event_time,
    is_control_signal,
    memory_advice,
    normalize_signals,
    parse_at,
    problem_signals,
    situation_signals,
)
from gep.learning.problem_key import outcome_signals
from gep.signals.behavior import DETAIL_PREFIXES

__all__ = [
    "CandidateScore",
    "GeneBan",
    "Selection",
    "SelectorDecision",
    "active_bans",
    "dominance_alternative",
    "drift_intensity",
    "is_control_signal",
    "match_pattern",
    "match_score",
    "pattern_refusal",
    "select_capsule",
    "select_gene_and_capsule",
]

BAN_PREFIX = "ban_gene:"
DISTILLED_PREFIX = "gene_distilled_"
NOT_A_CYCLE = {"skipped", "running"}  # recorded events that did not run a cycle do not use up a ban


# ------------------------------------------------------------------ models


class Selection(BaseModel):
    gene: Gene | None = None
    capsule: Capsule | None = None
    decision: SelectorDecision


# ------------------------------------------------------------------ pattern matching

@dataclass(frozen=True)
class _Pattern:
    raw: str
    regex: SafePattern | None
    needles: tuple[str, ...]


def _compile(pattern: str) -> _Pattern:
    p = str(pattern)
    if len(p) >= 2 and p.startswith("/") and p.rfind("/") > 0:
        parts = regex_parts(p)
        if parts is not None:
            try:
                return _Pattern(p, compile_regex(*parts), ())
            except UnsafePattern:
                pass  # invalid or unbounded: the whole text is matched as a substring (as the reference)
        return _Pattern(p, None, (p.lower(),))
    if "|" in p:
        return _Pattern(p, None, tuple(b for b in (x.strip().lower() for x in p.split("|")) if b))
    return _Pattern(p, None, (p.lower(),) if p else ())


@functools.lru_cache(maxsize=4096)  # a gene's patterns are matched against every signal of every cycle
def _pattern(pattern: str) -> _Pattern:
    return _compile(pattern)


def match_pattern(pattern: str, signal: str, *, exclude_control: bool = True) -> bool:
    """Whether one ``signals_match`` pattern (or capsule trigger) matches one signal.

    ``exclude_control=False`` matches control signals like any other, as the reference does."""
    if not pattern or not signal:
        return False
    s = str(signal)
    if exclude_control and is_control_signal(s):
        # a control signal matches only a pattern naming it exactly
        return str(pattern).strip().lower() == s.strip().lower()
    head, sep, _detail = s.partition(":")
    if sep and head in DETAIL_PREFIXES:
        # a behavioural signal: the pattern matches its name ("user_correction"), not the description after it
        # (the user's behaviour in words, where "error" or "slow" would pull in unrelated genes), or it as a whole
        if str(pattern).strip().lower() == s.strip().lower():
            return True
        s = head
    cp = _pattern(str(pattern))
    if cp.regex is not None:
        return cp.regex.search(s)
    low = s.lower()
    return any(n in low for n in cp.needles)


def match_score(gene: Gene, signals: Sequence[str]) -> float:
    """Number of the gene's patterns that match any signal; ``gene_distilled_*`` genes score x0.8."""
    score = float(sum(1 for pat in gene.signals_match if any(match_pattern(pat, s) for s in signals)))
    if score > 0 and gene.id.startswith(DISTILLED_PREFIX):
        score *= constants.DISTILLED_GENE_FACTOR
    return score


def avoided_genes(avoid: AvoidList, genes: Sequence[Gene], signals: Sequence[str],
                  excluded: dict[str, str]) -> dict[str, str]:
    """Genes to leave out of selection here: each active entry's gene, while another gene still matches."""
    out: dict[str, str] = {}
    entries = avoid.blocking(signals)
    for entry in entries:
        others = [g for g in genes if g.id != entry.gene_id and g.id not in excluded and g.id not in out
                  and match_score(g, signals) > 0]
        if others:
            out[entry.gene_id] = f"avoid: failed {entry.failures} times on this problem"
    return out


def drift_intensity(pool_size: int, drift: bool) -> float:
    """``1/sqrt(N)`` for a pool of N genes, +0.3 when drift is requested (capped at 1)."""
    if drift:
        return min(1.0, 1.0 / math.sqrt(pool_size) + constants.DRIFT_BONUS) if pool_size > 1 else constants.DRIFT_FALLBACK_INTENSITY
    return min(1.0, 1.0 / math.sqrt(pool_size)) if pool_size > 0 else 0.0


# ------------------------------------------------------------------ bans


def _cycles(events: Sequence[EvolutionEvent]) -> list[EvolutionEvent]:
    return [e for e in events if e.outcome.status not in NOT_A_CYCLE]


def _signal_bans(events: Sequence[EvolutionEvent], signals: Sequence[str], ban_cycles: int) -> list[GeneBan]:
    bans: dict[str, GeneBan] = {}

    def add(gene_id: str, left: int, where: str) -> None:
        if left <= 0 or not gene_id:
            return
        if gene_id not in bans or (bans[gene_id].cycles_left or 0) < left:
            bans[gene_id] = GeneBan(gene_id=gene_id, source="signal", cycles_left=left,
                                    reason=f"ban_gene:{gene_id} {where}")

    cycles = _cycles(events)
    for k, ev in enumerate(reversed(cycles)):  # k = cycles recorded after this one
        for s in ev.signals:
            if s.startswith(BAN_PREFIX):
                add(s[len(BAN_PREFIX):].strip(), ban_cycles - k, f"signalled {k + 1} cycle(s) ago")
    for s in signals:
        if s.startswith(BAN_PREFIX):
            add(s[len(BAN_PREFIX):].strip(), ban_cycles + 1, "in the current signals")
    return list(bans.values())


def _overlap(current: Sequence[str], trigger: Sequence[str]) -> float:
    """Share of the current signals found in a trigger (the reference's computeSignalOverlap), compared by their
    learning keys: ``errsig:`` lines match when they are one error at another time (gep/learning/problem_key.py)."""
    if not current or not trigger:
        return 0.0
    keys = normalize_signals([str(s).lower() for s in current])
    other = set(normalize_signals([str(t).lower() for t in trigger]))
    return sum(1 for s in keys if s in other) / len(keys) if keys else 0.0


def _trigger_situation(event: EvolutionEvent) -> list[str] | None:
    return list(event.signals)


def _failed_capsule_bans(failed: Sequence[FailedCapsule], signals: Sequence[str],
                         events: Sequence[EvolutionEvent], ban_cycles: int, *, source: str = "failed_capsules",
                         what: str = "failed capsules", view: Callable[[Sequence[str]], list[str]] = situation_signals,
                         about: Callable[[EvolutionEvent], list[str] | None] = _trigger_situation) -> list[GeneBan]:
    """``view``: what of a situation is compared (its workspace signals; for fixes, its problem); ``about``: the
    signals an event's success counts on (a success of the gene there lifts the ban)."""
    current = view(signals)
    if not current or not failed:
        return []
    cycles = _cycles(events)
    times = [event_time(e) for e in cycles]
    # the window: failures newer than the cycle ban_cycles back count (all of them when history is shorter)
    window_start = times[-ban_cycles] if 0 < ban_cycles <= len(times) else None
    last_success: dict[str, datetime] = {}
    for ev, at in zip(cycles, times, strict=True):
        if ev.gene_id is None or at is None or ev.outcome.status != "success" or ev.is_empty_cycle:
            continue
        where = about(ev)
        if where is not None and _overlap(current, view(where)) >= constants.FAILED_CAPSULE_OVERLAP_MIN:
            gid = ev.gene_id
            if gid not in last_success or at > last_success[gid]:
                last_success[gid] = at

    hits: dict[str, list[datetime | None]] = {}
    for fc in failed:
        if not fc.gene or _overlap(current, view(fc.trigger)) < constants.FAILED_CAPSULE_OVERLAP_MIN:
            continue
        at = parse_at(fc.created_at)
        if at is not None:
            if window_start is not None and at < window_start:
                continue
            if fc.gene in last_success and at <= last_success[fc.gene]:
                continue
        hits.setdefault(fc.gene, []).append(at)

    bans: list[GeneBan] = []
    for gid, ats in hits.items():
        if len(ats) < constants.FAILED_CAPSULE_BAN_COUNT:
            continue
        known = sorted((a for a in ats if a is not None), reverse=True)
        left: int | None = None
        if len(known) >= constants.FAILED_CAPSULE_BAN_COUNT and len(known) == len(ats):
            # the ban holds until the second-newest failure leaves the ban_cycles window
            anchor = known[constants.FAILED_CAPSULE_BAN_COUNT - 1]
            after = sum(1 for t in times if t is not None and t > anchor)
            left = max(1, ban_cycles - after)
        bans.append(GeneBan(gene_id=gid, source=source, cycles_left=left,
                            reason=f"{len(ats)} {what} with >= {constants.FAILED_CAPSULE_OVERLAP_MIN:.0%} signal overlap"))
    return bans


def _unheld_fix_bans(events: Sequence[EvolutionEvent], signals: Sequence[str], ban_cycles: int) -> list[GeneBan]:
    """The failed-capsule rule applied to committed fixes whose problem came back (``meta.fix_verdict``
    "did_not_hold"): each is a failed attempt of its gene on the problem it was judged on (gep/learning/problem_key.py
    ``outcome_signals``: the errors the change touched, not the generic signals that triggered its cycle; an event
    recorded before fixes were credited: its trigger signals), dated when it ran. Situations are compared by
    their problem, as the memory graph does. Its checks passed, so no failed capsule was written; without this,
    a fix that keeps not holding is only outweighed slowly by the gene's older record."""
    unheld = [FailedCapsule(id=e.id, gene=e.gene_id, trigger=about, created_at=e.meta.at)
              for e in events if e.gene_id is not None and e.meta.fix_verdict == "did_not_hold"
              and (about := outcome_signals(e)) is not None]
    return _failed_capsule_bans(unheld, signals, events, ban_cycles, source="fix_did_not_hold",
                                what="fixes that did not hold", view=problem_signals,
                                about=outcome_signals) if unheld else []


def _memory_bans(advice: MemoryAdvice) -> list[GeneBan]:
    return [GeneBan(gene_id=g, source="memory", reason=advice.ban_reasons.get(g, "memory: low success"))
            for g in advice.banned_gene_ids]


def _merge(*groups: Sequence[GeneBan]) -> list[GeneBan]:
    out: dict[str, GeneBan] = {}
    for group in groups:
        for b in group:
            out.setdefault(b.gene_id, b)
    return list(out.values())


def active_bans(
    *,
    recent_events: Sequence[EvolutionEvent],
    signals: Sequence[str],
    settings: Settings,
    failed_capsules: Sequence[FailedCapsule] = (),
    genes: Sequence[Gene] = (),
    now: datetime | None = None,
) -> list[GeneBan]:
    """Bans in force now (for ``gep genes list``): signalled bans and fixes that did not hold always;
    failed-capsule bans when failed capsules are given; memory-graph bans when genes and ``now`` are given.
    One ban per gene."""
    recent_events = judged(recent_events)  # as selection counts them
    groups = [_signal_bans(recent_events, signals, settings.ban_cycles),
              _failed_capsule_bans(failed_capsules, signals, recent_events, settings.ban_cycles)]
    if genes and now is not None:
        groups.append(_memory_bans(memory_advice(events=recent_events, signals=signals, genes=genes, now=now)))
    groups.append(_unheld_fix_bans(recent_events, signals, settings.ban_cycles))
    return _merge(*groups)


# ------------------------------------------------------------------ capsules


def select_capsule(capsules: Sequence[Capsule], signals: Sequence[str], *, gene_id: str | None = None,
                   banned: frozenset[str] | set[str] = frozenset()) -> Capsule | None:
    """The capsule whose triggers match the most signals; a capsule of a banned gene is never reused.
    Ties go to a capsule of the selected gene, then to list order."""
    best: tuple[float, int, int] | None = None
    chosen: Capsule | None = None
    for i, c in enumerate(capsules):
        if c.gene and c.gene in banned:
            continue
        score = sum(1 for t in c.trigger if any(match_pattern(t, s) for s in signals))
        if score <= 0:
            continue
        rank = (float(score), 1 if gene_id and c.gene == gene_id else 0, -i)
        if best is None or rank > best:
            best, chosen = rank, c
    return chosen


# ------------------------------------------------------------------ selection


def judged(events: Sequence[EvolutionEvent]) -> list[EvolutionEvent]:
    """Events as selection counts them: a committed fix whose trigger came back (``meta.fix_verdict`` is
    "did_not_hold", set by the next cycle) is a failure, not a success."""
    out: list[EvolutionEvent] = []
    for e in events:
        if e.outcome.status == OutcomeStatus.success.value and e.meta.fix_verdict == "did_not_hold":
            e = e.model_copy(update={"outcome": Outcome(status=OutcomeStatus.failed.value, score=constants.FAILURE_SCORE)})
        out.append(e)
    return out


def _recent_selections(events: Sequence[EvolutionEvent], n: int) -> list[str]:
    picks = [e.gene_id for e in _cycles(events) if e.gene_id is not None]
    return picks[-n:] if n > 0 else []


def _blend(expected: float, usefulness: float, weight: float) -> float:
    return (1.0 - weight) * expected + weight * usefulness


def _score_candidates(genes: Sequence[Gene], signals: Sequence[str], advice: MemoryAdvice, banned: set[str],
                      feedback: FeedbackIndex | None, weight: float,
                      now: datetime) -> tuple[list[CandidateScore], dict[str, Gene]]:
    """One score per matching gene (first of each id): memory-graph expected success, blended with the
    gene's usefulness when feedback is given."""
    scored: list[CandidateScore] = []
    by_id: dict[str, Gene] = {}
    for g in genes:
        m = match_score(g, signals)
        if m <= 0 or g.id in by_id:
            continue
        by_id[g.id] = g
        st = advice.stats(g.id)
        c = CandidateScore(gene_id=g.id, match_score=round(m, 4), expected=st.expected,
                           evidence=round(st.evidence, 4), banned=g.id in banned, rank=st.expected)
        if feedback is not None:
            use = feedback.usefulness(g.id, signals, now)
            c.usefulness, c.usefulness_scope = use.score, use.scope
            c.rank = round(_blend(st.expected, use.score, weight), 6)
        scored.append(c)
    return scored, by_id


def _inherit_source_rank(scored: Sequence[CandidateScore], by_id: Mapping[str, Gene], advice: MemoryAdvice) -> None:
    """A distilled gene with little record of its own takes its best matching source gene's rank (see 3.)."""
    ranked = {c.gene_id: c for c in scored}
    for c in scored:
        prov = by_id[c.gene_id].provenance
        # its own record: outcomes counted, not their weight (a family's discount makes two outcomes weigh 1.9)
        st = advice.stats(c.gene_id)
        if prov is None or prov.origin != "distilled" \
                or st.successes + st.failures + st.empties >= constants.MEMORY_BAN_MIN_EVIDENCE:
            continue
        sources = [ranked[g] for g in prov.source_gene_ids if g in ranked and g != c.gene_id]
        if sources:
            best = max(sources, key=lambda s: s.rank)
            c.rank, c.refines = max(c.rank, best.rank), best.gene_id


def _worse_than_unknown(st: GeneStats) -> bool:
    """A record here that says the gene does worse than an unknown one: at least ``MEMORY_BAN_MIN_EVIDENCE`` more
    failures (empty cycles included) than successes in similar situations. A good gene's unlucky outcome or two in a
    short trial is not such a record: two failures in four tries of a gene that succeeds nine times in ten happen
    about one trial in twenty, and its expected success is then about 0.5."""
    return st.failures + st.empties - st.successes >= constants.MEMORY_BAN_MIN_EVIDENCE


def _has_record(st: GeneStats) -> bool:
    """A window's worth of outcomes in similar situations: a record its rank rests on (before that, every gene is
    still being tried, and the order of 3. and drift explore without a trial)."""
    return st.successes + st.failures + st.empties >= constants.EVIDENCE_WINDOW


def _newcomer_trial(scored: Sequence[CandidateScore], advice: MemoryAdvice, weight: float,
                    feedback: FeedbackIndex | None, signals: Sequence[str], now: datetime) -> None:
    """Feedback's filter bubble (seed 003): a gene nobody has used yet ranks at a neutral 0.5 usefulness under
    every judged incumbent, and drift alone seldom lets it show what it does. So, while usefulness counts, such
    a gene matching alongside a judged gene with a record here (``EVIDENCE_WINDOW`` outcomes in similar
    situations) takes the best of their ranks until it has a record of its own (``EVIDENCE_WINDOW`` outcomes
    anywhere: what the incumbents are judged on), its record here is worse than an unknown gene's (two more
    failures than successes), or a person said it did not help (see 3.). The implicit ``ignored`` of a
    rolled-back change does not end it by itself: that is one unlucky outcome."""
    known = [c.rank for c in scored if not c.banned and _has_record(advice.stats(c.gene_id))
             and c.usefulness_scope != "none"]
    if weight <= 0 or not known or feedback is None:
        return
    top = max(known)
    for c in scored:
        st = advice.stats(c.gene_id)
        if c.rank < top and c.refines is None and st.prior_attempts < constants.EVIDENCE_WINDOW \
                and not _worse_than_unknown(st) and feedback.usefulness(c.gene_id, signals, now).not_helpful == 0:
            c.rank, c.trial = top, True


def _record_outweighs(st: GeneStats) -> bool:
    """A record here that says the gene succeeds more often than not (expected success over 0.5 on at least a
    window's worth of outcomes): two failed checks in a row do not ban such a gene (see 2.)."""
    return st.expected > 0.5 and _has_record(st)


def _all_bans(recent_events: Sequence[EvolutionEvent], signals: Sequence[str],
              failed_capsules: Sequence[FailedCapsule], advice: MemoryAdvice, settings: Settings) -> dict[str, GeneBan]:
    """Every ban that applies here, by gene: recent failures on these signals, failed capsules, the memory graph,
    fixes that did not hold."""
    streaks = [b for b in _failed_capsule_bans(failed_capsules, signals, recent_events, settings.ban_cycles)
               if not _record_outweighs(advice.stats(b.gene_id))]
    bans = _merge(_signal_bans(recent_events, signals, settings.ban_cycles), streaks,
                  _memory_bans(advice), _unheld_fix_bans(recent_events, signals, settings.ban_cycles))
    return {b.gene_id: b for b in bans}


def _ranked(scored: Sequence[CandidateScore], by_id: Mapping[str, Gene]) -> list[CandidateScore]:
    """The candidates not banned, best first: rank, a refinement before its source, match, gene order."""
    order = {gid: i for i, gid in enumerate(by_id)}
    # sorted() is stable, and ``order`` makes the gene-order tie-break explicit
    return sorted((c for c in scored if not c.banned),
                  key=lambda c: (-c.rank, c.refines is None and not c.trial, -c.match_score, order[c.gene_id]))


def _persons_word(candidates: list[CandidateScore], feedback: FeedbackIndex | None, signals: Sequence[str],
                  now: datetime, weight: float, reasons: list[str]) -> list[CandidateScore]:
    """The candidates a person has not spoken against here (see 3b.), or all of them when every one was."""
    if feedback is None or weight <= 0 or len(candidates) <= 1:
        return candidates
    against = {c.gene_id for c in candidates
               if (use := feedback.usefulness(c.gene_id, signals, now)).scope == "situation" and use.person_against}
    return _leave_out(candidates, against, reasons, "a person said their changes here did not help: {} left out "
                      "while another gene matches")


def _leave_out(candidates: list[CandidateScore], out: set[str], reasons: list[str], why: str) -> list[CandidateScore]:
    """``candidates`` without the genes in ``out`` (``why`` filled with their ids added to ``reasons``), or all of
    them when none or every one would be left out."""
    kept = [c for c in candidates if c.gene_id not in out]
    if not kept or not out:
        return candidates
    reasons.append(why.format(", ".join(sorted(out))))
    return kept


def _usefulness_reasons(candidates: Sequence[CandidateScore], weight: float) -> list[str]:
    known = [c for c in candidates if c.usefulness_scope != "none"]
    if weight > 0 and known:
        return [f"usefulness (weight {weight:g}): " + ", ".join(
            f"{c.gene_id} {c.usefulness:.2f} ({c.usefulness_scope})" for c in known[:constants.MAX_ALTERNATIVES])]
    return []


def _pick_reasons(gene: Gene, pick: CandidateScore, weight: float) -> list[str]:
    """The reasons that head the decision: why this gene, and whose rank a distilled one borrowed."""
    out = [f"signals match {gene.id}.signals_match (score {pick.match_score:g}, expected success {pick.expected:.2f}"
           + (f", usefulness {pick.usefulness:.2f})" if weight > 0 else ")")]
    if pick.refines:
        out.append(f"{gene.id} refines {pick.refines} (distilled from its successes): ranked as it "
                   f"until it has a record of its own")
    elif pick.trial:
        out.append(f"{gene.id} is new here: ranked with the best gene with a record until it has one")
    return out


def _no_gene(scored: Sequence[CandidateScore], capsules: Sequence[Capsule], signals: Sequence[str],
             banned: set[str], decision: SelectorDecision, reasons: list[str]) -> Selection:
    """No candidate left: say why, and still offer a capsule whose trigger matches."""
    if scored:
        reasons.insert(0, f"all {len(scored)} matching gene(s) are banned; no gene selected")
    else:
        reasons.insert(0, "no gene matches the signals; a new gene may be required")
    capsule = select_capsule(capsules, signals, banned=banned)
    decision.capsule = capsule.id if capsule else None
    decision.reasons = reasons
    return Selection(gene=None, capsule=capsule, decision=decision)


def _beta_var(st: GeneStats) -> float:
    n = st.alpha + st.beta
    return st.alpha * st.beta / (n * n * (n + 1.0))


def runner_up_chance(candidates: Sequence[CandidateScore], advice: MemoryAdvice, weight: float) -> float:
    """How likely the second candidate is really better than the first: the normal approximation of their
    Beta posteriors (scaled by the memory graph's share of the rank), 0.5 when nothing tells them apart."""
    if len(candidates) < 2:
        return 0.0
    first, second = candidates[0], candidates[1]
    sd = (1.0 - weight) * math.sqrt(_beta_var(advice.stats(first.gene_id)) + _beta_var(advice.stats(second.gene_id)))
    gap = first.rank - second.rank
    if sd <= 0:
        return 0.5 if gap <= 0 else 0.0
    return 0.5 * math.erfc(gap / (sd * math.sqrt(2.0)))


def _drift_pick(candidates: Sequence[CandidateScore], advice: MemoryAdvice, rng: random.Random, intensity: float,
                weight: float, reasons: list[str], gate: float) -> tuple[CandidateScore, str]:
    """The best candidate, or under drift (probability ``gate``) a Thompson draw among the top ones (how many:
    ``intensity``); with the mode it was picked by."""
    if len(candidates) <= 1 or rng.random() >= gate:
        return candidates[0], "selection"
    k = min(len(candidates), max(2, math.ceil(len(candidates) * intensity)))
    draws = []
    for c in candidates[:k]:
        st = advice.stats(c.gene_id)
        draws.append(_blend(rng.betavariate(st.alpha, st.beta), c.usefulness, weight))
    reasons.append(f"drift: stochastic pick among top {k} (intensity {intensity:.2f})")
    return candidates[max(range(k), key=lambda i: draws[i])], "drift"


def dominance_alternative(pick: str, order: Sequence[str], recent: Sequence[str], settings: Settings) -> str | None:
    """The dominance rule on gene ids: when picking ``pick`` now would give it more than ``dominance_share`` of the
    last ``dominance_window`` selections (``recent``: the selections before this one, newest last), the first gene
    of ``order`` (best first) that it would not put over the cap; None when ``pick`` may stand or none may."""
    window = settings.dominance_window
    cap = math.floor(settings.dominance_share * window + 1e-9)
    last = list(recent)[-(window - 1):] if window > 1 else []

    def over(gid: str) -> bool:
        return last.count(gid) + 1 > cap

    if not over(pick):
        return None
    return next((g for g in order if g != pick and not over(g)), None)


def _dominance_cap(pick: CandidateScore, candidates: Sequence[CandidateScore],
                   recent_events: Sequence[EvolutionEvent], settings: Settings,
                   reasons: list[str]) -> tuple[CandidateScore, list[str]]:
    """A gene picked too often in the recent window yields to the best one that was not (if any)."""
    if len(candidates) <= 1:
        return pick, []
    recent = _recent_selections(recent_events, settings.dominance_window - 1)
    alt_id = dominance_alternative(pick.gene_id, [c.gene_id for c in candidates], recent, settings)
    if alt_id is None:
        return pick, []
    alt = next(c for c in candidates if c.gene_id == alt_id)
    reasons.append(f"dominance: {pick.gene_id} had {recent.count(pick.gene_id)} of the last "
                   f"{len(recent)} selections (cap {settings.dominance_share:.0%} of {settings.dominance_window}); "
                   f"yielding to {alt.gene_id}")
    return alt, [pick.gene_id]


def _rank_candidates(genes: Sequence[Gene], excluded: Mapping[str, str] | None, signals: Sequence[str],
                     advice: MemoryAdvice, banned: Mapping[str, GeneBan], feedback: FeedbackIndex | None,
                     weight: float, now: datetime, reasons: list[str],
                     ) -> tuple[list[CandidateScore], dict[str, Gene], list[CandidateScore], list[GeneBan]]:
    """Steps 1-3c: each selectable gene scored (memory graph, bans, usefulness, the rank a distilled gene
    inherits, a newcomer's trial), then the candidates best first, without those a person spoke against or
    that do not match the problem the cycle leads with.
    Returns the scores, the genes by id, the candidates and the bans applied (said in ``reasons``)."""
    allowed = [g for g in genes if not (excluded and g.id in excluded)]
    scored, by_id = _score_candidates(allowed, signals, advice, set(banned), feedback, weight, now)
    _inherit_source_rank(scored, by_id, advice)
    _newcomer_trial(scored, advice, weight, feedback, signals, now)
    candidates = _ranked(scored, by_id)
    applied = [banned[c.gene_id] for c in scored if c.banned]
    for b in applied:
        reasons.append(f"banned {b.gene_id}: {b.reason}")
    candidates = _persons_word(candidates, feedback, signals, now, weight, reasons)
    return scored, by_id, _on_the_problem(candidates, by_id, signals, advice, reasons), applied


_ERROR_FLAGS = ("log_error", "recurring_error")  # what the rules flag an error line with, beside the line itself


def lead_problem_signals(signals: Sequence[str]) -> list[str]:
    """The error a cycle leads with: its first error line (or recurring error), the one the prompt puts first and
    the agent works on, with the flags the rules gave it; empty when the signals name no error. A request or a
    person's correction is not such a lead: the gene for a correction (the instruction file's) matches the
    correction, not the request the same transcript also raised."""
    lead = next((s for s in signals if s.startswith(("errsig:", "recurring_errsig"))), None)
    return [lead, *(s for s in signals if s in _ERROR_FLAGS)] if lead else []


def _on_the_problem(candidates: list[CandidateScore], by_id: Mapping[str, Gene], signals: Sequence[str],
                    advice: MemoryAdvice, reasons: list[str]) -> list[CandidateScore]:
    """The candidates whose patterns match the problem the cycle leads with (see 3c.), plus any whose record
    here says it succeeds more often than not; all of them when none matches it."""
    lead = lead_problem_signals(signals)
    if not lead or len(candidates) <= 1:
        return candidates
    beside = {c.gene_id for c in candidates
              if match_score(by_id[c.gene_id], lead) <= 0 and not _record_outweighs(advice.stats(c.gene_id))}
    return _leave_out(candidates, beside, reasons, "not a strategy for the problem this cycle leads with: {} left "
                      "out while a gene matching it remains")


def _capsule_for(capsules: Sequence[Capsule], signals: Sequence[str], gene: Gene, banned: set[str],
                 reasons: list[str]) -> Capsule | None:
    """The capsule to reuse with the picked gene (its reason added), or None."""
    capsule = select_capsule(capsules, signals, gene_id=gene.id, banned=banned)
    if capsule is not None:
        reasons.append(f"capsule {capsule.id} trigger matches signals")
    return capsule


def select_gene_and_capsule(
    *,
    genes: Sequence[Gene],
    capsules: Sequence[Capsule],
    failed_capsules: Sequence[FailedCapsule],
    signals: Sequence[str],
    recent_events: Sequence[EvolutionEvent],
    settings: Settings,
    rng: random.Random,
    now: datetime,
    drift: bool = False,
    excluded: Mapping[str, str] | None = None,
    feedback: FeedbackIndex | None = None,
    summaries: Sequence[SituationSummary] = (),
) -> Selection:
    """Choose a gene (and a capsule to reuse) for the current signals. ``recent_events`` oldest first
    (as ``Store.recent_events`` returns them); the more are given, the more the memory graph knows.
    ``excluded``: gene id -> why it may not be selected here (retired, not runnable: gep.genes.eligibility).
    ``feedback``: the stored feedback signals' scores; None ranks by the memory graph alone.
    ``summaries``: the memory graph's summaries of events folded before ``recent_events`` (the store's
    ``memory_history()``), so its advice covers the whole decayed history."""
    signals = [str(s) for s in signals]
    recent_events = judged(recent_events)
    use = learning_switch(settings)
    feedback = feedback if use.on("feedback") else None
    capsules = capsules if use.on("capsules") else ()
    advice = (memory_advice(events=recent_events, signals=signals, genes=genes, now=now, summaries=summaries)
              if use.on("memory_graph") else memory_advice(events=[], signals=signals, genes=genes, now=now))
    banned = _all_bans(recent_events, signals, failed_capsules, advice, settings) if use.on("bans") else {}
    intensity = drift_intensity(len(genes), drift) if use.on("drift") else 0.0
    weight = min(1.0, max(0.0, settings.usefulness_weight)) if feedback is not None else 0.0
    reasons = [f"not selectable {gid}: {why}" for gid, why in (excluded or {}).items()
               if any(g.id == gid and match_score(g, signals) > 0 for g in genes)]
    scored, by_id, candidates, applied = _rank_candidates(genes, excluded, signals, advice, banned, feedback,
                                                          weight, now, reasons)

    decision = SelectorDecision(drift=drift, drift_intensity=round(intensity, 4), bans_applied=applied,
                                scores=scored, signal_key=advice.signal_key,
                                memory_preferred=advice.preferred_gene_id, usefulness_weight=weight)
    if advice.explanation:
        reasons.append("memory_graph: " + " | ".join(advice.explanation))
    reasons += _usefulness_reasons(candidates, weight)
    if not candidates:
        return _no_gene(scored, capsules, signals, set(banned), decision, reasons)
    # drift in proportion to doubt (see 4.): a requested drift keeps the seed's intensity
    gate = intensity if drift else intensity * runner_up_chance(candidates, advice, weight)
    decision.drift_intensity = round(gate, 4)
    pick, mode = _drift_pick(candidates, advice, rng, intensity, weight, reasons, gate)
    pick, capped = (_dominance_cap(pick, candidates, recent_events, settings, reasons) if use.on("dominance_cap")
                    else (pick, []))
    gene = by_id[pick.gene_id]
    reasons[0:0] = _pick_reasons(gene, pick, weight)
    capsule = _capsule_for(capsules, signals, gene, set(banned), reasons)
    decision.selected = gene.id
    decision.capsule = capsule.id if capsule else None
    decision.alternatives = [c.gene_id for c in candidates if c.gene_id != gene.id][:constants.MAX_ALTERNATIVES]
    decision.drift_mode = mode
    decision.dominance_capped = capped
    decision.reasons = reasons
    return Selection(gene=gene, capsule=capsule, decision=decision)
