"""This machine's key for what the engine wrote itself: files in a workspace are trusted as context only with
its seal (issue 45, point 2).

A repository can ship any file: a ``.gep/context/cache.json`` or a ``memory/growth/signals/<day>.jsonl`` committed
by someone else would otherwise be served to agents as what the workspace learned. So the engine seals what it
writes there with an HMAC-SHA256 under a key that lives outside every repository: ``$XDG_STATE_HOME/gep/machine.key``
(``~/.local/state/gep/machine.key`` by default), 32 random bytes made on first use, mode 0600 in a 0700 folder.
A file whose seal does not verify (shipped, copied from another machine, edited by hand) is not trusted: the
cache is rebuilt, the signal is not used. Without a home to keep the key in, nothing is sealed and nothing
sealed is trusted (the context is built from the store every time).

Standard library only: the ``SessionStart`` hook's fast path uses it (gep/learning/context_cache.py).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from functools import lru_cache
from pathlib import Path

KEY_BYTES = 32


def key_path() -> Path | None:
    """Where this machine's key is kept (None without a home or a state folder to keep it in)."""
    state = os.environ.get("XDG_STATE_HOME", "")
    if state and os.path.isabs(state):
        return Path(state) / "gep" / "machine.key"
    home = os.environ.get("HOME", "")
    return Path(home) / ".local" / "state" / "gep" / "machine.key" if home and os.path.isabs(home) else None


@lru_cache(maxsize=8)
def _key_at(path: str) -> bytes | None:
    """The key kept at ``path``, made there when missing; None when it can be neither read nor made."""
    target = Path(path)
    try:
        data = target.read_bytes()
        return data if len(data) >= KEY_BYTES else None
    except FileNotFoundError:
        pass
    except OSError:
        return None
    try:
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:  # another process made it meanwhile: theirs is the key
        return _read(target)
    except OSError:
        return None
    try:
        os.write(fd, secrets.token_bytes(KEY_BYTES))
    finally:
        os.close(fd)
    return _read(target)


def _read(path: Path) -> bytes | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return data if len(data) >= KEY_BYTES else None


def machine_key() -> bytes | None:
    path = key_path()
    return _key_at(str(path)) if path is not None else None


def seal(text: str) -> str | None:
    """The seal of ``text`` under this machine's key (None when there is no key)."""
    key = machine_key()
    if key is None:
        return None
    return hmac.new(key, text.encode("utf-8", "surrogateescape"), hashlib.sha256).hexdigest()


def sealed(text: str, mac: object) -> bool:
    """Whether ``mac`` is this machine's seal of ``text``."""
    if not isinstance(mac, str) or not mac:
        return False
    expected = seal(text)
    return expected is not None and hmac.compare_digest(expected, mac)
