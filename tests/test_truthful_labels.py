"""What gep says about a fix is what is so (issue 44, point 1): a fix nothing ran after is "committed, not yet
judged", a trigger is never labelled "not a trigger", and the hint about a kept branch goes once it is
merged or deleted (naming the person's edits in its files while it stands). Real git repositories."""

from __future__ import annotations

from pathlib import Path

from conftest import git, init_repo

from gep.cli.history_cmd import credit_shown, fix_shown, kept_hints
from gep.cli.history_table import summary
from gep.core.models import EvolutionEvent

TRIGGER = "errsig:2026-11-21T09:14:03Z [ERROR] report: AssertionError: mean([2, 4, 6]) returned 6.0"
OTHER = "errsig:2026-11-21T09:14:03Z [ERROR] report: ZeroDivisionError: division by zero in stats.mean"


def fix_event(verdict: str | None = None, **meta: object) -> EvolutionEvent:
    return EvolutionEvent(
        id="evt_1764300000123_abcdef", signals=["log_error", TRIGGER], genes_used=["gene_repair_from_errors"],
        outcome={"status": "success", "score": 0.8},
        meta={"commit": "c0ffee", "fix_verdict": verdict, **meta})


def test_a_fix_not_judged_is_said_to_be_committed_not_yet_judged():
    event = fix_event()
    assert fix_shown(event) == "not yet judged"
    assert summary([event]) == "1 cycle: 0 verified fixes, 0 did not hold, 1 committed, not yet judged"
    assert fix_shown(fix_event(delivery="kept", branch="gep/evt_1764300000123_abcdef")) == "not landed"


def test_the_error_that_triggered_the_cycle_is_never_labelled_not_a_trigger():
    # the demo's fix: judged on its trigger (the AssertionError) and on an error it touched unasked
    credit = {"addressed": [TRIGGER, OTHER], "credited": [OTHER], "judged": [TRIGGER, OTHER]}
    said = credit_shown(fix_event("verified", fix_credit=credit))
    assert said is not None and said.startswith("fix verified; judged on: [ERROR] report: AssertionError"), said
    assert "not a trigger" not in said and said.endswith("(+1 more)")
    # the one error it touched was not a trigger: then the label says so
    only = {"addressed": [OTHER], "credited": [OTHER], "judged": [OTHER]}
    assert "judged on (not a trigger): [ERROR] report: ZeroDivision" in str(credit_shown(fix_event("verified",
                                                                                                  fix_credit=only)))


def test_the_hint_about_a_kept_branch_goes_once_it_is_merged_or_deleted(tmp_path: Path):
    ws = init_repo(tmp_path / "ws", {"stats.py": "def mean(v):\n    return sum(v) / (len(v) - 1)\n",
                                     "notes.md": "notes\n"})
    git(ws, "branch", "gep/evt_1764300000123_abcdef")
    git(ws, "checkout", "-q", "gep/evt_1764300000123_abcdef")
    (ws / "stats.py").write_text("def mean(v):\n    return sum(v) / len(v)\n")
    git(ws, "commit", "-q", "-am", "fix mean")
    commit = git(ws, "rev-parse", "HEAD").strip()
    git(ws, "checkout", "-q", "main")
    event = fix_event(commit=commit, delivery="kept", branch="gep/evt_1764300000123_abcdef",
                      merge_command=f"git -C {ws} merge gep/evt_1764300000123_abcdef")

    [hint] = kept_hints(ws, [event])
    assert hint == "abcdef kept on gep/evt_1764300000123_abcdef: `gep land abcdef` lands it"
    (ws / "notes.md").write_text("my notes\n")  # an edit elsewhere does not stand in the way
    assert kept_hints(ws, [event]) == [hint]
    (ws / "stats.py").write_text("def mean(v):\n    return 0\n")  # an edit of the person's to the same file
    assert kept_hints(ws, [event]) == [hint, "  (commit or stash your edits to stats.py first)"]
    git(ws, "checkout", "--", "stats.py")

    git(ws, "merge", "-q", "gep/evt_1764300000123_abcdef")
    assert kept_hints(ws, [event]) == []  # merged: nothing left to do
    git(ws, "reset", "-q", "--hard", "HEAD~0")
    git(ws, "checkout", "-q", "-b", "other", "HEAD~1")
    assert len(kept_hints(ws, [event])) == 1  # not in this branch
    git(ws, "branch", "-D", "gep/evt_1764300000123_abcdef")
    assert kept_hints(ws, [event]) == []  # deleted: nothing to merge
