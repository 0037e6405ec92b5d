"""A fleet run here runs one validation per core at a time (gep/validation/slots.py): real validations in the
sandbox, from two threads of one process, as a fleet's cycles run them."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from gep.core.config import Settings
from gep.core.errors import ConfigError
from gep.core.models import ValidationReport
from gep.validation.runner import run_validation
from gep.validation.slots import SLOTS_ENV, cpus, slot_count

# prints when it started and ended: the two validations' intervals, from their own output
STAMPS = "import time; print('start', time.time()); time.sleep({s}); print('end', time.time())\n"


@pytest.mark.parametrize(("raw", "count"), [("", None), ("0", 0), ("1", 1), (" 3 ", 3)])
def test_the_setting(raw: str, count: int | None):
    assert slot_count({SLOTS_ENV: raw}) == (cpus() if count is None else count)
    assert cpus() >= 1


@pytest.mark.parametrize("raw", ["-1", "two", "1.5", "99999"])
def test_a_bad_setting_is_refused_in_one_line(raw: str):
    with pytest.raises(ConfigError, match=f"^GEP_VALIDATION_SLOTS='{raw}' is not a number of validations at once "
                                          r"\(0 for no limit, at most 1024\)$"):
        slot_count({SLOTS_ENV: raw})


def _intervals(tmp_path: Path, seconds: float) -> list[tuple[float, float]]:
    """Two validations started together from two threads: each one's (start, end), as the command printed."""
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "stamp.py").write_text(STAMPS.format(s=seconds))
    reports: list[ValidationReport] = []
    together = threading.Barrier(2)

    def validate(name: str) -> None:
        together.wait()
        reports.append(run_validation(commands=["python stamp.py"], cwd=tmp_path / name, settings=Settings(),
                                      gene_id="g", report_id=f"vr_{name}"))

    threads = [threading.Thread(target=validate, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out = []
    for rep in reports:
        assert rep.overall_ok, rep.results
        stamps = dict(line.split() for line in rep.results[0].stdout.split("\n") if line.strip())
        out.append((float(stamps["start"]), float(stamps["end"])))
    return sorted(out)


def test_one_slot_runs_the_validations_one_after_the_other(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(SLOTS_ENV, "1")
    (a_start, a_end), (b_start, _) = _intervals(tmp_path, 1.0)
    assert b_start >= a_end > a_start


def test_two_slots_run_them_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(SLOTS_ENV, "2")
    (_, a_end), (b_start, _) = _intervals(tmp_path, 3.0)
    assert b_start < a_end
