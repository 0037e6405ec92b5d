"""Lines that fit the terminal (80 columns when output is piped): prose wraps, a value too long is shortened
with "…" in its middle, and the full value is one command away (`--json`, or `show`)."""

from __future__ import annotations

import shutil
import textwrap

WIDTH = 80


def columns() -> int:
    """The terminal's width (COLUMNS when set), 80 when output is piped; never under 40."""
    return max(40, shutil.get_terminal_size((WIDTH, 24)).columns)


def wrap(text: str, indent: str = "  ", width: int | None = None) -> list[str]:
    """``text`` as lines of at most ``width`` (the terminal's) characters, the later ones indented; words
    longer than a line (an id, a path) are broken rather than left sticking out."""
    return textwrap.wrap(text, width=width or columns(), subsequent_indent=indent, break_on_hyphens=False) or [""]


def shorten(text: str, room: int) -> str:
    """``text`` in ``room`` characters: its middle elided, so that both its start and its end still show."""
    if len(text) <= room:
        return text
    keep = max(room - 1, 0)
    head = keep * 2 // 3
    return text[:head] + "…" + text[len(text) - (keep - head):]
