"""Issue 13's findings through FULL cycles (gep.run_cycle, a command agent in the cycle's clone): the user
working during a cycle, an agent doing git things, ignored, large and oddly named files, CRLF with
``text=auto``. The user's side (every file's bytes and mode, the index, status, stash, git config and hooks)
is compared byte for byte."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import pytest
from git_scenario import BIG, ODD, UNICODE, files_of, git, make_repo, snapshot, user_edits

from gep import CycleRequest, run_cycle
from gep.core.models import EvolutionEvent

LOG = "[ERROR] app: TypeError: add() failed on None\n"
GOOD = "p = pathlib.Path('app.py'); p.write_text(p.read_text().replace('return a + b', 'return b + a'))"
BAD = "p = pathlib.Path('app.py'); p.write_text(p.read_text().replace('return a + b', 'return a - b'))"
# the user, working in their own tree while the agent works in its clone
USER_WORKS = (
    "u = pathlib.Path.cwd().parents[2]; (u / 'README.md').write_text('hello\\nedited during the cycle\\n'); "
    "(u / 'during.txt').write_text('a new file of mine\\n'); (u / 'lib' / 'more.py').write_text('Z = 1\\n'); "
    "g = ['git', '-C', str(u), '-c', 'user.name=U', '-c', 'user.email=u@x']; "
    "subprocess.run(g + ['add', 'lib/more.py'], check=True); "
    "subprocess.run(g + ['commit', '-q', '-m', 'my commit during the cycle', '--', 'lib/more.py'], check=True)")


@pytest.fixture(autouse=True)
def venv_python_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = make_repo(tmp_path / "ws")
    user_edits(path)
    (path / "logs").mkdir()
    (path / "logs" / "app.log").write_text(LOG)  # ignored: where the cycle's signals come from
    return path


def cycle(ws: Path, *code: str) -> EvolutionEvent:
    agent = "import pathlib, subprocess, sys; sys.stdin.read(); " + "; ".join(code)
    event = run_cycle(CycleRequest(workspace=ws, mutator="command", seed=1,
                                   agent_cmd=shlex.join([sys.executable, "-c", agent])),
                      env={**os.environ, "GEP_VALIDATION": "python check.py"})
    assert event is not None
    return event


@pytest.mark.parametrize("change, outcome", [(GOOD, "success"), (BAD, "failed")])
def test_nothing_of_the_user_is_touched_ignored_large_and_odd_files_included(ws: Path, change: str,
                                                                             outcome: str) -> None:
    before = snapshot(ws)
    event = cycle(ws, change)
    assert event.outcome.status == outcome, event.meta.failure_reasons
    after = snapshot(ws)
    if outcome == "failed":
        assert after == before and event.meta.rescued_patch  # not one byte, the change saved as a patch
        return
    expected = dict(files_of(before))
    expected["app.py"] = (b"def add(a, b):\n    return b + a\n", expected["app.py"][1])  # type: ignore[index]
    assert files_of(after) == expected  # .env, build/, .venv, the 9 MB file, odd and unicode names as they were
    assert len(files_of(after)["big.bin"][0]) == BIG and ODD in files_of(after) and UNICODE in files_of(after)  # type: ignore[index]
    assert after["stash"] == before["stash"] and after["git"] == before["git"]
    assert git(ws, "diff", "--cached", "--name-only").split() == ["draft.md", "lib/util.py"]  # still staged


@pytest.mark.parametrize("change, outcome", [(GOOD, "success"), (BAD, "failed")])
def test_work_the_user_does_during_the_cycle_is_never_lost_nor_swallowed(ws: Path, change: str,
                                                                         outcome: str) -> None:
    event = cycle(ws, change, USER_WORKS)
    assert event.outcome.status == outcome, event.meta.failure_reasons
    assert (ws / "README.md").read_text() == "hello\nedited during the cycle\n"
    assert (ws / "during.txt").read_text() == "a new file of mine\n"
    log = git(ws, "log", "--format=%s", "-3").splitlines()
    if outcome == "success":  # rebased onto the user's commit, validated again, landed on top of it
        assert log[:2] == ["gep(repair): " + log[0].split(": ", 1)[1], "my commit during the cycle"]
        assert "rebased onto it" in (event.meta.delivery_note or "") and event.meta.delivery == "landed"
        assert set(git(ws, "show", "--name-only", "--format=", "HEAD").split()) == {"app.py"}  # only the cycle's
    else:
        assert log[0] == "my commit during the cycle"
    status = git(ws, "status", "--porcelain").splitlines()
    assert " M README.md" in status and "?? during.txt" in status and "A  draft.md" in status


GIT_TAMPERING = {  # what an agent does with `git -C <your repo>` -> where the cycle's commit goes
    "delete main and gc": ("git update-ref -d refs/heads/main && git reflog expire --expire=now --all && "
                           "git gc -q --prune=now", "kept"),
    "move a tag": ("git tag -f v1 HEAD~1", "landed"),
    "plant a replace ref": ("git replace -f HEAD HEAD~1", "landed"),
    "clear the stash": ("git stash clear && git gc -q --prune=now", "landed"),
    "switch branch": ("git checkout -q -b other", "kept"),
}


@pytest.mark.parametrize("how", list(GIT_TAMPERING))
def test_refs_changed_in_the_users_repository_during_a_cycle_are_left_as_they_were_made(ws: Path, how: str) -> None:
    """Issue 32: the engine cannot tell an agent's `git -C` from the user's own git work, and the user's refs
    are theirs: nothing is put back, deleted or resurrected; only the branch the commit lands on is checked."""
    git(ws, "tag", "v1")
    v1 = git(ws, "rev-parse", "v1").strip()
    git(ws, "stash", "push", "-q", "-m", "kept work", "--", "README.md")
    (ws / "README.md").write_text("hello\nwork in progress\n")
    command, where = GIT_TAMPERING[how]
    tamper = ("u = pathlib.Path.cwd().parents[2]; subprocess.run(" + repr(command) + ", shell=True, cwd=u, check=True)")
    event = cycle(ws, GOOD, tamper)
    assert event.outcome.status == "success" and event.meta.delivery == where, event.meta.failure_reasons
    refs_after = git(ws, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads", "refs/tags",
                     "refs/replace") + git(ws, "stash", "list", "--format=%H")
    expected = {"delete main and gc": lambda r: "refs/heads/main " not in r,
                "move a tag": lambda r: "refs/tags/v1 " in r and f"refs/tags/v1 {v1}" not in r,
                "plant a replace ref": lambda r: "refs/replace/" in r,
                "clear the stash": lambda r: not git(ws, "stash", "list"),
                "switch branch": lambda r: git(ws, "symbolic-ref", "HEAD").strip() == "refs/heads/other"}[how]
    assert expected(refs_after), refs_after  # as the agent left it
    assert not git(ws, "for-each-ref", "refs/gep/rescued/")
    if where == "kept":
        assert event.meta.branch == f"gep/{event.id}" and event.meta.merge_command
    assert (ws / "README.md").read_text() == "hello\nwork in progress\n"


def test_an_agent_doing_git_things_in_its_clone_fails_and_never_reaches_the_user(ws: Path) -> None:
    before = snapshot(ws)
    event = cycle(ws, GOOD, "subprocess.run('git add -A && git -c user.name=A -c user.email=a@x commit -qm mine "
                            "&& git stash clear && git branch -D main && git checkout -q -b rogue', shell=True, "
                            "check=True)")
    assert event.outcome.status == "failed"
    assert any("the agent moved HEAD in its copy" in r for r in event.meta.failure_reasons), event.meta.failure_reasons
    assert snapshot(ws) == before


def test_crlf_with_text_auto_keeps_the_users_bytes(ws: Path) -> None:
    (ws / ".gitattributes").write_text("* text=auto\n")
    git(ws, "add", ".gitattributes")
    git(ws, "commit", "-q", "-m", "text=auto", "--", ".gitattributes")
    (ws / "README.md").write_bytes(b"hello\r\nmy CRLF work in progress\r\n")
    event = cycle(ws, GOOD)
    assert event.outcome.status == "success" and event.meta.delivery == "landed", event.meta.failure_reasons
    assert (ws / "README.md").read_bytes() == b"hello\r\nmy CRLF work in progress\r\n"
    assert (ws / "app.py").read_bytes() == b"def add(a, b):\n    return b + a\n"
    assert git(ws, "status", "--porcelain", "--", "app.py") == ""


def test_a_change_rebased_onto_the_users_commit_is_validated_again(ws: Path) -> None:
    """The user commits a stricter check while the agent works: the change passed the old check in the clone,
    is rebased onto the user's commit, fails the new one, and never lands."""
    stricter = ("u = pathlib.Path.cwd().parents[2]; (u / 'check.py').write_text(\"import sys; "
                "sys.exit(0 if 'a + b' in open('app.py').read() else 1)\\n\"); "
                "g = ['git', '-C', str(u), '-c', 'user.name=U', '-c', 'user.email=u@x']; "
                "subprocess.run(g + ['commit', '-q', '-m', 'stricter check', '--', 'check.py'], check=True)")
    event = cycle(ws, GOOD, stricter)
    assert event.outcome.status == "failed"
    assert any(r.startswith("after rebasing onto your new commits: validation: python check.py exited 1")
               for r in event.meta.failure_reasons or []), event.meta.failure_reasons
    assert git(ws, "log", "-1", "--format=%s").strip() == "stricter check"
    assert (ws / "app.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert "return b + a" in Path(event.meta.rescued_patch or "").read_text()
