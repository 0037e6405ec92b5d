"""References are the user's (issue 32, finding 6): whatever is done to the user's refs during a cycle (a
branch made, switched to, committed on or deleted; a tag; an amend or a reset; a stash dropped or cleared)
is left exactly as it was done. The engine checks only the branch it lands on: when that moved in a way it
cannot build on, or HEAD is no longer on it, the commit is kept on ``gep/<event>`` and the reason says so."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from git_scenario import agent_edit, commit_clone, git, make_repo, user_edits

from gep.git import deliver, open_clone, open_repo


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = make_repo(tmp_path / "ws")
    git(path, "tag", "-a", "-m", "release", "v1", "HEAD~1")
    git(path, "branch", "feature", "HEAD~1")
    (path / "wip.txt").write_text("stashed work\n")
    git(path, "stash", "push", "-q", "-u", "-m", "my older stash")
    (path / "README.md").write_text("hello\nstashed edit\n")
    git(path, "stash", "push", "-q", "-m", "my newer stash")
    user_edits(path)
    return path


def refs(ws: Path) -> str:
    return git(ws, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads", "refs/tags", "refs/replace",
               "refs/stash") + git(ws, "symbolic-ref", "HEAD") + git(ws, "stash", "list", "--format=%H %gs")


# what is done to the user's refs during the cycle -> where the commit goes ("landed" on main, or "kept")
MEANWHILE = {
    "checkout -b mywork + commit": ([["checkout", "-q", "-b", "mywork"], ["commit", "-q", "-m", "my work"]],
                                    "kept", "you switched from main to mywork during the cycle"),
    "branch -D main + gc --prune=now": ([["update-ref", "-d", "refs/heads/main"],
                                         ["reflog", "expire", "--expire=now", "--all"], ["gc", "-q", "--prune=now"]],
                                        "kept", "main no longer contains the cycle's baseline"),
    "commit --amend": ([["commit", "-q", "--amend", "-m", "reworded"]], "kept",
                       "main no longer contains the cycle's baseline"),
    "reset --soft HEAD~1": ([["reset", "-q", "--soft", "HEAD~1"]], "kept", "main no longer contains the cycle's baseline"),
    "branch -D feature": ([["branch", "-D", "feature"]], "landed", ""),
    "tag created": ([["tag", "mine", "HEAD"]], "landed", ""),
    "tag -f": ([["tag", "-f", "v1", "HEAD"]], "landed", ""),
    "refs/replace": ([["replace", "-f", "HEAD~1", "HEAD"]], "landed", ""),
    "stash drop": ([["stash", "drop", "-q", "stash@{1}"]], "landed", ""),
    "stash clear + gc": ([["stash", "clear"], ["gc", "-q", "--prune=now"]], "landed", ""),
    "new branch": ([["branch", "made-meanwhile", "HEAD~1"]], "landed", ""),
}


def _others(ws: Path) -> str:
    """Every ref but main, HEAD, and the stash list: what the engine must leave as it finds it."""
    return "".join(line + "\n" for line in refs(ws).splitlines()
                   if not line.startswith(("refs/heads/main ", "refs/heads/gep/")))


def _main(ws: Path) -> str:
    return subprocess.run(["git", "rev-parse", "-q", "--verify", "refs/heads/main"], cwd=ws, capture_output=True,
                          text=True).stdout.strip()


@pytest.mark.parametrize("op", list(MEANWHILE))
def test_what_is_done_to_the_users_refs_during_a_cycle_stays_as_it_was_done(ws: Path, op: str) -> None:
    repo = open_repo(ws)
    rec = open_clone(repo, "evt_1")
    agent_edit(rec.path)
    commit = commit_clone(repo, rec)
    steps, where, why = MEANWHILE[op]
    for args in steps:
        git(ws, *args)  # the user (or an agent) with git in the user's repository
    main, others = _main(ws), _others(ws)
    d = deliver(repo, rec, commit)
    assert d.status == where, d
    assert _others(ws) == others  # nothing deleted, moved or resurrected; the stash list as they left it
    assert not git(ws, "for-each-ref", "refs/gep/rescued/")
    if where == "kept":
        assert d.branch == "gep/evt_1" and git(ws, "rev-parse", "gep/evt_1").strip() == commit
        assert any(why in r for r in d.reasons), d.reasons
        assert _main(ws) == main  # not landed
    else:
        assert git(ws, "rev-parse", "main").strip() == commit
    assert subprocess.run(["git", "fsck", "--no-dangling"], cwd=ws, capture_output=True).returncode == 0


@pytest.mark.parametrize("op", ["commit", "stash push", "fetch"])
def test_what_the_user_does_meanwhile_is_not_tampering(ws: Path, tmp_path: Path, op: str) -> None:
    repo = open_repo(ws)
    rec = open_clone(repo, "evt_1")
    agent_edit(rec.path)
    commit = commit_clone(repo, rec)
    if op == "commit":
        git(ws, "commit", "-q", "-m", "the user commits their staged work")
    elif op == "stash push":
        git(ws, "stash", "push", "-q", "--", "README.md")
    else:
        other = tmp_path / "remote"
        git(tmp_path, "clone", "-q", str(ws), str(other))
        git(other, "commit", "-q", "--allow-empty", "-m", "remote work")
        git(ws, "fetch", "-q", str(other), "+refs/heads/main:refs/remotes/origin/main")
    d = deliver(repo, rec, commit)
    assert d.status in ("landed", "needs_revalidation"), d
