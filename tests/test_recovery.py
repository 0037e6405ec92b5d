"""kill -9 of a cycle at each stage, then recovery: the repo is exactly at its baseline (or, after the
commit, at the documented outcome: the committed cycle recorded as a success), with nothing duplicated."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from crash_driver import EVENT_ID, git, make_scenario, snapshot, user_dirty_edits

from gep.config import load_settings
from gep.store import Store
from gep.workspace import Workspace, recover

DRIVER = Path(__file__).with_name("crash_driver.py")


def _run_driver(ws: Path, stage: str, allow_dirty: bool) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, str(DRIVER), str(ws), stage] + (["--allow-dirty"] if allow_dirty else [])
    if stage != "during_validation":
        return subprocess.run(args, capture_output=True, text=True, timeout=60)
    pidfile = ws / "slow.pid"
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not (pidfile.exists() and pidfile.read_text().strip()):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "validation never started"
            time.sleep(0.05)
        slow_pids = _pids_with_arg(str(pidfile))  # host pids (the pid in the file is the sandbox's)
        assert slow_pids
        os.kill(proc.pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # the validation command dies with the cycle (no orphan keeps writing into the workspace)
    for _ in range(100):
        if not _pids_with_arg(str(pidfile)):
            break
        time.sleep(0.05)
    else:
        for pid in _pids_with_arg(str(pidfile)):
            os.kill(pid, signal.SIGKILL)
        pytest.fail("the validation process outlived the killed cycle")
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def _pids_with_arg(arg: str) -> list[int]:
    """Live (non-zombie) processes with ``arg`` on their command line."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if arg.encode() in argv and state != "Z" and b"crash_driver.py" not in b" ".join(argv):
            found.append(int(entry.name))
    return found


def _recover(ws: Path) -> list[object]:
    settings = load_settings(ws, env={})
    with Store.for_workspace(ws, settings) as store:
        return list(recover(workspace=ws, store=store, settings=settings))


KILL_POINTS = [(stage, dirty) for stage in ("during_stash", "after_begin", "after_mutation", "after_tamper",
                                             "during_validation", "before_commit")
               for dirty in (False, True) if dirty or stage != "during_stash"]  # nothing is stashed on a clean tree


@pytest.mark.parametrize("stage, allow_dirty", KILL_POINTS,
                         ids=[f"{s}-{'allow-dirty' if d else 'clean'}" for s, d in KILL_POINTS])
def test_kill_before_commit_then_recover_restores_baseline(tmp_path: Path, stage: str, allow_dirty: bool) -> None:
    ws = make_scenario(tmp_path / "ws")
    if allow_dirty:
        user_dirty_edits(ws)
    baseline = snapshot(ws)

    proc = _run_driver(ws, stage, allow_dirty)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    if stage != "after_begin":
        assert snapshot(ws) != baseline  # the crash really left the workspace changed

    recovered = _recover(ws)
    assert [r.event_id for r in recovered] == [EVENT_ID]  # type: ignore[attr-defined]
    assert snapshot(ws) == baseline

    with Store.for_workspace(ws) as store:
        events = store.list_events(limit=10)
        assert [e.id for e in events] == [EVENT_ID]
        assert events[0].outcome.status == "interrupted"  # not a failure of the gene: the process died
        assert events[0].meta.failure_reasons == ["interrupted"]
        assert store.list_capsules() == []
        assert store.get_run(EVENT_ID).status == "closed"  # type: ignore[union-attr]
        assert store.open_runs() == []
    # a second recovery finds nothing; the next cycle can begin
    assert _recover(ws) == []
    assert snapshot(ws) == baseline


@pytest.mark.parametrize("allow_dirty", [False, True], ids=["clean", "allow-dirty"])
def test_kill_during_rollback_keeps_the_real_failure_and_finishes_the_rollback(tmp_path: Path,
                                                                              allow_dirty: bool) -> None:
    ws = make_scenario(tmp_path / "ws")
    if allow_dirty:
        user_dirty_edits(ws)
    baseline = snapshot(ws)

    proc = _run_driver(ws, "during_rollback", allow_dirty)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert snapshot(ws) != baseline

    recovered = _recover(ws)
    assert [(r.event_id, r.outcome, r.rolled_back) for r in recovered] == [  # type: ignore[attr-defined]
        (EVENT_ID, "failed", True)]
    assert snapshot(ws) == baseline
    with Store.for_workspace(ws) as store:
        events = store.list_events(limit=10)
        assert [e.id for e in events] == [EVENT_ID]
        # the reasons recorded before the crash are kept, not replaced by "interrupted"
        assert events[0].meta.failure_reasons[0].startswith("validation: python check.py exited 1")
        assert len(store.list_failed_capsules()) == 1 and store.list_capsules() == []
        assert store.open_runs() == []


@pytest.mark.parametrize("allow_dirty", [False, True], ids=["clean", "allow-dirty"])
def test_kill_after_commit_records_the_committed_success(tmp_path: Path, allow_dirty: bool) -> None:
    ws = make_scenario(tmp_path / "ws")
    if allow_dirty:
        user_dirty_edits(ws)
    baseline = snapshot(ws)

    proc = _run_driver(ws, "after_commit", allow_dirty)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    head = git(ws, "rev-parse", "HEAD").strip()
    assert head != baseline["head"]

    recovered = _recover(ws)
    assert len(recovered) == 1 and recovered[0].outcome == "success"  # type: ignore[attr-defined]
    assert recovered[0].commit == head  # type: ignore[attr-defined]
    # documented outcome: the commit stays, the cycle is recorded as the success it was
    assert git(ws, "rev-parse", "HEAD").strip() == head
    assert git(ws, "rev-parse", "HEAD^").strip() == baseline["head"]
    assert f"GEP-Event: {EVENT_ID}" in git(ws, "log", "-1", "--format=%B")
    committed = set(git(ws, "show", "--name-only", "--format=", "HEAD").split())
    assert committed == {"app.py", "feature.py", "pkg/sub/new.py", "slow.py"}
    after = snapshot(ws)
    files = after["files"]
    assert isinstance(files, dict) and isinstance(baseline["files"], dict)
    for keep in ("notes.txt", ".venv/lib/site.py", "debug.log"):
        assert files[keep] == baseline["files"][keep]
    if allow_dirty:
        for rel in ("README.md", "check.py", "draft.md"):
            assert files[rel] == baseline["files"][rel]
        assert git(ws, "diff", "--cached", "--name-only").split() == ["check.py", "draft.md"]
        assert git(ws, "stash", "list") == ""

    with Store.for_workspace(ws) as store:
        events = store.list_events(limit=10)
        assert [e.id for e in events] == [EVENT_ID]
        assert events[0].outcome.status == "success"
        assert events[0].meta.commit == head
        assert events[0].meta.empty_cycle is False
        capsules = store.list_capsules()
        assert len(capsules) == 1 and capsules[0].commit == head and capsules[0].asset_id
        assert events[0].capsule_id == capsules[0].id
        assert store.list_failed_capsules() == []
    assert _recover(ws) == []
    with Store.for_workspace(ws) as store:
        assert store.count_events() == 1 and len(store.list_capsules()) == 1


def test_gep_recover_says_a_committed_cycle_was_recorded_as_a_success(tmp_path: Path) -> None:
    ws = make_scenario(tmp_path / "ws")
    assert _run_driver(ws, "after_commit", False).returncode == -signal.SIGKILL
    head = git(ws, "rev-parse", "HEAD").strip()
    out = subprocess.run([str(Path(sys.executable).with_name("gep")), "recover", "--workspace", str(ws)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"recovered {EVENT_ID}: the cycle had committed {head[:12]}; recorded as a success"
    with Store.for_workspace(ws) as store:
        assert store.get_event(EVENT_ID).outcome.status == "success"  # type: ignore[union-attr]


def test_gep_recover_says_an_interrupted_cycle_was_rolled_back(tmp_path: Path) -> None:
    ws = make_scenario(tmp_path / "ws")
    baseline = snapshot(ws)
    assert _run_driver(ws, "after_mutation", False).returncode == -signal.SIGKILL
    out = subprocess.run([str(Path(sys.executable).with_name("gep")), "recover", "--workspace", str(ws)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    head = str(baseline["head"])
    assert out.stdout.strip() == f"recovered {EVENT_ID}: workspace restored to {head[:12]}; recorded as interrupted"
    assert snapshot(ws) == baseline


def test_uninterrupted_driver_succeeds(tmp_path: Path) -> None:
    """The same driver without a crash: a success, so the crash tests exercise the real path."""
    ws = make_scenario(tmp_path / "ws")
    proc = _run_driver(ws, "none", False)
    assert proc.returncode == 0, proc.stderr
    assert '"status": "success"' in proc.stdout
    assert _recover(ws) == []


def test_live_cycle_is_not_recovered_without_force(tmp_path: Path) -> None:
    ws_path = make_scenario(tmp_path / "ws")
    ws = Workspace.open(ws_path)
    settings = load_settings(ws_path, env={})
    with Store.for_workspace(ws_path, settings) as store:
        sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        try:
            run = ws.begin(event_id="evt_2_x", store=store)
            run.pid = sleeper.pid  # a cycle that is still alive elsewhere
            store.save_run(run)
            (ws_path / "feature.py").write_text("x = 1\n")
            assert recover(workspace=ws_path, store=store, settings=settings) == []
            assert (ws_path / "feature.py").exists()
            # the caller holding the workspace lock knows no other cycle runs: the record is stale
            with ws.lock(1):
                assert [r.event_id for r in recover(workspace=ws_path, store=store, settings=settings)] == ["evt_2_x"]
            assert not (ws_path / "feature.py").exists()
        finally:
            sleeper.kill()
            sleeper.wait()
