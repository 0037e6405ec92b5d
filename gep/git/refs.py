"""References are the user's: record them all at the start, find what changed, put it back.

A change counts as tampering unless it is one of: the target branch (or a detached HEAD) moving forward to
a descendant (the user committing), a remote-tracking ref moving (``git fetch``, an editor's autofetch),
new stash entries pushed on top of the recorded ones (the user's ``git stash``; every recorded entry is
still there). Anything else (a deleted, created, rewound or rewritten branch or tag, a ``refs/replace``
entry, a dropped or cleared stash, HEAD switched) is restored from the record; the value found is kept
under ``refs/gep/rescued/<event>/<ref>`` so nothing is lost. Every recorded object is pinned under
``refs/gep/pin/<event>/`` for the cycle's life: ``gc --prune=now`` cannot take what a restore needs.
"""

from __future__ import annotations

from typing import Literal

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


class RefChange(BaseModel):
    ref: str
    old: str | None
    new: str | None
    kind: Literal["created", "deleted", "moved", "head", "stash"]
    note: str = ""

    def describe(self) -> str:
        def short(sha: str | None) -> str:
            return sha[:12] if sha else "nothing"

        what = {"created": f"{self.ref} created at {short(self.new)}",
                "deleted": f"{self.ref} deleted (was {short(self.old)})",
                "moved": f"{self.ref} moved from {short(self.old)} to {short(self.new)}",
                "head": f"HEAD changed from {self.old} to {self.new}",
                "stash": f"stash entries dropped ({self.old} -> {self.new})"}[self.kind]
        return what + (f"; {self.note}" if self.note else "")


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


def _stash_change(g: Git, record: RefRecord) -> RefChange | None:
    now = read_stash(g)
    old = [s.sha for s in record.stash]
    new = [s.sha for s in now]
    if new == old or (len(new) > len(old) and new[len(new) - len(old):] == old):
        return None  # unchanged, or the user pushed entries on top: every recorded entry is there
    return RefChange(ref=STASH, old=f"{len(old)} entries", new=f"{len(new)} entries", kind="stash")


def ref_changes(repo: Repo, record: RefRecord, target: str | None, own: set[str] = frozenset()) -> list[RefChange]:  # type: ignore[assignment]
    """What changed since ``record`` that is not allowed (see the module doc). ``target``: the branch a
    cycle delivers to (``refs/heads/main``), None for a detached HEAD. ``own``: refs this cycle created."""
    g = repo.git()
    head_ref, head, refs = read_refs(g)
    out: list[RefChange] = []
    for name in sorted(set(record.refs) | set(refs)):
        old, new = record.refs.get(name), refs.get(name)
        if old == new or name in own or name.startswith(FREE_NS) or name == STASH:
            continue
        if name == target and old and new and is_descendant(g, old, new):
            continue
        kind = "created" if old is None else "deleted" if new is None else "moved"
        out.append(RefChange(ref=name, old=old, new=new, kind=kind))
    if head_ref != record.head_ref:
        out.append(RefChange(ref="HEAD", old=record.head_ref or f"detached at {record.head}",
                             new=head_ref or f"detached at {head}", kind="head"))
    elif head_ref is None and head != record.head:
        if not (record.head and head and target is None and is_descendant(g, record.head, head)):
            out.append(RefChange(ref="HEAD", old=f"detached at {record.head}", new=f"detached at {head}",
                                 kind="head"))
    stash = _stash_change(g, record)
    return out + ([stash] if stash else [])
