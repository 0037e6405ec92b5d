"""The test files that take longest, in the order `make test` starts them (tests/conftest.py sorts by it).

pytest-xdist (``--dist loadfile --no-loadscope-reorder``) hands each worker the next file when it is nearly
done: the longest files started first leave short ones to even out the end, instead of one long file
starting last and running alone (tests/test_recovery.py did). Order from the test times of a whole
run (wall time per file, 2 workers, loaded machine); a file not named keeps its place after these."""

from __future__ import annotations

import pytest

# wall time per file, longest first (after this branch's cuts: test_recovery.py ~1/3 of before), except that the
# second worker starts on test_recovery.py, which needs no Prefect server: the first worker's server makes the
# session's migrated database meanwhile, which a second server would only wait for (tests/conftest.py)
HEAVY = [
    "test_e2e_prefect.py", "test_recovery.py", "test_e2e_fleet.py", "test_fleet_here.py", "test_slot_restart.py",
    "test_learning_commands.py", "test_flows.py", "test_confinement_cycles.py", "test_distill_scenario.py",
    "test_learning_flows.py", "test_cli.py", "test_learning_cycles.py", "test_solidify.py", "test_store_prune.py",
    "test_inputs_cycle.py", "test_serve.py", "test_bench_evolution.py", "test_isolation.py",
    "test_genepool_cycles.py", "test_demo.py", "test_report.py", "test_validation_view.py",
    "test_learning_switch.py", "test_agent_context.py", "test_attribution.py", "test_bench_scripts.py",
    "test_git_recovery.py", "test_fleet.py", "test_store_concurrency.py", "test_store_copy.py",
    "test_redaction_shapes.py", "test_empty_cycles.py", "test_hostile_workspace.py", "test_inputs_folders.py",
    "test_quiet_terminal.py", "test_constraints.py", "test_sandbox.py",
]
_RANK = {name: i for i, name in enumerate(HEAVY)}


def heavy_first(items: list[pytest.Item]) -> None:
    """Reorder ``items`` in place: the files of HEAVY first, in its order; the rest as collected."""
    items.sort(key=lambda item: _RANK.get(item.path.name, len(HEAVY)))
