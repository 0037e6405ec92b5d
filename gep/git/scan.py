"""A work tree as a tree object, built through a temporary index (nobody's real index is touched).

``scan`` copies a seed index (stat data makes ``git add -A`` re-hash only what changed), adds everything
the current rules do not ignore, then takes back out what the *baseline* rules ignore (a change cannot
un-ignore ``.env`` and get it committed). What cannot be part of a commit is listed, not added: nested
repositories and special files (FIFOs, sockets, devices).
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, Field

from gep.git.ignore import baseline_ignored, tree_paths, untracked
from gep.git.plumbing import LITERAL, Git, enc, z
from gep.git.repo import Repo


class Refused(BaseModel):
    path: str
    why: str


class Scan(BaseModel):
    tree: str  # what a commit of this work tree would hold
    ignored: list[str] = Field(default_factory=list)  # untracked files the baseline ignores (never committed)
    refused: list[Refused] = Field(default_factory=list)


def temp_dir(repo: Repo) -> Path:
    """``.gep/tmp``: engine scratch space on the repository's file system (removed by recovery)."""
    return repo.engine_dir("tmp")


def _special(root: Path, rel: str) -> str | None:
    if rel.endswith("/"):
        return "a nested git repository (not committed)"
    try:
        mode = os.lstat(root / rel).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode) or stat.S_ISLNK(mode):
        return None
    return "not a regular file (FIFO, socket or device; not committed)"


def _changed_tracked(g: Git) -> list[str]:
    """Tracked paths whose file changed (by stat data): a tracked file replaced by a FIFO is among them, and
    ``git add -A`` fails on it for the whole tree (issue 45, G06: every cycle in a person's tree failed)."""
    res = g.run("diff-files", "-z", "--name-only", ok=True)
    return list(dict.fromkeys(z(res.out))) if res.ok else []


def _not_ignored(g: Git, paths: set[str]) -> list[str]:
    """Which of ``paths`` exist and the current rules do not ignore: only those need keeping out of
    ``git add -A`` (naming an ignored path, even to exclude it, makes git add fail)."""
    present = sorted(p for p in paths if os.path.lexists(Path(g.cwd) / p))
    if not present:
        return []
    res = g.run("check-ignore", "-z", "--stdin", input=b"".join(enc(p) + b"\0" for p in present), ok=True)
    ignored = set(z(res.out)) if res.code in (0, 1) else set()
    return [p for p in present if p not in ignored]


def scan(repo: Repo, work_tree: Path, *, base_tree: str, seed_index: Path | None = None,
         skip: Iterable[str] = (), all_untracked: bool = True, baseline_rules: bool = True) -> Scan:
    """The committable tree of ``work_tree`` against ``base_tree`` (whose rules decide what is ignored).

    ``skip``: paths that are not part of any change (the engine's own links). ``all_untracked``: list every
    untracked file, ignored ones included (a clone, where every ignored file is the cycle's); False lists
    only files the current rules do not ignore (the user's tree, where ``.venv`` holds thousands).
    ``baseline_rules`` False: the current rules alone decide (taking the baseline itself)."""
    skip = set(skip)
    base_entries = tree_paths(repo.git(), base_tree)
    with tempfile.TemporaryDirectory(prefix="scan-", dir=temp_dir(repo)) as tmp:
        index = Path(tmp) / "index"
        g = Git(work_tree, git_dir=repo.git_dir, work_tree=work_tree, index=index, where=str(work_tree))
        if seed_index is not None and seed_index.is_file():
            # copy2 keeps the index's mtime: git re-reads a file modified in the same second as the index
            # was written ("racily clean"); a fresh mtime would make it trust the stat data of a same-size edit
            shutil.copy2(seed_index, index)
        else:
            g.run("read-tree", base_tree)
        found = [p for p in untracked(g, all_files=all_untracked, exclude=skip) if p not in skip]
        refused = [Refused(path=p, why=why) for p in [*found, *_changed_tracked(g)] if (why := _special(work_tree, p))]
        no = {r.path for r in refused}
        candidates = [p for p in found if p not in no] if baseline_rules else []
        ignored = sorted(p for p in baseline_ignored(repo, base_tree, candidates, base_entries)
                         if p not in base_entries)
        specs = [f":(exclude,literal){p}" for p in _not_ignored(g, {p.rstrip("/") for p in no | skip})]
        g.run("add", "-A", "--", ".", *specs)
        wanted = [p for p in found if p not in no and p not in ignored]
        if wanted:  # new files the change's own rules ignore but the baseline's do not: committed all the same
            g.run("add", "-f", "--pathspec-from-file=-", "--pathspec-file-nul",
                  input=b"".join(enc(p) + b"\0" for p in wanted), env=LITERAL)
        if ignored:  # added because the change un-ignored them: out again
            g.run("update-index", "-z", "--force-remove", "--stdin", input=b"".join(enc(p) + b"\0" for p in ignored))
        tree = g.out("write-tree")
    return Scan(tree=tree, ignored=ignored, refused=refused)
