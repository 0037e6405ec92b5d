"""Tasks mined from a workspace's own history: a commit that makes the workspace's validation pass where its
parent failed it.

A task starts from the parent's files with the commit's test files laid over them (the tests the fix came
with: a parent whose own tests pass but the commit's fail is a task too); the failing output there is the
task's log, and the judge is the same validation on an attempt's files with the commit's test files put back
(an agent cannot pass by editing them). The workspace's validation is ``validation`` in gep.toml, else
``default_validation``, run as a cycle runs it (the allowlist, the sandbox, gep/validation/runner.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import BaseModel

from gep.core.config import Settings
from gep.core.errors import GepError
from gep.core.sanitize import redact
from gep.eval.scratch import materialize
from gep.git.plumbing import Git
from gep.validation.runner import run_validation

# a file a commit's tests live in, in the usual layouts (tests/, test_*.py, *_test.go, *.spec.ts, conftest.py)
TEST_PATH = re.compile(r"(^|/)(tests?|spec|__tests__)/|(^|/)test_[^/]*$|_test\.\w+$|\.(test|spec)\.\w+$|"
                       r"(^|/)conftest\.py$")
LOG_CHARS = 8_000  # of a failing output kept as the task's log (its tail: where the failures are)
Say = Callable[[str], None]


class Task(BaseModel):
    id: str  # the fixing commit's short id
    commit: str  # the fixing commit (its tests are the judge)
    parent: str
    subject: str
    tests: list[str]  # the commit's test files, laid over the parent's files
    start: str  # the commit the task starts from, in the evaluation's copy of the history
    log: str  # the validation's failing output at the start (redacted, its tail)


class Checker:
    """Runs the workspace's validation on a tree, once per tree (a tree checked twice is answered from memory)."""

    def __init__(self, git: Git, settings: Settings, folder: Path, env_dirs: Sequence[Path] = ()) -> None:
        self.git, self.settings, self.folder, self.env_dirs = git, settings, folder, list(env_dirs)
        folder.mkdir(parents=True, exist_ok=True)
        self.commands = list(settings.validation or settings.default_validation)
        self.seen: dict[str, tuple[bool, str]] = {}
        self.blocked: dict[str, str] = {}  # tree -> why its validation could not run (not a failure)

    def refused(self, tree: str, git: Git | None = None) -> str | None:
        return self.blocked.get((git or self.git).out("rev-parse", f"{tree}^{{tree}}"))

    def check(self, tree: str, git: Git | None = None) -> tuple[bool, str]:
        """(passed, output) of the validation on ``tree`` (of ``git``'s repository, default the mirror's)."""
        g = git or self.git
        tree = g.out("rev-parse", f"{tree}^{{tree}}")
        if tree not in self.seen:
            files = materialize(g, tree, self.folder / "tree", self.env_dirs)
            report = run_validation(commands=self.commands, cwd=files, settings=self.settings, gene_id=None,
                                    report_id="eval")
            blocked = [r.blocked_reason for r in report.results if r.blocked_reason]
            if blocked:  # not a failing tree: a validation that cannot run on it
                self.blocked[tree] = blocked[0]
            text = "\n".join(f"$ {r.cmd}\n{r.blocked_reason or ''}{r.stdout}{r.stderr}".rstrip()
                             for r in report.results)
            self.seen[tree] = report.overall_ok, redact(text)[-LOG_CHARS:]
        return self.seen[tree]


def test_files(git: Git, commit: str, parent: str) -> list[str]:
    return [p for p in git.paths("diff", "--name-only", "-z", "--no-renames", parent, commit) if TEST_PATH.search(p)]


def overlay(git: Git, base: str, source: str, paths: Sequence[str], message: str, date_of: str, scratch: Path) -> str:
    """A commit of ``base``'s files with ``paths`` as ``source`` has them (deleted where it has none), dated as
    ``date_of`` so the same history gives the same commit; its id."""
    if not paths:
        return git.out("rev-parse", f"{base}^{{commit}}")
    index = scratch / "overlay.index"
    g = git.with_(index=index)
    try:
        g.run("read-tree", base)
        zero = "0" * len(git.out("rev-parse", base))
        gone = "".join(f"0 {zero}\t{p}\n" for p in paths)  # mode 0: out of the index
        listed = g.run("ls-tree", "-r", "-z", source, "--", *paths).text.replace("\0", "\n")
        g.run("update-index", "--index-info", input=(gone + listed).encode())
        tree = g.out("write-tree")
    finally:
        index.unlink(missing_ok=True)
    when = git.out("log", "-1", "--format=%aI", date_of)
    dated = {"GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when, "GIT_AUTHOR_NAME": "gep eval",
             "GIT_AUTHOR_EMAIL": "gep-eval@localhost", "GIT_COMMITTER_NAME": "gep eval",
             "GIT_COMMITTER_EMAIL": "gep-eval@localhost"}
    return git.out("commit-tree", tree, "-p", base, "-m", message, env=dated)


def mine(git: Git, checker: Checker, *, limit: int, scan: int, say: Say) -> list[Task]:
    """Up to ``limit`` tasks among the newest ``scan`` first-parent commits, oldest first."""
    commits = git.out("rev-list", "--first-parent", f"--max-count={scan}", "HEAD").split()
    tasks: list[Task] = []
    if commits and not checker.check(commits[0])[0] and checker.refused(commits[0]):  # cannot run here at all
        raise GepError(f"the workspace's validation cannot run here: {checker.refused(commits[0])}")
    for n, commit in enumerate(commits, 1):
        parent = git.sha(f"{commit}^1")
        if parent is None or len(tasks) >= limit:
            break
        say(f"looking for tasks: commit {n} of {len(commits)}, {len(tasks)} found")
        if not checker.check(commit)[0]:
            continue
        tests = test_files(git, commit, parent)
        short = commit[:10]
        start = overlay(git, parent, commit, tests, f"gep eval: task {short} (its tests on its parent)", commit,
                        checker.folder)
        ok, log = checker.check(start)
        if ok or checker.refused(start):
            continue
        git.run("update-ref", f"refs/heads/gep-eval/{short}", start)
        subject = git.out("log", "-1", "--format=%s", commit)
        tasks.append(Task(id=short, commit=commit, parent=parent, subject=redact(subject)[:200], tests=tests,
                          start=start, log=log))
    return list(reversed(tasks))
