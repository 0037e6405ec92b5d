"""A person's word outranks an absence of log lines (issue 41, point 3; gep/learning/persons_word.py): a change
that swallowed a failure and logs nothing is verified by the logs; a person's not_helpful on it makes selection
count it as a fix that did not hold, and a gene people rejected across problems is left out while a less
rejected one matches. Real store, the real selector fed as every cycle feeds it, the select stage's rule."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

from gep.core.config import Settings
from gep.core.models import BlastRadius, EventMeta, EvolutionEvent, Gene, Outcome, iso
from gep.cycle.fixes import apply_verdict
from gep.cycle.record_learning import learn_outcome
from gep.cycle.stages import select_from_store
from gep.learning.human_verdicts import give_feedback
from gep.learning.resolved import FixVerdict
from gep.store import Store

T0 = datetime(2026, 11, 28, 2, 0, tzinfo=UTC)
ERR = "ERROR app.billing: ZeroDivisionError: division by zero in app.billing.total_invoice"
OTHER = "ERROR app.users: KeyError: 'name' in app.users.load_user"
HOUR = timedelta(hours=1)


GENES = [Gene(id="gene_quiet", category="repair", signals_match=["errsig"]),
         Gene(id="gene_repair", category="repair", signals_match=["errsig"])]


def _picks(tmp_path: Path, word: str | None, settings: Settings | None = None) -> list[str]:
    """gene_quiet's change on total_invoice's error was verified (gene_repair untried); the genes picked over 20
    seeds for load_user's new error after a person's ``word`` on that change (its record elsewhere is a prior)."""
    with Store.open(f"sqlite:///{tmp_path}/{word}-{settings is None}.db") as store:
        event = EvolutionEvent(id="evt_quiet", genes_used=["gene_quiet"], signals=[f"errsig:{ERR}"],
                               outcome=Outcome(status="success", score=0.85), blast_radius=BlastRadius(files=1, lines=4),
                               meta=EventMeta(at=iso(T0)))
        store.add_event(event)
        learn_outcome(store, event, T0)
        apply_verdict(store, FixVerdict(event_id="evt_quiet", gene_id="gene_quiet", commit_sha="c", verdict="verified",
                                        judged=[f"errsig:{ERR}"]), T0 + HOUR / 2)  # as the next cycle records it
        if word is not None:
            give_feedback(store, "evt_quiet", word.split("-")[0], now=T0 + HOUR, author="ana")
        if word == "not_helpful-then-helpful":  # another person's later word takes it back
            give_feedback(store, "evt_quiet", "helpful", now=T0 + 1.5 * HOUR, author="bo")
        return [sel.gene.id for s in range(20)
                if (sel := select_from_store(store, genes=GENES, signals=[f"errsig:{OTHER}"],
                                             settings=settings or Settings(), rng=random.Random(s),
                                             now=T0 + 2 * HOUR)[0]).gene is not None]


def test_selection_counts_a_verified_fix_a_person_rejected_as_one_that_did_not_hold(tmp_path: Path) -> None:
    assert _picks(tmp_path, None).count("gene_quiet") > 10  # its verified fix ranks it first
    rejected = _picks(tmp_path, "not_helpful")
    assert rejected.count("gene_quiet") <= 2, rejected  # counted as a fix that did not hold (drift aside)
    assert _picks(tmp_path, "not_helpful-then-helpful").count("gene_quiet") > 10
    off = _picks(tmp_path, "not_helpful", Settings(learning_off=["feedback"]))
    assert off.count("gene_quiet") > 10  # feedback off: the verdict stands



def test_a_gene_people_rejected_across_problems_is_left_out_while_a_less_rejected_one_matches(tmp_path: Path) -> None:
    """gene_quiet's changes to other functions were each called not helpful (the logs said nothing against them):
    on load_user's error the select stage's rule leaves it out while gene_repair matches; one word less, the
    other gene rejected as often, a later helpful, or no error to lead with, and it stays."""
    from gep.cycle.stages import persons_rejects

    def left_out(name: str, quiet: list[str], repair: list[str], signals: list[str] | None = None) -> list[str]:
        with Store.open(f"sqlite:///{tmp_path}/{name}.db") as store:
            for i, (gene, word) in enumerate([*(("gene_quiet", w) for w in quiet),
                                              *(("gene_repair", w) for w in repair)]):
                store.add_event(EvolutionEvent(id=f"evt_{i}", genes_used=[gene], signals=[f"errsig:f{i} failed"],
                                               outcome=Outcome(status="success", score=0.8),
                                               meta=EventMeta(at=iso(T0 - (i + 2) * HOUR))))
                give_feedback(store, f"evt_{i}", word, now=T0 - HOUR + i * timedelta(minutes=1), author="ana")
            return list(persons_rejects(GENES, signals or ["log_error", f"errsig:{OTHER}"], store.list_feedback(),
                                        T0, {}))

    nh, ok = "not_helpful", "helpful"
    assert left_out("rejected", [nh, nh], []) == ["gene_quiet"]
    assert left_out("more", [nh, nh, nh], [nh]) == ["gene_quiet"]  # rejected more than the other
    assert left_out("one", [nh], []) == []  # one word is not a pattern
    assert left_out("both", [nh, nh], [nh, nh]) == []  # neither is preferred on people's word
    assert left_out("approved", [nh, nh, ok], []) == []
    assert left_out("no error", [nh, nh], [], ["perf_bottleneck"]) == []
    # an error that keeps coming back leads too, as in the selector's step 3c
    assert left_out("recurring", [nh, nh], [], [f"recurring_errsig(3x):{OTHER}"]) == ["gene_quiet"]


def test_the_select_stage_leaves_a_rejected_gene_out_only_with_feedback_on(tmp_path: Path) -> None:
    """The cycle's own select stage over a real workspace: two of gene_quiet's changes rejected, a new error to
    lead with; feedback on, gene_quiet is left out with its reason; ``learning_off = ["feedback"]``, it stays."""
    import json

    from conftest import init_repo

    from gep.core.request import CycleRequest
    from gep.cycle.context import CycleContext
    from gep.cycle.stages import collect, select
    from gep.cycle.state import CycleState
    from gep.git import open_repo

    def excluded(name: str, settings: Settings) -> dict[str, str]:
        ws = init_repo(tmp_path / name, {"README.md": "x\n", ".gitignore": ".gep/\n"})
        (ws / ".gep" / "genes").mkdir(parents=True)
        (ws / ".gep" / "genes" / "gene_quiet.json").write_text(json.dumps(
            {"type": "Gene", "id": "gene_quiet", "category": "repair", "signals_match": ["errsig"],
             "strategy": ["Make the failing step tolerate the failure"], "schema_version": "1.6.0"}))
        with Store.for_workspace(ws) as store:
            for i in range(2):
                store.add_event(EvolutionEvent(id=f"evt_{i}", genes_used=["gene_quiet"],
                                               signals=[f"errsig:f{i} failed"],
                                               outcome=Outcome(status="success", score=0.8),
                                               meta=EventMeta(at=iso(T0 - (i + 2) * HOUR))))
                give_feedback(store, f"evt_{i}", "not_helpful", now=T0 - HOUR, author="ana")
            ctx = CycleContext(request=CycleRequest(workspace=ws), settings=settings, repo=open_repo(ws),
                               store=store, event_id="evt_next", cycle_number=3, seed=1, started_at=T0,
                               clock=lambda: T0)
            state = collect(ctx, CycleState())
            state.signals = ["log_error", f"errsig:{OTHER}"]
            state = select(ctx, state)
        assert state.pool is not None
        return {k: v for k, v in state.pool.excluded.items() if "people rejected" in v}

    assert list(excluded("on", Settings())) == ["gene_quiet"]
    assert excluded("off", Settings(learning_off=["feedback"])) == {}
