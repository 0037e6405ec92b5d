"""Where behavioural signals are kept: daily JSONL files in the workspace (seed 000), append-only.

``<workspace>/memory/growth/signals/YYYY-MM-DD.jsonl``: one :class:`~gep.signals.behavior.StoredSignal` per line (the
seed's five fields, then ``source`` and ``key``), validated before it is written; the day is the signal's UTC
date. A folder capture creates ignores itself in git (its ``.gitignore``: ``*``; delete it to track them). Files other tools write are read too: a line that is not a valid signal is skipped and counted. Each line gep writes
carries this machine's seal (``mac``, gep/core/machine_key.py): what reaches an agent (the session context, a
cycle's behavioural signals) reads only sealed lines, so a signals file the repository ships is never trusted.

``<workspace>/.gep/behavior/``: ``seen`` ("<key> <pass>" per exchange already read, pass ``rules`` or
``llm``), ``lock`` (``flock``: every writer holds it, so hooks and cycles never interleave), ``capture.log``.
An exchange is captured once however often it is read: its key is looked up in ``seen`` and in the day's
file (deleting ``.gep/`` does not duplicate what was written). At most :data:`~gep.signals.behavior.MAX_PER_DAY`
signals per day and source are written; the rest are counted as capped.

Every file here is read and appended to through :mod:`gep.core.safe_files`: a FIFO, a device or a symlink out of the
workspace in its place is skipped (named in the report's ``warnings``), never waited on or written through.

:func:`record` and :func:`read_signals` are what the cycle (and later the store) call.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from gep.core import constants
from gep.core.machine_key import seal, sealed
from gep.core.records import InputWarning
from gep.core.safe_files import (
    Unreadable,
    append_regular,
    flock_within,
    glob_files,
    note,
    open_regular,
    read_text_capped,
)
from gep.core.sanitize import redact
from gep.signals.behavior import MAX_PER_DAY, Detected, StoredSignal, detect_session
from gep.signals.sources import SessionExchanges

SIGNALS_DIR = Path("memory") / "growth" / "signals"
STATE_DIR = Path(".gep") / "behavior"
LOG_MAX_BYTES = 64_000
Pass = Literal["rules", "llm"]


class Busy(Exception):
    """Another writer held the lock longer than the caller could wait."""


class RecordReport(BaseModel):
    offered: int = 0  # exchanges handed in
    new: int = 0  # exchanges not read before by this pass (now marked)
    written: list[StoredSignal] = Field(default_factory=list)
    capped: int = 0  # signals over the daily cap of their source, not written
    warnings: list[InputWarning] = Field(default_factory=list)  # files skipped (a FIFO, a device ...)


class ReadReport(BaseModel):
    signals: list[StoredSignal] = Field(default_factory=list)
    malformed: int = 0  # lines skipped: not JSON, or not a valid signal
    untrusted: int = 0  # signals skipped when only trusted ones were asked for: not sealed by this machine's gep
    files: int = 0
    warnings: list[InputWarning] = Field(default_factory=list)  # files skipped (a FIFO, a device ...)


def signals_dir(workspace: Path) -> Path:
    return Path(workspace) / SIGNALS_DIR


def state_dir(workspace: Path) -> Path:
    """``.gep/behavior/``, created when missing. A ``.gep/`` made here ignores itself (``.gitignore``: ``*``)
    so it never shows in the user's ``git status``."""
    gep = Path(workspace) / ".gep"
    if not gep.is_dir():
        gep.mkdir()
        (gep / ".gitignore").write_text("*\n", encoding="utf-8")
    out = Path(workspace) / STATE_DIR
    out.mkdir(exist_ok=True)
    return out


def log(workspace: Path, message: str, now: datetime) -> None:
    """One redacted line in ``.gep/behavior/capture.log`` (kept under 64 KB). Never raises."""
    try:
        path = state_dir(workspace) / "capture.log"
        if path.is_file() and not path.is_symlink() and path.stat().st_size > LOG_MAX_BYTES:
            with open_regular(path) as fh:
                fh.seek(-(LOG_MAX_BYTES // 2), os.SEEK_END)
                kept = fh.read(LOG_MAX_BYTES // 2)
            path.write_bytes(kept)
        line = f"{now.astimezone(UTC).isoformat(timespec='seconds')} {redact(' '.join(message.split()))}\n"
        append_regular(path, line.encode("utf-8"))
    except OSError:
        pass


@contextmanager
def locked(workspace: Path, timeout_s: float) -> Iterator[None]:
    """Hold ``.gep/behavior/lock``; :class:`Busy` when it cannot be had within ``timeout_s``."""
    fd = os.open(state_dir(workspace) / "lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
    try:
        if not flock_within(fd, timeout_s, 0.01):
            raise Busy(f"signals lock held by another writer for more than {timeout_s:g}s")
        yield
    finally:
        os.close(fd)  # releases the lock


def seen(workspace: Path, pass_: Pass, warnings: list[InputWarning] | None = None) -> set[str]:
    """Keys of the exchanges ``pass_`` has read (none when ``seen`` is missing or unreadable: the day files'
    keys still keep a signal from being written twice)."""
    path = Path(workspace) / STATE_DIR / "seen"
    try:
        lines = read_text_capped(path, constants.BEHAVIOR_SEEN_MAX_BYTES, within=Path(workspace),
                                 errors="replace").splitlines()
    except FileNotFoundError:
        return set()
    except Unreadable as exc:
        note(warnings, exc.warning(Path(workspace)))
        return set()
    return {parts[0] for parts in (line.split() for line in lines) if len(parts) == 2 and parts[1] == pass_}


def _day_file(workspace: Path, day: date) -> Path:
    return signals_dir(workspace) / f"{day.isoformat()}.jsonl"


def _parse(line: str) -> StoredSignal | None:
    try:
        data = json.loads(line)
        return StoredSignal.model_validate(data) if isinstance(data, dict) else None
    except (ValueError, ValidationError):
        return None


def _read_file(path: Path, workspace: Path) -> tuple[list[StoredSignal], int]:
    """(signals, lines that are none) of a day's file; :class:`gep.core.safe_files.Unreadable` when it is no regular
    file in the workspace of at most ``SIGNALS_FILE_MAX_BYTES``."""
    good: list[StoredSignal] = []
    bad = 0
    try:
        text = read_text_capped(path, constants.SIGNALS_FILE_MAX_BYTES, within=workspace, errors="replace")
    except FileNotFoundError:
        return good, 0
    for line in text.splitlines():
        if line.strip():
            sig = _parse(line)
            if sig is None:
                bad += 1
            else:
                good.append(sig)
    return good, bad


def _new_folder(folder: Path) -> None:
    """The signals folder, created ignoring itself (``.gitignore``: ``*``) so capture leaves the user's
    ``git status`` clean; to track the signals, delete that file. A folder already there is left as it is."""
    if folder.is_dir():
        return
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ".gitignore").write_text("*\n", encoding="utf-8")


def _append(path: Path, lines: list[str], workspace: Path) -> None:
    """Append whole lines; a file another tool left without a final newline gets one first."""
    _new_folder(path.parent)
    prefix = ""
    try:
        with open_regular(path, within=workspace) as fh:
            size = os.fstat(fh.fileno()).st_size
            if size:
                fh.seek(size - 1)
                prefix = "" if fh.read(1) == b"\n" else "\n"
    except FileNotFoundError:
        pass
    append_regular(path, (prefix + "".join(line + "\n" for line in lines)).encode("utf-8"), within=workspace)


def _day_keys(workspace: Path, day: date, warnings: list[InputWarning]) -> tuple[Counter[str | None], set[str]] | None:
    """(signals per source, exchange keys) already in the day's file; None when it cannot be read (noted)."""
    try:
        existing, _bad = _read_file(_day_file(workspace, day), workspace)
    except Unreadable as exc:
        note(warnings, exc.warning(workspace))
        return None
    return Counter(s.source for s in existing), {s.key for s in existing if s.key}


def _write_days(workspace: Path, out: dict[date, list[str]], report: RecordReport) -> None:
    for day, lines in out.items():
        try:
            _append(_day_file(workspace, day), lines, workspace)
        except Unreadable as exc:  # replaced by a FIFO or a symlink since it was read
            note(report.warnings, exc.warning(workspace))
            report.written = [s for s in report.written if s.at.astimezone(UTC).date() != day]


def record(workspace: Path, detected: Sequence[Detected], *, pass_: Pass = "rules",
           timeout_s: float = 5.0) -> RecordReport:
    """Write the signals of the exchanges not captured before (by ``pass_``), at most MAX_PER_DAY per day and
    source, and mark every new exchange as read (also those with no signal). :class:`Busy` on lock timeout."""
    report = RecordReport(offered=len(detected))
    workspace = Path(workspace)
    with locked(workspace, timeout_s):
        done = seen(workspace, pass_, report.warnings)
        fresh = [d for d in {d.key: d for d in detected}.values() if d.key not in done]
        days: dict[date, tuple[Counter[str | None], set[str]] | None] = {}
        out: dict[date, list[str]] = {}
        for d in fresh:
            for sig in d.signals:
                day = sig.at.astimezone(UTC).date()
                if day not in days:
                    days[day] = _day_keys(workspace, day, report.warnings)
                known = days[day]
                if known is None:
                    continue  # the day's file is a FIFO, a device ...: nothing is written there
                counts, keys = known
                if d.key in keys:
                    continue  # written before .gep/ lost its index: not again
                if counts[d.source] >= MAX_PER_DAY:
                    report.capped += 1
                    continue
                stored = StoredSignal(**{**dict(sig), "source": d.source, "key": d.key})  # the signal, and where from
                stored.mac = seal(stored.sealed_body())  # gep wrote it: trusted as context (machine_key.py)
                counts[d.source] += 1
                out.setdefault(day, []).append(stored.model_dump_json(exclude_none=True))
                report.written.append(stored)
        _write_days(workspace, out, report)
        if fresh:  # after the signals: a crash in between re-reads the exchange, and the day's keys stop a copy
            try:
                append_regular(state_dir(workspace) / "seen", "".join(f"{d.key} {pass_}\n" for d in fresh).encode(),
                               within=workspace)
            except Unreadable as exc:
                note(report.warnings, exc.warning(workspace))
        report.new = len(fresh)
    return report


def read_signals(workspace: Path, *, day: date | None = None, type_: str | None = None,
                 since: datetime | None = None, trusted: bool = False) -> ReadReport:
    """The signals kept in the workspace (one day, or every day), oldest file first, optionally of one type
    or from ``since`` on. Lines that are not valid signals are counted in ``malformed``. ``trusted``: only the
    signals this machine's gep wrote (sealed, gep/core/machine_key.py), the others counted in ``untrusted``: a
    file the repository ships, or another tool wrote, never reaches an agent's context or a cycle."""
    workspace = Path(workspace)
    report = ReadReport()
    if day is not None:
        paths = [p for p in [_day_file(workspace, day)] if os.path.lexists(p)]
    else:
        paths = glob_files(signals_dir(workspace), "????-??-??.jsonl", warnings=report.warnings, root=workspace)
        if since is not None:  # a day's file holds that UTC day's signals: older days hold none from ``since`` on
            first = since.astimezone(UTC).date().isoformat()
            paths = [p for p in paths if p.stem >= first]
    for path in paths:
        try:
            good, bad = _read_file(path, workspace)
        except Unreadable as exc:
            note(report.warnings, exc.warning(workspace))
            continue
        report.files += 1
        report.malformed += bad
        wanted = [s for s in good if (type_ is None or s.type == type_) and (since is None or s.at >= since)]
        if trusted:
            kept = [s for s in wanted if sealed(s.sealed_body(), s.mac)]
            report.untrusted += len(wanted) - len(kept)
            wanted = kept
        report.signals += wanted
    return report


def capture_sessions(workspace: Path, sessions: Sequence[SessionExchanges], *, now: datetime,
                     timeout_s: float = 5.0) -> RecordReport:
    """Capture every exchange of the sessions a cycle read (``gep.signals.sources.collect_exchanges``): each is
    captured once, whether a hook already saw it or another cycle did."""
    detected = [d for s in sessions for d in detect_session(s, now=now)]
    return record(workspace, detected, timeout_s=timeout_s)
