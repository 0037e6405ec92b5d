"""tests/heavy_first.py: the files it starts first exist (a renamed file would silently lose its place)."""

from __future__ import annotations

from pathlib import Path

from heavy_first import HEAVY

TESTS = Path(__file__).resolve().parent


def test_every_file_named_exists_once() -> None:
    assert [n for n in HEAVY if not (TESTS / n).is_file()] == []
    assert len(set(HEAVY)) == len(HEAVY)
