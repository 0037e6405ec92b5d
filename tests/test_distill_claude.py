"""Distillation with Claude: the real anthropic SDK against the fake Messages API (tests/fake_anthropic.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from distill_cases import KEY, NOW, ZERO_DIV, mixed_capsules, python_workspace, repair_capsules, seed_genes
from fake_anthropic import FakeAnthropic, error_reply, message, text_block, tool_use

from gep.core.config import Settings
from gep.core.hashing import verify_asset_id
from gep.core.models import Gene
from gep.genes.distiller import (
    TOOL_NAME,
    ClaudeGeneProposer,
    DistillResult,
    InMemoryDistillLog,
    claude_proposer,
    distill,
    gene_tool_schema,
)

MODEL = "claude-sonnet-4-6"


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        yield server


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return python_workspace(tmp_path / "ws")


def proposal(**update: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "type": "Gene", "id": "gene_distilled_guard-empty-mean", "category": "repair",
        "signals_match": ["errsig:zerodivisionerror", "recurring_error"],
        "preconditions": ["a ZeroDivisionError in the logs"],
        "strategy": ["Find the division named in the traceback", "Return a defined value for empty input",
                     "Add a test for the empty case"],
        "constraints": {"max_files": 4, "forbidden_paths": [".git", ".gep", ".venv"]},
        "validation": ["python -m pytest -q tests/test_stats.py"],
        "summary": "Guard averages against empty input before dividing",
    }
    base.update(update)
    return base


def answer(gene: dict[str, Any]) -> dict[str, Any]:
    return message(text_block("Here is the gene."), tool_use(TOOL_NAME, gene))


def env(fake: FakeAnthropic) -> dict[str, str]:
    return {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": fake.url}


def run(fake: FakeAnthropic, ws: Path, reply: Any, log: InMemoryDistillLog | None = None) -> DistillResult:
    fake.script = lambda _req: reply  # the same answer to every request of this run
    return distill(capsules=mixed_capsules(), events=[], genes=seed_genes(), log=log or InMemoryDistillLog(),
                   workspace=ws, settings=Settings(model=MODEL), env=env(fake), now=NOW)


def test_claude_proposes_through_the_gene_tool(fake: FakeAnthropic, ws: Path) -> None:
    log = InMemoryDistillLog()
    caps = mixed_capsules()
    caps[0] = caps[0].model_copy(update={"summary": f"Moved the key {KEY} out of stats.py"})
    fake.script = [answer(proposal())]
    result = distill(capsules=caps, events=[], genes=seed_genes(), log=log, workspace=ws,
                     settings=Settings(model=MODEL), env=env(fake), now=NOW)
    assert result.run.status == "kept" and result.run.synthesis == "claude"
    assert (result.run.repairs, result.run.reasons) == ([], [])
    g = result.gene
    assert g.id == "gene_distilled_guard-empty-mean" and g.validation == ["python -m pytest -q tests/test_stats.py"]
    assert g.provenance.synthesis == "claude" and g.provenance.source_gene_ids == ["gene_repair_from_errors"]
    assert g.provenance.source_capsule_ids == [f"cap_{i:03d}" for i in range(12)]  # the capsules it matches
    assert verify_asset_id(g.to_asset()) and log.runs == [result.run]

    [req] = fake.requests
    body = req.body
    assert body["model"] == MODEL
    assert body["tool_choice"] == {"type": "tool", "name": TOOL_NAME}
    [tool] = body["tools"]
    assert tool["name"] == TOOL_NAME and tool["input_schema"] == gene_tool_schema()
    assert set(tool["input_schema"]["properties"]) == set(Gene.model_fields) - {"provenance", "schema_version",
                                                                                 "asset_id"}
    assert "$ref" not in str(tool["input_schema"])
    prompt = body["messages"][0]["content"]
    assert "gene_repair_from_errors" in prompt and ZERO_DIV in prompt  # existing genes and the capsules
    assert KEY not in str(body) and "[REDACTED]" in prompt  # the secret in a summary never reaches the prompt
    assert KEY in (req.headers.get("x-api-key"), req.headers.get("authorization", "").removeprefix("Bearer "))


@pytest.mark.parametrize("bad, field, fixed, repair", [
    ({"id": "guard_empty_mean"}, "id", "gene_distilled_guard-empty-mean", "id: 'guard_empty_mean' renamed"),
    ({"id": "gene_distilled_1773331925711"}, "id", "gene_distilled_zerodivisionerror-recurring-error",
     "id: 'gene_distilled_1773331925711': id holds a timestamp (1773331925711); derived"),
    ({"id": "gene_distilled_cursor-1773331925711"}, "id", "gene_distilled_zerodivisionerror-recurring-error",
     "id: 'gene_distilled_cursor-1773331925711': id holds a tool name (cursor); derived"),
    ({"constraints": {"max_files": 50, "forbidden_paths": []}}, "constraints",
     {"max_files": 12, "forbidden_paths": [".git", ".gep"]}, "constraints.max_files: 50 -> 12"),
    ({"validation": ["python -m pytest -q; rm -rf ~"]}, "validation", ["python -m compileall -q .", "python -m pytest -q"],
     "validation: dropped 'python -m pytest -q; rm -rf ~': blocked by the runner: shell operator ';'"),
])
def test_bad_proposals_are_repaired(fake: FakeAnthropic, ws: Path, bad: dict, field: str, fixed: Any,
                                    repair: str) -> None:
    result = run(fake, ws, answer(proposal(**bad)))
    assert result.run.status == "kept", result.run.reasons
    assert result.gene.model_dump(mode="json", exclude_none=True)[field] == fixed
    assert any(r.startswith(repair) for r in result.run.repairs), result.run.repairs
    assert verify_asset_id(result.gene.to_asset())


def test_a_duplicate_of_an_existing_gene_is_refused(fake: FakeAnthropic, ws: Path) -> None:
    log = InMemoryDistillLog()
    dup = proposal(signals_match=["perf_bottleneck", "slow|timeout|latency|bottleneck|out of memory|oom",
                                  "log_error"])
    ok = run(fake, ws, answer(dup), log)  # not the same set as gene_perf_bottleneck: fine
    assert ok.run.status == "kept"
    same = proposal(signals_match=["slow|timeout|latency|bottleneck|out of memory|oom", "perf_bottleneck"])
    refused = run(fake, ws, answer(same), log := InMemoryDistillLog())
    assert refused.gene is None and refused.run.status == "rejected"
    assert refused.run.reasons[0] == "near-duplicate of existing gene gene_perf_bottleneck (same signals_match set)"
    assert log.runs == [refused.run] and log.last_distill_attempt() == refused.run  # the attempt counts


def test_every_bad_thing_at_once(fake: FakeAnthropic, ws: Path) -> None:
    bad = proposal(id="gene_x_1773331925711", summary="ok",
                   constraints={"max_files": 50, "forbidden_paths": ["node_modules"]},
                   validation=["python -m pytest -q | tee out.txt", "node scripts/validate-modules.js"])
    result = run(fake, ws, answer(bad))
    g = result.gene
    assert result.run.status == "kept"
    assert g.id == "gene_distilled_zerodivisionerror-recurring-error"
    assert g.summary == "Find the division named in the traceback"
    assert g.constraints.max_files == 12 and {".git", ".gep"} <= set(g.constraints.forbidden_paths)
    assert g.validation == Settings().default_validation
    assert [r.split(":")[0] for r in result.run.repairs] == [
        "summary", "id", "constraints.max_files", "constraints.forbidden_paths", "validation", "validation",
        "validation"], result.run.repairs


@pytest.mark.parametrize("reply, reason", [
    (message(text_block('{"type": "Gene", "id": "gene_distilled_from-text"}')), f"Claude did not call {TOOL_NAME}"),
    (answer(proposal(strategy="just fix it")), "the proposal is not a Gene: field 'strategy'"),
    (answer(proposal(type="Capsule")), "the proposal is not a Gene: field 'type'"),
])
def test_answers_without_a_gene_are_rejected(fake: FakeAnthropic, ws: Path, reply: dict, reason: str) -> None:
    result = run(fake, ws, reply)
    assert result.run.status == "rejected" and result.gene is None
    assert result.run.reasons[0].startswith(reason)


def test_claude_unavailable_falls_back_to_synthesis(fake: FakeAnthropic, ws: Path) -> None:
    result = run(fake, ws, error_reply(529, "overloaded_error", "Overloaded", should_retry=False))
    assert result.run.status == "kept" and result.run.synthesis == "deterministic"
    assert result.run.notes[0].startswith("Claude unavailable: ") and "used deterministic synthesis" in result.run.notes[0]
    assert len(fake.requests) == 1


def test_the_key_decides_the_proposer(fake: FakeAnthropic) -> None:
    assert claude_proposer(Settings(), {}) is None
    assert isinstance(claude_proposer(Settings(), env(fake)), ClaudeGeneProposer)


def test_without_a_key_no_request_is_made(fake: FakeAnthropic, ws: Path) -> None:
    result = distill(capsules=repair_capsules(10), events=[], genes=seed_genes(), log=InMemoryDistillLog(),
                     workspace=ws, settings=Settings(), env={"ANTHROPIC_BASE_URL": fake.url}, now=NOW)
    assert result.run.synthesis == "deterministic" and fake.requests == []
