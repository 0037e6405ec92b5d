"""tests/heavy_first.py: the files it weighs exist (a renamed file would silently lose its place), and the
order follows the tests that will run."""

from __future__ import annotations

from pathlib import Path

from heavy_first import FIRST, WEIGHTS, weight

TESTS = Path(__file__).resolve().parent


def test_every_file_named_exists() -> None:
    assert [n for n in [*WEIGHTS, *FIRST] if not (TESTS / n).is_file()] == []


def test_make_check_weighs_a_file_by_its_quick_tests_alone() -> None:
    assert weight("test_e2e_prefect.py", e2e=False) == 0 < weight("test_e2e_prefect.py", e2e=True)
    assert weight("test_redaction_shapes.py", e2e=False) > weight("test_fleet.py", e2e=False)
    assert weight("no_such_file.py", e2e=True) == 0
