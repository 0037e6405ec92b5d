"""Feedback scores (seed 003): the arithmetic, decay, context-aware lookup, implicit and explicit signals,
the stats view, and reverts of GEP commits found in a real git repository."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from conftest import git, init_repo

from gep.learning.feedback import (
    FeedbackError,
    FeedbackIndex,
    FeedbackKind,
    FeedbackSignal,
    InMemoryFeedback,
    Observation,
    Score,
    decayed,
    explicit_signal,
    feedback_stats,
    find_reverts,
    fold,
    implicit_signal,
    outcome_observation,
    revert_signal,
    score_delta,
    situation_key_signals,
)

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
DB = ["perf_bottleneck", "errsig:TimeoutError: db query took 3021 ms at /srv/app/db.py:88"]
AUTH = ["log_error", "errsig:AuthError: token expired for user 42"]
OTHER = ["user_feature_request:add a rate limit to the API", "capability_gap"]


def sig(kind: str, at: datetime = T0, gene: str = "gene_a", signals: list[str] | None = None,
        confidence: float = 1.0, i: int = 0) -> FeedbackSignal:
    return FeedbackSignal(id=f"fb_{kind}_{i}_{at.timestamp()}", gene_id=gene, event_id=f"evt_{i}",
                          kind=FeedbackKind(kind), confidence=confidence, origin=Observation.person,
                          situation=situation_key_signals(signals or DB), created_at=at)


# ------------------------------------------------------------------ the seed's arithmetic


@pytest.mark.parametrize("kind, expected", [("used", 0.60), ("ignored", 0.45), ("helpful", 0.65),
                                            ("not_helpful", 0.40)])
def test_one_signal_from_neutral_moves_by_the_seeds_table(kind, expected):
    # seed table: used +0.10, ignored -0.05, helpful +0.15, not_helpful -0.10 per signal (confidence 1)
    assert fold([sig(kind)]).value == pytest.approx(expected)


def test_delta_is_weight_times_confidence_times_a_tenth():
    assert score_delta(FeedbackKind.used, 0.9) == pytest.approx(0.09)
    assert score_delta(FeedbackKind.ignored, 0.5) == pytest.approx(-0.025)
    assert score_delta(FeedbackKind.helpful, 0.4) == pytest.approx(0.06)
    assert fold([sig("used", confidence=0.9)]).value == pytest.approx(0.59)


def test_scores_are_clamped_to_zero_and_one():
    assert fold([sig("helpful", i=i) for i in range(10)]).value == 1.0
    assert fold([sig("not_helpful", i=i) for i in range(10)]).value == 0.0
    # clamping happens at each step: down from the ceiling at once, not from 0.5 + 1.5
    assert fold([sig("helpful", i=i) for i in range(10)] + [sig("not_helpful", T0 + timedelta(seconds=1))]
                ).value == pytest.approx(0.9)


@pytest.mark.parametrize("score, days, expected", [
    (0.9, 0, 0.9),
    (0.9, 7, 0.88),                      # 0.5 + 0.4 x 0.95
    (0.9, 14, 0.5 + 0.4 * 0.9025),       # 0.861
    (0.2, 7, 0.215),                     # toward 0.5 from below
    (0.9, 70, 0.5 + 0.4 * 0.95 ** 10),
    (0.5, 30, 0.5),
    (0.9, -3, 0.9),                      # no decay backwards
])
def test_decay_5_percent_a_week_toward_neutral(score, days, expected):
    assert decayed(score, days) == pytest.approx(expected)


def test_decay_applies_between_signals_and_up_to_now():
    s = fold([sig("helpful", T0), sig("helpful", T0 + timedelta(seconds=1), i=1),
              sig("used", T0 + timedelta(days=7), i=2)])
    # 0.8 after two helpful, decays a week to 0.785, then +0.1
    assert s.value == pytest.approx(0.885)
    assert s.at(T0 + timedelta(days=14)) == pytest.approx(0.5 + 0.385 * 0.95)
    assert Score().at(T0) == 0.5


def test_signals_are_applied_in_time_order_whatever_order_they_come_in():
    a = [sig("helpful", T0, i=0), sig("not_helpful", T0 + timedelta(days=3), i=1), sig("used", T0 + timedelta(days=9), i=2)]
    assert fold(a).value == pytest.approx(fold(list(reversed(a))).value)


# ------------------------------------------------------------------ context-aware scores


def _seed_example() -> list[FeedbackSignal]:
    # the seed's "Use connection pooling" fact: frequently used for database performance, often ignored
    # for authentication
    out = [sig("used", T0, signals=DB, i=0), sig("used", T0, signals=DB, i=1), sig("helpful", T0, signals=DB, i=2)]
    out += [sig("ignored", T0, signals=AUTH, i=10 + k) for k in range(3)]
    return out


def test_context_scores_as_the_seed_example():
    index = FeedbackIndex(_seed_example())
    db = index.usefulness("gene_a", DB, T0)
    auth = index.usefulness("gene_a", AUTH, T0)
    assert (db.scope, db.score) == ("situation", pytest.approx(0.85))
    assert (auth.scope, auth.score) == ("situation", pytest.approx(0.35))
    # an unrelated situation falls back to the gene's global score (every signal: 0.5 + 0.35 - 0.15)
    other = index.usefulness("gene_a", OTHER, T0)
    assert (other.scope, other.score) == ("global", pytest.approx(0.70))
    assert index.usefulness("gene_unknown", DB, T0).model_dump() == {
        "gene_id": "gene_unknown", "score": 0.5, "scope": "none", "situation_key": None, "similarity": 0.0,
        "signals": 0, "not_helpful": 0, "helpful": 0}


def test_lookup_uses_the_closest_similar_situation():
    index = FeedbackIndex(_seed_example())
    # the same error with other numbers and paths normalises to the same signature: an exact match
    same = ["perf_bottleneck", "errsig:TimeoutError: db query took 12 ms at /opt/other/db.py:7"]
    assert index.usefulness("gene_a", same, T0).similarity == 1.0
    # a similar situation (Jaccard 2/3 >= 0.34) and control signals are ignored
    near = DB + ["recurring_error", "consecutive_failure_streak_4", "ban_gene:gene_b"]
    got = index.usefulness("gene_a", near, T0)
    assert got.scope == "situation" and got.similarity == pytest.approx(2 / 3, abs=1e-3)
    assert got.score == pytest.approx(0.85)
    # below the memory graph's threshold: global
    far = ["perf_bottleneck", "log_error", "recurring_error", "high_tool_usage:exec"]  # 1/5 = 0.2
    assert FeedbackIndex(_seed_example()).usefulness("gene_a", far, T0).scope == "global"


def test_situation_scores_decay_too():
    index = FeedbackIndex(_seed_example())
    assert index.usefulness("gene_a", DB, T0 + timedelta(days=7)).score == pytest.approx(0.5 + 0.35 * 0.95)


# ------------------------------------------------------------------ implicit and explicit signals


@pytest.mark.parametrize("observation, kind, confidence", [
    (Observation.fix_verified, "used", 0.9),
    (Observation.fix_did_not_hold, "ignored", 0.6),
    (Observation.ended_empty, "ignored", 0.5),
    (Observation.ended_abandoned, "ignored", 0.5),
    (Observation.rolled_back, "ignored", 0.5),
    (Observation.reverted, "not_helpful", 1.0),
])
def test_implicit_mapping(observation, kind, confidence):
    s = implicit_signal(event_id="evt_1", gene_id="gene_a", signals=AUTH + ["ban_gene:x"], observation=observation,
                        at=T0)
    assert (s.kind.value, s.confidence, s.origin) == (kind, confidence, observation)
    assert s.situation == sorted(set(s.situation)) and not any(x.startswith("ban_gene") for x in s.situation)
    assert any(x.startswith("errsig_norm:") for x in s.situation)
    # the same observation of the same event is the same signal: recording it twice adds nothing
    again = implicit_signal(event_id="evt_1", gene_id="gene_a", signals=AUTH, observation=observation,
                            at=T0 + timedelta(hours=1))
    repo = InMemoryFeedback()
    assert repo.add_feedback(s) is True and repo.add_feedback(again) is False
    assert len(repo.list_feedback()) == 1


def test_no_gene_no_implicit_signal():
    assert implicit_signal(event_id="e", gene_id=None, signals=AUTH, observation=Observation.fix_verified,
                           at=T0) is None


@pytest.mark.parametrize("status, empty, expected", [
    ("empty", True, Observation.ended_empty), ("success", True, Observation.ended_empty),
    ("abandoned", False, Observation.ended_abandoned), ("success", False, None),
    # a change that failed its checks was rolled back: abandoned for usefulness; a failure before any change is not
    ("failed", False, Observation.rolled_back), ("failed", True, None),
])
def test_outcome_observation(status, empty, expected):
    assert outcome_observation(status, empty) == expected


def test_explicit_feedback_keeps_a_redacted_note():
    s = explicit_signal(event_id="evt_9", gene_id="gene_a", signals=AUTH, kind="not_helpful", at=T0,
                        note="broke login, see token=abcd1234efgh5678 ", author="ana")
    assert s.kind is FeedbackKind.not_helpful and s.confidence == 1.0 and s.origin is Observation.person
    assert "abcd1234efgh5678" not in s.note and s.note.startswith("broke login")
    assert fold([s]).value == pytest.approx(0.4)
    with pytest.raises(FeedbackError, match="'helpful' or 'not_helpful'"):
        explicit_signal(event_id="evt_9", gene_id="gene_a", signals=AUTH, kind="used", at=T0)
    with pytest.raises(FeedbackError, match="used no gene"):
        explicit_signal(event_id="evt_9", gene_id=None, signals=AUTH, kind="helpful", at=T0)


def test_stats_view():
    signals = _seed_example() + [sig("not_helpful", T0 + timedelta(days=2), gene="gene_b", signals=AUTH, i=50)]
    stats = feedback_stats(signals, T0 + timedelta(days=2))
    assert [g.gene_id for g in stats] == ["gene_a", "gene_b"]
    a = stats[0]
    assert a.counts.model_dump() == {"used": 2, "ignored": 3, "helpful": 1, "not_helpful": 0}
    assert a.last_signal_at == T0
    assert a.score == pytest.approx(0.5 + 0.2 * 0.95 ** (2 / 7), abs=1e-6)
    assert sorted(round(s.score, 3) for s in a.situations) == sorted(
        [round(0.5 + 0.35 * 0.95 ** (2 / 7), 3), round(0.5 - 0.15 * 0.95 ** (2 / 7), 3)])
    assert {s.counts.total for s in a.situations} == {3}
    assert stats[1].score == pytest.approx(0.4) and stats[1].last_signal_at == T0 + timedelta(days=2)


# ------------------------------------------------------------------ reverts of GEP commits (real git)


def _gep_commit(repo: Path, event_id: str, path: str, content: str) -> str:
    (repo / path).write_text(content)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", f"gep(repair): fix {path}\n\nGEP-Event: {event_id}\nGEP-Gene: gene_a\n")
    return git(repo, "rev-parse", "HEAD").strip()


def test_git_revert_of_a_gep_commit_is_found_and_scored(tmp_path: Path):
    repo = init_repo(tmp_path / "r", {"stats.py": "def mean(v):\n    return sum(v) / (len(v) - 1)\n"})
    start = git(repo, "rev-parse", "HEAD").strip()
    sha = _gep_commit(repo, "evt_100_abc", "stats.py", "def mean(v):\n    return sum(v) / len(v)\n")
    other = _gep_commit(repo, "evt_101_def", "notes.md", "kept\n")
    (repo / "README.md").write_text("a person's own change\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "docs")
    git(repo, "revert", "--no-edit", sha)
    found = find_reverts(repo, since=start)
    assert [(f.event_id, f.reverted_sha, f.how) for f in found] == [("evt_100_abc", sha, "message")]
    assert found[0].author == "Test" and found[0].subject.startswith("Revert")
    assert other not in {f.reverted_sha for f in found}
    s = revert_signal(found[0], gene_id="gene_a", signals=AUTH)
    assert (s.kind, s.confidence, s.origin, s.event_id) == (FeedbackKind.not_helpful, 1.0, Observation.reverted,
                                                            "evt_100_abc")
    assert fold([s]).value == pytest.approx(0.4)
    # nothing in a range that starts after the revert
    assert find_reverts(repo, since="HEAD") == []


def test_a_commit_that_exactly_undoes_a_gep_commit_is_a_revert(tmp_path: Path):
    repo = init_repo(tmp_path / "r", {"a.py": "x = 1\n", "b.py": "y = 2\n"})
    sha = _gep_commit(repo, "evt_7", "a.py", "x = 10\n")
    (repo / "a.py").write_text("x = 1\n")  # by hand, no "This reverts" message
    git(repo, "commit", "-qam", "back to what worked")
    assert [(f.event_id, f.reverted_sha, f.how) for f in find_reverts(repo)] == [("evt_7", sha, "exact_undo")]


def test_partial_undo_and_reverted_reverts_do_not_count(tmp_path: Path):
    repo = init_repo(tmp_path / "r", {"a.py": "x = 1\n", "b.py": "y = 2\n"})
    (repo / "b.py").write_text("y = 20\n")
    _gep_commit(repo, "evt_8", "a.py", "x = 10\n")  # changes a.py and b.py
    (repo / "a.py").write_text("x = 1\n")
    git(repo, "commit", "-qam", "undo half of it")
    assert find_reverts(repo) == []
    sha = _gep_commit(repo, "evt_9", "a.py", "x = 99\n")
    git(repo, "revert", "--no-edit", sha)
    revert = git(repo, "rev-parse", "HEAD").strip()
    assert [f.event_id for f in find_reverts(repo)] == ["evt_9"]
    git(repo, "revert", "--no-edit", revert)  # the person changed their mind
    assert find_reverts(repo) == []


def test_a_gep_commit_reverting_another_is_not_a_person(tmp_path: Path):
    repo = init_repo(tmp_path / "r", {"a.py": "x = 1\n"})
    _gep_commit(repo, "evt_1", "a.py", "x = 2\n")
    _gep_commit(repo, "evt_2", "a.py", "x = 1\n")  # the engine itself went back
    assert find_reverts(repo) == []


def test_find_reverts_outside_a_repository_is_a_one_line_error(tmp_path: Path):
    with pytest.raises(FeedbackError, match=r"git log failed in .*: fatal: not a git repository"):
        find_reverts(tmp_path)
