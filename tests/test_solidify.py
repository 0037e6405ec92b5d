"""solidify on real temporary repositories: commit on success, clean rollback on failure, recorded outcomes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from crash_driver import event, gene, git, make_scenario, mutate, mutation, snapshot, user_dirty_edits

from gep.checks import classify_blast
from gep.config import Settings
from gep.models import EvolutionEvent, Gene, Mutation, PersonalityState, RiskLevel
from gep.solidify import ReviewRequest, SolidifyInput, SolidifyResult, solidify
from gep.store import Store
from gep.workspace import Workspace


@pytest.fixture
def ws_path(tmp_path: Path) -> Path:
    return make_scenario(tmp_path / "ws")


@pytest.fixture
def store(ws_path: Path) -> Store:
    s = Store.for_workspace(ws_path)
    yield s  # type: ignore[misc]
    s.close()


def cycle(ws_path: Path, store: Store, change: Callable[[Path], None], *, g: Gene | None = None,
          settings: Settings | None = None, allow_dirty: bool = False, ev: EvolutionEvent | None = None,
          mut: Mutation | None = None, approve: Callable[[ReviewRequest], bool] | None = None,
          branch: str | None = None, summary: str = "add a docstring to add()") -> SolidifyResult:
    ws = Workspace.open(ws_path)
    ev = ev or event()
    store.add_event(ev)
    run = ws.begin(event_id=ev.id, store=store, allow_dirty=allow_dirty)
    change(ws_path)
    return solidify(SolidifyInput(workspace=ws, store=store, settings=settings or Settings(), run=run, event=ev,
                                  gene=g or gene(), mutation=mut or mutation(), summary=summary, branch=branch,
                                  approve=approve))


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
                    "GEP-Mutation: mut_1700000000000", "GEP-Signals: log_error, errsig:boom"):
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


def test_success_streak_counts_consecutive_successes_of_the_gene(ws_path: Path, store: Store) -> None:
    cycle(ws_path, store, mutate, ev=event("evt_1_a"))
    res = cycle(ws_path, store, lambda p: (p / "more.py").write_text("Z = 3\n"), ev=event("evt_2_b"))
    assert res.capsule is not None and res.capsule.success_streak == 2
    assert len(store.list_capsules()) == 2


def test_commit_on_evolution_branch(ws_path: Path, store: Store) -> None:
    base = git(ws_path, "rev-parse", "main").strip()
    res = cycle(ws_path, store, mutate, branch="gep/evolution")
    assert res.event.outcome.status == "success"
    assert git(ws_path, "rev-parse", "main").strip() == base
    assert git(ws_path, "rev-parse", "gep/evolution").strip() == res.commit_sha
    assert res.event.meta.branch == "gep/evolution"


def test_secrets_in_the_change_do_not_reach_the_capsule(ws_path: Path, store: Store) -> None:
    token = "sk-ant-api03-" + "Q" * 40
    res = cycle(ws_path, store, lambda p: (p / "conf.py").write_text(f"KEY = '{token}'\n"))
    assert res.capsule is not None and token not in (res.capsule.diff or "")
    assert "[REDACTED]" in (res.capsule.diff or "")


# ------------------------------------------------------------------ failure and rollback


def test_failed_validation_rolls_back_and_keeps_user_files(ws_path: Path, store: Store) -> None:
    before = snapshot(ws_path)
    res = cycle(ws_path, store, break_app)
    assert res.event.outcome.status == "failed" and res.commit_sha is None
    assert snapshot(ws_path) == before  # tracked restored, created removed, notes/.venv/debug.log/data kept
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
    # appending to a protected file is fine (rewriting it is not: tests/test_confinement_constraints.py)
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


def test_review_rejection_rolls_back(ws_path: Path, store: Store) -> None:
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


# ------------------------------------------------------------------ --allow-dirty


@pytest.mark.parametrize("change,outcome", [(mutate, "success"), (break_app, "failed")])
def test_allow_dirty_restores_user_edits_byte_for_byte(ws_path: Path, store: Store,
                                                       change: Callable[[Path], None], outcome: str) -> None:
    user_dirty_edits(ws_path)
    before = snapshot(ws_path)
    res = cycle(ws_path, store, change, allow_dirty=True)
    assert res.event.outcome.status == outcome
    after = snapshot(ws_path)
    for rel in ("README.md", "check.py", "draft.md", "notes.txt", ".venv/lib/site.py", "debug.log"):
        assert _files(after)[rel] == _files(before)[rel], rel
    assert git(ws_path, "diff", "--cached", "--name-only").split() == ["check.py", "draft.md"]
    assert git(ws_path, "diff", "--name-only").split() == ["README.md"]
    assert after["stash"] == ""
    if outcome == "success":
        # the user's work never enters the engine's commit
        committed = set(git(ws_path, "show", "--name-only", "--format=", "HEAD").split())
        assert committed.isdisjoint({"README.md", "check.py", "draft.md"})
    else:
        assert after == before


def test_allow_dirty_cycle_may_not_touch_the_users_files(ws_path: Path, store: Store) -> None:
    user_dirty_edits(ws_path)
    before = snapshot(ws_path)
    res = cycle(ws_path, store, lambda p: (p / "README.md").write_text("rewritten by the agent\n"),
                allow_dirty=True)
    assert res.event.outcome.status == "failed"
    assert any("uncommitted changes (--allow-dirty): README.md" in r for r in res.event.meta.failure_reasons)
    assert snapshot(ws_path) == before


# ------------------------------------------------------------------ kept files: the user's untracked files, .git/


def _git_meta(p: Path) -> dict[str, object]:
    """.git/config, info/ and every hook, byte for byte (what a planted hook or alias would change)."""
    gd = p / ".git"
    out: dict[str, object] = {"config": (gd / "config").read_bytes()}
    for f in sorted((gd / "hooks").rglob("*")):
        out[f"hooks/{f.relative_to(gd / 'hooks')}"] = (f.read_bytes(), f.stat().st_mode & 0o777)
    return out


@pytest.mark.parametrize("how", ["modified", "deleted", "chmod"])
def test_a_users_untracked_file_changed_by_the_cycle_fails_and_is_restored(ws_path: Path, store: Store,
                                                                          how: str) -> None:
    before = snapshot(ws_path)

    def change(p: Path) -> None:
        mutate(p)  # an otherwise valid change
        if how == "modified":
            (p / "notes.txt").write_text("rewritten by the agent\n")
        elif how == "deleted":
            (p / "notes.txt").unlink()
        else:
            (p / "notes.txt").chmod(0o755)

    res = cycle(ws_path, store, change)
    assert res.event.outcome.status == "failed" and res.commit_sha is None
    verb = "deleted" if how == "deleted" else "changed"
    assert (f"constraint: {verb} a file that was untracked before the cycle (yours): notes.txt"
            in res.event.meta.failure_reasons)
    assert res.failed_capsule is not None and any("notes.txt" in v for v in res.failed_capsule.constraint_violations)
    assert snapshot(ws_path) == before  # notes.txt back byte for byte (and mode)
    if how == "modified":  # the cycle's version is kept, not destroyed
        rescued = ws_path / ".gep" / "rescued" / res.event.id / "notes.txt"
        assert rescued.read_text() == "rewritten by the agent\n"


def test_a_change_to_a_users_untracked_file_alone_is_a_failure_not_an_empty_cycle(ws_path: Path,
                                                                                 store: Store) -> None:
    before = snapshot(ws_path)
    res = cycle(ws_path, store, lambda p: (p / "notes.txt").write_text("x\n"))
    assert res.event.outcome.status == "failed" and res.event.meta.empty_cycle is False
    assert snapshot(ws_path) == before


def test_staging_a_users_untracked_file_fails_and_never_commits_it(ws_path: Path, store: Store) -> None:
    before = snapshot(ws_path)

    def stage(p: Path) -> None:
        mutate(p)
        git(p, "add", "notes.txt")

    res = cycle(ws_path, store, stage)
    assert res.event.outcome.status == "failed"
    assert ("constraint: staged a file that was untracked before the cycle (yours): notes.txt"
            in res.event.meta.failure_reasons)
    assert snapshot(ws_path) == before


def test_tampering_with_git_hooks_and_config_fails_and_is_undone(ws_path: Path, store: Store) -> None:
    hooks = ws_path / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    (hooks / "post-checkout").write_text("#!/bin/sh\necho the user's own hook\n")
    (hooks / "post-checkout").chmod(0o755)
    meta_before, before = _git_meta(ws_path), snapshot(ws_path)

    def tamper(p: Path) -> None:
        mutate(p)
        (p / ".git" / "hooks" / "pre-commit").write_text("#!/bin/sh\ntouch /tmp/pwned\n")
        (p / ".git" / "hooks" / "pre-commit").chmod(0o755)
        (p / ".git" / "hooks" / "post-checkout").write_text("#!/bin/sh\ntouch /tmp/pwned\n")
        with (p / ".git" / "config").open("a") as fh:
            fh.write("[core]\n\tfsmonitor = touch /tmp/pwned\n")

    res = cycle(ws_path, store, tamper)
    assert res.event.outcome.status == "failed" and res.commit_sha is None
    reasons = res.event.meta.failure_reasons
    for shown in (".git/config (modified)", ".git/hooks/post-checkout (modified)", ".git/hooks/pre-commit (added)"):
        assert f"constraint: forbidden path touched: {shown}" in reasons
    assert res.report.results == []  # a change that broke a constraint is never executed
    assert _git_meta(ws_path) == meta_before
    assert snapshot(ws_path) == before
    rescued = ws_path / ".gep" / "rescued" / res.event.id / ".git" / "hooks" / "pre-commit"
    assert "pwned" in rescued.read_text()


def test_a_user_file_too_large_to_copy_is_detected_but_left_alone(ws_path: Path, store: Store,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import gep.constants as C

    monkeypatch.setattr(C, "KEPT_FILE_MAX_BYTES", 10)
    (ws_path / "big.dat").write_text("x" * 100)
    res = cycle(ws_path, store, lambda p: (p / "big.dat").write_text("y" * 100))
    assert res.event.outcome.status == "failed"
    assert ("constraint: changed a file that was untracked before the cycle (yours): big.dat "
            "(too large to keep a copy: not restored)") in res.event.meta.failure_reasons
    assert (ws_path / "big.dat").read_text() == "y" * 100  # no copy to restore from: left as it is


# ------------------------------------------------------------------ what validation itself writes


def test_validation_output_files_are_removed_and_a_success_leaves_a_clean_tree(ws_path: Path, store: Store) -> None:
    def change(p: Path) -> None:
        (p / "feature.py").write_text("VALUE = 1\n")
        (p / "check.py").write_text("import os\nos.makedirs('reports', exist_ok=True)\n"
                                    "open('reports/out.txt', 'w').write('x')\n")

    res = cycle(ws_path, store, change)
    assert res.event.outcome.status == "success", res.event.meta.failure_reasons
    assert res.event.meta.validation_artifacts_removed == ["reports/out.txt"]
    assert not (ws_path / "reports").exists()
    assert git(ws_path, "status", "--porcelain") == "?? notes.txt\n"  # only the user's own file
    assert set(git(ws_path, "show", "--name-only", "--format=", "HEAD").split()) == {"check.py", "feature.py"}


@pytest.mark.parametrize("target", ["README.md", "feature.py"])
def test_validation_that_changes_tracked_or_changed_files_fails(ws_path: Path, store: Store, target: str) -> None:
    before = snapshot(ws_path)

    def change(p: Path) -> None:
        (p / "feature.py").write_text("VALUE = 1\n")
        (p / "check.py").write_text(f"open({target!r}, 'a').write('# written by validation\\n')\n")

    res = cycle(ws_path, store, change)
    assert res.event.outcome.status == "failed"
    assert (f"validation: the commands changed the workspace they checked: {target}"
            in res.event.meta.failure_reasons)
    assert snapshot(ws_path) == before
