"""The order `make test` and `make check` start the test files in (tests/conftest.py sorts by it): the longest
of the tests that will run first.

pytest-xdist (``--dist loadfile --no-loadscope-reorder``) hands each worker the next file when it is nearly
done: the longest files started first leave short ones to even out the end, instead of one long file
starting last and running alone (tests/test_recovery.py did). A file's weight is the seconds its tests took
in a whole run, counted apart for the tests `make check` runs and for those marked ``e2e``: `make check`
(``-m "not e2e"``) orders by the first figure alone, so a file whose quick tests are few does not go first
there because its end-to-end tests are long. A file not named keeps its place after these."""

from __future__ import annotations

import pytest

# seconds per file (its tests not marked e2e, its e2e tests), summed from `--junitxml` of a whole run
# (1e9c1c9 on the shared machine at load average 8-10, 7 Dec 2026: ~3x an idle run, in proportion); files
# under 4 s are left out. Re-measure when a file grows: `make test PYTEST_ARGS=--junitxml=...`.
WEIGHTS: dict[str, tuple[int, int]] = {
    "test_e2e_prefect.py": (0, 281),
    "test_e2e_fleet.py": (0, 256),
    "test_flows.py": (0, 185),
    "test_fleet.py": (2, 132),
    "test_cli.py": (19, 111),
    "test_store_prune.py": (32, 91),  # less the pruned-store test marked e2e since
    "test_recovery.py": (0, 123),
    "test_distill_scenario.py": (1, 96),
    "test_mcp_server.py": (0, 93),
    "test_serve.py": (0, 90),
    "test_eval.py": (5, 67),
    "test_bench_evolution.py": (0, 71),
    "test_agent_context.py": (2, 67),
    "test_genepool_cycles.py": (12, 54),
    "test_slot_restart.py": (0, 65),
    "test_learning_commands.py": (0, 64),
    "test_solidify.py": (0, 63),
    "test_inputs_cycle.py": (3, 60),
    "test_learning_switch.py": (3, 60),
    "test_interrupt.py": (0, 60),
    "test_real_tasks.py": (2, 58),
    "test_bench_scripts.py": (0, 57),  # less the labeller test marked e2e since
    "test_report.py": (19, 38),
    "test_isolation.py": (0, 55),
    "test_fleet_here.py": (0, 54),
    "test_learning_cycles.py": (0, 53),
    "test_redaction_shapes.py": (53, 0),
    "test_demo.py": (0, 52),
    "test_learning_flows.py": (0, 50),
    "test_git_refs.py": (43, 0),
    "test_e2e_review_terminal.py": (0, 42),
    "test_git_recovery.py": (0, 42),
    "test_attribution.py": (0, 41),
    "test_store_concurrency.py": (0, 41),
    "test_behavior_cycles.py": (0, 39),
    "test_confinement_cycles.py": (0, 37),
    "test_hostile_inputs.py": (2, 34),
    "test_quiet_terminal.py": (0, 33),
    "test_hostile_workspace.py": (0, 32),
    "test_stuck_noisy.py": (10, 20),
    "test_validation_view.py": (0, 29),
    "test_store_copy.py": (9, 18),
    "test_selector.py": (25, 0),
    "test_sanitize.py": (24, 0),
    "test_git_inplace.py": (24, 0),
    "test_flows_overhead.py": (2, 22),
    "test_similar_problems.py": (0, 21),
    "test_signals_properties.py": (21, 0),
    "test_empty_cycles.py": (0, 21),
    "test_terminal_output.py": (0, 21),
    "test_history_ids.py": (0, 21),
    "test_git_clone.py": (18, 2),
    "test_store_quick.py": (3, 17),
    "test_sandbox.py": (9, 9),
    "test_blame.py": (0, 17),
    "test_terminal_review.py": (17, 0),
    "test_store_only_imports.py": (0, 16),
    "test_redaction_sinks.py": (10, 7),
    "test_mutator_anthropic.py": (5, 11),
    "test_constraints.py": (16, 0),
    "test_holdout.py": (6, 8),
    "test_workspace_default.py": (14, 0),
    "test_layering.py": (14, 0),
    "test_sandbox_credentials.py": (0, 13),
    "test_store_postgres.py": (0, 13),
    "test_inputs_folders.py": (7, 6),
    "test_terminal_fit.py": (12, 0),
    "test_git_delivery.py": (12, 0),
    "test_store_pool.py": (8, 4),
    "test_secret_sinks.py": (0, 12),
    "test_store_fleet.py": (5, 7),
    "test_git_paths.py": (6, 5),
    "test_warning_signals.py": (0, 11),
    "test_feedback_steers.py": (11, 0),
    "test_unread.py": (0, 10),
    "test_tools.py": (1, 9),
    "test_mutator_command.py": (1, 9),
    "test_module_state.py": (9, 0),
    "test_cycle_deadline.py": (4, 5),
    "test_workspace_id.py": (3, 5),
    "test_runner.py": (8, 0),
    "test_one_gene.py": (7, 2),
    "test_behavior_files.py": (8, 0),
    "test_capture.py": (1, 7),
    "test_prompt.py": (8, 0),
    "test_validation_slots.py": (8, 0),
    "test_pipeline.py": (0, 7),
    "test_workspace_hosts.py": (2, 5),
    "test_one_name.py": (7, 0),
    "test_gene_pool_limit.py": (7, 0),
    "test_unsafe_entries.py": (0, 6),
    "test_problem_memory.py": (0, 6),
    "test_assets.py": (5, 0),
    "test_workspace.py": (5, 0),
    "test_store.py": (5, 0),
    "test_signals.py": (4, 0),
    "test_signals_golden.py": (4, 0),
    "test_function_length.py": (4, 0),
    "test_memory_graph.py": (4, 0),
}
# a whole run's second worker starts on test_recovery.py, which needs no Prefect server: the first worker's
# server (test_e2e_prefect.py) makes the session's migrated database meanwhile, which a second server would
# only wait for (tests/conftest.py)
FIRST = ("test_e2e_prefect.py", "test_recovery.py")


def weight(name: str, e2e: bool) -> int:
    """The seconds of ``name``'s tests that will run: its quick tests', and its e2e tests' when ``e2e``."""
    quick, end_to_end = WEIGHTS.get(name, (0, 0))
    return quick + end_to_end if e2e else quick


def heavy_first(items: list[pytest.Item], e2e: bool = True) -> None:
    """Reorder ``items`` in place: the heaviest files first (with ``e2e``, FIRST before all); the files
    without a weight as collected (the sort is stable)."""
    def key(item: pytest.Item) -> tuple[int, int]:
        name = item.path.name
        if e2e and name in FIRST:
            return (FIRST.index(name) - len(FIRST), 0)
        return (0, -weight(name, e2e))

    items.sort(key=key)
