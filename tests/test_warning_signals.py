"""``warning_signals`` (gep/signals/warning_lines.py): the skeptic's baseline chases every new warning line."""

from __future__ import annotations

from datetime import UTC
from pathlib import Path

import pytest
from learning_helpers import LOG, REPAIR, agent_workspace, committed_fix, later, venv_first

from gep import CycleRequest, run_cycle
from gep.core.config import load_settings
from gep.signals.warning_lines import warning_signals, with_warning_signals

pytestmark = pytest.mark.timeout(300)

WARN = "WARNING app.users: average_order returned no result"


def test_each_distinct_warning_line_becomes_a_problem_signal_after_the_others() -> None:
    text = "\n".join([
        f"2026-12-01T10:00:00Z {WARN}", "2026-12-01T10:00:01Z WARNING app.job: request took 6.2s",
        "2026-12-01T10:00:02Z INFO app.job: job finished in 3.1s", "2026-12-01T11:00:00Z WARNING app.job: request took 3.9s",
        '{"ts": "2026-12-01T11:00:03Z", "level": "warning", "logger": "app.ingest", "msg": "format_item returned no result"}'])
    got = warning_signals(text)
    assert len(got) == 3 and all(s.startswith("errsig:") for s in got), got  # 6.2s and 3.9s: one warning
    assert got[0].endswith("format_item returned no result\"}") and "3.9s" in got[1] and got[2].endswith(WARN)
    signals = with_warning_signals(["log_error", "errsig:ERROR app.x: KeyError: 'a'", "stable_success_plateau"], text)
    assert signals[:2] == ["log_error", "errsig:ERROR app.x: KeyError: 'a'"] and "stable_success_plateau" not in signals
    assert with_warning_signals(["errsig:" + got[0].removeprefix("errsig:")], text).count(got[0]) == 1
    assert warning_signals("INFO all good\nERROR app: KeyError: 'a'") == []


def test_the_setting_is_off_by_default_and_read_from_the_environment() -> None:
    assert load_settings(env={}).warning_signals is False
    assert load_settings(env={"GEP_WARNING_SIGNALS": "1"}).warning_signals is True


@pytest.mark.parametrize("on", [False, True])
def test_with_learning_off_a_new_warning_line_drives_repair_only_with_the_setting(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, on: bool) -> None:
    venv_first(monkeypatch)
    ws = agent_workspace(tmp_path / "ws")
    committed_fix(ws)  # the error is fixed; the report then only warns
    at = later(2).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    with (ws / LOG).open("a") as fh:
        fh.write(f"{at} WARNING report: mean returned no result\n")
    env = {"GEP_LEARNING": "off", **({"GEP_WARNING_SIGNALS": "1"} if on else {})}
    nxt = run_cycle(CycleRequest(workspace=ws, seed=2, mutator="prompt"), env=env)
    assert nxt is not None
    chased = [s for s in nxt.signals if s.startswith("errsig:") and "mean returned no result" in s]
    assert bool(chased) is on, nxt.signals
    assert (nxt.genes_used == [REPAIR]) is on, (nxt.genes_used, nxt.signals)
