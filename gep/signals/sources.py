"""What a cycle reads from a workspace: bounded, redacted tails of logs, memory and transcripts.

Mapping onto the four texts of ``gep.signals.rules.extract_signals`` (the reference's inputs):

* ``recent_session_transcript``: agent session transcripts (``transcript_globs``, JSONL), newest file
  first, each rendered to lines such as ``**USER**: ...``, ``**ASSISTANT**: ... [TOOL: Bash]``,
  ``[TOOL RESULT] ...``, ``[TOOL ERROR] ...`` and ``[LLM ERROR] ...`` under a
  ``--- SESSION (<file>) ---`` header. Both OpenClaw sessions (``{"type": "message", "message":
  {"role", "content": [{"type": "text"|"toolCall"}], "errorMessage"}}``) and Claude Code sessions
  (``{"type": "user"|"assistant", "message": {"role", "content": [{"type": "text"|"tool_use"|
  "tool_result"}]}}``) are understood. No transcript file at all gives the reference's
  ``[NO SESSION LOGS FOUND]`` marker; files that render to nothing give "" (as the reference).
  Agents keep their sessions outside the workspace, so a transcript pattern (only those) may start
  with ``~/``, be absolute, or start with ``{claude_project}``: the directory where Claude Code keeps
  this workspace's sessions (``$CLAUDE_CONFIG_DIR`` or ``~/.claude``, then ``projects/`` and the
  workspace's absolute path with every character but ASCII letters and digits turned into ``-``).
  OpenClaw's are in ``~/.openclaw/agents/<agent>/sessions/*.jsonl``. Sessions of the engine's own
  agent (their first bytes hold the cycle prompt's title) are skipped, and so are sessions last
  written more than ``transcript_max_age_hours`` (24) before ``now``, as the reference's active
  window: only stale sessions give the missing marker.
* ``today_log``: today's memory log (``<memory_dir>/YYYY-MM-DD.md``, the date of the injected
  ``now`` in UTC, as the reference's ``toISOString``), then the tails of the log files
  (``log_globs``), newest first, each under a ``--- LOG (<path>) ---`` header.
* ``memory_snippet``: the tail of ``memory_file`` (MEMORY.md), or ``[MEMORY.md MISSING]``.
* ``user_snippet``: the tail of ``user_file`` (USER.md), or ``[USER.md MISSING]``.

Every file is read as a bounded tail: the reader seeks to ``size - cap`` and reads at most ``cap``
bytes, so a 2 GB log costs what a 2 MB one does. Only regular files are read, and folders are walked
iteratively to a depth cap (gep/core/safe_files.py): a FIFO, a device, a symlink out of the folder or a tree too deep
is skipped and named in ``SourceBundle.warnings``. Bytes are decoded as UTF-8 with replacement
(binary content never raises), a tail that starts mid-line drops that partial line, and every
returned text has passed through ``gep.core.sanitize.redact``. Nothing under ``.git/`` or ``.gep/`` is
read, nor anything a log or memory glob or symlink would reach outside the workspace; a transcript
pattern's files stay inside the directory the pattern names.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from gep.core.config import Settings
from gep.core.records import FileMark as FileMark
from gep.core.records import InputWarning, SourceFile, SourceKind
from gep.core.safe_files import Unreadable, check_regular, glob_files, note, open_regular, shown
from gep.core.sanitize import REDACTED, redact

_SKIP_DIRS = frozenset({".git", ".gep"})
_LINE_CLIP = 300
_RESULT_CLIP = 200

NO_SESSION_LOGS = "[NO SESSION LOGS FOUND]"
# The title of the engine's own mutation prompt (gep/mutators/gep_prompt.py): a session that starts with it is the
# engine's agent at work (e.g. `claude -p` as agent_cmd) and is skipped, as the reference skips its own
# sessions, so a cycle never reads its previous prompt back as signals.
ENGINE_PROMPT_MARKER = "Genome Evolution Protocol, mutation executor"
_HEAD_BYTES = 32_000
MEMORY_MISSING = "[MEMORY.md MISSING]"
USER_MISSING = "[USER.md MISSING]"


class SourceBundle(BaseModel):
    """The texts handed to signal extraction and the prompt, plus what was read to make them."""

    recent_session_transcript: str = ""
    today_log: str = ""
    memory_snippet: str = ""
    user_snippet: str = ""
    files: list[SourceFile] = Field(default_factory=list)
    warnings: list[InputWarning] = Field(default_factory=list)  # inputs skipped (see gep/core/safe_files.py)


# ---------------------------------------------------------------- bounded reading


@dataclass
class _Tail:
    text: str
    size: int
    bytes_read: int
    truncated: bool
    start: int = 0  # offset in the file of the first byte of ``text``


def _tail_bytes(path: Path, cap: int, within: Path | None = None) -> tuple[bytes, int, int, bool]:
    """(data, file size, offset of data in the file, truncated): at most ``cap`` bytes from the end, starting
    at a character boundary and, when truncated, at the next full line when there is one, and past the rest
    of a key block cut by the start. Only a regular file (inside ``within`` when given) is read: else
    :class:`gep.core.safe_files.Unreadable`."""
    cap = max(0, int(cap))
    with open_regular(path, within=within) as fh:
        size = os.fstat(fh.fileno()).st_size
        start = max(0, size - cap)
        fh.seek(start)
        data = fh.read(cap)
        truncated = start > 0
        offset = start
        if truncated:
            # Resume at a character boundary, then at the next full line when there is one.
            skip = 0
            while skip < min(3, len(data)) and 0x80 <= data[skip] <= 0xBF:
                skip += 1
            data = data[skip:]
            offset += skip
            newline = data.find(b"\n")
            if 0 <= newline < len(data) - 1:
                data = data[newline + 1 :]
                offset += newline + 1
            fh.seek(max(0, offset - _KEY_LOOKBACK))
            cut = _past_open_key(fh.read(min(offset, _KEY_LOOKBACK)), data)
            data, offset = data[cut:], offset + cut
    return data, size, offset, truncated


_KEY_LOOKBACK = 64 * 1024  # bytes read before a tail's start to see whether it starts inside a key block
_BEGIN, _END = b"-----BEGIN ", b"-----END "


def _past_open_key(before: bytes, data: bytes) -> int:
    """Where ``data`` (a tail) may start: past the rest of a key block (PEM, OpenSSH, PGP) that began
    before it. Its body lines carry no marker of their own, so redaction of the tail alone would miss them."""
    if before.rfind(_BEGIN) <= before.rfind(_END):
        return 0
    end = data.find(_END)
    if end < 0:
        return len(data)  # the whole tail lies inside the key
    newline = data.find(b"\n", end)
    return len(data) if newline < 0 else newline + 1


def read_tail(path: Path, cap: int, within: Path | None = None) -> _Tail:
    """At most ``cap`` bytes from the end of ``path`` (a regular file, see :func:`_tail_bytes`), decoded
    with replacement."""
    data, size, offset, truncated = _tail_bytes(path, cap, within)
    text = data.decode("utf-8", errors="replace").replace("\x00", "")
    return _Tail(text=text, size=size, bytes_read=min(max(0, int(cap)), size), truncated=truncated, start=offset)


def _in_skipped(path: Path, root: Path) -> bool:
    """Whether ``path`` (really) lies under the workspace's ``.git/`` or ``.gep/``."""
    try:
        rel = path.resolve().relative_to(root)
    except (OSError, ValueError, RuntimeError):
        return False
    return bool(_SKIP_DIRS & set(rel.parts))


def _regular(path: Path, within: Path, root: Path, warnings: list[InputWarning] | None) -> os.stat_result | None:
    """``path``'s stat when it is a regular file that stays inside ``within`` and out of ``.git/`` and
    ``.gep/``; else None, with a warning unless it is a folder or is gone. A name that is not UTF-8 costs that
    file only (it cannot be shown in a prompt, an event or a commit's trailer)."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        note(warnings, InputWarning(path=shown(path, root), reason="skipped: its name is not UTF-8"))
        return None
    try:
        if path.is_dir():
            return None
        st = check_regular(path, within=within)
    except Unreadable as exc:
        note(warnings, exc.warning(root))
        return None
    except (OSError, RuntimeError):  # gone meanwhile, a symlink loop
        return None
    if _in_skipped(path, root):
        note(warnings, InputWarning(path=shown(path, root), reason="skipped: a symlink into .git/ or .gep/"))
        return None
    return st


CLAUDE_PROJECT = "{claude_project}"
_GLOB_CHARS = frozenset("*?[")


def claude_project_dir(workspace: Path, env: Mapping[str, str] | None = None) -> Path:
    """Where Claude Code keeps the sessions it ran in ``workspace``."""
    env = os.environ if env is None else env
    config = Path(env["CLAUDE_CONFIG_DIR"]).expanduser() if env.get("CLAUDE_CONFIG_DIR") else Path.home() / ".claude"
    return config / "projects" / re.sub(r"[^A-Za-z0-9]", "-", str(Path(workspace).resolve()))


def _split_pattern(root: Path, pattern: str, outside: bool) -> tuple[Path, str, str] | None:
    """(base directory, glob relative to it, label shown for its files), or None for a refused pattern.

    Without ``outside`` only relative patterns (inside the workspace) are accepted."""
    if not pattern:
        return None
    label = ""
    if pattern.startswith(CLAUDE_PROJECT):
        if not outside:
            return None
        base, rest, label = claude_project_dir(root), pattern[len(CLAUDE_PROJECT):].lstrip("/"), CLAUDE_PROJECT
    elif pattern.startswith("~") or Path(pattern).is_absolute():
        if not outside:
            return None
        try:
            path = Path(pattern).expanduser()
        except RuntimeError:  # "~user" with no such user, or no home directory
            return None
        parts = path.parts
        cut = next((i for i, part in enumerate(parts) if _GLOB_CHARS & set(part)), len(parts) - 1)
        base, rest = Path(*parts[:cut]), "/".join(parts[cut:])
        if pattern.startswith("~/") and base.is_relative_to(Path.home()):
            label = "~/" + base.relative_to(Path.home()).as_posix()
    else:
        base, rest = root, pattern
    if not rest or ".." in Path(rest).parts:
        return None
    return base, rest, label


def _glob_newest(root: Path, patterns: list[str], limit: int, outside: bool = False,
                 warnings: list[InputWarning] | None = None) -> list[tuple[Path, os.stat_result, str]]:
    """Regular files matched by ``patterns``, newest first, at most ``limit``, each with its label. What a
    pattern matches but is not read (a FIFO, a device, a symlink out of the pattern's folder, a tree too deep)
    is noted in ``warnings``."""
    found: dict[Path, tuple[os.stat_result, str]] = {}
    for pattern in patterns:
        split = _split_pattern(root, pattern, outside)
        if split is None:
            continue
        base, rest, label = split
        try:
            if not base.is_dir():
                continue
            base = base.resolve()
        except (OSError, RuntimeError):
            continue
        for path in glob_files(base, rest, skip_names=_SKIP_DIRS, warnings=warnings, root=root):
            if path in found or _SKIP_DIRS & set(path.relative_to(base).parts):
                continue
            st = _regular(path, base, root, warnings)
            if st is None:
                continue
            label_path = _rel(path, root) if base == root else (
                f"{label}/{path.relative_to(base).as_posix()}" if label else redact(path.as_posix()))
            found[path] = (st, label_path)
    ordered = sorted(found.items(), key=lambda item: (-item[1][0].st_mtime, str(item[0])))
    return [(path, st, label_path) for path, (st, label_path) in ordered[: max(0, limit)]]


# ---------------------------------------------------------------- transcripts


def _flat(text: str, limit: int) -> str:
    return " ".join(part for part in text.replace("\r", "\n").split("\n") if part != "")[:limit]


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for item in value:
            if isinstance(item, dict) and item.get("type") == "text":
                parts.append(str(item.get("text", "")))
            elif isinstance(item, str):
                parts.append(item)
        return "\n".join(parts)
    return json.dumps(value, ensure_ascii=False) if value is not None else ""


def _tool_result_line(content: str, is_error: bool) -> str | None:
    if not is_error:
        if len(content) < 50 and ("success" in content or "done" in content):
            return None
        if content.strip() in ("", "{}"):
            return None
    preview = _flat(content, _RESULT_CLIP) + ("..." if len(content) > _RESULT_CLIP else "")
    return ("[TOOL ERROR] " if is_error else "[TOOL RESULT] ") + preview


def _openclaw_lines(data: dict[str, Any]) -> list[str]:  # JSON edge: a record of OpenClaw's transcript
    msg = data.get("message")
    if data.get("type") == "message" and isinstance(msg, dict) and msg.get("role") != "toolResult":
        role = str(msg.get("role") or "unknown").upper()
        content = msg.get("content")
        if isinstance(content, list):
            text = " ".join(
                str(c.get("text", ""))
                if c.get("type") == "text"
                else f"[TOOL: {c.get('name')}]"
                if c.get("type") == "toolCall"
                else ""
                for c in content
                if isinstance(c, dict)
            )
        elif isinstance(content, str):
            text = content
        else:
            text = json.dumps(content, ensure_ascii=False)
        error = msg.get("errorMessage")
        if error:
            err = error if isinstance(error, str) else json.dumps(error, ensure_ascii=False)
            text = "[LLM ERROR] " + _flat(err, _LINE_CLIP)
        if text.strip() == "HEARTBEAT_OK" or ("NO_REPLY" in text and not error):
            return []
        return [f"**{role}**: {_flat(text, _LINE_CLIP)}"]
    # Tool results: {"type": "tool_result", ...} or a message with role "toolResult".
    result = ""
    tool_result = data.get("tool_result")
    if isinstance(tool_result, dict):
        result = _as_text(tool_result.get("output")) if tool_result.get("output") else json.dumps(tool_result)
    if data.get("content"):
        result = _as_text(data["content"])
    elif isinstance(msg, dict) and msg.get("content"):
        result = _as_text(msg["content"])
    is_error = bool(data.get("is_error") or (isinstance(msg, dict) and msg.get("isError")))
    line = _tool_result_line(result, is_error)
    return [line] if line else []


def _claude_code_lines(data: dict[str, Any]) -> list[str]:  # JSON edge: a record of Claude Code's transcript
    msg = data.get("message")
    if not isinstance(msg, dict):
        return []
    role = str(msg.get("role") or data.get("type") or "unknown").upper()
    content = msg.get("content")
    if data.get("isApiErrorMessage"):
        return ["[LLM ERROR] " + _flat(_as_text(content), _LINE_CLIP)]
    if isinstance(content, str):
        return [f"**{role}**: {_flat(content, _LINE_CLIP)}"] if content.strip() else []
    if not isinstance(content, list):
        return []
    lines: list[str] = []
    words: list[str] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            words.append(str(block.get("text", "")))
        elif kind == "tool_use":
            words.append(f"[TOOL: {block.get('name')}]")
        elif kind == "tool_result":
            line = _tool_result_line(_as_text(block.get("content")), bool(block.get("is_error")))
            if line:
                lines.append(line)
    text = " ".join(w for w in words if w)
    if text.strip():
        lines.insert(0, f"**{role}**: {_flat(text, _LINE_CLIP)}")
    return lines


def render_transcript(jsonl: str) -> str:
    """Readable lines of an OpenClaw or Claude Code JSONL session (unparsable lines skipped)."""
    out: list[str] = []
    last, repeats = "", 0
    for raw in jsonl.split("\n"):
        if not raw.strip():
            continue
        try:  # a record that cannot be read (bad JSON, nested past the parser's depth ...) is left out
            data = json.loads(raw)
            if not isinstance(data, dict):
                continue
            entries = _claude_code_lines(data) if data.get("type") in ("user", "assistant") else _openclaw_lines(data)
        except (ValueError, TypeError, OverflowError, RecursionError):
            continue
        for entry in entries:
            if entry == last:
                repeats += 1
                continue
            if repeats:
                out.append(f"   ... [Repeated {repeats} times] ...")
                repeats = 0
            out.append(entry)
            last = entry
    if repeats:
        out.append(f"   ... [Repeated {repeats} times] ...")
    return "\n".join(out)


# ---------------------------------------------------------------- collection


def _rel(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def _read_tracked(path: Path, root: Path, cap: int, kind: SourceKind, files: list[SourceFile],
                  label: str | None = None, warnings: list[InputWarning] | None = None) -> str | None:
    """The bounded tail of ``path``, noted in ``files`` (as ``label``); None when it cannot be read (noted
    in ``warnings`` when it is no longer a regular file)."""
    try:
        tail = read_tail(path, cap)
        mtime = path.stat().st_mtime
    except Unreadable as exc:
        note(warnings, exc.warning(root))
        return None
    except OSError:
        return None
    files.append(SourceFile(path=label or _rel(path, root), kind=kind, size=tail.size, bytes_read=tail.bytes_read,
                            truncated=tail.truncated, mtime=mtime))
    return tail.text


def _engine_session(path: Path) -> bool:
    """Whether the session's first bytes hold the engine's own prompt."""
    try:
        with open_regular(path) as fh:
            return ENGINE_PROMPT_MARKER.encode() in fh.read(_HEAD_BYTES)
    except OSError:
        return False


def _single_path(root: Path, name: str, warnings: list[InputWarning] | None = None) -> Path | None:
    """``root/name`` when ``name`` is a relative path to a regular file in the workspace (not under
    ``.git/`` or ``.gep/``); a FIFO, a device or a symlink out is noted in ``warnings``."""
    if not name or Path(name).is_absolute() or ".." in Path(name).parts or _SKIP_DIRS & set(Path(name).parts):
        return None
    path = root / name
    return path if _regular(path, root, root, warnings) is not None else None


def _read_single(root: Path, name: str, cap: int, kind: SourceKind, files: list[SourceFile],
                 warnings: list[InputWarning]) -> str | None:
    path = _single_path(root, name, warnings)
    return None if path is None else _read_tracked(path, root, cap, kind, files, warnings=warnings)


def _sessions(root: Path, settings: Settings, now: datetime,
              warnings: list[InputWarning] | None = None) -> list[tuple[Path, os.stat_result, str]]:
    """The transcripts a cycle reads: newest first, recent enough, not the engine's own sessions."""
    sessions = _glob_newest(root, settings.transcript_globs, settings.max_source_files, outside=True,
                            warnings=warnings)
    if settings.transcript_max_age_hours > 0:
        oldest = now.timestamp() - settings.transcript_max_age_hours * 3600
        sessions = [item for item in sessions if item[1].st_mtime >= oldest]
    return [item for item in sessions if not _engine_session(item[0])]


def collect_sources(workspace: Path, settings: Settings, now: datetime | None = None) -> SourceBundle:
    """Read what ``settings`` points at in ``workspace`` (see the module docstring for the mapping)."""
    root = Path(workspace).resolve()
    now = now or datetime.now(UTC)
    files: list[SourceFile] = []
    warnings: list[InputWarning] = []

    # Transcripts, newest first (their patterns may point outside the workspace).
    sections = []
    sessions = _sessions(root, settings, now, warnings)
    for path, _st, label in sessions:
        text = _read_tracked(path, root, settings.transcript_tail_bytes, "transcript", files, label, warnings)
        rendered = render_transcript(text) if text is not None else ""
        if rendered.strip():
            sections.append(f"--- SESSION ({path.name}) ---\n{rendered}")
    # Sessions that render to nothing (heartbeats only, one record longer than the cap) are not missing.
    transcript = "\n\n".join(sections) if sessions else NO_SESSION_LOGS

    # Today's memory log, then the log files.
    day = now.astimezone(UTC).strftime("%Y-%m-%d")
    log_parts = []
    memory_log = _read_single(
        root, f"{settings.memory_dir}/{day}.md", settings.memory_tail_bytes, "memory_log", files, warnings
    )
    if memory_log:
        log_parts.append(memory_log)
    for path, _st, _label in _glob_newest(root, settings.log_globs, settings.max_source_files, warnings=warnings):
        text = _read_tracked(path, root, settings.log_tail_bytes, "log", files, warnings=warnings)
        if text and text.strip():
            log_parts.append(f"--- LOG ({_rel(path, root)}) ---\n{text}")

    memory = _read_single(root, settings.memory_file, settings.memory_tail_bytes, "memory", files, warnings)
    user = _read_single(root, settings.user_file, settings.user_tail_bytes, "user", files, warnings)

    return SourceBundle(
        recent_session_transcript=redact(transcript),
        today_log=redact("\n".join(log_parts)),
        memory_snippet=redact(memory) if memory is not None else MEMORY_MISSING,
        user_snippet=redact(user) if user is not None else USER_MISSING,
        files=files,
        warnings=warnings,
    )


# ---------------------------------------------------------------- timelines (for resolved errors)
#
# Which lines of the logs, today's memory log and the transcripts were written when: what gep/learning/resolved.py
# needs to tell an error seen before a fix was committed from a new occurrence. Read with the same caps and
# the same file choice as ``collect_sources``; nothing above changes.

_LEAD_TIME = re.compile(
    r"^\s*\[?(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}(?::\d{2}(?:[.,]\d{1,9})?)?)\s?(Z|UTC|[+-]\d{2}:?\d{2})?(?![\d:])")
_JSON_TIME = re.compile(r'"(?:timestamp|ts|time|@timestamp)"\s*:\s*"(\d{4}-\d{2}-\d{2})[T ]'
                        r'(\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?)(Z|[+-]\d{2}:?\d{2})?"')


def parse_line_time(line: str, *, json_record: bool = False) -> datetime | None:
    """The timestamp a log line starts with (``2026-11-21T09:14:03Z``, ``[2026-11-21 09:14:03,120]``, with an
    offset or without: then UTC), or a JSON record's ``"timestamp"`` (``ts``, ``time``, ``@timestamp``)
    field (a transcript's records, or a log line that is a JSON object); None when there is none."""
    json_record = json_record or line.lstrip().startswith("{")
    m = (_JSON_TIME if json_record else _LEAD_TIME).search(line[:400] if json_record else line[:64])
    if m is None:
        return None
    day, clock, zone = m.group(1), m.group(2).replace(",", "."), m.group(3) or ""
    if "." in clock:
        head, frac = clock.split(".", 1)
        clock = f"{head}.{(frac + '000000')[:6]}"
    zone = "+00:00" if zone in ("", "Z", "UTC") else (zone if ":" in zone else f"{zone[:3]}:{zone[3:]}")
    try:  # 9999-12-31T23:59:59-14:00 is valid but has no UTC time: OverflowError
        return datetime.fromisoformat(f"{day}T{clock}{zone}").astimezone(UTC)
    except (ValueError, OverflowError):
        return None


class TailLine(BaseModel):
    start: int  # byte offset of the line in its file
    at: datetime | None = None  # its own timestamp, or (in a log) that of the last timestamped line before it
    text: str  # redacted


class FileTail(BaseModel):
    """The bounded tail of one file, line by line."""

    path: str
    kind: SourceKind
    size: int
    lines: list[TailLine] = Field(default_factory=list)
    head: bytes = b""  # its first bytes (in memory only): compared with a mark's digest

    def rewritten_since(self, mark: FileMark) -> bool:
        """Whether the file is no longer the one marked grown: smaller now, or other first bytes."""
        if self.size < mark.size:
            return True
        return mark.head is not None and head_digest(self.head[:min(mark.size, HEAD_BYTES)]) != mark.head


HEAD_BYTES = 256


def head_digest(data: bytes) -> str:
    return hashlib.sha256(data[:HEAD_BYTES]).hexdigest()[:16]


def _read_head(path: Path, data: bytes, offset: int) -> bytes:
    """The first bytes of a file already read (its tail ``data`` from ``offset``), read again when needed."""
    if offset == 0:
        return data[:HEAD_BYTES]
    try:
        with open_regular(path) as fh:
            return fh.read(HEAD_BYTES)
    except (OSError, Unreadable):
        return b""


def _redacted_lines(raw: list[str]) -> list[str]:
    """Each line redacted as ``redact`` treats the whole text: a secret spanning lines (a key block) leaves
    none of its lines behind."""
    whole = redact("\n".join(raw)).split("\n")
    if len(whole) == len(raw):
        return whole
    per_line = [redact(x) for x in raw]
    keep: set[int] = set()
    for a, _b, n in difflib.SequenceMatcher(None, per_line, whole, autojunk=False).get_matching_blocks():
        keep.update(range(a, a + n))
    return [x if i in keep else REDACTED for i, x in enumerate(per_line)]


def _file_tail(path: Path, label: str, kind: SourceKind, cap: int, root: Path,
               warnings: list[InputWarning] | None) -> FileTail | None:
    try:
        data, size, offset, _truncated = _tail_bytes(path, cap)
    except Unreadable as exc:
        note(warnings, exc.warning(root))
        return None
    except OSError:
        return None
    starts, raw = [], []
    pos = 0
    for chunk in data.split(b"\n"):
        if chunk.strip():
            starts.append(offset + pos)
            raw.append(chunk.decode("utf-8", errors="replace").replace("\x00", "").rstrip("\r"))
        pos += len(chunk) + 1
    json_record, inherit = kind == "transcript", kind in ("log", "memory_log")
    lines: list[TailLine] = []
    last: datetime | None = None
    for start, text, red in zip(starts, raw, _redacted_lines(raw), strict=True):
        at = parse_line_time(text, json_record=json_record)
        if at is not None:
            last = at
        lines.append(TailLine(start=start, at=at if at is not None or not inherit else last, text=red))
    return FileTail(path=label, kind=kind, size=size, lines=lines, head=_read_head(path, data, offset))


def _timeline_files(root: Path, settings: Settings, now: datetime,
                    warnings: list[InputWarning] | None) -> list[tuple[Path, str, SourceKind, int]]:
    """(path, shown path, kind, cap) of the transcripts, today's memory log and the logs a cycle reads."""
    out: list[tuple[Path, str, SourceKind, int]] = [
        (path, label, "transcript", settings.transcript_tail_bytes)
        for path, _st, label in _sessions(root, settings, now, warnings)]
    day = now.astimezone(UTC).strftime("%Y-%m-%d")
    memory_log = _single_path(root, f"{settings.memory_dir}/{day}.md", warnings)
    if memory_log is not None:
        out.append((memory_log, _rel(memory_log, root), "memory_log", settings.memory_tail_bytes))
    for path, _st, _label in _glob_newest(root, settings.log_globs, settings.max_source_files, warnings=warnings):
        out.append((path, _rel(path, root), "log", settings.log_tail_bytes))
    return out


def collect_tails(workspace: Path, settings: Settings, now: datetime,
                  warnings: list[InputWarning] | None = None) -> list[FileTail]:
    """The files ``collect_sources`` reads for the transcript and log texts, line by line, with where each
    line starts in its file and when it was written (when the line says). Inputs skipped go to
    ``warnings`` (None: the log)."""
    root = Path(workspace).resolve()
    tails = [_file_tail(path, label, kind, cap, root, warnings)
             for path, label, kind, cap in _timeline_files(root, settings, now, warnings)]
    return [t for t in tails if t is not None]


def file_marks(workspace: Path, settings: Settings, now: datetime,
               warnings: list[InputWarning] | None = None) -> list[FileMark]:
    """The current size of each file ``collect_tails`` reads (taken when a fix is committed)."""
    root = Path(workspace).resolve()
    marks: list[FileMark] = []
    for path, label, kind, _cap in _timeline_files(root, settings, now, warnings):
        try:
            with open_regular(path) as fh:
                size = os.fstat(fh.fileno()).st_size
                head = fh.read(min(size, HEAD_BYTES))
            marks.append(FileMark(path=label, kind=kind, size=size, head=head_digest(head)))
        except (OSError, Unreadable):
            continue
    return marks

# ---------------------------------------------------------------- exchanges (user turns with the agent turn before)

AgentKind = Literal["claude_code", "openclaw"]
_AGENT_CLIP = 4000
# Claude Code writes these into user records itself (slash commands, their output, hook and system notes):
# they are not something the person typed to the agent.
_NOT_TYPED = ("<command-", "<local-command-", "<bash-", "<system-reminder>", "<user-prompt-submit-hook>",
              "[Request interrupted", "Caveat: The messages below", "<task-notification>")


class TranscriptExchange(BaseModel):
    """One user turn of a session transcript with the agent turn before it (for context)."""

    source: AgentKind
    session_id: str
    agent: str = ""  # the agent's text since the previous user turn ("" at the start of a session)
    agent_tools: list[str] = Field(default_factory=list)  # tools the agent called in that turn, in order
    user: str
    ts: datetime | None = None  # when the user turn was written, when the transcript says


class SessionExchanges(BaseModel):
    """A session's exchanges, oldest first, and the agent text written after the last user turn."""

    source: AgentKind
    session_id: str
    exchanges: list[TranscriptExchange] = Field(default_factory=list)
    pending_agent: str = ""
    pending_tools: list[str] = Field(default_factory=list)
    skipped_records: int = 0  # records that could not be parsed (bad JSON, a timestamp out of range ...)


class _Unparsable(ValueError):
    """A transcript record the engine cannot read: skipped and counted, never the cycle's failure."""


def _parse_ts(value: Any) -> datetime | None:
    """A record's time in UTC; None without one; :class:`_Unparsable` when it has one that is no time."""
    if value is None or value == "":
        return None
    try:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return datetime.fromtimestamp(value / 1000, UTC)  # OpenClaw: epoch milliseconds
        if isinstance(value, str):
            ts = datetime.fromisoformat(value.replace("Z", "+00:00"))
            return (ts if ts.tzinfo else ts.replace(tzinfo=UTC)).astimezone(UTC)
    except (ValueError, OverflowError, OSError):
        pass
    raise _Unparsable(f"timestamp {str(value)[:40]!r} is not a time")


def _blocks(content: Any, text_kind: str, tool_kind: str) -> tuple[str, list[str], bool]:
    """(text, tool names, only tool results) of a message's content."""
    if isinstance(content, str):
        return content, [], False
    if not isinstance(content, list):
        return "", [], False
    texts = [str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == text_kind]
    tools = [str(b.get("name")) for b in content if isinstance(b, dict) and b.get("type") == tool_kind]
    results = bool(content) and all(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
    return "\n".join(t for t in texts if t), tools, results


def _turn(data: dict[str, Any]) -> tuple[str, str, list[str], datetime | None] | None:  # JSON edge: a transcript record
    """(role, text, tools, ts) of one transcript record, or None when it is neither person nor agent."""
    msg = data.get("message")
    if not isinstance(msg, dict):
        return None
    if data.get("type") in ("user", "assistant"):  # Claude Code
        if data.get("isSidechain") or data.get("isMeta") or data.get("isCompactSummary") \
                or data.get("isApiErrorMessage"):
            return None
        text, tools, results = _blocks(msg.get("content"), "text", "tool_use")
        role = "agent" if data["type"] == "assistant" else "user"
        if role == "user" and (results or text.lstrip().startswith(_NOT_TYPED)):
            return None
        return role, text, tools, _parse_ts(data.get("timestamp"))
    if data.get("type") == "message" and msg.get("role") in ("user", "assistant"):  # OpenClaw
        text, tools, _ = _blocks(msg.get("content"), "text", "toolCall")
        if msg.get("errorMessage") or text.strip() == "HEARTBEAT_OK" or "NO_REPLY" in text:
            return None
        role = "agent" if msg["role"] == "assistant" else "user"
        return role, text, tools, _parse_ts(data.get("timestamp") or msg.get("timestamp"))
    return None


def transcript_exchanges(jsonl: str, session_id: str = "") -> SessionExchanges:
    """The user turns of an OpenClaw or Claude Code JSONL session, each with the agent turn before it.

    Unparsable lines are skipped. Tool results, slash-command records, subagent (sidechain) and meta records
    are not user turns. A session of the engine's own agent (its first user turn holds the cycle prompt's
    title) gives no exchanges. ``session_id`` is the fallback when the records name none."""
    source: AgentKind = "claude_code"
    out: list[TranscriptExchange] = []
    agent: list[str] = []
    tools: list[str] = []
    skipped = 0
    for raw in jsonl.split("\n"):
        try:  # any one record that cannot be read costs that record, never the cycle
            data = json.loads(raw) if raw.strip() else None
            turn = _turn(data) if isinstance(data, dict) else None
        except (ValueError, TypeError, OverflowError, RecursionError):  # _Unparsable is a ValueError
            skipped += 1
            continue
        if not isinstance(data, dict):
            continue
        if data.get("type") in ("session", "message"):
            source = "openclaw"
            if data.get("type") == "session" and isinstance(data.get("id"), str):
                session_id = data["id"]
        elif isinstance(data.get("sessionId"), str):
            session_id = data["sessionId"]
        if turn is None:
            continue
        role, text, names, ts = turn
        if role == "agent":
            agent.append(text)
            tools.extend(names)
            continue
        if not text.strip():
            continue
        if not out and ENGINE_PROMPT_MARKER in text:
            return SessionExchanges(source=source, session_id=session_id, skipped_records=skipped)
        out.append(TranscriptExchange(source=source, session_id=session_id, user=text, ts=ts,
                                      agent="\n".join(a for a in agent if a)[-_AGENT_CLIP:], agent_tools=tools))
        agent, tools = [], []
    for ex in out:  # the records name the session only as they go: the last name holds for all
        ex.session_id = session_id
    return SessionExchanges(source=source, session_id=session_id, exchanges=out, skipped_records=skipped,
                            pending_agent="\n".join(a for a in agent if a)[-_AGENT_CLIP:], pending_tools=tools)


SKIPPED_RECORDS = "records skipped: they cannot be parsed"  # a transcript's warning (gep/cycle/collect_behavior.py)


def is_engine_session(path: Path) -> bool:
    """Whether a session file is the engine's own agent at work (its first bytes hold the cycle prompt)."""
    return _engine_session(path)


def collect_exchanges(workspace: Path, settings: Settings, now: datetime,
                      warnings: list[InputWarning] | None = None) -> list[SessionExchanges]:
    """The exchanges of the sessions a cycle reads (``transcript_globs``, newest first, the same age window
    and bounded tails as :func:`collect_sources`). Texts are as written: redact before storing or sending.
    Inputs skipped go to ``warnings`` (None: the log)."""
    root = Path(workspace).resolve()
    out: list[SessionExchanges] = []
    for path, _st, _label in _sessions(root, settings, now, warnings):
        try:
            tail = read_tail(path, settings.transcript_tail_bytes)
        except Unreadable as exc:
            note(warnings, exc.warning(root))
            continue
        except OSError:
            continue
        parsed = transcript_exchanges(tail.text, session_id=path.stem)
        if parsed.skipped_records:
            note(warnings, InputWarning(path=shown(path, root), reason=f"{parsed.skipped_records} {SKIPPED_RECORDS}"))
        if tail.truncated:  # the first exchange's agent turn may have lost records before the cut
            parsed.exchanges = parsed.exchanges[1:]
        if parsed.exchanges:
            out.append(parsed)
    return out
