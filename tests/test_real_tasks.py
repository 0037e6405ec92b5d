"""bench/real: the real bug-fix tasks hold (each failing test fails before its fix and passes after), the
checker and the test runner tell a real task from a wrong one, and the real world's agent follows its rules
and runs through the engine. Figures are the bench's business, not this test's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH / "real"))

import make_repo  # noqa: E402
import real_agent  # noqa: E402
import real_world  # noqa: E402
import taskfiles  # noqa: E402
import verify  # noqa: E402

pytestmark = pytest.mark.timeout(600)
BUG = "def half(x):\n    return x // 2\n\n\ndef double(x):\n    return x * 2\n"
FIX = "def half(x):\n    return x / 2\n\n\ndef double(x):\n    return x * 2\n"
OLD_TESTS = "from calc import double, half\n\n\ndef test_double():\n    assert double(2) == 4\n"
NEW_TESTS = OLD_TESTS + "\n\ndef test_half_of_odd():\n    assert half(3) == 1.5\n"


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def _repo(sources: Path) -> tuple[str, str]:
    """A public repository's stand-in: a bug with its old test, then the fix commit with a new test."""
    repo = sources / "someone+calc"
    (repo / "tests").mkdir(parents=True)
    (repo / "calc.py").write_text(BUG)
    (repo / "tests" / "test_calc.py").write_text(OLD_TESTS)
    (repo / "LICENSE").write_text("MIT License\n")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm", "calc")
    parent = _git(repo, "rev-parse", "HEAD")
    (repo / "calc.py").write_text(FIX)
    (repo / "tests" / "test_calc.py").write_text(NEW_TESTS)
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qam", "Fix half of odd numbers")
    return parent, _git(repo, "rev-parse", "HEAD")


def _task(parent: str, commit: str, **over: object) -> dict[str, object]:
    return {"id": "calc-1", "repo": "someone/calc", "commit": commit, "parent": parent, "license": "MIT",
            "license_file": "LICENSE", "subject": "Fix half", "source": ["calc.py"], "package": ["calc.py"],
            "pythonpath": ".", "test_file": "tests/test_calc.py",
            "failing_tests": ["tests/test_calc.py::test_half_of_odd"], **over}


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str, str]:
    monkeypatch.setenv("GEP_REAL_SOURCES", str(tmp_path / "sources"))
    monkeypatch.setattr(taskfiles, "CACHE", tmp_path / "cache")
    for module in (verify, make_repo):
        monkeypatch.setattr(module, "materialize", lambda t: taskfiles.materialize(t, tmp_path / "cache"))
    parent, commit = _repo(tmp_path / "sources")
    return tmp_path, parent, commit


def test_verify_holds_a_real_fix_and_rejects_a_test_that_passes_before(stand_in: tuple[Path, str, str],
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    tmp, parent, commit = stand_in
    good = tmp / "good.json"
    good.write_text(json.dumps({"tasks": [_task(parent, commit)]}))
    assert verify.main(["--tasks", str(good)]) == 0
    assert "1 of 1 tasks hold" in capsys.readouterr().out
    folder = tmp / "cache" / "calc-1"
    assert (folder / "LICENSE").read_text() == "MIT License\n"
    assert "-    return x // 2" in (folder / "fix.patch").read_text()
    assert (folder / "pre" / "calc.py").read_text() == BUG  # the code before the fix, the test after it
    not_a_bug = tmp / "bad.json"  # a test that passes before the fix is no task
    not_a_bug.write_text(json.dumps({"tasks": [_task(parent, commit, id="calc-2",
                                                     failing_tests=["tests/test_calc.py::test_double"])]}))
    assert verify.main(["--tasks", str(not_a_bug)]) == 1
    assert "0 of 1 tasks hold" in capsys.readouterr().out


def test_verify_says_what_is_missing(stand_in: tuple[Path, str, str], capsys: pytest.CaptureFixture[str]) -> None:
    tmp, parent, commit = stand_in
    gone = tmp / "gone.json"
    gone.write_text(json.dumps({"tasks": [_task(parent, commit, repo="someone/elsewhere")]}))
    assert verify.main(["--tasks", str(gone)]) == 2
    assert "no clone of someone/elsewhere" in capsys.readouterr().err
    assert verify.main(["--tasks", str(gone), "nope"]) == 2


def test_make_repo_builds_the_tasks_history(stand_in: tuple[Path, str, str],
                                             capsys: pytest.CaptureFixture[str]) -> None:
    tmp, parent, commit = stand_in
    tasks = tmp / "tasks.json"
    tasks.write_text(json.dumps({"tasks": [_task(parent, commit)]}))
    repo = tmp / "eval-repo"
    assert make_repo.main(["calc-1", str(repo), "--tasks", str(tasks)]) == 0
    assert _git(repo, "log", "--format=%s").splitlines() == [
        "Fix half", "Add the failing test: test_half_of_odd", f"someone/calc at {parent[:12]}, before the fix"]
    assert (repo / "LICENSE").read_text() == "MIT License\n" and _git(repo, "status", "--porcelain") == ""
    check = ["python", "run_tests.py", "--quiet", "--pythonpath", ".", "--all", "tests/test_calc.py"]
    assert f'validation = ["{" ".join(check)}"]' in (repo / "gep.toml").read_text()
    passes = []
    for rev in reversed(_git(repo, "log", "--format=%H").splitlines()):  # gep eval mines: a commit whose parent fails
        _git(repo, "checkout", "-q", rev)
        passes.append(subprocess.run([sys.executable, *check[1:]], cwd=repo, capture_output=True).returncode == 0)
    assert passes == [True, False, True]
    assert make_repo.main(["calc-1", str(repo), "--tasks", str(tasks)]) == 2  # not an empty folder
    assert make_repo.main(["calc-9", str(tmp / "other"), "--tasks", str(tasks)]) == 2
    assert "unknown task 'calc-9'" in capsys.readouterr().err


def test_the_runner_prints_each_failure_as_a_job_would(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "calc.py").write_text(BUG)
    (tmp_path / "tests" / "test_calc.py").write_text(NEW_TESTS + (
        "\n\nimport unittest\nimport pytest\n\n\nclass HalfTest(unittest.TestCase):\n    def test_even(self):\n"
        "        self.assertEqual(half(4), 3)\n\n\n@pytest.mark.parametrize('x', [2, 4])\ndef test_even(x):\n"
        "    assert half(x) * 2 == x\n\n\ndef test_fails_by_pytest():\n    pytest.fail('no')\n"))
    run = subprocess.run([sys.executable, str(taskfiles.RUNNER), "--all", "tests/test_calc.py"], cwd=tmp_path,
                         capture_output=True, text=True)
    assert run.returncode == 1
    lines = [line for line in run.stdout.splitlines() if line.startswith(("PASSED", "FAILED"))]
    assert sorted(lines) == sorted([
        "PASSED tests/test_calc.py::test_double", "PASSED tests/test_calc.py::test_even",
        "FAILED tests/test_calc.py::test_half_of_odd - AssertionError: ",
        "FAILED tests/test_calc.py::HalfTest::test_even - AssertionError: 2 != 3",
        "FAILED tests/test_calc.py::test_fails_by_pytest - Failed: no"])
    assert 'File "tests/test_calc.py", line 9, in test_half_of_odd' in run.stdout  # relative, no runner frames
    assert "runtests.py" not in run.stdout
    only = subprocess.run([sys.executable, str(taskfiles.RUNNER), "--quiet", "--all", "tests/test_calc.py", "--only",
                           "tests/test_calc.py::test_d", "--skip", "tests/test_calc.py::test_half_of_odd"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert (only.returncode, only.stdout.strip()) == (0, "0 failed, 1 passed")


def test_the_agent_aims_at_the_task_and_learns_from_what_the_prompt_says() -> None:
    task = {"id": "t", "failing_tests": ["tests/test_calc.py::test_half_of_odd"], "test_file": "tests/test_calc.py"}
    rng = real_agent.random.Random(1)
    assert real_agent.targeted("## Signals\nerrsig: FAILED tests/test_calc.py::test_half_of_odd\n", task, rng)
    assert not real_agent.targeted("## Signals\nlog_error\n", task, rng)
    plain = real_agent.odds("gene_repair_x\n## Signals\n", task)
    told = real_agent.odds("gene_repair_x\n## Lessons\ntest_half_of_odd: the change did not hold\n", task)
    assert plain == real_agent.REPAIR_ODDS
    failing_line = "errsig: ERROR nightly: FAILED tests/test_calc.py::test_half_of_odd - AssertionError"
    assert real_agent.odds(f"gene_repair_x\n## Signals\n{failing_line}\n", task) == plain  # the job's line: no news
    outcome = "## Recent outcomes (newest first)\n- fix did not hold · signals: " + failing_line
    assert real_agent.odds(f"gene_repair_x\n{outcome}\n", task) == told
    assert told["fix"] == pytest.approx(plain["fix"] + 0.25)
    assert told["partial"] + told["wrong"] == pytest.approx(plain["partial"] + plain["wrong"] - 0.25)
    assert real_agent.odds("gene_optimize\n", task) == real_agent.OTHER_ODDS


def test_the_real_world_runs_a_task_through_the_engine(stand_in: tuple[Path, str, str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    tmp, parent, commit = stand_in
    monkeypatch.setattr(real_world, "materialize", lambda t: taskfiles.materialize(t, tmp / "cache"))
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PREFECT_HOME", str(tmp / "prefect"))
    task = taskfiles.Task(**_task(parent, commit))  # type: ignore[arg-type]
    ws, side = tmp / "ws", tmp / "side"
    agent_task = real_world.build(task, ws, side)
    assert agent_task["touched_lines"] and agent_task["partial_patch"] == ""  # one hunk: no partial fix
    assert not real_world.tick(task, ws, side, real_world.START, real_agent.random.Random(1))
    assert "ERROR nightly: FAILED tests/test_calc.py::test_half_of_odd" in (ws / "logs" / "job.log").read_text()
    assert "test_half_of_odd" not in (ws / "tests" / "test_calc.py").read_text()  # the job's test is not here
    run = real_world.run_task("full", task, 1, 3, tmp / "runs")
    assert sum(run.statuses.values()) == 3 and run.fixed == real_world.nightly(
        task, tmp / "runs" / "full" / "calc-1-s1" / "ws", tmp / "runs" / "full" / "calc-1-s1" / "side")[0]


@pytest.mark.skipif(not all((taskfiles.sources() / t.repo.replace("/", "+")).exists() for t in taskfiles.load_tasks()),
                    reason="no clones of the tasks' repositories (bench/real/taskfiles.py clone DIR)")
def test_every_real_task_holds() -> None:
    tasks = taskfiles.load_tasks()
    assert len(tasks) >= 20 and len({t.repo for t in tasks}) >= 5
    assert all(t.license in ("MIT", "BSD-3-Clause", "Apache-2.0", "PSF-2.0") for t in tasks)
    run = subprocess.run([sys.executable, str(BENCH / "real" / "verify.py"), "--json"], capture_output=True,
                         text=True, timeout=580)
    bad = [c for c in json.loads(run.stdout) if not c["ok"]]
    assert run.returncode == 0 and not bad, bad


def test_evolution_runs_the_real_world_on_request(capsys: pytest.CaptureFixture[str]) -> None:
    import evolution

    assert evolution.main(["--world", "real", "--tasks", "nope"]) == 2
    assert "real_world.py: unknown task 'nope'" in capsys.readouterr().err
    assert real_world.main(["--arms", "fresh"]) == 2
