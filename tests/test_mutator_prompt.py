"""Prompt mode: the prompt is written for a human or agent and the cycle awaits changes."""

from __future__ import annotations

from pathlib import Path

from gep.core.config import Settings
from gep.core.models import Gene, Mutation
from gep.mutators import get_mutator
from gep.mutators.base import MutationRequest
from gep.mutators.gep_prompt import PromptInput, build_prompt, render_markdown


def test_prompt_file_written_and_cycle_awaits_changes(example_ws: Path) -> None:
    g = Gene(id="gene_repair_from_errors", strategy=["Fix the root cause"], validation=["python -m pytest -q"])
    secret = "sk-ant-api03-" + "S" * 40
    prompt = build_prompt(PromptInput(
        mutation=Mutation(id="mut_9", category="repair", expected_effect="mean is right"), gene=g,
        signals=["log_error"], cycle_id="evt_prompt_1",
        sources={"today_log": f"[ERROR] ZeroDivisionError (key {secret})"}), context_chars=8000)
    before = (example_ws / "stats.py").read_text()
    req = MutationRequest(work_tree=example_ws, cycle_id="evt_prompt_1", prompt=prompt, gene=g,
                          settings=Settings(), forbidden_paths=[".git", ".gep"], validation_commands=g.validation)

    mutator = get_mutator(None, Settings(), {})  # no API key: prompt mode is the default
    assert mutator.name == "prompt"
    result = mutator.apply(req)

    path = example_ws / ".gep" / "prompts" / "evt_prompt_1.md"
    assert result.status == "awaiting_changes"
    assert result.error is None
    assert result.prompt_file == str(path)
    text = path.read_text()
    assert text == render_markdown(prompt)
    assert "mut_9" in text and "mean is right" in text and "ZeroDivisionError" in text
    assert secret not in text
    assert "gep solidify --workspace" in result.rationale
    assert (example_ws / "stats.py").read_text() == before  # the engine changed nothing itself


def test_unwritable_prompt_dir_is_an_error_result(repo: Path) -> None:
    (repo / ".gep").write_text("not a directory")
    g = Gene(id="g")
    prompt = build_prompt(PromptInput(mutation=Mutation(id="m", category="repair"), gene=g, cycle_id="evt_x"),
                          context_chars=8000)
    req = MutationRequest(work_tree=repo, cycle_id="evt_x", prompt=prompt, gene=g, settings=Settings())
    result = get_mutator("prompt", Settings(), {}).apply(req)
    assert result.status == "error" and result.error is not None
    assert result.error.startswith("cannot write the prompt file")
