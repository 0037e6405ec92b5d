"""Each outcome's cycle artifact says what happened and the one next step that works (issue 31, point 5)."""

from __future__ import annotations

from pathlib import Path

from gep.core.models import EvolutionEvent
from gep.report.cycle_text import cycle_markdown

WS = Path("/home/me/my agent")


def event(status: str, **meta: object) -> EvolutionEvent:
    return EvolutionEvent(id="evt_1764300000123_a1b2c3", genes_used=["gene_repair_from_errors"],
                          outcome={"status": status, "score": 0.5}, meta={"mutator": "command", **meta})


def next_step(markdown: str) -> str:
    return markdown.split("## Next step\n", 1)[1]


def test_a_failed_command_cycle_names_its_rescued_patch_not_solidify():
    patch = "/home/me/my agent/.gep/rescued/evt_1764300000123_a1b2c3.patch"
    failed = event("failed", failure_reasons=["validation: pytest failed"], rescued_patch=patch,
                   rescue_command=f"git -C '/home/me/my agent' apply '{patch}'")
    text = next_step(cycle_markdown(failed, WS, prompt_file="/home/me/my agent/.gep/prompts/p.md"))
    assert patch in text and "git -C '/home/me/my agent' apply" in text
    assert "solidify" not in text and "Awaiting" not in cycle_markdown(failed, WS, "/tmp/p.md")


def test_each_outcome_has_its_own_next_step():
    awaiting = next_step(cycle_markdown(event("awaiting_changes"), WS, prompt_file="/w/.gep/prompts/p.md"))
    assert "`/w/.gep/prompts/p.md`" in awaiting and "`gep solidify --workspace '/home/me/my agent'`" in awaiting
    kept = next_step(cycle_markdown(event("success", commit="c0ffee" * 6, branch="gep/x", delivery="kept",
                                          merge_command="git -C /w merge gep/x"), WS))
    assert "`git -C /w merge gep/x`" in kept
    landed = next_step(cycle_markdown(event("success", commit="c0ffee" * 6, branch="main"), WS))
    assert "`gep feedback a1b2c3 helpful --workspace '/home/me/my agent'`" in landed
    assert "no next step" in next_step(cycle_markdown(event("empty"), WS))
    assert "Nothing was changed" in next_step(cycle_markdown(event("failed"), WS))
