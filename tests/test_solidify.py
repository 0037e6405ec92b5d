"""solidify on real temporary repositories: a model's or an agent's change checked in its clone, then
committed and landed (or kept on a branch), or discarded with its change saved as a patch; a person's change
(prompt mode) checked in their own tree and never rolled back; recorded outcomes."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import pytest
from crash_driver import event, gene, git, make_scenario, mutate, mutation, snapshot, user_dirty_edits

from gep.core.config import Settings
from gep.core.models import CycleRun, EvolutionEvent, Gene, Mutation, PersonalityState, RiskLevel
from gep.cycle.checks import classify_blast
from gep.cycle.solidify import ReviewRequest, SolidifyInput, SolidifyResult, solidify
from gep.cycle.tree import CycleTree
from gep.git import open_repo
from gep.store import Store


@pytest.fixture(autouse=True)
def venv_python_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")


@pytest.fixture
def ws_path(tmp_path: Path) -> Path:
    return make_scenario(tmp_path / "ws")


@pytest.fixture
def store(ws_path: Path) -> Store:
    s = Store.for_workspace(ws_path)
    yield s  # type: ignore[misc]
    s.close()


def begin(ws_path: Path, store: Store, ev: EvolutionEvent, settings: Settings,
          mode: Literal["clone", "in_place"] = "clone") -> tuple[CycleTree, CycleRun]:
    """What the begin stage does: the event and the run recorded, then the clone (or the baseline) made."""
    repo = open_repo(ws_path)
    store.add_event(ev)
    run = CycleRun(event_id=ev.id, workspace=str(repo.path), head_sha=repo.head(), branch="main", mode=mode,
                   pid=os.getpid(), awaited=mode == "in_place")
    store.save_run(run)
    return CycleTree.open(repo, ev.id, settings, mode, "agent" if mode == "clone" else "person"), run


def cycle(ws_path: Path, store: Store, change: Callable[[Path], None], *, g: Gene | None = None,
          settings: Settings | None = None, ev: EvolutionEvent | None = None, mode: Literal["clone", "in_place"]
          = "clone", mut: Mutation | None = None, approve: Callable[[ReviewRequest], bool] | None = None,
          branch: str | None = None, summary: str = "add a docstring to add()") -> SolidifyResult:
    """A cycle whose change ``change`` makes in the cycle's tree (the clone; in place: the user's tree)."""
    settings = settings or Settings()
    ev = ev or event()
    tree, run = begin(ws_path, store, ev, settings, mode)
    change(tree.path)
    return solidify(SolidifyInput(tree=tree, store=store, settings=settings, run=run, event=ev, gene=g or gene(),
                                  mutation=mut or mutation(), summary=summary, branch=branch, approve=approve))


def _files(snap: dict[str, object]) -> dict[str, object]:
    files = snap["files"]
    assert isinstance(files, dict)
    return files


def break_app(p: Path) -> None:
    (p / "app.py").write_text("def add(a, b):\n    return a - b\n")
    (p / "helper.py").write_text("HELP = True\n")
    (p / "newpkg").mkdir()
    (p / "newpkg" / "mod.py").write_text("Y = 1\n")


# ------------------------------------------------------------------ success


def test_success_commits_with_trailers_and_records_everything(ws_path: Path, store: Store) -> None:
    before = snapshot(ws_path)
    res = cycle(ws_path, store, mutate)
    assert res.event.outcome.status == "success", res.event.meta.failure_reasons
    head = git(ws_path, "rev-parse", "HEAD").strip()
    assert res.commit_sha == head and git(ws_path, "rev-parse", "HEAD^").strip() == before["head"]
    msg = git(ws_path, "log", "-1", "--format=%B")
    assert msg.startswith("gep(repair): add a docstring to add()\n\n")
    for trailer in ("GEP-Event: evt_1700000000000_abc123", "GEP-Gene: gene_test",
                    "GEP-Mutation: mut_1700000000000", "GEP-Signals: log_error, errsig"):
        assert trailer in msg
    assert set(git(ws_path, "show", "--name-only", "--format=", "HEAD").split()) == {
        "app.py", "feature.py", "pkg/sub/new.py", "slow.py"}
    after = _files(snapshot(ws_path))
    for keep in ("notes.txt", ".venv/lib/site.py", "debug.log"):
        assert after[keep] == _files(before)[keep]

    stored = store.get_event(res.event.id)
    assert stored is not None and stored.outcome.status == "success" and stored.outcome.score == 0.85
    meta = stored.meta
    assert meta.commit == head and meta.empty_cycle is False and meta.failure_reasons == []
    assert [v.model_dump() for v in meta.validation] == [{"cmd": "python check.py", "ok": True}]
    assert meta.validation_ok and meta.canary_ok and meta.protocol_ok
    assert meta.blast_severity == "within_limit" and meta.constraint_violations == []
    assert stored.blast_radius.files == 4 and meta.diff_chars > 0
    capsules = store.list_capsules()
    assert len(capsules) == 1 and capsules[0].commit == head and capsules[0].gene == "gene_test"
    assert capsules[0].diff and len(capsules[0].diff) <= 8_000 + 20 and capsules[0].asset_id
    assert capsules[0].success_streak == 1 and stored.capsule_id == capsules[0].id
    report = store.get_validation_report(stored.validation_report_id or "")
    assert report is not None and report.overall_ok and report.results[0].ok
    assert store.get_run(res.event.id).status == "closed"  # type: ignore[union-attr]
    assert store.list_failed_capsules() == []
    assert not list(ws_path.rglob("__pycache__"))  # validation and canary leave no bytecode behind
    assert meta.delivery == "landed" and meta.branch == "main" and meta.sandbox == "bwrap"
    assert list((ws_path / ".gep" / "worktrees").iterdir()) == []  # the clone is gone, and its pins
    assert git(ws_path, "for-each-ref", "refs/gep/") == ""


def test_success_streak_counts_consecutive_successes_of_the_gene(ws_path: Path, store: Store) -> None:
    cycle(ws_path, store, mutate, ev=event("evt_1_a"))
    res = cycle(ws_path, store, lambda p: (p / "more.py").write_text("Z = 3\n"), ev=event("evt_2_b"))
    assert res.capsule is not None and res.capsule.success_streak == 2
    assert len(store.list_capsules()) == 2


def test_commit_on_a_branch_the_user_named(ws_path: Path, store: Store) -> None:
    before = snapshot(ws_path)
    res = cycle(ws_path, store, mutate, branch="evolution")
    assert res.event.outcome.status == "success"
    assert snapshot(ws_path) == before  # main, HEAD and the user's tree as they were
    assert git(ws_path, "rev-parse", "evolution").strip() == res.commit_sha
    assert git(ws_path, "rev-parse", "evolution^").strip() == before["head"]
    m = res.event.meta
    assert (m.branch, m.delivery) == ("evolution", "kept") and m.merge_command == f"git -C {ws_path} merge evolution"
    # a later cycle may not put its commit on an "evolution" that moved on: kept on its own branch instead
    again = cycle(ws_path, store, lambda p: (p / "more.py").write_text("Z = 3\n"), ev=event("evt_2_b"),
                  branch="evolution")
    assert again.event.meta.branch == "gep/evt_2_b" and "evolution exists" in (again.event.meta.delivery_note or "")
    assert git(ws_path, "rev-parse", "evolution").strip() == res.commit_sha


def test_secrets_in_the_change_do_not_reach_the_capsule(ws_path: Path, store: Store) -> None:
    token = "sk-ant-api03-" + "Q" * 40
    res = cycle(ws_path, store, lambda p: (p / "conf.py").write_text(f"KEY = '{token}'\n"))
    assert res.capsule is not None and token not in (res.capsule.diff or "")
    assert "[REDACTED]" in (res.capsule.diff or "")


# ------------------------------------------------------------------ failure and rollback


def test_failed_validation_discards_the_clone_and_saves_the_change(ws_path: Path, store: Store) -> None:
    before = snapshot(ws_path)
    res = cycle(ws_path, store, break_app)
    assert res.event.outcome.status == "failed" and res.commit_sha is None
    assert snapshot(ws_path) == before  # the user's tree was never touched: notes/.venv/debug.log/data as they were
    assert list((ws_path / ".gep" / "worktrees").iterdir()) == [] and git(ws_path, "for-each-ref", "refs/gep/") == ""
    patch = Path(res.event.meta.rescued_patch or "")
    assert patch.parent == ws_path / ".gep" / "rescued" and "return a - b" in patch.read_text()
    assert res.event.meta.rescue_command == f"git -C {ws_path} apply {patch}"
    git(ws_path, "apply", "--check", str(patch))  # the printed line brings the change back
    reasons = res.event.meta.failure_reasons
    assert reasons and reasons[0].startswith("validation: python check.py exited 1")
    assert res.event.meta.validation_ok is False and res.event.meta.empty_cycle is False
    failed = store.list_failed_capsules()
    assert len(failed) == 1 and failed[0].gene == "gene_test" and "return a - b" in failed[0].diff_snapshot
    assert failed[0].failure_reason.startswith("validation:") and failed[0].asset_id
    assert store.list_capsules() == []
    stored = store.get_event(res.event.id)
    assert stored is not None and stored.outcome.status == "failed" and stored.meta.failure_reasons == reasons
    assert store.get_validation_report(stored.validation_report_id or "").overall_ok is False  # type: ignore[union-attr]


def test_forbidden_path_fails_without_running_validation(ws_path: Path, store: Store) -> None:
    before = snapshot(ws_path)
    marker = ws_path.parent / "validation-ran"

    def touch_forbidden(p: Path) -> None:
        (p / "secrets").mkdir()
        (p / "secrets" / "key.txt").write_text("x\n")
        (p / "check.py").write_text(f"open({str(marker)!r}, 'w')\n")

    res = cycle(ws_path, store, touch_forbidden)
    assert res.event.outcome.status == "failed"
    assert "constraint: forbidden path touched: secrets/key.txt" in res.event.meta.failure_reasons
    assert not marker.exists()  # a change that broke a constraint is never executed
    assert res.report.results == [] and res.report.overall_ok is False
    assert snapshot(ws_path) == before


def test_hard_cap_breach_fails(ws_path: Path, store: Store) -> None:
    def many(p: Path) -> None:
        for i in range(4):
            (p / f"f{i}.py").write_text("x = 1\n")

    res = cycle(ws_path, store, many, settings=Settings(hard_cap_files=3))
    assert res.event.outcome.status == "failed"
    assert res.event.meta.blast_severity == "hard_cap_breach"
    assert any(r.startswith("constraint: hard cap breach: 4 files") for r in res.event.meta.failure_reasons)
    lines = cycle(ws_path, store, lambda p: (p / "big.py").write_text("x = 1\n" * 50),
                  settings=Settings(hard_cap_lines=20), ev=event("evt_9_z"))
    assert lines.event.outcome.status == "failed" and lines.event.meta.blast_severity == "hard_cap_breach"


def test_blast_severity_scale() -> None:
    s = Settings()
    assert classify_blast(8, 10, 10, s)[0] == "within_limit"
    assert classify_blast(9, 10, 10, s)[0] == "approaching_limit"
    assert classify_blast(11, 10, 10, s)[0] == "exceeded"
    assert classify_blast(21, 10, 10, s)[0] == "critical_overrun"
    assert classify_blast(61, 10, 100, s)[0] == "hard_cap_breach"
    assert classify_blast(1, 20_001, 10, s)[0] == "hard_cap_breach"


def test_max_files_exceeded_fails_and_approaching_warns(ws_path: Path, store: Store) -> None:
    res = cycle(ws_path, store, mutate, g=gene(max_files=3))
    assert res.event.outcome.status == "failed"
    assert "constraint: max_files exceeded: 4 > 3" in res.event.meta.failure_reasons
    ok = cycle(ws_path, store, mutate, g=gene(max_files=4), ev=event("evt_2_b"))
    assert ok.event.outcome.status == "success"
    assert ok.event.meta.blast_severity == "approaching_limit" and ok.event.meta.constraint_warnings


@pytest.mark.parametrize("how", ["emptied", "deleted"])
def test_protected_file_emptied_or_deleted_fails(ws_path: Path, store: Store, how: str) -> None:
    before = snapshot(ws_path)

    def damage(p: Path) -> None:
        if how == "emptied":
            (p / "MEMORY.md").write_text("")
        else:
            (p / "MEMORY.md").unlink()

    res = cycle(ws_path, store, damage)
    assert res.event.outcome.status == "failed"
    assert f"constraint: protected file {how}: MEMORY.md" in res.event.meta.failure_reasons
    assert snapshot(ws_path) == before
    # appending to a protected file is fine (rewriting it is not: tests/test_constraints.py)
    ok = cycle(ws_path, store, lambda p: (p / "MEMORY.md").write_text("# memory\nthe agent remembers things\nmore\n"),
               ev=event("evt_2_b"))
    assert ok.event.outcome.status == "success"


def test_canary_catches_a_broken_python_file(ws_path: Path, store: Store) -> None:
    before = snapshot(ws_path)
    res = cycle(ws_path, store, lambda p: (p / "broken.py").write_text("def oops(:\n"))
    assert res.event.outcome.status == "failed"
    assert res.event.meta.validation_ok is True and res.event.meta.canary_ok is False
    assert any(r.startswith("canary: compileall") for r in res.event.meta.failure_reasons)
    assert snapshot(ws_path) == before


def test_blocked_validation_command_fails(ws_path: Path, store: Store) -> None:
    res = cycle(ws_path, store, mutate, g=gene(["python check.py && touch pwned"]))
    assert res.event.outcome.status == "failed"
    assert any("blocked" in r for r in res.event.meta.failure_reasons)
    assert not (ws_path / "pwned").exists()


def test_protocol_high_risk_and_intent_mismatch(ws_path: Path, store: Store) -> None:
    ev = event()
    ev.personality_state = PersonalityState(rigor=0.3, risk_tolerance=0.9)
    mut = mutation()
    mut.risk_level = RiskLevel.high
    ev.intent = "optimize"
    res = cycle(ws_path, store, mutate, ev=ev, mut=mut)
    reasons = res.event.meta.failure_reasons
    assert res.event.outcome.status == "failed" and res.event.meta.protocol_ok is False
    assert "protocol: high_risk_mutation_not_allowed_by_personality" in reasons
    assert "protocol: intent_mismatch_with_mutation:optimize!=repair" in reasons


def test_review_rejection_discards_the_change(ws_path: Path, store: Store) -> None:
    before = snapshot(ws_path)
    seen: list[ReviewRequest] = []
    res = cycle(ws_path, store, mutate, approve=lambda r: seen.append(r) or False)
    assert seen and seen[0].files == 4 and "GEP-Event" in seen[0].message and seen[0].diff
    assert res.event.outcome.status == "failed"
    assert "protocol: rejected in review" in res.event.meta.failure_reasons
    assert snapshot(ws_path) == before


# ------------------------------------------------------------------ empty


def test_empty_change_is_recorded_as_empty_not_success(ws_path: Path, store: Store) -> None:
    before = snapshot(ws_path)
    res = cycle(ws_path, store, lambda p: None)
    assert res.event.outcome.status == "empty" and res.event.meta.empty_cycle is True
    assert res.commit_sha is None and res.capsule is None and res.failed_capsule is None
    assert snapshot(ws_path) == before
    stored = store.get_event(res.event.id)
    assert stored is not None and stored.is_empty_cycle and stored.outcome.status == "empty"
    assert store.list_failed_capsules() == [] and store.list_capsules() == []


# ------------------------------------------------------------------ the user's work, before and during the cycle


@pytest.mark.parametrize("change,outcome", [(mutate, "success"), (break_app, "failed")])
def test_uncommitted_work_is_never_touched_whatever_the_outcome(ws_path: Path, store: Store,
                                                                 change: Callable[[Path], None], outcome: str) -> None:
    user_dirty_edits(ws_path)  # a dirty tree no longer blocks a cycle
    before = snapshot(ws_path)
    res = cycle(ws_path, store, change)
    assert res.event.outcome.status == outcome
    after = snapshot(ws_path)
    for rel in ("README.md", "check.py", "draft.md", "notes.txt", ".venv/lib/site.py", "debug.log"):
        assert _files(after)[rel] == _files(before)[rel], rel
    assert git(ws_path, "diff", "--cached", "--name-only").split() == ["check.py", "draft.md"]
    assert git(ws_path, "diff", "--name-only").split() == ["README.md"]
    assert after["stash"] == "" and after["git"] == before["git"]
    if outcome == "success":
        # the user's work never enters the engine's commit
        committed = set(git(ws_path, "show", "--name-only", "--format=", "HEAD").split())
        assert committed == {"app.py", "feature.py", "pkg/sub/new.py", "slow.py"}
    else:
        assert after == before


def test_work_the_user_does_during_the_cycle_stays_and_their_commit_is_built_on(ws_path: Path, store: Store) -> None:
    def agent_and_user(clone: Path) -> None:
        mutate(clone)  # the agent, in its clone
        (ws_path / "README.md").write_text("hello\nedited while the cycle ran\n")  # the user, meanwhile
        (ws_path / "new_idea.txt").write_text("mine\n")
        (ws_path / "lib.py").write_text("Y = 2\n")
        git(ws_path, "add", "lib.py")
        git(ws_path, "commit", "-q", "-m", "the user's commit during the cycle")

    user_commit_before = git(ws_path, "rev-parse", "HEAD").strip()
    res = cycle(ws_path, store, agent_and_user)
    assert res.event.outcome.status == "success", res.event.meta.failure_reasons
    log = git(ws_path, "log", "--format=%s", "-3").splitlines()
    assert log[:2] == ["gep(repair): add a docstring to add()", "the user's commit during the cycle"]
    assert git(ws_path, "rev-parse", "HEAD~2").strip() == user_commit_before
    assert (ws_path / "README.md").read_text() == "hello\nedited while the cycle ran\n"
    assert (ws_path / "new_idea.txt").read_text() == "mine\n" and (ws_path / "lib.py").is_file()
    m = res.event.meta
    assert m.delivery == "landed" and "rebased onto it" in (m.delivery_note or "")  # and validated again
    assert git(ws_path, "status", "--porcelain").splitlines() == [" M README.md", "?? new_idea.txt", "?? notes.txt"]


def test_a_change_to_a_file_holding_the_users_edits_is_kept_on_its_branch(ws_path: Path, store: Store) -> None:
    user_dirty_edits(ws_path)
    before = snapshot(ws_path)
    res = cycle(ws_path, store, lambda p: (p / "README.md").write_text("rewritten by the agent\n"))
    assert res.event.outcome.status == "success"
    assert snapshot(ws_path) == before  # the user's edit of README.md is never overwritten
    m = res.event.meta
    assert (m.delivery, m.branch) == ("kept", f"gep/{res.event.id}")
    assert m.merge_command == f"git -C {ws_path} merge gep/{res.event.id}"
    assert "README.md" in (m.delivery_note or "")
    assert git(ws_path, "show", f"gep/{res.event.id}:README.md") == "rewritten by the agent\n"


def test_a_file_of_the_cycle_where_the_user_has_an_untracked_one_is_never_overwritten(ws_path: Path,
                                                                                      store: Store) -> None:
    before = snapshot(ws_path)
    res = cycle(ws_path, store, lambda p: (p / "notes.txt").write_text("the agent's notes\n"))
    assert res.event.outcome.status == "success" and res.event.meta.delivery == "kept"
    assert snapshot(ws_path) == before and (ws_path / "notes.txt").read_text() == "my own untracked notes\n"


def test_the_agents_own_git_in_its_clone_fails_the_cycle_and_never_reaches_the_user(ws_path: Path,
                                                                                   store: Store) -> None:
    before = snapshot(ws_path)

    def commit_and_branch(p: Path) -> None:
        mutate(p)
        git(p, "add", "-A")
        git(p, "commit", "-q", "-m", "the agent committed on its own")
        git(p, "branch", "-D", "main")

    res = cycle(ws_path, store, commit_and_branch)
    assert res.event.outcome.status == "failed"
    reasons = res.event.meta.failure_reasons
    assert any(r.startswith("constraint: git: the agent moved HEAD in its copy") for r in reasons), reasons
    assert "constraint: git: the agent deleted refs/heads/main in its copy" in reasons
    assert snapshot(ws_path) == before and git(ws_path, "rev-parse", "main").strip() == before["head"]


def test_hooks_and_config_planted_in_the_clone_never_run_and_never_reach_the_user(ws_path: Path,
                                                                                 store: Store) -> None:
    marker = ws_path.parent / "pwned"
    meta_before = snapshot(ws_path)["git"]

    def plant(p: Path) -> None:
        mutate(p)
        for hook in ("pre-commit", "post-checkout", "reference-transaction", "post-merge"):
            (p / ".git" / "hooks").mkdir(exist_ok=True)
            (p / ".git" / "hooks" / hook).write_text(f"#!/bin/sh\ntouch {marker}\n")
            (p / ".git" / "hooks" / hook).chmod(0o755)
        with (p / ".git" / "config").open("a") as fh:
            fh.write(f"[core]\n\tfsmonitor = touch {marker}\n\thooksPath = .git/hooks\n")

    res = cycle(ws_path, store, plant)
    assert res.event.outcome.status == "success", res.event.meta.failure_reasons
    assert not marker.exists()
    assert snapshot(ws_path)["git"] == meta_before  # the user's .git/config and hooks as they were


# ------------------------------------------------------------------ what validation itself writes


def test_validation_output_files_never_reach_the_tree_and_a_success_leaves_it_clean(ws_path: Path,
                                                                                    store: Store) -> None:
    def change(p: Path) -> None:
        (p / "feature.py").write_text("VALUE = 1\n")
        (p / "check.py").write_text("import os\nos.makedirs('reports', exist_ok=True)\n"
                                    "open('reports/out.txt', 'w').write('x')\n")

    res = cycle(ws_path, store, change)
    assert res.event.outcome.status == "success", res.event.meta.failure_reasons
    assert not res.event.meta.validation_artifacts_removed  # written in the throw-away copy, gone with it
    assert not (ws_path / "reports").exists()
    assert git(ws_path, "status", "--porcelain") == "?? notes.txt\n"  # only the user's own file
    assert set(git(ws_path, "show", "--name-only", "--format=", "HEAD").split()) == {"check.py", "feature.py"}


@pytest.mark.parametrize("target", ["README.md", "feature.py"])
def test_what_validation_changes_in_tracked_or_changed_files_is_discarded(ws_path: Path, store: Store,
                                                                          target: str) -> None:
    """Issue 32: a check appending to README.md (the secrets it read) was committed when it did so only the
    first time; now every command runs in a throw-away copy, and the commit is the tree that was checked."""
    readme = (ws_path / "README.md").read_bytes()

    def change(p: Path) -> None:
        (p / "feature.py").write_text("VALUE = 1\n")
        (p / "check.py").write_text(f"open({target!r}, 'a').write('# written by validation\\n')\n")

    res = cycle(ws_path, store, change)
    assert res.event.outcome.status == "success", res.event.meta.failure_reasons
    assert git(ws_path, "show", "HEAD:feature.py") == "VALUE = 1\n"
    assert git(ws_path, "show", "HEAD:README.md").encode() == readme
    assert "# written by validation" not in (ws_path / target).read_text()


# ------------------------------------------------------------------ prompt mode: a person's change, in place


def test_a_persons_failed_change_stays_and_the_cycle_keeps_awaiting(ws_path: Path, store: Store) -> None:
    user_dirty_edits(ws_path)
    ev = event()
    tree, run = begin(ws_path, store, ev, Settings(), "in_place")
    break_app(ws_path)  # the person's attempt
    edited = snapshot(ws_path)
    inp = SolidifyInput(tree=tree, store=store, settings=Settings(), run=run, event=ev, gene=gene(),
                        mutation=mutation(), summary="fix add")
    res = solidify(inp)
    assert res.event.outcome.status == "awaiting_changes" and res.commit_sha is None
    assert snapshot(ws_path) == edited  # nothing rolled back
    m = res.event.meta
    assert m.solidify_attempts == 1 and m.failure_reasons[0].startswith("validation: python check.py exited 1")
    assert m.not_run is None  # a verdict: the change fails
    assert store.get_run(ev.id).status == "awaiting_changes" and store.list_failed_capsules() == []  # type: ignore[union-attr]
    (ws_path / "app.py").write_text('def add(a, b):\n    """Sum."""\n    return a + b\n')  # the person fixes it
    again = solidify(inp.model_copy(update={"event": res.event,
                                            "tree": CycleTree.resume(open_repo(ws_path), ev.id, "in_place")}))
    assert again.event.outcome.status == "success", again.event.meta.failure_reasons
    assert set(git(ws_path, "show", "--name-only", "--format=", "HEAD").split()) == {
        "app.py", "helper.py", "newpkg/mod.py"}
    # the person's other uncommitted work stays uncommitted, as it was
    assert git(ws_path, "diff", "--cached", "--name-only").split() == ["check.py", "draft.md"]
    assert (ws_path / "README.md").read_text() == "hello\nwork in progress\n"


@pytest.mark.parametrize("command, settings, says", [
    ("python -m no_such_checker -q", Settings(python_modules=["no_such_checker"]),
     "the Python module no_such_checker is not installed for `python`: install it (pip install no_such_checker), "
     'or set the validation commands this workspace runs in gep.toml (validation = ["..."])'),
    ("no-such-program --check", Settings(command_allowlist=["no-such-program"]),
     "`no-such-program` is not installed (not found on PATH): install it, or set the validation commands"),
    ("python -m timeit 1", Settings(), "`python -m timeit 1` is not allowed here (python -m timeit"),
    ("python sleepy.py out.pid", Settings(validation_timeout_s=0.5), "ran past the validation timeout: raise "
     "validation_timeout_s in gep.toml"),
], ids=["module", "program", "allowlist", "timeout"])
def test_validation_that_cannot_run_is_not_a_verdict(ws_path: Path, store: Store, command: str, settings: Settings,
                                                     says: str) -> None:
    ev = event()
    tree, run = begin(ws_path, store, ev, settings, "in_place")
    mutate(ws_path)
    edited = snapshot(ws_path)
    res = solidify(SolidifyInput(tree=tree, store=store, settings=settings, run=run, event=ev,
                                 gene=gene([command]), mutation=mutation()))
    assert res.event.outcome.status == "awaiting_changes"
    assert {k: v for k, v in snapshot(ws_path).items() if k not in ("files", "status")} == \
        {k: v for k, v in edited.items() if k not in ("files", "status")}  # nothing rolled back (out.pid aside)
    assert res.event.meta.not_run is not None and res.event.meta.not_run.startswith(
        "validation could not run here: ") and says in res.event.meta.not_run, res.event.meta.not_run
    assert store.get_run(ev.id).status == "awaiting_changes"  # type: ignore[union-attr]


def test_a_persons_change_to_a_file_with_earlier_uncommitted_edits_is_left_to_them(ws_path: Path,
                                                                                  store: Store) -> None:
    user_dirty_edits(ws_path)
    res = cycle(ws_path, store, lambda p: (mutate(p), (p / "README.md").write_text("hello\nmore\n")),
                mode="in_place")
    assert res.event.outcome.status == "success", res.event.meta.failure_reasons
    assert "README.md" not in git(ws_path, "show", "--name-only", "--format=", "HEAD").split()
    assert ("not committed (had your uncommitted edits before the cycle (commit it yourself)): README.md"
            in (res.event.meta.constraint_warnings or []))
    assert (ws_path / "README.md").read_text() == "hello\nmore\n"


def test_what_validation_writes_in_a_persons_tree_never_lands_there(ws_path: Path, store: Store) -> None:
    def change(p: Path) -> None:
        (p / "feature.py").write_text("VALUE = 1\n")
        (p / "check.py").write_text("import os\nos.makedirs('reports', exist_ok=True)\n"
                                    "open('reports/out.txt', 'w').write('x')\nopen('feature.py', 'a').write('#\\n')\n")

    res = cycle(ws_path, store, change, mode="in_place")
    assert res.event.outcome.status == "success", res.event.meta.failure_reasons
    assert not res.event.meta.validation_artifacts_removed and not (ws_path / "reports").exists()
    assert not (ws_path / ".gep" / "rescued" / f"{res.event.id}-validation").exists()
    assert (ws_path / "feature.py").read_text() == "VALUE = 1\n" == git(ws_path, "show", "HEAD:feature.py")


def test_a_change_nobody_summarised_is_committed_under_what_it_changed(ws_path: Path, store: Store) -> None:
    """Issue 31, point 7: the subject comes from the diff (files and functions), not the gene's template."""
    def fix_add(p: Path) -> None:
        text = (p / "app.py").read_text()
        (p / "app.py").write_text(text.replace("return a + b", "return b + a"))

    assert "return a + b" in (ws_path / "app.py").read_text()
    res = cycle(ws_path, store, fix_add, summary="")
    assert res.event.outcome.status == "success", res.event.meta.failure_reasons
    msg = git(ws_path, "log", "-1", "--format=%B")
    assert msg.splitlines()[0] == "gep(repair): Update app.py: add()", msg
    assert mutation().expected_effect not in msg.splitlines()[0]
    assert "GEP-Gene: gene_test" in msg  # the gene stays in the trailers
