"""Whether a path is one a gene forbids: the rule the model's tools and the cycle's checks share.

Patterns read like .gitignore lines: a bare name matches at any depth, a pattern with a slash is anchored
at the workspace's root, and a path under a matched folder is matched too.
"""

from __future__ import annotations

import fnmatch
from pathlib import PurePosixPath


def is_forbidden(rel: str, patterns: list[str]) -> bool:
    """Whether the workspace-relative posix path ``rel`` is, or lies under, a forbidden path."""
    parts = PurePosixPath(rel).parts
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    for raw in patterns:
        p = raw.strip().replace("\\", "/")
        while p.startswith("./"):
            p = p[2:]
        anchored = p.startswith("/") or "/" in p.strip("/")  # as in .gitignore
        p = p.strip("/")
        if not p:
            continue
        wild = any(ch in p for ch in "*?[")
        candidates = prefixes if anchored else parts
        if any((fnmatch.fnmatchcase(x, p) if wild else x == p) for x in candidates):
            return True
    return False
