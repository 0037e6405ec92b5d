"""kill -9 of a FULL cycle through the pipeline (tests/crash_driver.py) at every stage, inside the steps that
write, and at random moments, in both modes; then recovery. The user's tree (files, index, status, stash,
git config and hooks) is byte for byte as the user left it, uncommitted work included, or, once the
commit had landed, exactly as an uninterrupted cycle leaves it. The store holds one event for the cycle
(interrupted, or the success it already was), nothing is left open or behind (clone, index.lock, pins), and
a second recovery finds nothing."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from crash_driver import make_scenario, person_edits, read_progress, run_and_kill, snapshot, user_dirty_edits
from zygote import Forked, Zygote, module_zygote

from gep.api import recover
from gep.core.models import EvolutionEvent
from gep.cycle import pipeline
from gep.git import open_repo
from gep.git.indexwrite import marker_path
from gep.store import Store

pytestmark = pytest.mark.timeout(900)
DRIVER = Path(__file__).with_name("crash_driver.py")
STAGES = [s.name for s in pipeline.STAGES] + [pipeline.RECORD.name]
AGENT_POINTS = [f"after:{s}" for s in STAGES] + ["in_validation", "after_commit_object", "after_cas",
                                                 "in_read_tree", "after_landing"]
PROMPT_CYCLE_POINTS = [f"after:{s}" for s in STAGES if s != "solidify"]  # it ends awaiting changes
PROMPT_SOLIDIFY_POINTS = [("before:solidify", False), ("after:solidify", True), ("after:record", True),
                          ("inplace_after_cas", True), ("inplace_in_index", True)]
LANDED = ("after_cas", "in_read_tree", "after_landing", "after:solidify", "after:record")


@pytest.fixture(autouse=True)
def venv_python_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """`python` in validation is this interpreter; the driver inherits the environment."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")


_ZYGOTE: list[Zygote] = []  # the module's zygote (its fixture), used by drive()


@pytest.fixture(scope="module", autouse=True)
def zygote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Zygote]:
    """The driver's imports paid once: every run of this module is a child forked from one process."""
    with module_zygote(DRIVER, tmp_path_factory.mktemp("zygote"), _ZYGOTE) as z:
        yield z


def scenario(path: Path) -> Path:
    ws = make_scenario(path)
    user_dirty_edits(ws)  # uncommitted work: a dirty tree no longer blocks a cycle, and is never touched
    return ws


def drive(ws: Path, run: str, point: str, kill_after: float | None = None) -> tuple[int, float]:
    """Run the driver: (exit code, seconds from its start line to its end). ``kill_after``: SIGKILL it that
    many seconds after it started; ``in_validation``: once the slow check is running."""
    meanwhile = (lambda proc: _kill_in_validation(ws, proc)) if point == "in_validation" else None
    return run_and_kill([sys.executable, str(DRIVER), str(ws), run, point], ws, kill_after, meanwhile,
                        zygote=_ZYGOTE[-1])


def _kill_in_validation(ws: Path, proc: Forked) -> None:
    deadline = time.monotonic() + 60
    while not any(p.read_text().strip() for p in (ws / ".gep" / "tmp").glob("check-*/sleepy.pid")):
        assert proc.poll() is None and time.monotonic() < deadline, "validation never started"
        time.sleep(0.05)
    assert _pids_with("sleepy.pid")
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    for _ in range(100):  # the validation command dies with the cycle: no orphan keeps writing
        if not _pids_with("sleepy.pid"):
            return
        time.sleep(0.05)
    for pid in _pids_with("sleepy.pid"):
        os.kill(pid, signal.SIGKILL)
    pytest.fail("the validation process outlived the killed cycle")


def _pids_with(arg: str) -> list[int]:
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
        if arg.encode() in argv and state != "Z" and b"bwrap" not in argv[0]:
            found.append(int(entry.name))
    return found


def events(ws: Path) -> list[EvolutionEvent]:
    with Store.for_workspace(ws) as store:
        return store.list_events(limit=50)


def same(a: dict[str, object], b: dict[str, object]) -> bool:
    """The user's side is the same (HEAD's sha aside: a commit's time is in it)."""
    return {k: v for k, v in a.items() if k != "head"} == {k: v for k, v in b.items() if k != "head"}


def nothing_left(ws: Path, awaiting: bool = False) -> None:
    """No clone, no index.lock, no half-written marker, no pins; a second recovery finds nothing."""
    assert not (ws / ".git" / "index.lock").exists() and not marker_path(open_repo(ws)).exists()
    assert list((ws / ".gep" / "worktrees").iterdir()) == [] if (ws / ".gep" / "worktrees").exists() else True
    pins = subprocess.run(["git", "for-each-ref", "refs/gep/pin/", "refs/gep/baseline/"], cwd=ws,
                          capture_output=True, text=True).stdout
    assert bool(pins) == awaiting, pins  # a cycle awaiting changes keeps its baseline, nothing else does
    again = recover(ws)
    assert (again.runs, again.actions, again.warnings) == ([], [], []), again


# ------------------------------------------------------------------ references (uninterrupted runs)


@pytest.fixture(scope="module")
def refs(tmp_path_factory: pytest.TempPathFactory, zygote: Zygote) -> dict[str, dict[str, object]]:
    """The user's side after uninterrupted runs: an agent's cycle landed; a prompt cycle awaiting, edited by
    the person, then committed."""
    base = tmp_path_factory.mktemp("refs")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
        agent = scenario(base / "a" / "ws")
        assert drive(agent, "agent", "none")[0] == 0 and events(agent)[0].outcome.status == "success"
        prompt = scenario(base / "p" / "ws")
        assert drive(prompt, "prompt_cycle", "none")[0] == 0
        person_edits(prompt)
        edited = snapshot(prompt)
        assert drive(prompt, "prompt_solidify", "none")[0] == 0 and events(prompt)[0].outcome.status == "success"
    return {"landed": snapshot(agent), "edited": edited, "committed": snapshot(prompt)}


def check_agent(ws: Path, before: dict[str, object], refs: dict[str, dict[str, object]], bad: bool = False) -> str:
    """After a killed agent cycle and recovery: the outcome recorded, the tree as it must be."""
    evs = events(ws)
    assert len(evs) <= 1, [e.id for e in evs]  # never duplicated (none when killed before it was recorded)
    status = evs[0].outcome.status if evs else "nothing"
    after = snapshot(ws)
    if status == "success":
        assert not bad and same(after, refs["landed"]) and evs[0].meta.commit
        assert subprocess.run(["git", "rev-parse", "HEAD^"], cwd=ws, capture_output=True, text=True).stdout.strip() \
            == before["head"]
    else:
        assert status in ("nothing", "interrupted", "failed"), status
        assert after == before  # byte for byte as the user left it, their uncommitted work included
        if evs and evs[0].meta.rescued_patch:  # a change that existed is saved, never lost
            assert Path(evs[0].meta.rescued_patch).is_file()
    with Store.for_workspace(ws) as store:
        assert store.open_runs() == []
    nothing_left(ws)
    return status


# ------------------------------------------------------------------ every stage, every writing step


@pytest.mark.parametrize("point", AGENT_POINTS)
def test_kill_an_agent_cycle_at_each_point_then_recover(tmp_path: Path, refs: dict[str, dict[str, object]],
                                                       point: str) -> None:
    ws = scenario(tmp_path / "ws")
    before = snapshot(ws)
    assert drive(ws, "agent", point)[0] == -signal.SIGKILL
    if point == "in_read_tree":
        assert (ws / ".git" / "index.lock").exists()
    done = recover(ws)
    if point == "in_read_tree":  # the engine's own index.lock is removed and named
        assert any(f"removed {ws / '.git' / 'index.lock'}" in a for a in done.actions), done.actions
    status = check_agent(ws, before, refs)
    assert status == _expected(point)
    if status == "success" and not point.startswith("after:"):  # killed inside solidify: recovery recorded it
        assert [r.outcome for r in done.runs] == ["success"] and "committed" in (events(ws)[0].meta.recovery or "")
    if point in ("after:apply", "in_validation", "after_commit_object"):  # the change existed: saved as a patch
        assert events(ws)[0].meta.rescued_patch and events(ws)[0].meta.failure_reasons == ["interrupted"]


def _expected(point: str) -> str:
    if point in LANDED:
        return "success"
    if point.startswith("after:") and STAGES.index(point[6:]) < STAGES.index("record baseline"):
        return "nothing"  # killed before the cycle recorded anything
    return "interrupted"


@pytest.mark.parametrize("point", ["in_discard", "after:solidify"])
def test_kill_a_failing_agent_cycle_keeps_the_real_failure(tmp_path: Path, refs: dict[str, dict[str, object]],
                                                          point: str) -> None:
    ws = scenario(tmp_path / "ws")
    before = snapshot(ws)
    assert drive(ws, "agent_bad", point)[0] == -signal.SIGKILL
    recover(ws)
    assert check_agent(ws, before, refs, bad=True) == "failed"
    [ev] = events(ws)
    assert ev.meta.failure_reasons and ev.meta.failure_reasons[0].startswith("validation: python check.py exited 1")
    assert ev.meta.rescued_patch and "return a - b" in Path(ev.meta.rescued_patch).read_text()


@pytest.mark.parametrize("point", PROMPT_CYCLE_POINTS)
def test_kill_a_prompt_cycle_at_each_stage_then_recover(tmp_path: Path, point: str) -> None:
    ws = scenario(tmp_path / "ws")
    before = snapshot(ws)
    assert drive(ws, "prompt_cycle", point)[0] == -signal.SIGKILL
    recover(ws)
    assert snapshot(ws) == before
    evs = events(ws)
    stage = point.removeprefix("after:")
    reached = STAGES.index(stage) >= STAGES.index("apply")
    expected = "awaiting_changes" if reached else "interrupted" if STAGES.index(stage) >= STAGES.index(
        "record baseline") else None
    assert [e.outcome.status for e in evs] == ([expected] if expected else [])
    nothing_left(ws, awaiting=reached)


def test_kill_between_the_awaiting_run_and_its_event_then_recover(tmp_path: Path) -> None:
    """The run is saved awaiting changes, the event still says running: recovery brings the event up to date
    (the random kills found this window: the event stayed "running" for good)."""
    ws = scenario(tmp_path / "ws")
    before = snapshot(ws)
    assert drive(ws, "prompt_cycle", "awaiting_run_saved")[0] == -signal.SIGKILL
    assert [e.outcome.status for e in events(ws)] == ["running"]
    done = recover(ws)
    assert snapshot(ws) == before
    assert [e.outcome.status for e in events(ws)] == ["awaiting_changes"]
    assert [r.outcome for r in done.runs] == ["awaiting_changes"]
    nothing_left(ws, awaiting=True)


@pytest.mark.parametrize("point, committed", PROMPT_SOLIDIFY_POINTS, ids=[p for p, _ in PROMPT_SOLIDIFY_POINTS])
def test_kill_gep_solidify_then_recover(tmp_path: Path, refs: dict[str, dict[str, object]], point: str,
                                       committed: bool) -> None:
    ws = scenario(tmp_path / "ws")
    assert drive(ws, "prompt_cycle", "none")[0] == 0
    person_edits(ws)
    edited = snapshot(ws)
    assert drive(ws, "prompt_solidify", point)[0] == -signal.SIGKILL
    done = recover(ws)
    if point == "inplace_in_index":
        assert any("index.lock" in a for a in done.actions), done.actions
    check_prompt_solidify(ws, edited, refs, committed=committed)
    if not committed:
        assert [r.outcome for r in done.runs] == ["awaiting_changes"]


def check_prompt_solidify(ws: Path, edited: dict[str, object], refs: dict[str, dict[str, object]],
                          committed: bool | None = None) -> str:
    """After a killed `gep solidify` and recovery: the person's files exactly as they left them; committed
    (the success it already was) or awaiting changes again."""
    [ev] = events(ws)
    after = snapshot(ws)
    assert after["files"] == edited["files"]  # the person's files are never written, whatever happened
    if ev.outcome.status == "success":
        assert same(after, refs["committed"])
    else:
        assert ev.outcome.status == "awaiting_changes" and after == edited
    if committed is not None:
        assert (ev.outcome.status == "success") == committed
    nothing_left(ws, awaiting=ev.outcome.status == "awaiting_changes")
    return ev.outcome.status


# ------------------------------------------------------------------ random kills


def test_random_kills_of_full_cycles_never_leave_the_user_tree_changed(tmp_path: Path,
                                                                       refs: dict[str, dict[str, object]]) -> None:
    rng = random.Random(20260)
    # how long each run takes here (the fastest of two: the first pays for cold caches)
    durations = {run: min(drive(scenario(tmp_path / f"t-{run}{n}" / "ws"), run, "random")[1] for n in range(2))
                 for run in ("agent", "prompt_cycle")}
    seen: dict[str, int] = {}
    for i in range(10):  # agent cycles (each stage is also killed deterministically above)
        ws = scenario(tmp_path / f"a{i}" / "ws")
        before = snapshot(ws)
        code, _ = drive(ws, "agent", "random", kill_after=rng.uniform(0.0, durations["agent"]))
        recover(ws)
        progress = read_progress(ws)
        status = check_agent(ws, before, refs)
        key = "finished" if code == 0 else progress[-1]
        seen[key] = seen.get(key, 0) + 1
        assert code != 0 or status == "success"
    for i in range(6):  # prompt mode: 3 kills while the cycle runs, 3 while `gep solidify` runs
        ws = scenario(tmp_path / f"p{i}" / "ws")
        before = snapshot(ws)
        if i % 2 == 0:
            drive(ws, "prompt_cycle", "random", kill_after=rng.uniform(0.0, durations["prompt_cycle"]))
            recover(ws)
            assert snapshot(ws) == before
            assert [e.outcome.status for e in events(ws)] in ([], ["interrupted"], ["awaiting_changes"])
            continue
        drive(ws, "prompt_cycle", "none")
        person_edits(ws)
        edited = snapshot(ws)
        drive(ws, "prompt_solidify", "random", kill_after=rng.uniform(0.0, durations["prompt_cycle"]))
        recover(ws)
        check_prompt_solidify(ws, edited, refs)
    print(seen, durations)
    # the kills really landed in different stages (each stage is also killed deterministically above); since
    # validation checks a copy of the tree, solidify takes most of a cycle's time and so most random kills
    assert len(seen) >= 3, seen


# ------------------------------------------------------------------ the next cycle, `gep recover`, runs rows


def test_the_next_cycle_recovers_and_says_so(tmp_path: Path) -> None:
    ws = scenario(tmp_path / "ws")
    before = snapshot(ws)
    assert drive(ws, "agent", "after:apply")[0] == -signal.SIGKILL
    dead = events(ws)[0].id
    assert (ws / ".gep" / "worktrees" / dead).is_dir()
    assert drive(ws, "prompt_cycle", "none")[0] == 0  # the next cycle starts by recovering
    evs = {e.id: e for e in events(ws)}
    assert evs[dead].outcome.status == "interrupted" and evs[dead].meta.rescued_patch
    new = next(e for e in evs.values() if e.id != dead)
    assert new.meta.recovered == [dead] and any(f"removed the clone of cycle {dead}" in n
                                                for n in new.meta.start_notes or [])
    assert snapshot(ws) == before and not (ws / ".gep" / "worktrees" / dead).exists()


def _gep(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(Path(sys.executable).with_name("gep")), *args], capture_output=True, text=True,
                          timeout=120)


def test_gep_recover_says_what_it_recorded(tmp_path: Path) -> None:
    landed = scenario(tmp_path / "l" / "ws")
    assert drive(landed, "agent", "after_landing")[0] == -signal.SIGKILL
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=landed, capture_output=True, text=True).stdout.strip()
    out = _gep("recover", "--workspace", str(landed))
    assert out.returncode == 0, out.stderr
    eid = events(landed)[0].id
    assert f"recovered {eid}: the cycle had committed {head[:12]}; recorded as a success" in out.stdout
    died = scenario(tmp_path / "d" / "ws")
    assert drive(died, "agent", "in_read_tree")[0] == -signal.SIGKILL
    out = _gep("recover", "--workspace", str(died))
    assert out.returncode == 0 and f"removed {died / '.git' / 'index.lock'}" in out.stdout, out.stdout
    assert "recorded as a success" in out.stdout  # the landing was finished: the success it already was
    mid = scenario(tmp_path / "m" / "ws")
    assert drive(mid, "agent", "after:apply")[0] == -signal.SIGKILL
    out = _gep("recover", "--workspace", str(mid))
    eid = events(mid)[0].id
    assert f"recovered {eid}: your tree was never changed by it; its change is saved in " in out.stdout, out.stdout
    assert "recorded as interrupted" in out.stdout
    assert _gep("recover", "--workspace", str(mid)).stdout.strip() == "nothing to recover"


def test_an_unreadable_runs_row_is_moved_aside_and_never_blocks(tmp_path: Path) -> None:
    from sqlalchemy import text

    ws = scenario(tmp_path / "ws")
    assert drive(ws, "agent", "after:apply")[0] == -signal.SIGKILL
    dead = events(ws)[0].id
    with Store.for_workspace(ws) as store:
        with store.engine.begin() as conn:
            conn.execute(text("UPDATE runs SET data = '{not json' WHERE event_id = :id"), {"id": dead})
            conn.execute(text("INSERT INTO runs (workspace_id, event_id, status, data) VALUES (:ws, 'evt_gone', "
                              "'running', :data)"), {"ws": store.workspace_id, "data": json.dumps(
                                  {"event_id": "evt_gone", "workspace": "/x", "head_sha": "d" * 40})})
    done = recover(ws)
    assert any(w.startswith(f"the run record of cycle {dead} could not be read and was moved aside")
               for w in done.warnings), done.warnings
    assert any("evt_gone: its baseline commit dddddddddddd is gone" in w for w in done.warnings), done.warnings
    by_id = {e.id: e for e in events(ws)}
    assert by_id[dead].outcome.status == "interrupted"  # its event is not left running for good
    assert by_id["evt_gone"].outcome.status == "interrupted"
    assert drive(ws, "agent", "none")[0] == 0  # the workspace is not blocked
    assert events(ws)[0].outcome.status == "success"
    with Store.for_workspace(ws) as store:
        assert store.open_runs() == []
        with store.engine.begin() as conn:
            assert conn.execute(text("SELECT status FROM runs WHERE event_id = :id"), {"id": dead}).scalar() \
                == "unreadable"


def test_gep_recover_while_a_cycle_holds_the_workspace_names_it(tmp_path: Path) -> None:
    ws = scenario(tmp_path / "ws")
    (ws / "gep.toml").write_text("lock_timeout_s = 0.5\n")
    proc = subprocess.Popen([sys.executable, str(DRIVER), str(ws), "agent", "in_validation"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not list((ws / ".gep" / "tmp").glob("check-*/sleepy.pid")):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        out = _gep("recover", "--workspace", str(ws))
        assert out.returncode == 2 and f"another cycle is running on {ws} (pid {proc.pid})" in out.stderr
        assert "Traceback" not in out.stderr
        assert len(list((ws / ".gep" / "worktrees").iterdir())) >= 1  # a live cycle's clone is left alone
    finally:
        proc.kill()
        proc.wait()
    recover(ws)
