"""What one cycle has found, decided and made so far: the value its stages pass along.

Everything a stage produces lives here (the signals, the gene, the event, the run record, the tree the
change is made in, the notes opening the cycle left); the resources it uses (clock, environment, settings,
store, repository, lock) are on gep/cycle/context.py's ``CycleContext``. It imports no stage logic.
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel, ConfigDict, Field

from gep.core.models import CycleRun, EvolutionEvent, Gene, Mutation
from gep.core.records import GenePoolRecord, HistoryRecord, MutatorResult
from gep.cycle.collect_behavior import BehaviorCapture
from gep.cycle.solidify import ReviewRequest
from gep.cycle.tree import CycleTree
from gep.genes.personality import PersonalitySelection
from gep.genes.selector import Selection
from gep.genes.strategy import StrategyPreset
from gep.learning.resolved import ResolutionCheck
from gep.signals.sources import SourceBundle

Approve = Callable[[ReviewRequest], bool]


class CycleState(BaseModel):
    """What the stages have found and decided so far; each stage fills in its part."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    notes: list[str] = Field(default_factory=list)  # what opening the cycle did: recovery, abandoning
    recovered: list[str] = Field(default_factory=list)  # crashed cycles recovered on the way in
    abandoned: list[str] = Field(default_factory=list)  # cycles awaiting changes given up on the way in
    run: CycleRun | None = None  # the open run record (from the begin stage on; finishing: the pending one)
    tree: CycleTree | None = None  # where the change is made and checked (from the begin stage on)
    approve: Approve | None = None  # review mode: asked before committing (the flow pauses for a person)
    sources: SourceBundle = Field(default_factory=SourceBundle)  # logs and transcripts: since the last change
    behavior: BehaviorCapture | None = None  # behavioural signals captured from the transcripts read
    events: list[EvolutionEvent] = Field(default_factory=list)  # recent finished cycles, oldest first
    signals: list[str] = Field(default_factory=list)
    fixes: ResolutionCheck | None = None  # earlier fixes against this cycle's signals (gep/cycle/fixes.py)
    history: HistoryRecord = Field(default_factory=HistoryRecord)
    strategy: StrategyPreset | None = None
    selection: Selection | None = None
    pool: GenePoolRecord | None = None  # genes not selectable here; the automatic gene, when one was needed
    persona: PersonalitySelection | None = None
    gene: Gene | None = None
    mutation: Mutation | None = None
    event: EvolutionEvent | None = None
    result: MutatorResult | None = None
    summary: str = ""  # finishing a pending cycle: the person's one line
    skipped: str | None = None  # a scheduled tick that did nothing: why
    done: bool = False  # the outcome is settled: the remaining stages are not run
