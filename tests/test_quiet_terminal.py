"""`gep cycle` prints Prefect's INFO lines only with -v; the run's logs in the UI keep them (issue 31, point 6)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from live_prefect import BIN, LiveServer


@pytest.mark.timeout(600)
def test_cycle_is_quiet_by_default_and_verbose_with_v(live_prefect: LiveServer, example_ws: Path):
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    env = {**live_prefect.home_env, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "COLUMNS": "80"}
    env.pop("PREFECT_LOGGING_LEVEL", None)
    env.pop("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", None)
    quiet = live_prefect.run([str(BIN / "gep"), "cycle", "--mutator", "prompt"], cwd=example_ws, base=env,
                             timeout_s=180)
    assert quiet.returncode == 0, quiet.stderr
    assert len(quiet.stderr.splitlines()) <= 3 and "Flow run '" not in quiet.stderr, quiet.stderr
    run_id = next(ln for ln in quiet.stdout.splitlines() if "flow run:" in ln).rsplit("/", 1)[1]
    with live_prefect.client() as client:  # the UI's logs of the run keep the INFO lines
        logs = client.read_logs(LogFilter(flow_run_id=LogFilterFlowRunId(any_=[run_id])))
    assert any(log.level == 20 for log in logs), [(log.level, log.message) for log in logs]
    loud = live_prefect.run([str(BIN / "gep"), "cycle", "-v", "--mutator", "prompt", "--abandon-pending"],
                            cwd=example_ws, base=env, timeout_s=180)
    assert loud.returncode == 0, loud.stderr
    assert "Flow run '" in loud.stderr and "INFO" in loud.stderr, loud.stderr
