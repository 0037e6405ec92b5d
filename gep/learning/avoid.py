"""Avoid-lists (anti-genes, seed 004's memory): one kind of change that keeps failing on one kind of problem.

The kind of change is the gene; the kind of problem is the situation's problem (gep/learning/lessons_by_problem.py:
its error keys and requests, or its whole signal set when it names none). When ``AVOID_AFTER`` attempts of a
gene on a problem failed (its checks failed, or its committed fix did not hold; host failures are not its
doing) with no success of it on that problem since, an entry is made: stored (state ``learning.avoid``),
shown in the prompt as a short line naming the change that failed (never the file alone: issue 41), and used by selection (the gene is left out on that problem
while another gene matches the signals; with none it stays, so a live problem is never starved). A later
success of the gene on the problem retires the entry (kept, with the event that contradicted it).

Which problem an attempt counts on follows what its change was judged on, as the fix's verdict does
(gep/learning/fix_credit.py, ``meta.fix_credit``): a committed fix counts on the errors whose code it touched (the
verdict's, once judged), not on the generic signals that happened to trigger its cycle, so a fix of error A
that did not hold bans the gene on A only, and a success credited to A retires A's entry. A change that failed
its checks was never committed or credited: it counts on the problem its cycle was asked to fix.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from gep.core.models import EvolutionEvent
from gep.learning.attribution import learns_from
from gep.learning.feedback import situation_key_signals
from gep.learning.lessons_by_problem import problem_of
from gep.learning.problem_key import outcome_signals

if TYPE_CHECKING:  # the report and the session context build the list from events without the store
    from gep.store import Store

AVOID_EVENTS = 200  # recorded cycles the list is built from
AVOID_AFTER = 2  # failed attempts of one gene on one problem, with no success since
# later cycles on the problem an entry keeps the gene out of selection; then the gene may be tried again (a
# failure renews the entry, a success retires it). Without it an entry never lifted, since only a success of
# the gene it keeps out could retire it: bench/selection.py --overblocking measured the cost (docs/learning.md)
AVOID_HOLD = 3  # 10 (the bans' window) refused more and fixed less: docs/learning.md
STATE_KEY = "learning.avoid"
SHOWN_CHARS = 240


class AvoidEntry(BaseModel):
    gene_id: str
    problem: list[str]  # the problem's identities (or its situation when it names no specific problem)
    failures: int = 0
    event_ids: list[str] = Field(default_factory=list)  # the failed attempts, oldest first
    files: list[str] = Field(default_factory=list)  # what the last failed attempt touched
    change: str = ""  # the last failed attempt's change in a few lines (meta.change_excerpt)
    reason: str = ""  # the last failure's first reason
    retired_by: str | None = None  # the success that contradicted it
    since: int = 0  # cycles on its problem since its last failure

    @property
    def active(self) -> bool:
        return self.retired_by is None and self.failures >= AVOID_AFTER

    @property
    def blocks(self) -> bool:
        """Whether selection leaves the gene out now (an active entry, for AVOID_HOLD cycles on its problem)."""
        return self.active and self.since < AVOID_HOLD

    def line(self) -> str:
        """What failed, as the change it made (never "keep away from file X": that file may be the one to fix)."""
        tried = (f"; last change: {self.change}" if self.change
                 else f"; last change in {', '.join(self.files[:3])}" if self.files else "")
        text = (f"{self.gene_id}'s approach failed {self.failures} times on this problem{tried}"
                + (f"; checks said: {self.reason}" if self.reason else "") + ": try a different change")
        return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 3].rstrip() + "..."


class AvoidList(BaseModel):
    entries: list[AvoidEntry] = Field(default_factory=list)

    def on(self, signals: Sequence[str]) -> list[AvoidEntry]:
        """The active entries about the problem these signals name."""
        problem = _problem(signals)
        return [e for e in self.entries if e.active and set(e.problem) & set(problem)]

    def blocking(self, signals: Sequence[str]) -> list[AvoidEntry]:
        """The entries that keep their gene out of selection on this problem now."""
        return [e for e in self.on(signals) if e.blocks]


def _problem(signals: Sequence[str]) -> list[str]:
    situation = situation_key_signals(signals)
    return sorted(problem_of(situation)) or ["situation:" + "|".join(situation)]


def judged_problem(e: EvolutionEvent) -> list[str]:
    """The problem an attempt counts on (see the module doc): its credit's, else its trigger signals'."""
    if e.outcome.status != "success":
        return _problem(e.signals)
    about = outcome_signals(e)  # a change that touched none of its trigger errors (None) fixed none of them
    return _problem(about) if about is not None else []


def _failed(e: EvolutionEvent) -> bool:
    return (e.outcome.status == "failed" and not e.is_empty_cycle) or e.meta.fix_verdict == "did_not_hold"


def build_avoid_list(events: Sequence[EvolutionEvent]) -> AvoidList:
    """The avoid-list from the recorded cycles (oldest first): recomputed, so a verdict given later counts."""
    entries: dict[tuple[str, str], AvoidEntry] = {}
    for e in learns_from(events):
        if e.gene_id is None or e.outcome.status not in ("success", "failed"):
            continue
        for p in judged_problem(e):
            key = (e.gene_id, p)
            for other_key, other in entries.items():
                if other_key[1] == p and other_key != key:
                    other.since += 1
            entry = entries.get(key)
            if _failed(e):
                if entry is None or entry.retired_by is not None:
                    entry = entries[key] = AvoidEntry(gene_id=key[0], problem=[p])
                entry.failures += 1
                entry.since = 0
                entry.event_ids.append(e.id)
                entry.files = list(e.meta.changed_files or [])
                entry.change = e.meta.change_excerpt or ""
                entry.reason = " ".join((e.meta.failure_reasons or [""])[0].split())[:120]
            elif e.outcome.status == "success" and entry is not None and entry.retired_by is None:
                if entry.active:
                    entry.retired_by = e.id  # a success contradicts it: kept, retired
                else:
                    del entries[key]  # one failure then a success: nothing to avoid
    return AvoidList(entries=list(entries.values()))


def refresh_avoid_list(store: Store) -> AvoidList:
    """Rebuild the stored avoid-list from the recorded cycles (before selection reads it)."""
    avoid = build_avoid_list(store.recent_events(AVOID_EVENTS))
    store.set_state(STATE_KEY, avoid)
    return avoid


def avoid_lines(store: Store, signals: Sequence[str]) -> list[str]:
    """The prompt's "do not" lines for the problem these signals name."""
    avoid = store.get_state(STATE_KEY, AvoidList)
    return [e.line() for e in avoid.on(signals)] if avoid else []
