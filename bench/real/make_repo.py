"""Builds a small git repository with one real task's history, for ``gep eval`` and manual trials.

``python bench/real/make_repo.py TASK_ID DIR`` makes DIR (which must not exist or be empty) a repository with
three commits: the code before the fix with the tests the project had then (validation passes), the fix
commit's test file (its failing tests fail: validation fails), and the fix itself (validation passes again),
plus ``gep.toml`` (validation: bench/real/runtests.py, copied in as run_tests.py, on the test file) and the
repository's LICENSE. Each commit's validation is run while building; exit 1 when the history is not as said,
2 on bad input.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from taskfiles import RUNNER, TASKS, SourceMissing, Task, apply_patch, load_tasks, materialize

GEP_TOML = """[gep]
validation = ["{check}"]
log_globs = ["logs/*.log"]
"""


def _commit(repo: Path, message: str, when: str) -> None:
    env = {"GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when, "PATH": "/usr/bin:/bin"}
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True, capture_output=True)
    subprocess.run(["git", "-c", "user.name=gep bench", "-c", "user.email=bench@example.invalid", "commit", "-qm",
                    message], cwd=repo, check=True, capture_output=True, env=env)


def _passes(repo: Path, check: list[str]) -> bool:
    return subprocess.run(check, cwd=repo, capture_output=True, check=False).returncode == 0


def _skips(repo: Path, task: Task) -> list[str]:
    """Tests of the fix commit's file that fail even with the fix (on this Python): left out of validation."""
    run = subprocess.run([sys.executable, "run_tests.py", "--pythonpath", task.pythonpath, "--all", task.test_file],
                         cwd=repo, capture_output=True, text=True, check=False)
    return sorted({line.split()[1] for line in run.stdout.splitlines() if line.startswith("FAILED ")}
                  - set(task.failing_tests))


def build(task: Task, repo: Path) -> bool:
    folder = materialize(task)
    shutil.copytree(folder / "pre", repo, dirs_exist_ok=True)
    shutil.copy(RUNNER, repo / "run_tests.py")
    shutil.copy(folder / "LICENSE", repo / "LICENSE")
    apply_patch(repo, folder / "fix.patch")  # to find the tests that fail anyway, then undone
    check = ["python", "run_tests.py", "--quiet", "--pythonpath", task.pythonpath, "--all", task.test_file]
    check += [a for n in _skips(repo, task) for a in ("--skip", n)]
    apply_patch(repo, folder / "fix.patch", reverse=True)
    (repo / "gep.toml").write_text(GEP_TOML.format(check=" ".join(check)))
    (repo / ".gitignore").write_text("logs/\n__pycache__/\n.gep/\n")
    (repo / "README.md").write_text(f"{task.repo} at {task.parent[:12]}: the files of one task of gep's "
                                    f"bench/real/tasks.json ({task.id}), under the license in LICENSE.\n")
    new_test = repo / task.test_file
    fixed_tests = new_test.read_text()
    old = folder / "before" / task.test_file
    if old.exists():
        shutil.copy(old, new_test)
    else:
        new_test.unlink()
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True, capture_output=True)
    _commit(repo, f"{task.repo} at {task.parent[:12]}, before the fix", "2026-01-01T09:00:00Z")
    ok = not old.exists() or _passes(repo, [sys.executable, *check[1:]])
    new_test.write_text(fixed_tests)
    _commit(repo, f"Add the failing test: {', '.join(n.split('::')[-1] for n in task.failing_tests)}",
            "2026-01-02T09:00:00Z")
    ok = ok and not _passes(repo, [sys.executable, *check[1:]])
    apply_patch(repo, folder / "fix.patch")
    _commit(repo, f"{task.subject}\n\nUpstream: {task.url}", "2026-01-03T09:00:00Z")
    return ok and _passes(repo, [sys.executable, *check[1:]])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("task")
    ap.add_argument("dir", type=Path)
    ap.add_argument("--tasks", type=Path, default=TASKS)
    args = ap.parse_args(argv)
    task = next((t for t in load_tasks(args.tasks) if t.id == args.task), None)
    if task is None:
        print(f"make_repo.py: unknown task {args.task!r} (see bench/real/tasks.json)", file=sys.stderr)
        return 2
    if args.dir.exists() and any(args.dir.iterdir()):
        print(f"make_repo.py: {args.dir} is not empty", file=sys.stderr)
        return 2
    args.dir.mkdir(parents=True, exist_ok=True)
    try:
        ok = build(task, args.dir)
    except SourceMissing as exc:
        print(f"make_repo.py: {exc}", file=sys.stderr)
        return 2
    print(f"{args.dir}: {task.id} in 3 commits (before the fix, the failing test, the fix: {task.url})"
          + ("" if ok else "\nmake_repo.py: validation did not pass, fail, pass along the history"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
