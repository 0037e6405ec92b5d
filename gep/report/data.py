"""What `gep report` shows, computed from a workspace's store: typed, with no rendering (gep/report/html.py
draws it) and no Prefect.

Cycles are the recorded events in the order they were recorded. Each gets one outcome category: a committed
fix as later cycles judged it (verified, did not hold, not yet judged), a failure of the change, a failure of
the host (not the change's), an empty cycle, or waiting for a person. Long histories are grouped into at most
``MAX_BINS`` bins of consecutive cycles, so the charts keep one bar per bin at any length.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from gep.core.config import gep_dir, load_settings
from gep.core.errors import GepError
from gep.core.models import EvolutionEvent
from gep.eval.effect import LearningEffect, learning_effect
from gep.store.quick_read import open_quick

if TYPE_CHECKING:
    from gep.learning.feedback import FeedbackSignal
    from gep.learning.lessons import Lesson
    from gep.store.quick_read import ReadStore

MAX_BINS = 30
RATE_WINDOW = 10  # cycles in the rolling verified-fix rate
MAX_RATE_POINTS = 200  # points of the rate chart: past it, evenly spaced cycles (the page stays ~100 KB at any length)
TOP_GENES = 6  # genes charted by name; the rest are summed as "other genes"
PAGE = 1000

# Outcome categories, in the order the charts stack them (bottom first).
CATEGORIES: tuple[str, ...] = ("verified", "did_not_hold", "committed", "failed", "host_failure", "empty",
                               "waiting", "other")
CATEGORY_LABELS = {"verified": "verified fix", "did_not_hold": "fix did not hold", "committed": "committed, not "
                   "yet judged", "failed": "change failed", "host_failure": "host failure", "empty": "empty",
                   "waiting": "waiting for a person", "other": "other"}
NOT_RUN = frozenset({"skipped", "running"})  # a tick that did not run, a cycle still going: not charted

HOST_NOTE = ("As the engine recorded them (gep/learning/attribution.py): the agent command missing, or crashing or timing out "
             "before it edited anything; the model provider's errors; validation or the sandbox unable to run here. "
             "Interrupted cycles (killed, recovered later) are counted here too: no change failed.")

# Signal families: the signal's name (before ":" and any "(3x)") mapped to what it is about.
FAMILIES: dict[str, str] = {
    **dict.fromkeys(("log_error", "errsig", "recurring_error", "recurring_errsig", "error"), "errors"),
    **dict.fromkeys(("user_feature_request", "user_improvement_suggestion", "capability_gap"), "requests"),
    **dict.fromkeys(("perf_bottleneck", "high_tool_usage", "repeated_tool_usage"), "performance & tools"),
    **dict.fromkeys(("memory_missing", "session_logs_missing", "user_missing", "integration_key_missing",
                     "unsupported_input_type"), "missing inputs"),
    **dict.fromkeys(("failure_loop_detected", "repair_loop_detected", "empty_cycle_loop_detected",
                     "evolution_stagnation_detected", "high_failure_ratio", "force_innovation_after_repair_loop",
                     "force_steady_state", "evolution_saturation", "stable_success_plateau", "ban_gene"),
                    "loops & history"),
}
BEHAVIOUR_PREFIX = "user_"  # user_correction, user_preference, user_emotion ...: what people did (seed 000)


class Cycle(BaseModel):
    n: int  # 1-based, in recorded order
    event_id: str
    at: datetime | None = None
    status: str
    category: str
    gene: str | None = None
    families: list[str] = Field(default_factory=list)
    host_reason: str | None = None


class Bin(BaseModel):
    first: int  # cycle numbers the bin covers
    last: int
    counts: dict[str, int] = Field(default_factory=dict)  # category -> cycles

    @property
    def label(self) -> str:
        return str(self.first) if self.first == self.last else f"{self.first}-{self.last}"


class RatePoint(BaseModel):
    n: int  # the cycle the window ends at
    rate: float  # verified fixes per cycle in the window
    window: int  # cycles in the window (fewer at the start)


class GeneSeries(BaseModel):
    gene_id: str
    uses: list[int]  # per bin
    usefulness: list[float | None]  # feedback score (0-1, 0.5 neutral) at each bin's end; None: no feedback yet
    total: int
    verified: int


class FamilySeries(BaseModel):
    family: str
    counts: list[int]  # cycles per bin whose signals had this family


class LessonRow(BaseModel):
    id: str
    created_at: datetime
    category: str
    topic: str
    content: str
    strength: float
    current: bool  # not superseded by a later lesson on its topic


class AvoidRow(BaseModel):
    source: str  # where the entry is kept: "avoid list", "failed change"
    subject: str
    detail: str


class HostFailure(BaseModel):
    event_id: str
    at: datetime | None = None
    reason: str


class WorkspaceReport(BaseModel):
    name: str
    path: str
    cycles: list[Cycle] = Field(default_factory=list)
    not_run: int = 0  # skipped ticks and running cycles, not charted
    totals: dict[str, int] = Field(default_factory=dict)  # category -> cycles
    bins: list[Bin] = Field(default_factory=list)
    rate: list[RatePoint] = Field(default_factory=list)
    genes: list[GeneSeries] = Field(default_factory=list)
    families: list[FamilySeries] = Field(default_factory=list)
    lessons: list[LessonRow] = Field(default_factory=list)
    avoid: list[AvoidRow] = Field(default_factory=list)
    host_failures: list[HostFailure] = Field(default_factory=list)
    host_note: str = HOST_NOTE
    learning_effect: LearningEffect | None = None  # the holdout's groups and the measured effect (gep/eval/effect.py)
    error: str | None = None  # the store could not be read: why

    @property
    def verified_rate(self) -> float | None:
        return self.totals.get("verified", 0) / len(self.cycles) if self.cycles else None

    def as_json(self) -> dict[str, Any]:  # JSON edge: `gep report --json`, the page's data
        data = self.model_dump(mode="json", exclude={"learning_effect"})
        data["learning_effect"] = self.learning_effect.as_json() if self.learning_effect else None
        return data

    def summary(self) -> str:
        if self.error:
            return f"{self.name}: {self.error}"
        if not self.cycles:
            return f"{self.name}: no cycles yet"
        t = self.totals
        return (f"{self.name}: {len(self.cycles)} cycles: {t.get('verified', 0)} verified fixes, "
                f"{t.get('did_not_hold', 0)} did not hold, {t.get('failed', 0)} failed, "
                f"{t.get('host_failure', 0)} host failures")


class Report(BaseModel):
    generated_at: datetime
    workspaces: list[WorkspaceReport]

    @property
    def cycles(self) -> int:
        return sum(len(w.cycles) for w in self.workspaces)


# ------------------------------------------------------------------ reading the store


def read_events(store: ReadStore) -> list[EvolutionEvent]:
    """Every event, oldest first (the store pages newest first)."""
    out: list[EvolutionEvent] = []
    while True:
        page = store.list_events(limit=PAGE, offset=len(out))
        out += page
        if len(page) < PAGE:
            return out[::-1]


def workspace_report(store: ReadStore, workspace: Path) -> WorkspaceReport:
    """Everything the page shows for one workspace, read through the store's read API."""
    from gep.learning.lessons import heads

    events = read_events(store)
    lessons = store.list_lessons()
    current = {x.id for x in heads(lessons)}
    report = from_events(workspace, events, store.list_feedback())
    report.lessons = [lesson_row(x, x.id in current) for x in lessons]
    report.avoid = avoid_rows(store, events)
    return report


def from_events(workspace: Path, events: Sequence[EvolutionEvent],
                feedback: Sequence[FeedbackSignal] = ()) -> WorkspaceReport:
    """The cycle charts of ``events`` (oldest first); ``feedback`` gives the genes' usefulness over time."""
    run = [e for e in events if str(e.outcome.status) not in NOT_RUN]
    cycles = [cycle_of(i + 1, e) for i, e in enumerate(run)]
    report = WorkspaceReport(name=workspace.name, path=str(workspace), cycles=cycles,
                             not_run=len(events) - len(run))
    report.totals = dict(Counter(c.category for c in cycles))
    groups = binned(cycles)
    report.bins = [Bin(first=g[0].n, last=g[-1].n, counts=dict(Counter(c.category for c in g)))
                   for g in groups]
    report.rate = thinned(rolling_rate(cycles), MAX_RATE_POINTS)
    report.genes = gene_series(groups, feedback)
    report.families = family_series(groups)
    report.host_failures = [HostFailure(event_id=c.event_id, at=c.at, reason=c.host_reason or "")
                            for c in cycles if c.category == "host_failure"]
    report.learning_effect = learning_effect(run)
    return report


# ------------------------------------------------------------------ one cycle


def cycle_of(n: int, e: EvolutionEvent) -> Cycle:
    host = host_reason(e)
    return Cycle(n=n, event_id=e.id, at=parse_at(e.meta.at), status=str(e.outcome.status),
                 category=category(e, host), gene=e.gene_id,
                 families=sorted({family(s) for s in e.signals}), host_reason=host)


def category(e: EvolutionEvent, host: str | None) -> str:
    status = str(e.outcome.status)
    if status == "success":
        verdict = e.meta.fix_verdict
        if verdict in ("verified", "did_not_hold"):
            return verdict
        return "empty" if e.meta.empty_cycle else "committed"
    if host is not None:
        return "host_failure"
    if status == "failed":
        return "empty" if e.meta.empty_cycle and not e.meta.failure_reasons else "failed"
    if status == "empty":
        return "empty"
    if status == "awaiting_changes":
        return "waiting"
    return "other"  # abandoned, or a status another tool wrote


def host_reason(e: EvolutionEvent) -> str | None:
    """Why a cycle failed when that was not its change's fault (the engine records it: gep/learning/attribution.py),
    or why it was interrupted (killed, recovered later: nobody's change failed); else None."""
    recorded = e.meta.host_failure
    if recorded is not None:
        return f"{recorded.kind}: {recorded.reason}"
    if str(e.outcome.status) == "interrupted":
        reasons = list(e.meta.failure_reasons or [])
        return reasons[0] if reasons else "interrupted"
    return None


def family(signal: str) -> str:
    name = signal.split(":", 1)[0].split("(", 1)[0].strip()
    if name in FAMILIES:
        return FAMILIES[name]
    return "people (behaviour)" if name.startswith(BEHAVIOUR_PREFIX) else "other"


def parse_at(at: str | None) -> datetime | None:
    if not at:
        return None
    try:
        ts = datetime.fromisoformat(at.replace("Z", "+00:00"))
    except ValueError:
        return None
    return ts if ts.tzinfo else ts.replace(tzinfo=UTC)


# ------------------------------------------------------------------ series


def binned(cycles: Sequence[Cycle]) -> list[list[Cycle]]:
    """Consecutive cycles in at most MAX_BINS groups of equal size (the last one may be shorter)."""
    size = max(1, math.ceil(len(cycles) / MAX_BINS))
    return [list(cycles[i:i + size]) for i in range(0, len(cycles), size)]


def rolling_rate(cycles: Sequence[Cycle], window: int = RATE_WINDOW) -> list[RatePoint]:
    out: list[RatePoint] = []
    for i in range(len(cycles)):
        span = cycles[max(0, i + 1 - window): i + 1]
        out.append(RatePoint(n=cycles[i].n, rate=sum(c.category == "verified" for c in span) / len(span),
                             window=len(span)))
    return out


def thinned(points: Sequence[RatePoint], limit: int) -> list[RatePoint]:
    """At most ``limit`` of ``points``, evenly spaced, the first and the last kept (10,000 cycles made a
    2 MB page of circles: issue 45, B02)."""
    if len(points) <= limit:
        return list(points)
    step = (len(points) - 1) / (limit - 1)
    return [points[round(i * step)] for i in range(limit)]


def gene_series(groups: Sequence[Sequence[Cycle]], feedback: Sequence[FeedbackSignal]) -> list[GeneSeries]:
    """The most used genes' uses per bin, and their feedback score (gep/learning/feedback.py) once the bin's cycles were
    judged: the signals about its cycles and every earlier one, folded in time order."""
    from gep.learning.feedback import fold

    bin_of = {c.event_id: i for i, g in enumerate(groups) for c in g}
    used = Counter(c.gene for g in groups for c in g if c.gene)
    out: list[GeneSeries] = []
    for gene, total in used.most_common(TOP_GENES):
        signals = [(bin_of.get(s.event_id or "", _bin_at(groups, s.created_at)), s) for s in feedback
                   if s.gene_id == gene]
        useful: list[float | None] = []
        for i in range(len(groups)):
            upto = [s for b, s in signals if b <= i]
            useful.append(round(fold(upto).value, 3) if upto else None)
        out.append(GeneSeries(gene_id=gene, uses=[sum(c.gene == gene for c in g) for g in groups],
                              usefulness=useful, total=total,
                              verified=sum(c.gene == gene and c.category == "verified" for g in groups for c in g)))
    rest = [sum(1 for c in g if c.gene and c.gene not in {s.gene_id for s in out}) for g in groups]
    if any(rest):
        out.append(GeneSeries(gene_id="other genes", uses=rest, usefulness=[None] * len(groups), total=sum(rest),
                              verified=0))
    return out


def _bin_at(groups: Sequence[Sequence[Cycle]], at: datetime) -> int:
    """A signal about no recorded cycle (a person's, say): the bin whose cycles had started by then."""
    started = [i for i, g in enumerate(groups) if g[0].at is not None and g[0].at <= at]
    return started[-1] if started else 0


def family_series(groups: Sequence[Sequence[Cycle]]) -> list[FamilySeries]:
    seen = Counter(f for g in groups for c in g for f in c.families)
    return [FamilySeries(family=f, counts=[sum(f in c.families for c in g) for g in groups])
            for f, _ in seen.most_common()]


# ------------------------------------------------------------------ lessons and what to avoid


def lesson_row(x: Lesson, current: bool) -> LessonRow:
    return LessonRow(id=x.id, created_at=x.created_at, category=str(x.category.value), topic=x.topic,
                     content=x.content, strength=round(float(x.strength), 3), current=current)


def avoid_rows(store: object, events: Sequence[EvolutionEvent]) -> list[AvoidRow]:
    """The avoid-list's active entries (built from the recorded cycles, oldest first, as selection builds it:
    gep/learning/avoid.py), then the failed changes the store keeps so that later cycles do not repeat them."""
    from gep.learning.avoid import build_avoid_list

    rows = [AvoidRow(source="avoid list", subject=e.gene_id, detail=e.line())
            for e in build_avoid_list(events).entries if e.active]
    failed = getattr(store, "list_failed_capsules", None)
    if callable(failed):
        for fc in _listed(failed):
            rows.append(AvoidRow(source="failed change", subject=str(getattr(fc, "gene", None) or "-"),
                                 detail=str(getattr(fc, "failure_reason", "") or getattr(fc, "summary", ""))))
    return rows


def _listed(reader: Any) -> Iterable[Any]:
    try:
        return list(reader())
    except Exception:  # noqa: BLE001 - a reader of another version's shape: the page says nothing is listed
        return []


# ------------------------------------------------------------------ opening the workspaces


def load_report(workspaces: Sequence[Path], now: datetime) -> Report:
    """The report of ``workspaces`` (checked paths). A workspace no cycle ran on has no store and gets no
    ``.gep/``; one whose store cannot be read is reported with the reason, and the others still are."""
    out: list[WorkspaceReport] = []
    for path in workspaces:
        try:
            out.append(_read_one(path))
        except GepError as exc:
            out.append(WorkspaceReport(name=path.name, path=str(path), error=str(exc)))
    return Report(generated_at=now, workspaces=out)


def _read_one(path: Path) -> WorkspaceReport:

    if not path.is_dir():
        raise GepError("no such folder here (a path on another machine?)")
    settings = load_settings(path)
    if not settings.database_url and not gep_dir(path).is_dir():
        return WorkspaceReport(name=path.name, path=str(path))
    quick = open_quick(path, settings)
    if quick is not None:
        with quick:
            return workspace_report(quick, path)
    # deferred: the full store imports SQLAlchemy (~0.4 s), needed only when the quick reader declines
    from gep.store import Store

    with Store.for_workspace(path, settings) as store:
        return workspace_report(store, path)
