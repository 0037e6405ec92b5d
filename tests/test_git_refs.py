"""References are the user's (gep/git/refs.py, refs_restore.py, delivery.py): what an agent does to the
user's repository with ``git -C <user repo>`` during a cycle is found before delivering, refused and undone,
with the value it found kept under refs/gep/rescued/; what the user does (commit, stash, fetch) is not."""

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


TAMPER = {
    "branch -D main + gc --prune=now": [["update-ref", "-d", "refs/heads/main"],
                                        ["reflog", "expire", "--expire=now", "--all"], ["gc", "-q", "--prune=now"]],
    "branch -D feature": [["branch", "-D", "feature"]],
    "tag -f": [["tag", "-f", "v1", "HEAD"]],
    "refs/replace": [["replace", "-f", "HEAD~1", "HEAD"]],
    "checkout -b": [["checkout", "-q", "-b", "agent-branch"]],
    "reset --soft HEAD~1": [["reset", "-q", "--soft", "HEAD~1"]],
    "stash clear + gc": [["stash", "clear"], ["gc", "-q", "--prune=now"]],
    "stash drop": [["stash", "drop", "-q", "stash@{1}"]],
    "new branch": [["branch", "agent-made", "HEAD~1"]],
}


@pytest.mark.parametrize("op", list(TAMPER))
def test_tampering_with_the_user_refs_is_refused_and_undone(ws: Path, op: str) -> None:
    before = refs(ws)
    stash_commits = git(ws, "stash", "list", "--format=%H").split()
    repo = open_repo(ws)
    rec = open_clone(repo, "evt_1")
    agent_edit(rec.path)
    commit = commit_clone(repo, rec)
    for args in TAMPER[op]:
        git(ws, *args)  # the agent, with `git -C <user repo>`
    assert refs(ws) != before
    d = deliver(repo, rec, commit)
    assert d.status == "refused", d
    assert d.reasons and all(r.startswith("references changed during the cycle") for r in d.reasons)
    assert refs(ws) == before  # every ref, HEAD and the whole stash list back
    for sha in stash_commits:  # the stashes' contents survived gc (pinned for the cycle's life)
        assert git(ws, "cat-file", "-t", sha).strip() == "commit"
    rescued = git(ws, "for-each-ref", "--format=%(refname)", "refs/gep/rescued/evt_1/")
    # any value found in place of a recorded one is kept (reflog expire --all also emptied the stash list)
    deleted_only = op in ("branch -D feature", "stash clear + gc")
    assert bool(rescued) != deleted_only, rescued
    assert subprocess.run(["git", "fsck", "--no-dangling"], cwd=ws, capture_output=True).returncode == 0
    assert git(ws, "rev-parse", "main").strip() == rec.baseline  # nothing landed


def test_head_switched_to_another_commit_is_reported_not_forced_back(ws: Path) -> None:
    repo = open_repo(ws)
    rec = open_clone(repo, "evt_1")
    agent_edit(rec.path)
    commit = commit_clone(repo, rec)
    git(ws, "stash", "push", "-q")  # the user's edits out of the way so the checkout can run
    git(ws, "checkout", "-q", "feature")
    d = deliver(repo, rec, commit)
    assert d.status == "refused"
    assert any("HEAD: left where it is" in r for r in d.restored)
    assert git(ws, "symbolic-ref", "HEAD").strip() == "refs/heads/feature"  # the tree follows it: left
    assert git(ws, "status", "--porcelain", "--untracked-files=no") == ""


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
