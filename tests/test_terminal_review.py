"""The terminal is enough (issue 44, point 3), on the library: `gep status` as data (the pending cycle, kept
branches not merged, the last outcome; 80 columns; --json), `gep land ID` and `gep undo ID` on real git
repositories (never touching the person's uncommitted work), and answering a review that waits.
The two-terminal review flow against a live Prefect server is tests/test_e2e_review_terminal.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import git, init_repo
from typer.testing import CliRunner

from gep.api import workspace_status
from gep.cli.root import app
from gep.core.errors import GepError
from gep.core.models import CycleRun, EvolutionEvent
from gep.cycle.by_hand import land_cycle, undo_cycle
from gep.cycle.record_learning import record_revert
from gep.cycle.review_wait import ReviewWait, announce, answer, clear, waiting
from gep.learning.feedback import FeedbackKind, Observation, find_reverts
from gep.store import Store

BUG = "def mean(v):\n    return sum(v) / (len(v) - 1)\n"
FIXED = "def mean(v):\n    return sum(v) / len(v)\n"
KEPT = "evt_1764300000123_bbbbbb"
DONE = "evt_1764300000023_aaaaaa"
GENE = "gene_repair_from_errors"


def event(event_id: str, status: str = "success", **meta: object) -> EvolutionEvent:
    return EvolutionEvent(id=event_id, signals=["log_error"], genes_used=[GENE], intent="repair",
                          outcome={"status": status, "score": 0.8}, meta=meta)


def kept_workspace(tmp_path: Path) -> tuple[Path, str]:
    """A workspace with a cycle's commit kept on gep/<event> (the fixed mean), recorded in its store."""
    ws = init_repo(tmp_path / "ws", {"stats.py": BUG, "notes.md": "notes\n"})
    git(ws, "checkout", "-q", "-b", f"gep/{KEPT}")
    (ws / "stats.py").write_text(FIXED)
    git(ws, "commit", "-q", "-am", f"gep(repair): mean\n\nGEP-Event: {KEPT}\n")
    tip = git(ws, "rev-parse", "HEAD").strip()
    git(ws, "checkout", "-q", "main")
    with Store.for_workspace(ws) as store:
        store.add_event(event(KEPT, commit=tip, delivery="kept", branch=f"gep/{KEPT}",
                              merge_command=f"git -C {ws} merge gep/{KEPT}", at="2026-11-28T01:00:00Z"))
    return ws, tip


def land(ws: Path, typed: str = "bbbb") -> object:
    with Store.for_workspace(ws) as store:
        return land_cycle(ws, store, typed)


# ------------------------------------------------------------------ gep status


def test_status_names_what_waits_with_the_commands_that_decide_it(tmp_path: Path):
    ws, _tip = kept_workspace(tmp_path)
    waits, prompt = "evt_1764300000223_cccccc", "evt_1764300000323_dddddd"
    head = git(ws, "rev-parse", "HEAD").strip()
    with Store.for_workspace(ws) as store:
        store.add_event(event(waits, "running", at="2026-11-28T02:00:00Z"))
        store.save_run(CycleRun(event_id=waits, workspace=str(ws), head_sha=head, pid=os.getpid(), stage="solidify"))
        announce(store, ReviewWait(event_id=waits, flow_run_id=None, subject="gep(repair): the mean",
                                   files=["stats.py"], lines=2))
        store.add_event(event(prompt, "awaiting_changes", at="2026-11-28T03:00:00Z"))
        store.save_run(CycleRun(event_id=prompt, workspace=str(ws), head_sha=head, mode="in_place",
                                status="awaiting_changes"))
    st = workspace_status(ws)
    assert {(p.id, p.state) for p in st.pending} == {("cccccc", "awaiting_review"), ("dddddd", "awaiting_changes")}
    review = next(p for p in st.pending if p.state == "awaiting_review")
    assert review.commands[0].startswith("gep approve cccccc") and "gep reject cccccc" in review.commands[1]
    assert [(k.id, k.command.split(" -w")[0]) for k in st.kept] == [("bbbbbb", "gep land bbbbbb")]
    assert st.last is not None and st.last.id == "dddddd"  # the newest that is not still running
    assert all(len(line) <= 80 for line in st.lines() if str(ws) not in line), st.lines()
    # the answer is gone with the waiting process: a killed cycle waits for nobody
    with Store.for_workspace(ws) as store:
        announce(store, ReviewWait(event_id=waits, pid=2 ** 22 + 11))
        assert waiting(store) == []
        clear(store, waits)
    git(ws, "merge", "-q", f"gep/{KEPT}")
    assert workspace_status(ws).kept == []  # merged: no longer listed


def test_mcp_gep_status_answers_what_gep_status_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """One reader for both (gep/cycle/status.py): MCP's gep_status, from the quick store, gives the review that
    waits with its commands, the kept commit with its `gep land` line and the last outcome, as `gep status
    --json` does (it used to read on its own: one awaiting-changes cycle, every gep/ branch, no review)."""
    from gep.server import server_state
    from gep.sessions import mcp_answers

    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "no-prefect"))
    ws, _tip = kept_workspace(tmp_path)
    waits, head = "evt_1764300000223_cccccc", git(ws, "rev-parse", "HEAD").strip()
    with Store.for_workspace(ws) as store:
        store.add_event(event(waits, "running", at="2026-11-28T02:00:00Z"))
        store.save_run(CycleRun(event_id=waits, workspace=str(ws), head_sha=head, pid=os.getpid(), stage="solidify"))
        announce(store, ReviewWait(event_id=waits, flow_run_id=None, subject="gep(repair): the mean",
                                   files=["stats.py"], lines=2))
    monkeypatch.chdir(ws)
    said = mcp_answers.status(ws).model_dump(mode="json")
    assert said.pop("data_note")  # marked as the workspace's data, as every MCP answer
    assert said == workspace_status(ws, server_state()).model_dump(mode="json")
    assert [(p["id"], p["state"]) for p in said["pending"]] == [("cccccc", "awaiting_review")]
    assert said["pending"][0]["commands"][0].startswith("gep approve cccccc")
    assert [k["command"] for k in said["kept"]] == ["gep land bbbbbb"] and said["last"]["id"] == "bbbbbb"
    from gep.api import read_store

    with read_store(ws) as quick:  # the quick store answered itself (no fall-back to the full one)
        assert [r.event_id for r in quick.open_runs()] == [waits] and [w.event_id for w in waiting(quick)] == [waits]
        assert getattr(quick, "_full", "full") is None


def test_gep_status_on_a_new_workspace_and_as_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    ws = init_repo(tmp_path / "fresh")
    for key in [k for k in os.environ if k.startswith("PREFECT_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "no-prefect"))
    monkeypatch.chdir(ws)
    shown = CliRunner().invoke(app, ["status"], env={"COLUMNS": "80"})
    assert shown.exit_code == 0, shown.output
    assert "last cycle: none yet" in shown.stdout and "pending: nothing waits for you" in shown.stdout
    # every line fits 80 columns but the one naming the workspace's path, as long as the path is
    assert "server: " in shown.stdout
    assert max(len(x) for x in shown.stdout.splitlines() if not x.startswith("workspace: ")) <= 80
    assert not (ws / ".gep").exists()  # reading never creates the store
    data = json.loads(CliRunner().invoke(app, ["status", "--json"]).stdout)
    assert data["pending"] == [] and data["kept"] == [] and data["server"]["running"] is False


# ------------------------------------------------------------------ gep land


def test_land_fast_forwards_a_kept_commit_and_leaves_other_edits_alone(tmp_path: Path):
    ws, tip = kept_workspace(tmp_path)
    (ws / "notes.md").write_text("my notes, not committed\n")
    done = land(ws)
    assert done.result.how == "fast-forward" and git(ws, "rev-parse", "HEAD").strip() == tip
    assert (ws / "stats.py").read_text() == FIXED and (ws / "notes.md").read_text() == "my notes, not committed\n"
    assert git(ws, "status", "--porcelain").strip() == "M notes.md"
    with pytest.raises(GepError, match="nothing to land"):
        land(ws)
    with Store.for_workspace(ws) as store:  # landed now: a fix to judge, and one `gep undo` takes
        landed = store.get_event(KEPT)
        assert landed is not None and (landed.meta.delivery, landed.meta.branch) == ("landed", "main")
        assert [r.event_id for r in store.recent_resolutions()] == [KEPT]
        assert undo_cycle(ws, store, "bbbb").result.how == "revert commit"
    assert (ws / "stats.py").read_text() == BUG


def test_land_makes_a_merge_commit_when_the_branch_moved_on(tmp_path: Path):
    ws, tip = kept_workspace(tmp_path)
    (ws / "notes.md").write_text("a commit of mine meanwhile\n")
    git(ws, "commit", "-q", "-am", "mine")
    mine = git(ws, "rev-parse", "HEAD").strip()
    done = land(ws)
    assert done.result.how == "merge commit"
    assert git(ws, "rev-parse", "HEAD^1", "HEAD^2").split() == [mine, tip]
    assert (ws / "stats.py").read_text() == FIXED and git(ws, "status", "--porcelain").strip() == ""


def test_land_refuses_and_changes_nothing_over_edits_or_conflicts(tmp_path: Path):
    ws, _tip = kept_workspace(tmp_path)
    head = git(ws, "rev-parse", "HEAD").strip()
    (ws / "stats.py").write_text("def mean(v):\n    return 0  # mine\n")
    with pytest.raises(GepError, match="commit or stash your edits to stats.py first") as refused:
        land(ws)
    assert refused.value.exit_code == 2
    assert git(ws, "rev-parse", "HEAD").strip() == head and "# mine" in (ws / "stats.py").read_text()
    git(ws, "commit", "-q", "-am", "my own mean")  # the same lines, committed: a conflict
    with pytest.raises(GepError, match="conflicts with your branch"):
        land(ws)
    assert "# mine" in (ws / "stats.py").read_text() and git(ws, "status", "--porcelain").strip() == ""


# ------------------------------------------------------------------ gep undo


def landed_workspace(tmp_path: Path) -> tuple[Path, str]:
    ws = init_repo(tmp_path / "ws", {"stats.py": BUG, "notes.md": "notes\n"})
    (ws / "stats.py").write_text(FIXED)
    git(ws, "commit", "-q", "-am", f"gep(repair): mean\n\nGEP-Event: {DONE}\n")
    commit = git(ws, "rev-parse", "HEAD").strip()
    with Store.for_workspace(ws) as store:
        store.add_event(event(DONE, commit=commit, delivery="landed", branch="main"))
    return ws, commit


def test_undo_reverts_a_landed_cycle_keeps_the_persons_work_and_counts_as_not_helpful(tmp_path: Path):
    ws, commit = landed_workspace(tmp_path)
    (ws / "notes.md").write_text("my notes, not committed\n")
    with Store.for_workspace(ws) as store:
        done = undo_cycle(ws, store, "aaaa", "the mean was right")
        feedback = store.list_feedback(GENE)
    assert done.result.how == "revert commit" and done.feedback
    assert (ws / "stats.py").read_text() == BUG and (ws / "notes.md").read_text() == "my notes, not committed\n"
    assert git(ws, "rev-parse", "HEAD^").strip() == commit
    assert f"This reverts commit {commit}." in git(ws, "log", "-1", "--format=%B")
    assert [(f.kind, f.origin) for f in feedback] == [(FeedbackKind.not_helpful, Observation.reverted)]
    assert git(ws, "status", "--porcelain").strip() == "M notes.md"
    # the revert scan of the next cycle finds the same revert: it counts once
    [found] = find_reverts(ws)
    with Store.for_workspace(ws) as store:
        assert record_revert(store, found, found.committed_at) is None and len(store.list_feedback(GENE)) == 1
        with pytest.raises(GepError, match="no longer in your branch"):
            undo_cycle(ws, store, "aaaa")


def test_undo_refuses_and_changes_nothing_when_the_persons_edits_touch_its_files(tmp_path: Path):
    ws, commit = landed_workspace(tmp_path)
    (ws / "stats.py").write_text(FIXED + "# my edit\n")
    with Store.for_workspace(ws) as store, pytest.raises(GepError, match="commit or stash your edits to stats.py"):
        undo_cycle(ws, store, "aaaa")
    assert git(ws, "rev-parse", "HEAD").strip() == commit and (ws / "stats.py").read_text() == FIXED + "# my edit\n"
    git(ws, "commit", "-q", "-am", "mine on the same lines")
    (ws / "stats.py").write_text("def mean(v):\n    return 1\n")
    git(ws, "commit", "-q", "-am", "the same lines again")
    with Store.for_workspace(ws) as store, pytest.raises(GepError, match="later commits changed the lines"):
        undo_cycle(ws, store, "aaaa")


# ------------------------------------------------------------------ answering a review


def test_answering_when_nothing_waits_says_so(tmp_path: Path):
    ws, _ = landed_workspace(tmp_path)
    with Store.for_workspace(ws) as store:
        with pytest.raises(GepError, match="no cycle waits for a review"):
            answer(store, "aaaa", True, "")
        announce(store, ReviewWait(event_id=KEPT, flow_run_id=None, subject="x"))
        with pytest.raises(GepError, match="cycle aaaaaa does not wait for a review"):
            answer(store, DONE, True, "")
        with pytest.raises(GepError, match="answer it in the Prefect UI"):
            answer(store, "bbbb", True, "")  # a wait with no flow run gep can reach
