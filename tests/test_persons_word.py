"""A person's word outranks an absence of log lines (issue 41, point 3; gep/learning/persons_word.py): a change
that swallowed a failure and logs nothing is verified by the logs; a person's not_helpful on it makes selection
count it as a fix that did not hold, and sends the next cycle back to its problem, once.

Real git repository, real store, the cycle's own collect and extract stages and the real selector."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

from conftest import git, init_repo

from gep.core.config import Settings
from gep.core.models import BlastRadius, EventMeta, EvolutionEvent, Gene, Outcome, iso
from gep.core.request import CycleRequest
from gep.cycle.context import CycleContext
from gep.cycle.fixes import apply_verdict, remember_commit
from gep.cycle.record_learning import learn_outcome
from gep.cycle.stages import collect, extract, select_from_store
from gep.cycle.state import CycleState
from gep.git import open_repo
from gep.learning.human_verdicts import give_feedback
from gep.learning.resolved import FixVerdict
from gep.store import Store

BILLING = "def total_invoice(pair):\n    total, count = pair\n    return total / count\n"
MADE_UP = ("def total_invoice(pair):\n    try:\n        total, count = pair\n        return total / count\n"
           "    except Exception:\n        return 1.0\n")
USERS = "def load_user(rec):\n    return rec['name']\n"
T0 = datetime(2026, 11, 28, 2, 0, tzinfo=UTC)
ERR = "ERROR app.billing: ZeroDivisionError: division by zero in app.billing.total_invoice"
OTHER = "ERROR app.users: KeyError: 'name' in app.users.load_user"
HOUR = timedelta(hours=1)


def _at(t: datetime) -> str:
    return f"{t:%Y-%m-%dT%H:%M:%S}.5Z"


class World:
    """A workspace whose change to total_invoice swallowed its error and returns a made-up value: the job then
    logs nothing about it (only load_user's new error), so the fix verdict calls the change verified."""

    def __init__(self, tmp_path: Path, settings: Settings | None = None) -> None:
        self.ws = ws = tmp_path / "ws"
        (ws / "app").mkdir(parents=True)
        (ws / "logs").mkdir()
        (ws / ".gitignore").write_text("logs/\n.gep/\n")
        init_repo(ws, {"app/__init__.py": "", "app/billing.py": BILLING, "app/users.py": USERS})
        self.log = ws / "logs" / "job.log"
        self.log.write_text(f"{_at(T0 - HOUR)} {ERR}\n")
        self.settings = settings or Settings()
        self.store = Store.for_workspace(ws)
        self.ctx = CycleContext(request=CycleRequest(workspace=ws), settings=self.settings, repo=open_repo(ws),
                                store=self.store, event_id="evt_next", cycle_number=2, seed=1, started_at=T0,
                                clock=lambda: T0)
        self.commit("evt_quiet", "gene_quiet", MADE_UP, [f"errsig:{ERR}"], T0)

    def commit(self, eid: str, gene: str, billing: str, signals: list[str], at: datetime) -> None:
        (self.ws / "app" / "billing.py").write_text(billing)
        git(self.ws, "commit", "-qam", eid)
        event = EvolutionEvent(id=eid, genes_used=[gene], signals=signals, outcome=Outcome(status="success", score=0.8),
                               meta=EventMeta(at=iso(at), commit=git(self.ws, "rev-parse", "HEAD").strip(),
                                              solidified_at=at.isoformat()))
        self.store.add_event(event)
        remember_commit(self.ctx.model_copy(update={"started_at": at, "clock": lambda: at}), event)

    def cycle(self, hours: int, record: bool = False) -> list[str]:
        """The signals of the cycle ``hours`` after the change (the job wrote load_user's error 40 minutes
        before); ``record`` stores the cycle's event with them, as a cycle that worked on them would."""
        at = T0 + hours * HOUR
        with self.log.open("a") as fh:
            fh.write(f"{_at(at - timedelta(minutes=40))} {OTHER}\n")
        nxt = self.ctx.model_copy(update={"started_at": at, "clock": lambda: at, "event_id": f"evt_{hours}"})
        signals = extract(nxt, collect(nxt, CycleState())).signals
        if record:
            self.store.add_event(EvolutionEvent(id=f"evt_{hours}", genes_used=["gene_repair"], signals=signals,
                                                outcome=Outcome(status="failed", score=0.2),
                                                meta=EventMeta(at=iso(at))))
        return [s for s in signals if s.startswith("errsig:")]

    def say(self, verdict: str, hours: float) -> None:
        give_feedback(self.store, "evt_quiet", verdict, now=T0 + timedelta(hours=hours), author="ana")


def test_a_verified_fix_a_person_says_did_not_help_is_worked_on_again_once(tmp_path: Path) -> None:
    w = World(tmp_path)
    try:
        assert not any("total_invoice" in s for s in w.cycle(1))  # the logs say nothing: verified
        assert w.store.get_event("evt_quiet").meta.fix_verdict == "verified"  # type: ignore[union-attr]
        w.say("not_helpful", 1.5)
        again = w.cycle(2, record=True)
        assert "total_invoice" in again[0] and any("load_user" in s for s in again[1:]), again  # first, none dropped
        assert not any("total_invoice" in s for s in w.cycle(3))  # once per word: a cycle had it since
    finally:
        w.store.close()


def test_no_word_a_helpful_feedback_off_or_a_newer_change_leave_it_closed(tmp_path: Path) -> None:
    for name, settings, word in (("none", None, None), ("helpful", None, "helpful"),
                                 ("off", Settings(learning_off=["feedback"]), "not_helpful"),
                                 ("back", None, "helpful-after")):
        w = World(tmp_path / name, settings)
        try:
            w.cycle(1)
            if word == "helpful-after":  # a later helpful takes the not_helpful back (one verdict per person)
                w.say("not_helpful", 1.5)
                give_feedback(w.store, "evt_quiet", "helpful", now=T0 + 1.6 * HOUR, author="bo")
            elif word is not None:
                w.say(word, 1.5)
            assert not any("total_invoice" in s for s in w.cycle(2)), name
        finally:
            w.store.close()
    w = World(tmp_path / "newer")
    try:
        w.cycle(1)
        w.say("not_helpful", 1.5)
        w.commit("evt_newer", "gene_repair", BILLING.replace("/ count", "/ count if count else 0.0"),
                 [f"errsig:{ERR}"], T0 + 1.7 * HOUR)  # a newer change to the function answers the word
        assert not any("total_invoice" in s for s in w.cycle(2))
    finally:
        w.store.close()


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
            give_feedback(store, "evt_quiet", word, now=T0 + HOUR, author="ana")
        return [sel.gene.id for s in range(20)
                if (sel := select_from_store(store, genes=GENES, signals=[f"errsig:{OTHER}"],
                                             settings=settings or Settings(), rng=random.Random(s),
                                             now=T0 + 2 * HOUR)[0]).gene is not None]


def test_selection_counts_a_verified_fix_a_person_rejected_as_one_that_did_not_hold(tmp_path: Path) -> None:
    assert _picks(tmp_path, None).count("gene_quiet") > 10  # its verified fix ranks it first
    rejected = _picks(tmp_path, "not_helpful")
    assert rejected.count("gene_quiet") <= 2, rejected  # counted as a fix that did not hold (drift aside)
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
