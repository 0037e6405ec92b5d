"""What a cycle has not read yet: the lines of logs, today's memory log and transcripts written since the
last change landed (issue 41, the plain engine reads what is new).

When a cycle's change lands in the workspace (committed, not kept on a branch of its own), the record stage
leaves read marks in the store (:data:`READ_MARKS_KEY`, gep/cycle/fixes.py ``mark_read``): when, and per file
its size up to its last complete line and a digest of its first bytes (``gep.core.records.FileMark``). The lines
written before describe the code before the change. Every later cycle feeds signal extraction (and the prompt's
log and transcript excerpts) only the lines past those marks: an error fixed and not logged again stops driving
repair; one still happening shows in the new lines of every run of the job; a cycle that changed nothing (its
change rolled back, an empty or failed attempt) leaves the marks where they were, so the error it did not fix
still drives the next one. A line is *read* when its file still starts with the same bytes and has only grown
since, and the line lies in the bytes the file had at the mark. A file that is new or was rewritten since
(rotated, truncated, copied over) is read whole, but for lines whose own timestamp (or, in a log, that of the
timestamped line they continue) is no later than the mark: a file renamed by a rotation does not bring its old
errors back. Before the first change (no marks) the tails are read as before. Only the texts handed to
extraction and the prompt change; what ``gep.signals.rules`` makes of a given text does not (seed 002).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pydantic import BaseModel, Field

from gep.core.records import FileMark
from gep.core.sanitize import redact
from gep.signals.sources import FileTail, SourceBundle, TailLine, head_digest, render_transcript

READ_MARKS_KEY = "read_marks"  # the store's state key


class ReadMarks(BaseModel):
    """Where the previous cycle stopped reading."""

    at: datetime
    files: list[FileMark] = Field(default_factory=list)


def marks_of(tails: Sequence[FileTail], at: datetime) -> ReadMarks:
    """The marks of what ``tails`` hold: each file's size when it was read, up to its last complete line."""
    files = []
    for t in tails:
        size = t.size if t.complete_to is None else t.complete_to  # a line still being written: read again
        files.append(FileMark(path=t.path, kind=t.kind, size=size, head=head_digest(t.head[:size])))
    return ReadMarks(at=at, files=files)


def _is_read(line: TailLine, tail: FileTail, mark: FileMark | None, previous: datetime) -> bool:
    if mark is not None and not tail.rewritten_since(mark):
        return line.start < mark.size
    return line.at is not None and line.at <= previous


def unread_lines(tails: Sequence[FileTail], marks: ReadMarks) -> dict[str, list[str]]:
    """Per file (shown path), its lines not read by the cycle that left ``marks`` (files with none left out)."""
    by_path = {m.path: m for m in marks.files}
    out: dict[str, list[str]] = {}
    for tail in tails:
        new = [line.text for line in tail.lines if not _is_read(line, tail, by_path.get(tail.path), marks.at)]
        if new:
            out[tail.path] = new
    return out


def unread_sources(bundle: SourceBundle, tails: Sequence[FileTail], marks: ReadMarks | None) -> SourceBundle:
    """``bundle`` (``collect_sources``) with its log and transcript texts cut to the lines written since
    ``marks`` (None: the first cycle, the bundle as it is). Memory and user snippets are kept whole."""
    if marks is None:
        return bundle
    new = unread_lines(tails, marks)
    logs: list[str] = []
    sessions: list[str] = []
    for tail in tails:
        lines = new.get(tail.path)
        if not lines:
            continue
        if tail.kind == "transcript":
            rendered = render_transcript("\n".join(lines))
            if rendered.strip():
                sessions.append(f"--- SESSION ({tail.path.rsplit('/', 1)[-1]}) ---\n{rendered}")
        elif tail.kind == "memory_log":
            logs.insert(0, "\n".join(lines))
        else:
            logs.append(f"--- LOG ({tail.path}) ---\n" + "\n".join(lines))
    transcript = bundle.recent_session_transcript if not any(t.kind == "transcript" for t in tails) \
        else "\n\n".join(sessions)
    return bundle.model_copy(update={"today_log": redact("\n".join(logs)),
                                     "recent_session_transcript": redact(transcript)})
