"""References are the user's: the engine records them at the start only to pin their objects for the
cycle's life (under ``refs/gep/pin/<event>/``: a ``gc --prune=now`` meanwhile cannot take the baseline). It
never compares them later to put anything back: what the user (or an agent's ``git -C``) does to branches,
tags and the stash during a cycle stays as it was done (issue 32). Delivery checks only the branch it lands
on (gep/git/delivery.py).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from gep.git.plumbing import Git
from gep.git.repo import Repo

ENGINE_NS = "refs/gep/"
FREE_NS = ("refs/remotes/", "refs/prefetch/")  # mirrors of other repositories: moving them loses nothing
STASH = "refs/stash"
PIN_MAX = 5000  # objects pinned per cycle at most (a repository with more refs pins its branches first)


class StashEntry(BaseModel):
    sha: str
    message: str


class RefRecord(BaseModel):
    head_ref: str | None  # what HEAD points at (refs/heads/main); None when detached
    head: str | None  # the commit HEAD resolved to
    refs: dict[str, str] = Field(default_factory=dict)  # every ref outside refs/gep/ -> object id
    stash: list[StashEntry] = Field(default_factory=list)  # newest first, as `git stash list`


def read_refs(g: Git) -> tuple[str | None, str | None, dict[str, str]]:
    head_ref = g.run("symbolic-ref", "-q", "HEAD", ok=True).line() or None
    head = g.sha("HEAD")
    refs: dict[str, str] = {}
    for line in g.run("for-each-ref", "--format=%(objectname) %(refname)").text.splitlines():
        sha, _, name = line.partition(" ")
        if name and not name.startswith(ENGINE_NS):
            refs[name] = sha
    return head_ref, head, refs


def read_stash(g: Git) -> list[StashEntry]:
    if g.sha(STASH) is None:
        return []
    res = g.run("log", "-g", "--no-abbrev", "--format=%H%x00%gs", STASH, "--", ok=True)
    out = []
    for line in res.text.splitlines():
        sha, _, msg = line.partition("\0")
        if sha:
            out.append(StashEntry(sha=sha, message=msg))
    return out


def record_refs(repo: Repo) -> RefRecord:
    g = repo.git()
    head_ref, head, refs = read_refs(g)
    return RefRecord(head_ref=head_ref, head=head, refs=refs, stash=read_stash(g))


def _pin_values(record: RefRecord) -> list[str]:
    first = [record.head or ""] + [s.sha for s in record.stash]
    first += [v for k, v in record.refs.items() if k.startswith("refs/heads/")]
    rest = [v for k, v in record.refs.items() if not k.startswith(("refs/heads/", *FREE_NS))]
    seen: dict[str, None] = {}
    for sha in first + rest:
        if sha:
            seen.setdefault(sha, None)
    return list(seen)[:PIN_MAX]


def pin(repo: Repo, event_id: str, record: RefRecord, extra: dict[str, str] | None = None) -> None:
    """Keep every recorded object reachable for the cycle's life (one ref transaction)."""
    lines = [f"update refs/gep/pin/{event_id}/{i} {sha}\n" for i, sha in enumerate(_pin_values(record))]
    lines += [f"update {ref} {sha}\n" for ref, sha in (extra or {}).items()]
    repo.git().run("update-ref", "--stdin", input="".join(lines).encode())


def unpin(repo: Repo, event_id: str) -> None:
    """Drop the cycle's pins (``refs/gep/pin/<event>/``, ``refs/gep/baseline/<event>``)."""
    g = repo.git()
    names = g.run("for-each-ref", "--format=%(refname)", f"refs/gep/pin/{event_id}/",
                  f"refs/gep/baseline/{event_id}").text.split()
    if names:
        g.run("update-ref", "--stdin", input="".join(f"delete {n}\n" for n in names).encode())


def is_descendant(g: Git, old: str, new: str) -> bool:
    return g.run("merge-base", "--is-ancestor", old, new, ok=True).code == 0
