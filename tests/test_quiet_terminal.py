"""`gep cycle` prints Prefect's INFO lines only with -v; the run's logs in the UI keep them (issue 31, point 6)."""

from __future__ import annotations

import os
import re
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


@pytest.mark.timeout(600)
def test_sigterm_stops_gep_serve_as_ctrl_c_does(live_prefect: LiveServer, example_ws: Path, tmp_path: Path):
    """Issue 31, point 8: SIGTERM stops `gep serve` cleanly, without "coroutine ... was never awaited"."""
    import signal
    import time

    from live_prefect import kill_group
    from prefect.exceptions import ObjectNotFound

    log = tmp_path / "serve.log"
    env = {**live_prefect.home_env, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    serving = live_prefect.spawn([str(BIN / "gep"), "serve"], cwd=example_ws, base=env, log=log)
    deadline = time.monotonic() + 240
    # the runner up: it has polled the server for its deployment's runs (waited on, not slept out: SIGTERM to
    # a runner not yet started takes another path, which never showed the bug)
    while True:
        assert serving.poll() is None and time.monotonic() < deadline, log.read_text()
        served = re.search(r"and (evolution-cycle/\S+); Ctrl-C stops", log.read_text(errors="replace"))
        if served:
            with live_prefect.client() as client:
                try:
                    if client.read_deployment_by_name(served.group(1)).last_polled is not None:
                        break
                except ObjectNotFound:  # named in the log a moment before the runner stores it
                    pass
        time.sleep(0.2)
    serving.send_signal(signal.SIGTERM)
    try:
        code = serving.wait(60)
    finally:
        kill_group(serving, grace_s=0)
    text = log.read_text(errors="replace")
    assert "never awaited" not in text and "Traceback" not in text, text
    assert code == 0, text
