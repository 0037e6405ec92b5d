"""Workspace tools the model edits through (anthropic mutator), confined to one workspace.

Every path a tool receives is checked before anything is read or written: absolute paths, ``..``
components and symlinks resolving outside the workspace are refused, and so is any path that touches a
forbidden path (the gene's forbidden paths, ``.git``, ``.gep`` and the protected files). A refusal is
reported back to the model as a tool error and counted; it never raises out of :meth:`WorkspaceTools.call`.

Forbidden paths match like .gitignore entries: a pattern without ``/`` matches that name at any depth
(``.git`` also forbids ``sub/.git``; a trailing ``/`` does not count), a pattern with a leading or inner
``/`` matches from the workspace root, and shell wildcards (``*``, ``?``, ``[``) are allowed.
Everything a tool returns passes through ``redact`` because it goes to the model, off the machine.
Only regular files are read (a FIFO or a device is refused, never waited on), files over 8 MB are not read
whole, and folders are walked iteratively to a depth cap (gep/core/safe_files.py): a 1,500-level tree is cut, with
a line saying so.
"""

from __future__ import annotations

import fnmatch
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from gep.core import constants
from gep.core.config import Settings
from gep.core.forbidden_paths import is_forbidden
from gep.core.models import ValidationReport
from gep.core.records import InputWarning
from gep.core.safe_files import Unreadable, read_capped, walk
from gep.core.safe_regex import UnsafePattern, compile_untrusted
from gep.core.sanitize import redact
from gep.validation.runner import run_validation
from gep.validation.sandbox import ChangeOrigin, Sandbox

if TYPE_CHECKING:
    from anthropic.types import ToolParam

# The engine's own state and git's: off limits whatever the request says.
ALWAYS_FORBIDDEN = (".git", ".gep")
# Folder levels a tool path may have: deeper, pathlib's recursive mkdir and resolve would hit Python's recursion
# limit (a 2,000-level path killed the mutator with RecursionError); walks stop at 48 levels anyway.
MAX_PATH_PARTS = 64
# Directories never worth listing or searching (noise, not secrets: they are still readable).
_NOISE_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"}


class ToolSpec(BaseModel):
    """One tool as the Messages API declares it (``input_schema`` is JSON Schema: a JSON edge)."""

    name: str
    description: str
    input_schema: dict[str, Any]  # JSON edge: a JSON Schema for the API

    def to_api(self) -> ToolParam:
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}


def _schema(props: dict[str, Any], required: list[str]) -> dict[str, Any]:  # JSON edge: JSON Schema
    return {"type": "object", "properties": props, "required": required}


_PATH = {"type": "string", "description": "Path relative to the workspace root, e.g. src/app.py"}

TOOL_SPECS: list[ToolSpec] = [
    ToolSpec(
        name="list_files",
        description="List files under a directory of the workspace (recursive, bounded). "
        "Forbidden paths are not listed.",
        input_schema=_schema({"path": {**_PATH, "description": "Directory relative to the workspace root; "
                                       "default: the root"}}, []),
    ),
    ToolSpec(
        name="read_file",
        description="Read a text file. Lines come back numbered as '<n>\\t<text>' (the number and tab are "
        "not part of the file). Use start_line/end_line (1-based, inclusive) for long files.",
        input_schema=_schema({"path": _PATH, "start_line": {"type": "integer", "minimum": 1},
                              "end_line": {"type": "integer", "minimum": 1}}, ["path"]),
    ),
    ToolSpec(
        name="search",
        description="Search file contents with a regular expression (RE2 syntax: no backreferences or lookarounds); returns 'path:line: text' hits "
        "(bounded). Optional path limits the search to a directory, glob to file names (e.g. *.py).",
        input_schema=_schema({"pattern": {"type": "string"}, "path": _PATH,
                              "glob": {"type": "string"}}, ["pattern"]),
    ),
    ToolSpec(
        name="write_file",
        description="Create or overwrite a file with the given content (parent directories are created).",
        input_schema=_schema({"path": _PATH, "content": {"type": "string"}}, ["path", "content"]),
    ),
    ToolSpec(
        name="edit_file",
        description="Replace old_text with new_text in a file. old_text must match exactly once "
        "(whitespace included, without read_file's line numbers); add surrounding lines to make it unique.",
        input_schema=_schema({"path": _PATH, "old_text": {"type": "string"}, "new_text": {"type": "string"}},
                             ["path", "old_text", "new_text"]),
    ),
    ToolSpec(
        name="run_validation",
        description="Run the gene's validation commands in the workspace (the same safe runner the engine "
        "uses before committing) and return their exit codes and output.",
        input_schema=_schema({}, []),
    ),
    ToolSpec(
        name="finish",
        description="End the session. summary: one line in the imperative mood, at most 72 characters "
        "(it becomes the commit subject). rationale: what changed, why, and how it was checked.",
        input_schema=_schema({"summary": {"type": "string"}, "rationale": {"type": "string"}},
                             ["summary", "rationale"]),
    ),
]

TOOL_NAMES = [t.name for t in TOOL_SPECS]


class ToolRefused(Exception):
    """A path outside the workspace or on a forbidden path: sent back to the model and counted."""


class ToolFailed(Exception):
    """An ordinary tool error (file missing, no unique match, bad regex): sent back to the model."""


class ToolOutcome(BaseModel):
    content: str
    is_error: bool = False
    refused: bool = False


class FinishReport(BaseModel):
    summary: str
    rationale: str = ""


def _number(lines: list[str], first: int) -> str:
    return "".join(f"{first + i}\t{line}" for i, line in enumerate(lines))


def _bounded(text: str, limit: int, what: str) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... {what} truncated at {limit} characters ...]"


class WorkspaceTools:
    """The tools of one mutation session. ``call`` never raises for anything the model sends."""

    def __init__(self, work_tree: Path, *, forbidden_paths: list[str], validation_commands: list[str],
                 settings: Settings, gene_id: str | None, cycle_id: str, origin: ChangeOrigin = "model") -> None:
        self.root = Path(work_tree).resolve()
        self.origin: ChangeOrigin = origin  # whose change the checks run on: the sandbox's policy
        self.forbidden = sorted({*forbidden_paths, *ALWAYS_FORBIDDEN})
        self.validation_commands = list(validation_commands)
        self.settings = settings
        self.gene_id = gene_id
        self.cycle_id = cycle_id
        self.calls = 0
        self.refusals = 0
        self.validations = 0
        self.changed: set[str] = set()
        self.finished: FinishReport | None = None

    # -------------------------------------------------------------- dispatch

    def call(self, name: str, args: Mapping[str, Any] | Any) -> ToolOutcome:
        self.calls += 1
        handler = getattr(self, f"_tool_{name}", None) if name in TOOL_NAMES else None
        if handler is None:
            return ToolOutcome(content=f"unknown tool '{name}'; available: {', '.join(TOOL_NAMES)}",
                               is_error=True)
        if not isinstance(args, Mapping):
            return ToolOutcome(content="tool input must be a JSON object", is_error=True)
        try:
            text = handler(args)
        except ToolRefused as exc:
            self.refusals += 1
            return ToolOutcome(content=redact(f"refused: {exc}"), is_error=True, refused=True)
        except ToolFailed as exc:
            return ToolOutcome(content=redact(str(exc)), is_error=True)
        except OSError as exc:
            return ToolOutcome(content=redact(f"{type(exc).__name__}: {exc.strerror or exc}"), is_error=True)
        except RecursionError:  # whatever the input nests, the session goes on
            return ToolOutcome(content=f"{name}: the input is nested too deep", is_error=True)
        return ToolOutcome(content=redact(text))

    # -------------------------------------------------------------- paths

    def resolve(self, raw: Any, *, default: str | None = None) -> tuple[Path, str]:
        """(absolute path, workspace-relative posix path) or ToolRefused."""
        if raw is None or raw == "":
            if default is None:
                raise ToolFailed("path is required")
            raw = default
        if not isinstance(raw, str):
            raise ToolFailed("path must be a string")
        if "\x00" in raw:
            raise ToolRefused("path contains a NUL byte")
        text = raw.replace("\\", "/")
        if text.startswith(("/", "~")) or re.match(r"^[A-Za-z]:", text) or Path(raw).is_absolute():
            raise ToolRefused(f"'{raw}' is absolute; use a path relative to the workspace root")
        parts = [p for p in text.split("/") if p not in ("", ".")]
        if len(parts) > MAX_PATH_PARTS:
            raise ToolFailed(f"path has {len(parts)} levels; at most {MAX_PATH_PARTS}")
        if ".." in parts:
            raise ToolRefused(f"'{raw}' contains '..'; paths must stay inside the workspace")
        lexical = "/".join(parts)
        target = self.root.joinpath(*parts)
        resolved = target.resolve()  # follows symlinks, also in parent directories
        try:
            real_rel = resolved.relative_to(self.root).as_posix()
        except ValueError:
            raise ToolRefused(f"'{raw}' resolves outside the workspace (symlink)") from None
        for rel in {lexical, real_rel} - {"", "."}:
            if is_forbidden(rel, self.forbidden):
                raise ToolRefused(f"'{raw}' is a forbidden path for this mutation")
        return target, lexical or "."

    def _rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def _walk(self, start: Path, skipped: list[InputWarning] | None = None) -> list[Path]:
        """Regular files under ``start`` (sorted, no symlinked directories, forbidden paths pruned, at most
        ``WALK_MAX_DEPTH`` levels down: where the walk stops is noted in ``skipped``)."""
        base = self._rel(start)

        def prune(rel: str) -> bool:
            return rel.rsplit("/", 1)[-1] in _NOISE_DIRS or is_forbidden(self._sub(base, rel), self.forbidden)

        out: list[Path] = []
        for entry in walk(start, prune=prune, warnings=skipped, root=self.root):
            if entry.is_dir or is_forbidden(self._sub(base, entry.rel), self.forbidden) or not self._inside(entry.path):
                continue
            try:
                if stat.S_ISREG(entry.path.stat().st_mode):  # a FIFO or a device: never listed, never read
                    out.append(entry.path)
            except OSError:
                continue
        return out

    @staticmethod
    def _sub(base: str, rel: str) -> str:
        return rel if base in ("", ".") else f"{base}/{rel}"

    def _inside(self, p: Path) -> bool:
        try:
            p.resolve().relative_to(self.root)
        except ValueError:
            return False
        return True

    def _read_text(self, path: Path) -> str:
        """A regular file in the workspace of at most ``TOOL_READ_MAX_FILE_BYTES``, decoded."""
        try:
            data = read_capped(path, constants.TOOL_READ_MAX_FILE_BYTES, within=self.root)
        except Unreadable as exc:
            raise ToolFailed(f"'{self._rel(path)}' not read: {exc.reason}") from None
        if b"\x00" in data[:8192]:
            raise ToolFailed(f"{path.name} is a binary file")
        return data.decode("utf-8", errors="replace")

    # -------------------------------------------------------------- tools

    def _tool_list_files(self, args: Mapping[str, Any]) -> str:
        target, rel = self.resolve(args.get("path"), default=".")
        if not target.is_dir():
            raise ToolFailed(f"'{rel}' is not a directory")
        skipped: list[InputWarning] = []
        files = self._walk(target, skipped)
        shown = [self._rel(p) for p in files[: constants.TOOL_LIST_MAX_ENTRIES]]
        notes = "".join(f"\n[{w}]" for w in skipped)
        if not shown:
            return f"(no files under '{rel}')" + notes
        more = len(files) - len(shown)
        tail = f"\n[... {more} more files; list a subdirectory ...]" if more > 0 else ""
        return "\n".join(shown) + tail + notes

    def _tool_read_file(self, args: Mapping[str, Any]) -> str:
        target, rel = self.resolve(args.get("path"))
        if not target.is_file():
            raise ToolFailed(f"'{rel}' does not exist or is not a file")
        # redacted whole, before a line range or the size cut (as in search, whose line numbers these match):
        # a range inside a PEM key shows body lines with no marker of their own, a cut splits a token
        lines = redact(self._read_text(target)).splitlines(keepends=True)
        start = _as_int(args.get("start_line"), 1, "start_line")
        end = _as_int(args.get("end_line"), len(lines), "end_line")
        if start < 1 or end < start:
            raise ToolFailed(f"bad line range {start}-{end}")
        if lines and start > len(lines):
            raise ToolFailed(f"'{rel}' has only {len(lines)} lines")
        body = _number(lines[start - 1:end], start)
        if not lines:
            return f"('{rel}' is empty)"
        return _bounded(body, constants.TOOL_READ_MAX_CHARS, f"{rel}; read a line range")

    def _tool_search(self, args: Mapping[str, Any]) -> str:
        pattern = args.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            raise ToolFailed("pattern is required")
        try:  # the model's pattern runs without backtracking: no pattern can hang the cycle
            rx = compile_untrusted(pattern)
        except UnsafePattern as exc:
            raise ToolFailed(f"pattern refused: {exc}") from None
        target, rel = self.resolve(args.get("path"), default=".")
        glob = args.get("glob")
        files = self._walk(target) if target.is_dir() else [target]
        hits: list[str] = []
        for p in files:
            if glob and not fnmatch.fnmatch(p.name, str(glob)) and not fnmatch.fnmatch(self._rel(p), str(glob)):
                continue
            try:
                if p.stat().st_size > constants.TOOL_SEARCH_MAX_FILE_BYTES:
                    continue
                # redacted whole, before lines are cut: a PEM body line holds no marker of its own, and a
                # pattern run on the clear text would tell the model what a secret holds
                text = redact(self._read_text(p))
            except (ToolFailed, OSError):
                continue
            for n, line in enumerate(text.splitlines(), 1):
                if rx.search(line):
                    hits.append(f"{self._rel(p)}:{n}: {line[: constants.TOOL_SEARCH_LINE_CHARS]}")
                    if len(hits) >= constants.TOOL_SEARCH_MAX_HITS:
                        return "\n".join(hits) + f"\n[... stopped at {len(hits)} hits; narrow the search ...]"
        return "\n".join(hits) if hits else f"no match for /{pattern}/ under '{rel}'"

    def _tool_write_file(self, args: Mapping[str, Any]) -> str:
        target, rel = self.resolve(args.get("path"))
        content = args.get("content")
        if not isinstance(content, str):
            raise ToolFailed("content must be a string")
        if len(content) > constants.TOOL_WRITE_MAX_CHARS:
            raise ToolFailed(f"content too large ({len(content)} > {constants.TOOL_WRITE_MAX_CHARS} characters)")
        if target.is_dir():
            raise ToolFailed(f"'{rel}' is a directory")
        existed = target.exists()
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        self.changed.add(rel)
        return f"{'overwrote' if existed else 'created'} {rel} ({len(content.splitlines())} lines)"

    def _tool_edit_file(self, args: Mapping[str, Any]) -> str:
        target, rel = self.resolve(args.get("path"))
        old, new = args.get("old_text"), args.get("new_text")
        if not isinstance(old, str) or not isinstance(new, str):
            raise ToolFailed("old_text and new_text must be strings")
        if not old:
            raise ToolFailed("old_text is empty; use write_file to create a file")
        if not target.is_file():
            raise ToolFailed(f"'{rel}' does not exist or is not a file")
        text = self._read_text(target)
        count = text.count(old)
        if count == 0:
            raise ToolFailed(f"old_text not found in {rel} (it must match exactly, whitespace included, "
                             "without line numbers)")
        if count > 1:
            raise ToolFailed(f"old_text matches {count} times in {rel}; include more surrounding lines")
        target.write_text(text.replace(old, new, 1), encoding="utf-8")
        self.changed.add(rel)
        return f"edited {rel} (-{len(old.splitlines())} +{len(new.splitlines())} lines)"

    def _tool_run_validation(self, args: Mapping[str, Any]) -> str:
        if not self.validation_commands:
            return "the gene declares no validation commands"
        self.validations += 1
        before = self._snapshot()
        try:
            report = run_validation(commands=self.validation_commands, cwd=self.root, settings=self.settings,
                                    gene_id=self.gene_id, report_id=f"vr_{self.cycle_id}_tool{self.validations}",
                                    sandbox=Sandbox.resolve(self.root, self.settings, origin=self.origin))
        finally:
            self._remove_new(before)
        return format_report(report, self.settings.output_cap_chars)

    def _snapshot(self) -> set[str]:
        """Every path in the workspace (outside .git and .gep), files and directories, down to the walk's
        depth cap. No entry cap: a cut that moved between two snapshots would make old files look new."""
        return {str(entry.path) for entry in walk(self.root, prune=lambda rel: rel in ALWAYS_FORBIDDEN,
                                                  max_entries=None, root=self.root)}

    def _remove_new(self, before: set[str]) -> None:
        """Drop what validation left behind (__pycache__, .pytest_cache, test output), so the model's
        checks never end up in the commit. Only paths that did not exist before the run are removed."""
        for path in sorted(self._snapshot() - before, key=len, reverse=True):
            p = Path(path)
            try:
                if p.is_dir() and not p.is_symlink():
                    p.rmdir()  # deepest first, so directories are empty by now
                else:
                    p.unlink()
            except OSError:
                pass

    def _tool_finish(self, args: Mapping[str, Any]) -> str:
        summary = args.get("summary")
        if not isinstance(summary, str) or not summary.strip():
            raise ToolFailed("summary is required (one line, at most 72 characters)")
        rationale = args.get("rationale")
        first = summary.strip().splitlines()[0].strip()
        self.finished = FinishReport(summary=redact(first)[:200],
                                     rationale=redact(rationale.strip() if isinstance(rationale, str) else ""))
        return "finished"


def _as_int(value: Any, default: int, name: str) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ToolFailed(f"{name} must be an integer")
    try:
        return int(value)
    except ValueError:
        raise ToolFailed(f"{name} must be an integer") from None


def format_report(report: ValidationReport, cap: int) -> str:
    """The validation report as the model reads it: verdict first, then each command's tail of output."""
    lines = [f"validation {'PASSED' if report.overall_ok else 'FAILED'}"]
    per_cmd = max(200, cap // max(1, len(report.results)))
    for r in report.results:
        if r.blocked_reason:
            lines.append(f"$ {r.cmd}\n  blocked: {r.blocked_reason}")
            continue
        state = "timed out" if r.timed_out else f"exit {r.exit_code}"
        out = (r.stdout + ("\n" if r.stdout and r.stderr else "") + r.stderr).strip()
        if len(out) > per_cmd:
            out = "[...]\n" + out[-per_cmd:]
        lines.append(f"$ {r.cmd}  ({state}, {'ok' if r.ok else 'failed'})" + (f"\n{out}" if out else ""))
    return "\n".join(lines)
