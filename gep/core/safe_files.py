"""Reading files other programs write, the one way the engine does it: never hangs, never explodes.

A workspace (and an agent's session folder) may hold anything: a FIFO named ``*.json`` (opening it for
reading waits for a writer, for ever), a symlink to ``/dev/zero`` (reads until memory runs out), a file of
many gigabytes, a directory 1,500 levels deep (a recursive walk or ``pathlib.glob("**")`` overflows
Python's stack), names with newlines. So:

* :func:`open_regular` opens only regular files: it checks the target (following symlinks) before
  opening, opens with ``O_NONBLOCK`` (a FIFO swapped in meanwhile cannot block) and checks the opened file
  again. With ``within``, a file that resolves outside that folder (a symlink out) is refused too.
  :func:`read_capped` reads a whole file up to a cap (a larger file is refused, not cut);
  :func:`append_regular` appends to a regular file only (never through a symlink, never to a FIFO).
  What is refused raises :class:`Unreadable` (an ``OSError``, so a caller that only expects I/O errors
  still survives it) carrying an :class:`~gep.core.records.InputWarning` for the cycle's record.
* :func:`walk` goes down a tree iteratively (an explicit stack), never into symlinked directories, at most
  ``WALK_MAX_DEPTH`` levels and ``WALK_MAX_ENTRIES`` entries, with a warning where it stops.
  :func:`glob_files` matches a glob pattern (``*``, ``?``, ``[...]``, ``**`` for any number of folders) on
  such a walk: the replacement of ``Path.glob``.

Symlink checks are made on resolved paths before opening: they keep honest mistakes and planted links out,
not a process racing the engine (the regular-file check, which keeps the engine from hanging, is made on
the opened file itself).
"""

from __future__ import annotations

import fcntl
import itertools
import logging
import os
import re
import stat
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, NamedTuple

from gep.core import constants
from gep.core.records import InputWarning
from gep.core.sanitize import redact

log = logging.getLogger(__name__)
_MORE = "..."

_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


def printable(text: object) -> str:
    """``text`` on one line: control characters (a newline in a file name) escaped."""
    s = str(text)
    return s if s.isprintable() else "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in s)


def shown(path: Path, root: Path | None) -> str:
    """How a path appears in a warning: relative to ``root`` when under it, else absolute and redacted (a
    home directory's user name), on one line."""
    if root is not None and path.is_relative_to(root):
        return printable(path.relative_to(root).as_posix() or ".")
    return printable(redact(str(path)))


class Unreadable(OSError):
    """A file the engine will not read: not a regular file, out of its folder, or over a cap."""

    def __init__(self, path: Path, reason: str):
        super().__init__(f"{printable(path)}: {reason}")
        self.path = Path(path)
        self.reason = reason

    def warning(self, root: Path | None = None) -> InputWarning:
        return InputWarning(path=shown(self.path, root), reason=f"skipped: {self.reason}")


def not_regular(mode: int) -> str:
    """What a non-regular file is, in words."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def note(sink: list[InputWarning] | None, warning: InputWarning) -> None:
    """Add ``warning`` to ``sink`` (None: the log), at most ``INPUT_WARNINGS_MAX`` of them: past the cap the
    last one counts the rest, so a folder of 10,000 FIFOs does not swamp the event."""
    if sink is None:
        log.warning("%s", warning)
        return
    if len(sink) < constants.INPUT_WARNINGS_MAX:
        sink.append(warning)
        return
    last = sink[-1]
    counted = int(last.reason.split()[0]) if last.path == _MORE else 1  # the cap-th warning joins the count
    sink[-1] = InputWarning(path=_MORE, reason=f"{counted + 1} more inputs skipped (not listed)")


def _inside(real: str, within: Path) -> bool:
    base = os.path.realpath(within)
    return real == base or real.startswith(base.rstrip("/") + "/")


def check_regular(path: Path, *, within: Path | None = None) -> os.stat_result:
    """``path``'s stat when it is a regular file (symlinks followed) inside ``within`` (when given); else
    :class:`Unreadable`. A missing file raises ``FileNotFoundError`` as usual."""
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise Unreadable(path, not_regular(st.st_mode))
    if within is not None and not _inside(os.path.realpath(path), within):
        raise Unreadable(path, "a symlink out of the folder it is in")
    return st


@contextmanager
def open_regular(path: Path, *, within: Path | None = None) -> Iterator[BinaryIO]:
    """``path`` opened for binary reading, if it is a regular file (see :func:`check_regular`)."""
    check_regular(path, within=within)
    # O_NONBLOCK: should a FIFO have replaced the file since the check, open returns instead of waiting
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise Unreadable(path, not_regular(mode))
        fh = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with fh:
        yield fh


def read_capped(path: Path, cap: int, *, within: Path | None = None) -> bytes:
    """The whole of a regular file of at most ``cap`` bytes; :class:`Unreadable` when it is larger."""
    with open_regular(path, within=within) as fh:
        if os.fstat(fh.fileno()).st_size > cap:
            raise Unreadable(path, f"larger than {cap:,} bytes")
        data = fh.read(cap + 1)  # the size may lie (a file growing, a /proc file): never more than this
    if len(data) > cap:
        raise Unreadable(path, f"larger than {cap:,} bytes")
    return data


def read_text_capped(path: Path, cap: int, *, within: Path | None = None, errors: str = "strict") -> str:
    """:func:`read_capped` decoded as UTF-8 (``UnicodeDecodeError`` with ``errors="strict"``)."""
    return read_capped(path, cap, within=within).decode("utf-8", errors=errors)


def append_regular(path: Path, data: bytes, *, within: Path | None = None) -> None:
    """Append ``data`` to ``path`` (created when missing), only ever to a regular file: never through a
    symlink (``O_NOFOLLOW``), never to a FIFO (which would wait for a reader) or a device, and (with
    ``within``) never in a folder that resolves outside ``within``."""
    if within is not None and not _inside(os.path.realpath(Path(path).parent), within):
        raise Unreadable(path, "in a folder that is a symlink out of the workspace")
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        if os.path.islink(path):
            raise Unreadable(path, "a symlink (not written through)") from None
        if os.path.exists(path) and not os.path.isfile(path):
            raise Unreadable(path, not_regular(os.stat(path).st_mode)) from None
        raise exc
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise Unreadable(path, not_regular(mode))
        os.write(fd, data)
    finally:
        os.close(fd)


# ---------------------------------------------------------------- walking


def flock_within(fd: int, timeout_s: float, poll_s: float) -> bool:
    """Take an exclusive ``flock`` on ``fd``, trying every ``poll_s`` for up to ``timeout_s``; False when
    another holder kept it that long (never waits forever on a lock another process forgot)."""
    deadline = time.monotonic() + max(0.0, timeout_s)
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(poll_s)


class Walked(NamedTuple):
    path: Path
    rel: str  # posix, relative to the top of the walk
    is_dir: bool  # a real directory (a symlink to one is not: it is listed, never entered)


Prune = Callable[[str], bool]


def walk(top: Path, *, prune: Prune | None = None, max_depth: int = constants.WALK_MAX_DEPTH,
         max_entries: int | None = constants.WALK_MAX_ENTRIES, warnings: list[InputWarning] | None = None,
         root: Path | None = None) -> Iterator[Walked]:
    """Every entry under ``top``, sorted by name, each directory's entries before those of its
    subdirectories (as ``os.walk`` top-down), without entering symlinked directories or those ``prune``
    (given the directory's ``rel``) rejects. Entries deeper than ``max_depth`` levels, or past
    ``max_entries`` (None: no limit), are not listed: one warning says where (paths shown relative to
    ``root``)."""
    stack: list[tuple[Path, str, int]] = [(Path(top), "", 0)]
    budget = sys.maxsize - 1 if max_entries is None else max_entries
    cut = False
    while stack:
        here, rel, depth = stack.pop()
        try:
            with os.scandir(here) as it:
                entries = sorted(itertools.islice(it, budget + 1), key=lambda e: e.name)
        except OSError as exc:
            if rel:  # the top missing is the caller's business; a folder below that cannot be listed is noted
                note(warnings, InputWarning(path=shown(here, root), reason=f"skipped: cannot list "
                                            f"({exc.strerror or type(exc).__name__})"))
            continue
        subdirs: list[tuple[Path, str, int]] = []
        for entry in entries:
            if budget <= 0:
                note(warnings, InputWarning(path=shown(here, root), reason=f"walk stopped: more than "
                                            f"{max_entries:,} entries"))
                return
            budget -= 1
            child = f"{rel}/{entry.name}" if rel else entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            if is_dir and prune is not None and prune(child):
                continue
            yield Walked(Path(entry.path), child, is_dir)
            if not is_dir:
                continue
            if depth + 1 >= max_depth:
                if not cut:
                    cut = True
                    note(warnings, InputWarning(path=shown(Path(entry.path), root),
                                                reason=f"skipped: deeper than {max_depth} folder levels"))
                continue
            subdirs.append((Path(entry.path), child, depth + 1))
        stack.extend(reversed(subdirs))


# ---------------------------------------------------------------- globbing

_GLOB_CHARS = frozenset("*?[")


def _segment_re(seg: str) -> str:
    """One path segment of a glob as a regular expression (``*``/``?`` never match ``/``)."""
    out, i = [], 0
    while i < len(seg):
        ch = seg[i]
        if ch == "*":
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[" and (end := seg.find("]", i + 2 if seg[i + 1:i + 2] in ("!", "]") else i + 1)) > 0:
            body = seg[i + 1:end]
            neg = body.startswith("!")
            body = body[1:] if neg else body
            out.append("[" + ("^" if neg else "") + re.sub(r"([\\\[^&~|])", r"\\\1", body) + "]")
            i = end
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A relative glob (``logs/**/*.log``) as a regex over posix paths: ``**`` is any number of folders
    (none included), ``*``, ``?`` and ``[...]`` stay within one name, hidden names match (as in pathlib)."""
    parts = [p for p in pattern.split("/") if p not in ("", ".")]
    out = []
    for i, seg in enumerate(parts):
        last = i == len(parts) - 1
        if seg == "**":
            out.append(".+" if last else "(?:[^/]+/)*")
        else:
            out.append(_segment_re(seg) + ("" if last else "/"))
    return re.compile("".join(out), re.DOTALL)


def _literal_prefix(pattern: str) -> tuple[list[str], list[str]]:
    """(leading names without wildcards, the rest) of a glob split on ``/``."""
    parts = [p for p in pattern.split("/") if p not in ("", ".")]
    cut = next((i for i, p in enumerate(parts) if _GLOB_CHARS & set(p)), len(parts))
    return parts[:cut], parts[cut:]


def glob_files(base: Path, pattern: str, *, skip_names: frozenset[str] = frozenset(),
               warnings: list[InputWarning] | None = None, root: Path | None = None) -> list[Path]:
    """Paths under ``base`` that ``pattern`` matches and are not real directories (files, FIFOs, symlinks:
    the caller decides what it reads), sorted; folders named in ``skip_names`` are not entered. Iterative and
    depth-capped (:func:`walk`), unlike ``Path.glob``."""
    literal, rest = _literal_prefix(pattern)
    top = base.joinpath(*literal)
    if skip_names & set(literal):
        return []
    if not rest:  # no wildcard: one path
        return [top] if os.path.lexists(top) and not (top.is_dir() and not top.is_symlink()) else []
    rx = glob_regex("/".join(rest))
    # folders at the levels before a ``**`` must match the pattern there; without ``**`` nothing lies deeper
    # than the pattern's last level
    levels = [re.compile(_segment_re(p), re.DOTALL) for p in itertools.takewhile(lambda p: p != "**", rest[:-1])]
    bounded = "**" not in rest

    def prune(rel: str) -> bool:
        names = rel.split("/")
        level = len(names) - 1
        if names[-1] in skip_names or (bounded and level >= len(rest) - 1):
            return True
        return level < len(levels) and levels[level].fullmatch(names[-1]) is None

    if not top.is_dir():
        return []
    return sorted(w.path for w in walk(top, prune=prune, warnings=warnings, root=root)
                  if not w.is_dir and rx.fullmatch(w.rel))
