"""`gep history`: the recorded cycles of a workspace joined with their Prefect flow runs.

Flow-run states come from one request to the configured Prefect API (PREFECT_API_URL, the active profile, or
gep's background server) with a short timeout; when none answers, the events are shown with "-" at once.
With ``--all``, the runs that recorded no cycle (skipped scheduled ticks, refused runs) are listed too: only
Prefect keeps them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel

from gep import prefect_api as api
from gep.core.errors import GepError
from gep.core.learned import fix_label, is_specific
from gep.core.models import EvolutionEvent

# a log line's leading timestamp (ISO, Python logging, with or without brackets), not part of the problem
_LEAD_TIME = re.compile(r"^\s*\[?\d{4}-\d{2}-\d{2}[T ][\d:.,]+\s?(?:Z|UTC|[+-]\d{2}:?\d{2})?\]?\s*")


# after the outcome of a cycle drawn into the holdout (`holdout` in gep.toml): it ran without what was learned
HOLDOUT_MARK = "*"
HOLDOUT_LEGEND = "* holdout: ran without what was learned (gep report measures the effect)"


class HistoryRow(BaseModel):
    """One line of `gep history`: a recorded cycle, or (--all) a run that recorded none."""

    id: str  # as people type it (gep.core.event_ids)
    outcome: str
    intent: str = "-"
    gene: str = "-"
    fix: str = "-"
    run: str = "-"  # the run's UI link, else its id
    link: str | None = None
    state: str = "-"
    duration: str = "-"


class HistoryView(BaseModel):
    events: list[EvolutionEvent]
    runs: dict[str, api.FlowRunInfo] = {}
    others: list[api.FlowRunInfo] = []  # --all: runs with no recorded event
    note: str | None = None  # said on stderr (why states or runs are missing)
    limit: int = 20

    @classmethod
    def load(cls, workspace: Path, events: Sequence[EvolutionEvent], limit: int,
             include_runs: bool = False) -> HistoryView:
        view = cls(events=list(events), limit=limit)
        url = prefect_url()
        ids = [e.meta.flow_run_id for e in events if e.meta.flow_run_id]
        if url is None:
            if include_runs:
                view.note = ("--all: no Prefect server is configured or running (`gep server start`); skipped "
                             "and refused runs are kept only by Prefect")
            return view
        known = {i for i in ids if i}
        with ThreadPoolExecutor(2) as pool:  # --all: both requests at once (a round trip each on the server)
            pending = pool.submit(_other_runs, url, workspace, known, limit) if include_runs else None
            if ids:
                runs = api.read_flow_runs(url, sorted(known))  # one request for all of them
                if runs is None:
                    view.note = f"the Prefect server at {url} does not answer: flow-run states are shown as -"
                    return view
                view.runs = runs
            others = pending.result() if pending is not None else None
        if include_runs:
            if others is None:
                view.note = f"--all: the Prefect server at {url} does not answer; only recorded cycles are shown"
            else:
                view.others = others
        return view

    @property
    def rows(self) -> list[HistoryRow]:
        """Table rows, newest first: recorded cycles and (--all) the runs that recorded none; a run that
        finished a cycle (gep solidify) is shown as that, with the cycle's id."""
        from gep.core.event_ids import short_ids

        names = short_ids(e.id for e in self.events)
        by_run = {e.meta.flow_run_id: e for e in self.events if e.meta.flow_run_id}
        dated: list[tuple[datetime, HistoryRow]] = []
        for e in self.events:
            r = self.runs.get(e.meta.flow_run_id or "")
            dated.append((_when(e.meta.at), HistoryRow(
                id=names[e.id], outcome=outcome_shown(e) + (HOLDOUT_MARK if e.meta.holdout else ""),
                intent=str(e.intent),
                gene=",".join(e.genes_used) or "-", fix=fix_shown(e), run=_run_cell(r, e.meta.flow_run_id),
                link=r.link if r else None, state=r.state if r else "-", duration=_duration(r))))
        for r in self.others:
            outcome = r.tag("outcome") or r.state.lower()
            finished = by_run.get(r.tag("cycle-run") or "")
            solidify = finished is not None or r.name.startswith("solidify ")
            dated.append((_aware(r.start), HistoryRow(
                id=names[finished.id] if finished else "-", outcome=f"solidify: {outcome}" if solidify else outcome,
                run=_run_cell(r, r.id), link=r.link, state=r.state, duration=_duration(r))))
        dated.sort(key=lambda d: d[0], reverse=True)
        return [row for _, row in dated[: self.limit]]

    def as_json(self) -> list[dict[str, object]]:
        """The EvolutionEvent objects, each with its `flow_run` where Prefect knows it; --all adds
        `{"type": "FlowRun", "flow_run": {...}}` for runs that recorded no cycle."""
        # JSON edge: events as dumped by their model, plus the run beside them
        out: list[dict[str, object]] = []
        for e in self.events:
            item: dict[str, object] = e.model_dump(mode="json")
            run = self.runs.get(e.meta.flow_run_id or "")
            if run is not None:
                item["flow_run"] = run.model_dump(mode="json")
            out.append(item)
        out += [{"type": "FlowRun", "flow_run": r.model_dump(mode="json")} for r in self.others]
        return out


def fix_shown(event: EvolutionEvent) -> str:
    """A committed fix as later cycles judged it (gep/learning/resolved.py gives a verdict only once something ran
    after the commit)."""
    return fix_label(event.meta.fix_verdict, event.outcome.status, event.meta.delivery, bool(event.meta.commit))


def credit_shown(event: EvolutionEvent) -> str | None:
    """Which problem a committed fix was credited to (gep/learning/fix_credit.py) and, once judged, judged on: its verdict
    follows that problem, not the signals that triggered its cycle. None for a cycle with no credit recorded."""
    c = event.meta.fix_credit
    if c is None:
        return None
    named = [s for s in (c.judged or c.addressed) if is_specific(s)]
    if not named and c.missed and not c.judged:  # it touched none of the errors it was asked to fix
        return f"fix {fix_shown(event)}; touched none of: {_problem_text(c.missed[0])}"
    named = named or list(c.judged or c.addressed)
    if not named:
        return None
    named.sort(key=lambda s: s in c.credited)  # a trigger first; the label is about the one shown
    label = "judged on" if c.judged else "credited to"
    if named[0] in c.credited and named[0] not in event.signals:
        label += " (not a trigger)"
    more = f" (+{len(named) - 1} more)" if len(named) > 1 else ""
    return f"fix {fix_shown(event)}; {label}: {_problem_text(named[0])}{more}"


def kept_hints(workspace: Path, events: Sequence[EvolutionEvent]) -> list[str]:
    """Per commit kept on its own branch and not merged yet, the command that lands it (gep/git/kept.py):
    a branch merged or deleted since says nothing; edits of the person's in its files are named first."""
    from gep.core.event_ids import short_ids
    from gep.git.kept import kept_branch
    from gep.git.repo import open_repo

    kept = [e for e in events if e.meta.delivery == "kept" and e.meta.branch and e.meta.commit]
    if not kept:
        return []
    try:
        repo = open_repo(workspace)
    except GepError:  # the folder is no repository any more: nothing to land on
        return []
    names = short_ids(e.id for e in events)
    out = []
    for e in kept:
        k = kept_branch(repo, e.id, str(e.meta.branch))
        if k.state == "unmerged":
            out.append(f"{names[e.id]} kept on {k.branch}: `gep land {names[e.id]}` lands it")
            if k.dirty:
                out.append(f"  (commit or stash your edits to {', '.join(k.dirty[:3])} first)")
    return out


def _problem_text(signal: str) -> str:
    """A problem's signal as people read it: the error line without its leading timestamp."""
    line = signal.removeprefix("errsig:")
    return _LEAD_TIME.sub("", line, count=1) or line


def prefect_url() -> str | None:
    """PREFECT_API_URL (environment or profile), else the background server's address if one was started."""
    from gep.server import read_record

    configured = api.configured_api_url()
    if configured:
        return configured
    rec = read_record()
    return rec.api_url if rec else None


def _other_runs(url: str, workspace: Path, known: set[str], limit: int) -> list[api.FlowRunInfo] | None:
    runs = api.workspace_runs(url, api.workspace_tag(workspace), limit)
    if runs is None:
        return None
    real = workspace.resolve()
    return [r for r in runs if r.id not in known and _same_workspace(r.workspace, real)]


def _same_workspace(param: Path | None, real: Path) -> bool:
    """Runs of another workspace with the same folder name share the tag: keep this one's."""
    if param is None or "{{" in str(param):
        return True  # a refused run with no usable path: it carries this workspace's tag
    try:
        return Path(param).expanduser().resolve() == real
    except (OSError, RuntimeError):
        return False


def _run_cell(run: api.FlowRunInfo | None, run_id: str | None) -> str:
    return (run.link if run else None) or run_id or "-"


def _duration(run: api.FlowRunInfo | None) -> str:
    return f"{run.duration_s:.1f}s" if run and run.duration_s is not None else "-"


def _when(at: str | None) -> datetime:
    try:
        return _aware(datetime.fromisoformat(at.replace("Z", "+00:00"))) if at else _aware(None)
    except ValueError:
        return _aware(None)


def _aware(ts: datetime | None) -> datetime:
    if ts is None:
        return datetime.min.replace(tzinfo=UTC)
    return ts if ts.tzinfo else ts.replace(tzinfo=UTC)


def outcome_shown(e: EvolutionEvent) -> str:
    """The outcome, and for a host failure (gep/learning/attribution.py) what on the host it was: "failed (host: provider)"."""
    h = e.meta.host_failure
    return f"{e.outcome.status} (host: {h.kind})" if h is not None else str(e.outcome.status)
