"""The last context built for agent sessions, kept so a ``SessionStart`` hook answers within its time.

Building the context reads the store with pydantic's models (~0.4 s of imports on an idle machine); the hook
has 0.3 s. So each build keeps its answer in ``.gep/context/cache.json`` with the size and modification time
of every file it read (the SQLite store and its WAL, gep.toml, the behavioural signals' folder and files) and
the UTC day (preferences fade by day) and a digest of the ``GEP_*`` environment (``GEP_LEARNING=off`` and
other settings given that way change the answer; the digest keeps their values, a database URL say, out of
the file). The hook answers from the cache when none of these changed, with the
standard library only, and records the injection; otherwise it builds the context again. A store in
PostgreSQL (``database_url``) is never cached: its changes leave no file to stat. The cache is sealed with this
machine's key (gep/core/machine_key.py): one the repository ships, or written elsewhere, is never served.

Injection records are written here too (one writer for gep/learning/injections.py's file): the hook's fast path has
no pydantic.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from gep.core.machine_key import seal, sealed

CACHE = Path(".gep") / "context" / "cache.json"
LOG = Path(".gep") / "context" / "injections.jsonl"


def repository_top(path: Path) -> Path | None:
    """The top of the git repository ``path`` is in (a session may start in a sub-folder), or None."""
    for folder in (path, *path.parents):
        if (folder / ".git").exists():
            return folder
    return None


def hook_answer(text: str) -> str:
    """The JSON a ``SessionStart`` hook prints (empty when there is nothing to add)."""
    if not text:
        return ""
    return json.dumps({"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": text}},
                      ensure_ascii=False)


def answer_from_cache(workspace: Path, session: str, now: datetime) -> str | None:
    """The hook's answer from the cache, its injection recorded; None when the context must be built."""
    top = repository_top(workspace.resolve())
    if top is None:
        return ""
    hit = read(top, now.date().isoformat())
    if hit is None:
        return None
    append_injection(top, session=session, items=hit["items"], now=now)
    return hook_answer(hit["text"])


def _stat(path: str) -> list[int] | None:
    """A file's size and time; an empty file reads as none (an empty WAL, gep.toml or signals file says what
    a missing one says: SQLite deletes its checkpointed WAL when the last connection closes)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns] if st.st_size or stat.S_ISDIR(st.st_mode) else None


def fingerprint(paths: Sequence[str]) -> list[list[int] | None]:
    return [_stat(p) for p in paths]


def environment_digest() -> str:
    """A digest of the ``GEP_*`` variables settings are read from (gep/core/config.py)."""
    pairs = sorted((k, v) for k, v in os.environ.items() if k.startswith("GEP_"))
    return hashlib.sha256(json.dumps(pairs).encode("utf-8", "surrogateescape")).hexdigest()


def watched(folder: Path, files: Sequence[Path]) -> list[str]:
    """``files`` and ``folder`` itself (a new file in it changes the folder's time)."""
    return [str(folder), *(str(f) for f in files)]


def _body(data: dict[str, Any]) -> str:
    """What the seal covers: every field but the seal itself, in one canonical form."""
    return json.dumps({k: v for k, v in data.items() if k != "mac"}, sort_keys=True)


def read(workspace: Path, day: str) -> dict[str, Any] | None:
    """The cached answer (``text``, ``items``) when it is still the answer, else None. A cache this machine's
    engine did not write (no seal, or another's: a file the repository ships) is never the answer."""
    try:
        data = json.loads((Path(workspace) / CACHE).read_text(encoding="utf-8"))
        if not isinstance(data, dict) or not sealed(_body(data), data.get("mac")):
            return None
        paths = [str(p) for p in data["paths"]]
        if data["day"] != day or data.get("env") != environment_digest() or fingerprint(paths) != data["stamp"]:
            return None
        return {"text": str(data["text"]), "items": list(data["items"])}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write(workspace: Path, *, paths: Sequence[str], stamp: Sequence[list[int] | None], day: str, text: str,
          items: Sequence[dict[str, Any]]) -> None:
    """Keep an answer with the fingerprint its files had *before* it was built (a change made meanwhile
    then misses the cache instead of hiding behind it)."""
    path = Path(workspace) / CACHE
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        data: dict[str, Any] = {"paths": list(paths), "stamp": list(stamp), "day": day, "env": environment_digest(),
                                "text": text, "items": list(items)}
        mac = seal(_body(data))
        if mac is None:
            return  # no key on this machine: an unsealed cache would never be read
        data["mac"] = mac
        tmp.write_text(json.dumps(data), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass  # no cache: the next hook builds the context again


def append_injection(workspace: Path, *, session: str, items: Sequence[dict[str, Any]], now: datetime) -> str | None:
    """Record what a session received (gep/learning/injections.py reads it); the injection's id, None when nothing."""
    if not items:
        return None
    injection_id = f"inj_{int(now.timestamp() * 1000)}_{os.getpid()}"
    line = json.dumps({"type": "inject", "id": injection_id, "at": now.isoformat(), "session": session,
                       "items": [{"ref": i["ref"], "kind": i["kind"], "problems": list(i.get("problems", []))}
                                 for i in items]}, ensure_ascii=False) + "\n"
    path = Path(workspace) / LOG
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, line.encode("utf-8"))  # one write: concurrent hooks do not interleave their lines
    finally:
        os.close(fd)
    return injection_id
