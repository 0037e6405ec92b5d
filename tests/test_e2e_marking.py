"""tests/e2e_reach.py: a test is marked ``e2e`` from what it uses, followed through the suite's helpers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from e2e_reach import reaches_e2e

GEP = Path(sys.executable).parent / "gep"


def _python(*args: str) -> None:
    subprocess.run([sys.executable, *args], check=False)


def _via_helper() -> None:
    _python("-c", "pass")


def _console_script() -> None:
    subprocess.run([str(GEP), "--help"], check=False)


GEP_STR = str(GEP)
BIN = GEP.parent


def _console_script_str() -> None:
    subprocess.run([GEP_STR, "--help"], check=False)


def _console_script_in_bin() -> None:
    subprocess.run([str(BIN / "gep"), "--help"], check=False)


def _git_only(cwd: Path) -> None:
    subprocess.run(["git", "status"], cwd=cwd, check=False)


def _pure() -> int:
    return sum(range(3))


def _cycle() -> None:
    from gep.cycle.pipeline import run_cycle

    run_cycle  # noqa: B018 - the name is what is found


def _own_server(tmp: Path) -> None:
    from live_prefect import LiveServer

    LiveServer(tmp)


@pytest.mark.parametrize(("func", "e2e"), [
    (_python, True), (_via_helper, True), (_console_script, True), (_cycle, True), (_own_server, True),
    (_console_script_str, True), (_console_script_in_bin, True),
    (_git_only, False), (_pure, False),
])
def test_a_python_process_or_a_cycle_is_found_through_helpers(func: object, e2e: bool) -> None:
    assert reaches_e2e([func]) is e2e  # type: ignore[list-item]


def test_a_test_with_a_cli_subprocess_is_marked_e2e_and_a_unit_test_is_not(request: pytest.FixtureRequest) -> None:
    items = {item.name: item for item in request.session.items}
    marked = {name for name, item in items.items() if item.get_closest_marker("e2e")}
    cli = "test_gep_capture_never_fails_the_hook[args0-]"  # tests/test_capture.py: the console script
    if cli in items:  # when the whole suite (or that file) is collected
        assert cli in marked
    assert request.node.name not in marked


def test_the_postgresql_cases_and_a_test_with_its_own_server_are_marked(request: pytest.FixtureRequest) -> None:
    items = {item.nodeid.split("/")[-1]: item for item in request.session.items}
    for name in ("test_store_fleet.py::test_each_workspace_sees_only_its_own_rows[postgresql]",
                 "test_slot_restart.py::test_a_slot_held_across_a_server_restart_is_given_back_and_the_next_cycle_runs"):
        if name in items:  # when the whole suite (or that file) is collected
            assert items[name].get_closest_marker("e2e"), name
    # (test_store_prune's pruned-store case is marked e2e by hand, both backends: 1,600 cycles)
    sqlite = "test_store_fleet.py::test_each_workspace_sees_only_its_own_rows[sqlite]"
    if sqlite in items:
        assert not items[sqlite].get_closest_marker("e2e")
