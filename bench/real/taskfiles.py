"""Materializes the files of a task of bench/real/tasks.json from a clone of its public repository.

Nothing of those repositories is committed here: a task names its repository, the fix commit and the paths it
needs, and this module takes them out of a local clone (``git archive``) into ``bench/real/.cache/<task id>``:

  pre/          the importable code at the fix's parent, the test file (and its folder's helpers) at the fix
                commit (so it holds the failing test)
  before/       the test file at the parent (the tests the project had before the fix: a workspace's validation)
  fix.patch     the fix: ``git diff parent commit`` of the source files it changed
  LICENSE       the repository's license text, kept beside its files

Clones are looked up under ``$GEP_REAL_SOURCES`` (default ``/work/.mirror``) as ``<owner>+<name>/repo`` (a bare
git directory) or ``<owner>+<name>`` (a ``git clone``); ``python bench/real/taskfiles.py clone DIR`` prints the
``git clone`` commands that make such a folder.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TASKS = HERE / "tasks.json"
CACHE = HERE / ".cache"
RUNNER = HERE / "runtests.py"


class SourceMissing(Exception):
    """No clone of the task's repository under the sources folder."""


@dataclass
class Task:
    id: str
    repo: str
    commit: str
    parent: str
    license: str
    license_file: str
    subject: str
    source: list[str]  # the files the fix changes
    package: list[str]  # the importable code shipped (files or folders), at the parent
    pythonpath: str
    test_file: str
    failing_tests: list[str]
    helpers: list[str] = field(default_factory=list)  # the test folder's other modules (conftest, common ...)
    visible_skip: list[str] = field(default_factory=list)  # tests of the parent's file that fail here anyway
    visible_only: list[str] = field(default_factory=list)  # run only these of the parent's file (a big one)
    date: str = ""

    @property
    def url(self) -> str:
        return f"https://github.com/{self.repo}/commit/{self.commit}"


def load_tasks(path: Path = TASKS) -> list[Task]:
    data: list[dict[str, Any]] = json.loads(path.read_text())["tasks"]
    return [Task(**t) for t in data]


def sources() -> Path:
    return Path(os.environ.get("GEP_REAL_SOURCES", "/work/.mirror"))


def git_dir(repo: str) -> Path:
    base = sources() / repo.replace("/", "+")
    for d in (base / "repo", base):
        if (d / "HEAD").exists() or (d / ".git").exists():
            return d
    raise SourceMissing(f"no clone of {repo} under {sources()} (git clone https://github.com/{repo} {base})")


def git(repo: str, *args: str) -> bytes:
    run = subprocess.run(["git", "-C", str(git_dir(repo)), *args], capture_output=True, check=False)
    if run.returncode:
        raise SourceMissing(f"{repo}: git {' '.join(args[:2])}: {run.stderr.decode(errors='replace').strip()}")
    return run.stdout


def extract(repo: str, ref: str, paths: list[str], dest: Path) -> None:
    """The paths at ``ref`` into ``dest`` (missing ones skipped: a test file new in the fix commit)."""
    present = [p for p in paths if git(repo, "ls-tree", "--name-only", ref, "--", p.rstrip("/")).strip()]
    if not present:
        return
    with tarfile.open(fileobj=io.BytesIO(git(repo, "archive", ref, "--", *present))) as tar:
        members = [m for m in tar.getmembers() if m.isfile() or m.isdir()]  # no links out of the folder
        tar.extractall(dest, members=members)  # git archive of the paths named above


def materialize(task: Task, cache: Path = CACHE) -> Path:
    """The task's folder in the cache (made once; a half-made one is made again)."""
    out = cache / task.id
    if (out / "done").exists():
        return out
    shutil.rmtree(out, ignore_errors=True)
    (out / "pre").mkdir(parents=True)
    (out / "before").mkdir()
    extract(task.repo, task.parent, task.package, out / "pre")
    extract(task.repo, task.commit, [task.test_file, *task.helpers], out / "pre")
    extract(task.repo, task.parent, [task.test_file, *task.helpers], out / "before")
    (out / "fix.patch").write_bytes(git(task.repo, "diff", task.parent, task.commit, "--", *task.source))
    (out / "LICENSE").write_bytes(git(task.repo, "show", f"{task.commit}:{task.license_file}"))
    (out / "done").write_text(task.commit + "\n")
    return out


def old_tests_args(task: Task) -> list[str]:
    """runtests.py's arguments for the tests the project had before the fix (a workspace's validation)."""
    return (["--quiet", "--all", task.test_file] + [a for n in task.visible_only for a in ("--only", n)]
            + [a for n in task.visible_skip for a in ("--skip", n)])


def run_tests(folder: Path, task: Task, nodes: list[str], timeout: float = 60) -> tuple[bool, str]:
    """Runs ``nodes`` in ``folder`` with bench/real/runtests.py: (all passed, the output)."""
    cmd = [sys.executable, str(RUNNER), "--pythonpath", task.pythonpath, *nodes]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    run = subprocess.run(cmd, cwd=folder, capture_output=True, text=True, timeout=timeout, env=env, check=False)
    return run.returncode == 0, run.stdout + run.stderr


def apply_patch(folder: Path, patch: Path, reverse: bool = False) -> bool:
    cmd = ["git", "apply", "--whitespace=nowarn", *(["-R"] if reverse else []), str(patch.resolve())]
    return subprocess.run(cmd, cwd=folder, capture_output=True, check=False).returncode == 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["clone"] and len(argv) == 2:
        for repo in sorted({t.repo for t in load_tasks()}):
            print(f"git clone -q https://github.com/{repo} {Path(argv[1]) / repo.replace('/', '+')}")
        return 0
    print("usage: taskfiles.py clone DIR   (prints the git clone commands for $GEP_REAL_SOURCES)",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
