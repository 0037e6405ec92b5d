"""What people say steers evolution: behavioural signals push the intent and pick the gene that edits the
agent's own instruction files; their summaries never pull in unrelated genes."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gep.assets.gene_files import load_genes_dir, seed_genes_dir
from gep.core.config import Settings
from gep.core.models import Capsule, Intent
from gep.genes.mutation import build_mutation, mutation_category
from gep.genes.selector import match_pattern, match_score, select_gene_and_capsule
from gep.genes.strategy import PRESETS
from gep.signals.behavior import gep_signals
from gep.signals.behavior_log import capture_sessions, read_signals
from gep.signals.sources import collect_exchanges

NOW = datetime(2026, 3, 14, 12, 0, tzinfo=UTC)
FIXTURES = Path(__file__).parent / "fixtures"


def category(signals: list[str], seed: int = 0) -> tuple[Intent, str]:
    return mutation_category(signals=signals, strategy=PRESETS["balanced"], rng=random.Random(seed))


@pytest.mark.parametrize(("signals", "expected", "why"), [
    (["user_correction:User restated what they had asked for", "user_correction_repeated"], Intent.repair,
     "user corrections or frustration"),
    (["user_frustration"], Intent.repair, "user corrections or frustration"),
    (["user_preference:User prefers links sent directly"], Intent.optimize, "user preferences or style"),
    (["user_style:User writes formally (prefers a professional tone)"], Intent.optimize, "user preferences or style"),
    (["log_error", "user_preference:User prefers short, concise replies"], Intent.repair, "error signals"),
    (["user_feature_request:add export", "user_preference:x"], Intent.innovate, "opportunity signals"),
    (["user_feature_request:add export", "user_frustration"], Intent.repair, "user corrections or frustration"),
])
def test_behavioural_signals_push_the_intent(signals: list[str], expected: Intent, why: str) -> None:
    assert category(signals) == (expected, why)


def test_one_correction_or_approval_alone_leaves_the_intent_to_the_strategy() -> None:
    for signals in (["user_correction:User restated what they had asked for"], ["user_approval"]):
        assert all(category(signals, seed)[1].startswith("strategy") for seed in range(5))


def test_summaries_never_pull_in_genes_by_their_words() -> None:
    genes = {g.id: g for g in load_genes_dir(seed_genes_dir())}
    wordy = ["user_preference:User prefers: fix error traceback slow timeout refactor",
             "user_correction:User said the agent failed; cannot improve, not supported"]
    for gid, g in genes.items():
        assert match_score(g, wordy) == (2.0 if gid == "gene_agent_instructions" else 0.0), gid
    # a pattern naming the signal as a whole still matches it (capsule triggers are whole signals)
    assert match_pattern(wordy[0], wordy[0]) and match_pattern("user_preference", wordy[0])
    assert not match_pattern("timeout", wordy[0])


# A Claude Code session where the user keeps correcting the agent, ending in frustration.
CORRECTIONS = [("user", "add a --limit option to the export command"),
               ("assistant", "I added --limit to the import command."),
               ("user", "No, I said the export command, not import."),
               ("assistant", "Sorry! I moved it. I also renamed the option to --max."),
               ("user", "I didn't ask you to rename it, keep --limit."),
               ("assistant", "Renamed back to --limit and updated the README to say --max is deprecated."),
               ("user", "You misunderstood again. There is no --max. This is so frustrating!!!")]


def corrections_transcript(folder: Path) -> Path:
    """CORRECTIONS as a Claude Code session file."""
    turns = CORRECTIONS
    path = folder / "corrections.jsonl"
    path.write_text("\n".join(json.dumps({
        "type": role, "sessionId": "s-corr", "timestamp": f"2026-03-14T11:0{i}:00.000Z",
        "message": {"role": role, "content": [{"type": "text", "text": text}] if role == "assistant" else text},
    }) for i, (role, text) in enumerate(turns)) + "\n")
    return path


def test_a_transcript_full_of_corrections_selects_the_instructions_gene_for_repair(tmp_path: Path) -> None:
    """The pieces of the full cycle (wired by the lead): capture, GEP signals, intent, gene."""
    (tmp_path / "sessions").mkdir()
    path = corrections_transcript(tmp_path / "sessions")
    ws = tmp_path / "ws"
    ws.mkdir()
    settings = Settings(transcript_globs=[str(path.parent / "*.jsonl")], transcript_max_age_hours=0)
    capture_sessions(ws, collect_exchanges(ws, settings, now=NOW), now=NOW)
    signals = gep_signals(read_signals(ws).signals)
    assert "user_correction_repeated" in signals and "user_frustration" in signals

    genes = load_genes_dir(seed_genes_dir())
    selection = select_gene_and_capsule(genes=genes, capsules=[], failed_capsules=[], signals=signals,
                                        recent_events=[], settings=Settings(), rng=random.Random(0), now=NOW)
    assert selection.gene is not None and selection.gene.id == "gene_agent_instructions"
    assert selection.decision.alternatives == []  # no other gene reads the user's words
    mutation = build_mutation(signals=signals, gene=selection.gene, personality=None,
                              strategy=PRESETS["balanced"], rng=random.Random(0), now=NOW)
    assert mutation.category is Intent.repair and mutation.target == "gene:gene_agent_instructions"
    gene = selection.gene
    # the instruction files stay protected: the gene may only append to them, never rewrite or empty them
    assert not gene.constraints.editable_protected
    assert {"AGENTS.md", "CLAUDE.md", "USER.md", "SOUL.md"} <= set(Settings().protected_paths)
    assert "memory/growth/signals" in gene.constraints.forbidden_paths
    assert any("Never delete" in step for step in gene.strategy) and any("Append" in s for s in gene.strategy)


def test_capsules_of_behavioural_signals_are_reused_by_their_whole_signal() -> None:
    capsule = Capsule(id="cap_1", trigger=["user_preference:User prefers links sent directly"],
                      gene="gene_agent_instructions")
    selection = select_gene_and_capsule(genes=load_genes_dir(seed_genes_dir()), capsules=[capsule],
                                        failed_capsules=[], signals=["user_preference:User prefers links sent directly"],
                                        recent_events=[], settings=Settings(learning_on=["capsules"]),
                                        rng=random.Random(0), now=NOW)  # capsules: experimental (issue 41)
    assert selection.capsule is not None and selection.capsule.id == "cap_1"
