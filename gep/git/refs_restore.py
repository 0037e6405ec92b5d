"""Putting tampered refs back from the record, keeping what was found under ``refs/gep/rescued/``.

Every update is a compare-and-swap against the value just read, so a ref someone moves again meanwhile is
left alone (and said so) rather than overwritten. HEAD is put back first (a branch it was switched to may be
deleted next), and only when that does not change the commit tree the user's index and files follow: a HEAD switched to another commit is reported, not undone
(undoing it would make the user's whole tree look modified).
"""

from __future__ import annotations

from gep.git.plumbing import Git
from gep.git.refs import STASH, RefChange, RefRecord, read_stash
from gep.git.repo import Repo


def rescue_ref(event_id: str, ref: str) -> str:
    return f"refs/gep/rescued/{event_id}/{ref}"


def _restore_one(g: Git, event_id: str, c: RefChange) -> str:
    if c.new:
        g.run("update-ref", rescue_ref(event_id, c.ref), c.new)
    if c.old is None:
        res = g.run("update-ref", "-d", c.ref, c.new or "", ok=True)
    else:
        res = g.run("update-ref", c.ref, c.old, c.new or "", ok=True)
    kept = f" (the value found is kept as {rescue_ref(event_id, c.ref)})" if c.new else ""
    if not res.ok:
        return f"{c.ref}: changed again meanwhile, left as it is{kept}"
    return f"{c.ref}: restored{kept}"


def _same_tree(g: Git, a: str | None, b: str | None) -> bool:
    return bool(a and b) and g.sha(f"{a}^{{tree}}") == g.sha(f"{b}^{{tree}}")


def _restore_head(g: Git, event_id: str, record: RefRecord) -> str:
    now = g.sha("HEAD")
    if now:
        g.run("update-ref", rescue_ref(event_id, "HEAD"), now)
    goal = record.refs.get(record.head_ref) if record.head_ref else record.head  # as it will be once restored
    if not _same_tree(g, now, goal):
        return ("HEAD: left where it is (your working tree follows it); it was "
                f"{record.head_ref or record.head} when the cycle started")
    if record.head_ref:
        g.run("symbolic-ref", "HEAD", record.head_ref)
    else:
        g.run("update-ref", "--no-deref", "HEAD", record.head or "")
    return f"HEAD: restored to {record.head_ref or record.head}"


def _restore_stash(g: Git, event_id: str, record: RefRecord) -> str:
    now = read_stash(g)
    current = g.sha(STASH)
    if current:
        g.run("update-ref", rescue_ref(event_id, STASH), current)
    recorded = {s.sha for s in record.stash}
    newer = [s for s in now if s.sha not in recorded]
    if current:
        g.run("update-ref", "-d", STASH)
    for entry in [*reversed(record.stash), *reversed(newer)]:  # oldest first, as they were pushed
        g.run("update-ref", "--create-reflog", "-m", entry.message, STASH, entry.sha)
    return f"{STASH}: the {len(record.stash)} recorded entries restored"


def restore_refs(repo: Repo, event_id: str, record: RefRecord, changes: list[RefChange]) -> list[str]:
    """Undo ``changes`` (from :func:`gep.git.refs.ref_changes`); one line per ref saying what was done."""
    g = repo.git()
    done = [_restore_head(g, event_id, record)] if any(c.kind == "head" for c in changes) else []
    done += [_restore_one(g, event_id, c) for c in changes if c.kind in ("created", "deleted", "moved")]
    if any(c.kind == "stash" for c in changes):
        done.append(_restore_stash(g, event_id, record))
    return done
