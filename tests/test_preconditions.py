"""A gene's checkable preconditions (gep/genes/preconditions.py) are checked before selection, like the runnable
check: files that must exist, signals that must be present."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import init_repo
from test_behavior_cycles import CORRECTIONS, ago, write_session

from gep import CycleRequest, run_cycle
from gep.core.models import Gene
from gep.genes.preconditions import unmet_precondition

pytestmark = pytest.mark.timeout(300)
INSTRUCTIONS = "at least one of the agent's instruction files exists: AGENTS.md, CLAUDE.md, USER.md, SOUL.md"


def _gene(*preconditions: str) -> Gene:
    return Gene(id="gene_x", preconditions=list(preconditions))


def test_files_one_of_which_must_exist(tmp_path: Path) -> None:
    gene = _gene("behavioural signals from the user's conversations: corrections or preferences", INSTRUCTIONS)
    assert unmet_precondition(gene, workspace=tmp_path, signals=[]) == (
        "precondition not met: none of AGENTS.md, CLAUDE.md, USER.md, SOUL.md exists")
    (tmp_path / "SOUL.md").write_text("# soul\n")
    assert unmet_precondition(gene, workspace=tmp_path, signals=[]) is None


def test_files_that_must_all_exist(tmp_path: Path) -> None:
    gene = _gene("pyproject.toml and tests/ exist")
    (tmp_path / "pyproject.toml").write_text("")
    assert unmet_precondition(gene, workspace=tmp_path, signals=[]) == "precondition not met: tests/ missing"
    (tmp_path / "tests").mkdir()
    assert unmet_precondition(gene, workspace=tmp_path, signals=[]) is None


@pytest.mark.parametrize("text, signals, met", [
    ("perf_bottleneck signal present", ["perf_bottleneck"], True),
    ("perf_bottleneck signal present", ["log_error"], False),
    ("capability_gap or unsupported_input_type signal present", ["unsupported_input_type"], True),
    ("signals: errsig*, recurring_error", ["errsig:boom"], True),
    ("signal: user_correction", ["user_frustration"], False),
    ("an agent repeats the same tool without progress", [], True),  # a sentence for the agent only
    ("no active error signals (stability first)", ["log_error"], False),
    ("no active error signals (stability first)", ["errsig:TypeError: boom", "perf_bottleneck"], False),
    ("no active error signals (stability first)", ["user_improvement_suggestion"], True),
    ("no active log_error signals", ["log_error", "capability_gap"], False),
    ("no active log_error signals", ["errsig:boom", "capability_gap"], True),  # only log_error is named
])
def test_signals_that_must_be_present(tmp_path: Path, text: str, signals: list[str], met: bool) -> None:
    assert (unmet_precondition(_gene(text), workspace=tmp_path, signals=signals) is None) is met


def test_the_instruction_gene_is_not_selected_without_an_instruction_file(tmp_path: Path) -> None:
    ws = init_repo(tmp_path / "ws", {"MEMORY.md": "# memory\n", "tests/test_ok.py": "def test_ok():\n    pass\n",
                                     ".gitignore": "sessions/\n"})
    write_session(ws, CORRECTIONS, ago(20))
    event = run_cycle(CycleRequest(workspace=ws, mutator="prompt", seed=1), env={})
    assert event is not None and "user_correction_repeated" in event.signals, event.signals
    assert event.genes_used != ["gene_agent_instructions"]
    assert event.meta.gene_pool is not None
    assert "none of AGENTS.md" in event.meta.gene_pool.excluded["gene_agent_instructions"]
