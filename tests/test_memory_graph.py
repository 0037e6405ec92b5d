"""Memory graph: signal keys, Laplace estimates, decay, similarity, empty cycles, low-success bans."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from gep.core import constants
from gep.core.models import BlastRadius, EvolutionEvent, Gene, Outcome, iso
from gep.learning.memory_graph import (
    MemoryAdvice,
    SituationSummary,
    compute_signal_key,
    jaccard,
    memory_advice,
    merge_summaries,
    normalize_error_signature,
    problem_signals,
    stable_hash,
    summarize,
)

NOW = datetime(2026, 3, 1, tzinfo=UTC)
SIG = ["log_error", "errsig:TypeError: x is undefined", "recurring_error"]
GENES = [Gene(id="gene_a", signals_match=["log_error"]), Gene(id="gene_b", signals_match=["errsig"])]


def ev(i: int, gene: str | None, status: str, signals=SIG, age_days: float = 0.0, empty: bool = False,
       at: str | None = None) -> EvolutionEvent:
    changed = status == "success" and not empty
    return EvolutionEvent(id=f"e{i}", signals=list(signals), genes_used=[gene] if gene else [],
                          outcome=Outcome(status=status, score=0.85 if changed else 0.2),
                          blast_radius=BlastRadius(files=1, lines=3) if changed else BlastRadius(),
                          meta={"at": at if at is not None else iso(NOW - timedelta(days=age_days)),
                                "empty_cycle": empty})


def advice(events, signals=SIG, genes=GENES):
    return memory_advice(events=events, signals=signals, genes=genes, now=NOW)


# ------------------------------------------------------------------ keys


def test_stable_hash_is_fnv1a():
    assert stable_hash("") == "811c9dc5"
    assert stable_hash("a") == "e40c292c"
    assert stable_hash("foobar") == "bf9cf968"


@pytest.mark.parametrize("a, b, same", [
    (["errsig:Error at /home/u/app.py line 12"], ["errsig:Error at /srv/x/app.py line 99"], True),
    (["errsig:bad value 0xdeadbeef"], ["errsig:bad value 0x1f"], True),
    (["errsig:Error   in   C:\\work\\x.js"], ["errsig:error in D:\\other\\x.js"], True),
    # the learning key keeps a path's file name (gep/learning/problem_key.py): an error in another file is another error
    (["errsig:Error   in   C:\\work\\x.js"], ["errsig:error in D:\\other\\y.js"], False),
    (["errsig:TypeError"], ["errsig:ValueError"], False),
    (["b", "a", "a", " "], ["a", "b"], True),  # de-duplicated, sorted, blanks dropped
])
def test_signal_key_normalises_noise(a, b, same):
    assert (compute_signal_key(a) == compute_signal_key(b)) is same


def test_signal_key_shape():
    assert compute_signal_key([]) == "(none)"
    key = compute_signal_key(["log_error", "errsig:Boom 42"])
    assert key == f"errsig_norm:{stable_hash(normalize_error_signature('Boom 42'))}|log_error"
    assert normalize_error_signature("Boom 42 at /a/b.py") == "boom <n> at <path>"


def test_jaccard():
    assert jaccard([], []) == 1.0
    assert jaccard(["a"], []) == 0.0
    assert jaccard(["a", "b"], ["b", "c"]) == pytest.approx(1 / 3)


# ------------------------------------------------------------------ estimates


def test_laplace_expected_success_from_recorded_events():
    events = [ev(1, "gene_a", "success"), ev(2, "gene_a", "success"), ev(3, "gene_a", "success"),
              ev(4, "gene_a", "failed")]
    a = advice(events).stats("gene_a")
    assert (a.successes, a.failures, a.attempts) == (3, 1, 4)
    g = constants.FAMILY_DISCOUNT  # each outcome in the family fades the records before it
    assert a.expected == pytest.approx((1 + g ** 3 + g ** 2 + g) / (2 + g ** 3 + g ** 2 + g + 1), abs=1e-6)
    assert a.best == pytest.approx(4 / 6)  # the reference's value keeps the whole record
    assert advice(events).stats("gene_b").expected == 0.5  # nothing known


def test_edge_evidence_decays_with_a_30_day_half_life():
    a = advice([ev(1, "gene_a", "failed", age_days=30)]).stats("gene_a")
    assert a.evidence_fail == pytest.approx(0.5, abs=1e-6)
    assert a.best == pytest.approx((1 / 3) * 0.5, abs=1e-6)  # reference value: p * decay(last)
    assert a.prior == pytest.approx((1 / 3) * 0.5 ** (30 / 45), abs=1e-6)  # gene prior: 45-day half-life


def test_similar_situations_count_by_jaccard_at_least_0_34():
    # situations that name no specific problem are compared as a whole
    now = ["log_error", "recurring_error", "high_memory"]
    near = ["log_error", "recurring_error", "perf_bottleneck"]  # 2 shared of 4 -> 0.5
    far = ["log_error", "perf_bottleneck", "high_tool_usage", "capability_gap"]  # 1 of 6 -> 0.17
    a = advice([ev(1, "gene_a", "failed", signals=near), ev(2, "gene_a", "failed", signals=far)], signals=now)
    st = a.stats("gene_a")
    assert st.failures == 1
    assert st.prior_attempts == 2  # the far event still counts toward the gene's global prior
    assert [round(k.similarity, 2) for k in a.similar_keys] == [1.0, 0.5]


def test_control_signals_do_not_split_a_situation():
    events = [ev(1, "gene_a", "failed", signals=SIG + ["consecutive_failure_streak_3"]),
              ev(2, "gene_a", "failed", signals=SIG + ["consecutive_failure_streak_4", "ban_gene:gene_a"])]
    a = advice(events, signals=SIG + ["consecutive_failure_streak_5"])
    assert len(a.similar_keys) == 1
    assert a.signal_key == compute_signal_key(problem_signals(SIG))
    assert a.stats("gene_a").attempts == 2


def test_empty_success_is_not_a_success():
    a = advice([ev(i, "gene_a", "success", empty=True) for i in range(3)]).stats("gene_a")
    assert (a.successes, a.empties) == (0, 3)
    g = constants.FAMILY_DISCOUNT
    assert a.expected == pytest.approx(1 / (2 + g ** 2 + g + 1), abs=1e-6)


@pytest.mark.parametrize("status", ["running", "skipped", "awaiting_changes"])
def test_events_without_an_outcome_are_ignored(status):
    a = advice([ev(1, "gene_a", status), ev(2, None, "failed"), ev(3, "gene_zzz", "failed")])
    assert a.stats("gene_a").attempts == 0 and a.stats("gene_a").prior_attempts == 0


def test_a_fix_that_did_not_hold_counts_as_a_failure():
    held, undone = ev(1, "gene_a", "success"), ev(2, "gene_a", "success")
    undone.meta.fix_verdict = "did_not_hold"
    a = advice([held, undone]).stats("gene_a")
    assert (a.successes, a.failures) == (1, 1)
    assert sum(s.failed for s in summarize([held, undone])) == 1


def test_bad_timestamp_counts_as_now():
    assert advice([ev(1, "gene_a", "failed", at="not a time")]).stats("gene_a").evidence_fail == 1.0


# ------------------------------------------------------------------ advice


# the family's discounted record: four failures weigh 3.44 (expected 0.18), five 4.10
@pytest.mark.parametrize("fails, banned", [(3, False), (4, False), (5, True), (6, True)])
def test_low_success_ban_after_repeated_failures(fails, banned):
    a = advice([ev(i, "gene_a", "failed") for i in range(fails)])
    assert ("gene_a" in a.banned_gene_ids) is banned
    if banned:
        assert "expected success" in a.ban_reasons["gene_a"]


def test_old_failures_fade_instead_of_banning_forever():
    a = advice([ev(i, "gene_a", "failed", age_days=60) for i in range(4)])
    assert a.banned_gene_ids == []
    assert a.stats("gene_a").expected > 0.3


def test_old_success_is_not_turned_into_a_ban():
    # the reference bans when p * decay(last) < 0.18: three old successes and one failure would be banned
    events = [ev(i, "gene_a", "success", age_days=90) for i in range(3)] + [ev(9, "gene_a", "failed", age_days=90)]
    a = advice(events)
    assert a.stats("gene_a").best < 0.18
    assert a.banned_gene_ids == []


@pytest.mark.parametrize("fails, banned", [(6, False), (7, True)])
def test_gene_failing_everywhere_is_banned_by_its_prior(fails, banned):
    other = ["high_tool_usage", "capability_gap"]
    a = advice([ev(i, "gene_b", "failed", signals=other) for i in range(fails)])
    assert ("gene_b" in a.banned_gene_ids) is banned


def test_preferred_gene_has_the_best_record():
    events = [ev(1, "gene_a", "success"), ev(2, "gene_b", "success"), ev(3, "gene_b", "success"),
              ev(4, "gene_a", "failed")]
    a = advice(events)
    assert a.preferred_gene_id == "gene_b"
    assert a.explanation[0] == "memory_prefer:gene_b"
    assert advice([]).preferred_gene_id is None


def test_record_in_other_situations_is_one_pseudo_observation():
    other = ["high_tool_usage", "capability_gap"]
    good = advice([ev(i, "gene_a", "success", signals=other) for i in range(5)]).stats("gene_a")
    bad = advice([ev(i, "gene_a", "failed", signals=other) for i in range(5)]).stats("gene_a")
    assert good.evidence == 0 and bad.evidence == 0  # nothing in this situation
    assert 0.5 < good.expected < 2 / 3 and 1 / 3 < bad.expected < 0.5
    assert good.alpha + good.beta == pytest.approx(3.0)
    # once this situation has its own evidence (two outcomes' weight), the other situations stop counting
    own = advice([ev(i, "gene_a", "success", signals=other) for i in range(5)]
                 + [ev(9 + i, "gene_a", "failed") for i in range(3)]).stats("gene_a")
    g = constants.FAMILY_DISCOUNT
    assert own.expected == pytest.approx(1 / (2 + g ** 2 + g + 1), abs=1e-6)


# ------------------------------------------------------------------ summaries stand for the events they fold

SITUATIONS = [["log_error", "errsig:TypeError: x is undefined at /a/b.py:12"], ["perf_bottleneck"],
              ["log_error", "recurring_error"], ["capability_gap", "user_feature_request:add a flag"], [],
              ["log_error", "errsig:TypeError: x is undefined at /c/d.py:99", "consecutive_failure_streak_3"]]
GENE_IDS = ["gene_a", "gene_b", "gene_c"]


def random_history(rng: random.Random, n: int, future: bool = False) -> list[EvolutionEvent]:
    """n events over 200 days (some undated, some without an outcome; ``future``: some stamped after NOW)."""
    out = []
    for i in range(n):
        status = rng.choice(["success", "success", "failed", "empty", "running", "skipped"])
        when = rng.random()
        at = None if when < 0.05 else iso(NOW + timedelta(hours=1)) if future and when > 0.9 \
            else iso(NOW - timedelta(days=200 * (1 - i / n), seconds=rng.randrange(3600)))
        ev_ = ev(i, rng.choice(GENE_IDS + [None]), "success" if status == "empty" else status,
                 signals=rng.choice(SITUATIONS), empty=status == "empty", at=at or "")
        if rng.random() < 0.1:
            ev_.meta.fix_verdict = "did_not_hold"
        out.append(ev_)
    return out


def fold(events: list[EvolutionEvent], rng: random.Random) -> list[SituationSummary]:
    """Summaries of ``events`` folded in random batches, merged as the store merges them (as of the fold's
    time, NOW, or of each batch's newest event)."""
    folded: dict[tuple[str, str], SituationSummary] = {}
    i = 0
    while i < len(events):
        step = rng.randrange(1, 60)
        for s in summarize(events[i:i + step], ref=rng.choice([NOW, None])):
            key = (s.key, s.gene_id)
            folded[key] = merge_summaries(folded[key], s) if key in folded else s
        i += step
    return list(folded.values())


EVIDENCE = ("evidence_success", "evidence_fail", "alpha", "beta", "expected")


def same_advice(a: MemoryAdvice, b: MemoryAdvice, evidence: bool = True, tol: float = 2e-6) -> None:
    """``evidence``: also the family records' evidence (to ``tol``), its posterior and its bans (folded history
    starts a family's record from the summaries' window, so those are exact only where nothing was folded)."""
    assert (a.preferred_gene_id, a.signal_key) == (b.preferred_gene_id, b.signal_key)
    if evidence:
        assert (a.banned_gene_ids, a.ban_reasons, a.explanation) == (b.banned_gene_ids, b.ban_reasons, b.explanation)
    assert a.similar_keys == b.similar_keys
    for x, y in zip(a.genes, b.genes, strict=True):
        assert (x.gene_id, x.attempts, x.prior_attempts, x.successes, x.failures, x.empties) == \
            (y.gene_id, y.attempts, y.prior_attempts, y.successes, y.failures, y.empties)
        for field in ("best", "prior", "score", *(EVIDENCE if evidence else ())):
            assert getattr(x, field) == pytest.approx(getattr(y, field), rel=1e-9, abs=tol), field


@pytest.mark.parametrize("seed", range(12))
def test_summaries_give_the_counts_of_the_events_they_fold(seed: int) -> None:
    rng = random.Random(seed)
    genes = [Gene(id=g) for g in GENE_IDS]
    events = random_history(rng, rng.randrange(50, 400))
    cut = rng.randrange(len(events))
    events[cut:] = random_history(rng, len(events) - cut, future=True)  # clocks ahead: not folded yet
    summaries = fold(events[:cut], rng)
    later = NOW + timedelta(days=rng.choice([0, 3, 40]))
    for signals in [*SITUATIONS, ["log_error"], ["recurring_error", "perf_bottleneck"]]:
        whole = memory_advice(events=events, signals=signals, genes=genes, now=later)
        split = memory_advice(events=events[cut:], summaries=summaries, signals=signals, genes=genes, now=later)
        same_advice(whole, split, evidence=False)
    assert sum(s.total for s in summaries) == sum(1 for e in events[:cut] if e.genes_used
                                                  and e.outcome.status in ("success", "failed"))


def test_summary_json_round_trip_keeps_the_advice() -> None:
    events = random_history(random.Random(7), 200, future=True)
    summaries = [SituationSummary.model_validate_json(s.model_dump_json()) for s in summarize(events, ref=NOW)]
    same_advice(advice(events), memory_advice(events=[], summaries=summaries, signals=SIG, genes=GENES, now=NOW))


# ------------------------------------------------------------------ recency: the evidence window (issue 15)


def test_newest_outcomes_outweigh_a_long_old_record():
    # forty fixes that held, then the gene's fixes stop working: seven failures turn it (a family's record weighs
    # at most 1 / (1 - FAMILY_DISCOUNT) = 10 outcomes)
    w, g = 7, constants.FAMILY_DISCOUNT
    events = [ev(i, "gene_a", "success") for i in range(40)] + [ev(40 + i, "gene_a", "failed") for i in range(w)]
    a = advice(events).stats("gene_a")
    assert (a.successes, a.failures, a.attempts) == (40, w, 40 + w)  # the counts keep the whole record ...
    faded = sum(g ** k for k in range(w, w + 40))  # ... but each success has w or more newer outcomes
    recent = sum(g ** k for k in range(w))
    assert a.evidence_success == pytest.approx(faded, abs=1e-5) and a.evidence_fail == pytest.approx(recent)
    assert a.expected == pytest.approx((1 + faded) / (2 + faded + recent), abs=1e-5)
    assert a.expected < 0.5  # the whole record: 41 / (42 + w)


def test_a_summary_stored_before_the_window_keeps_its_evidence():
    events = [ev(i, "gene_a", "success" if i % 3 else "failed", age_days=i) for i in range(30)]
    (summary,) = summarize(events, ref=NOW)
    legacy = summary.model_dump(exclude={"recent", "faded_success", "faded_fail", "faded_undated_success",
                                         "faded_undated_fail"})
    old = SituationSummary.model_validate(legacy)
    got = memory_advice(events=[], summaries=[old], signals=SIG, genes=GENES, now=NOW).stats("gene_a")
    assert (got.evidence_success, got.evidence_fail) == pytest.approx((summary.edge_success, summary.edge_fail))
    assert got.successes == 20 and got.failures == 10
