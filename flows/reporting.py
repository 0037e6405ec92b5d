"""What a cycle shows in Prefect: the per-workspace slot, the run's name and tags, artifacts, review pauses.

A run is reported once, when its outcome is known: its name and tags and every artifact in one batch of
concurrent requests (a cycle that runs for minutes is also named as soon as its gene is known). Finishing a
cycle that waited for changes also updates the run that started it: its outcome tag, state and cycle
artifact, so the UI never shows a committed cycle as awaiting changes.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, NamedTuple
from uuid import UUID

import httpx
from prefect import get_client, get_run_logger
from prefect.artifacts import MarkdownArtifact
from prefect.context import FlowRunContext
from prefect.exceptions import PrefectException

from flows import states
from gep.core.models import EvolutionEvent
from gep.prefect_api import workspace_key, workspace_tag
from gep.report.cycle_text import cycle_markdown, md_list

__all__ = ["workspace_key", "workspace_tag", "RunReport", "publish", "label_now", "review_gate",
           "cycle_markdown"]

GEP_TAG_PREFIXES = ("intent:", "gene:", "outcome:", "workspace:", "cycle-run:")


# ------------------------------------------------------------------ run name and tags


def run_name(cycle_number: int, event: EvolutionEvent) -> str:
    gene = (event.gene_id or "no-gene")
    return f"cycle-{cycle_number:04d} {event.intent} {gene}"


def run_tags(current: list[str], workspace: Path, event: EvolutionEvent | None, outcome: str | None) -> list[str]:
    """The run's own tags (deployment tags kept) with gep's: workspace, intent, gene and outcome."""
    tags = {t for t in current if not t.startswith(GEP_TAG_PREFIXES)} | {workspace_tag(workspace)}
    if event is not None:
        tags |= {f"intent:{event.intent}", f"gene:{(event.gene_id or 'no-gene')}"}
    if outcome and outcome != "running":
        tags.add(f"outcome:{outcome}")
    return sorted(tags)


def current_run() -> tuple[UUID, list[str]] | None:
    ctx = FlowRunContext.get()
    if not ctx or not ctx.flow_run:
        return None
    return ctx.flow_run.id, list(ctx.flow_run.tags or [])


def label_now(name: str, tags: list[str]) -> threading.Thread | None:
    """Name and tag the current run from a thread while the cycle goes on (join it before the final label)."""
    run = current_run()
    if run is None:
        return None

    def update() -> None:
        try:
            with get_client(sync_client=True) as client:
                client.update_flow_run(run[0], name=name, tags=tags)
        except (httpx.HTTPError, PrefectException):  # a label is cosmetic; the final one follows
            pass

    thread = threading.Thread(target=update, name="gep-label", daemon=True)
    thread.start()
    return thread


# ------------------------------------------------------------------ the report, published in one go


class OriginalRun(NamedTuple):
    """The run that started a cycle this run finishes, and what to tell it."""

    run_id: UUID
    event: EvolutionEvent
    workspace: Path
    key: str  # the cycle artifact's key
    markdown: str


class RunReport:
    """What the flow run publishes once the outcome is known; :func:`publish` sends it all at once."""

    def __init__(self, run_id: UUID | None) -> None:
        self.run_id = run_id
        self.name: str | None = None
        self.tags: list[str] | None = None
        self.artifacts: list[MarkdownArtifact] = []
        self.originals: list[OriginalRun] = []

    def markdown(self, key: str, text: str, description: str) -> None:
        self.artifacts.append(MarkdownArtifact(key=key, markdown=text, description=description,
                                               flow_run_id=self.run_id))


def cycle_report(run_id: UUID | None, current_tags: list[str], workspace: Path, cycle_number: int,
                 event: EvolutionEvent, prompt_file: str | None = None,
                 abandoned: Sequence[EvolutionEvent] = (), key: str | None = None) -> RunReport:
    """Name, tags and artifacts of a finished cycle, and the update of each run whose cycle this run
    finished: the one it solidified, the ones it abandoned (``key``: the workspace's workspace_key, when the
    caller has it)."""
    report = RunReport(run_id)
    key = key or workspace_key(workspace)
    original = _original_run(event, run_id)
    report.name = run_name(cycle_number, event)
    report.tags = run_tags(current_tags, workspace, event, str(event.outcome.status))
    if original is not None:  # this run finishes a cycle another run started: say which
        report.name = f"solidify {report.name}"
        report.tags = sorted([*report.tags, f"cycle-run:{original}"])
    markdown = cycle_markdown(event, workspace, prompt_file)
    # one artifact for the cycle (its signals and validation included), and the prompt when there is one:
    # every artifact is rows and events on the server, which a fleet of cycles pays for
    report.markdown(f"gep-{key}-cycle", markdown, f"GEP cycle {event.id} on {workspace}")
    if prompt_file and Path(prompt_file).is_file():
        report.markdown(f"gep-{key}-prompt", Path(prompt_file).read_text(errors="replace"),
                        "The GEP prompt awaiting changes")
    if original is not None:
        report.originals.append(OriginalRun(original, event, workspace, f"gep-{key}-cycle", markdown))
    for gone in abandoned:
        if (gone_run := _original_run(gone, run_id)) is not None:
            report.originals.append(OriginalRun(gone_run, gone, workspace, f"gep-{key}-cycle",
                                                cycle_markdown(gone, workspace)))
    return report


def _original_run(event: EvolutionEvent, run_id: UUID | None) -> UUID | None:
    """The run that started this cycle when this run only finishes it (gep solidify, abandon)."""
    try:
        original = UUID(str(event.meta.flow_run_id))
    except ValueError:
        return None
    return original if original != run_id else None


def skip_report(run_id: UUID | None, current_tags: list[str], workspace: Path, signals: list[str],
                reason: str, outcome: str = "skipped", key: str | None = None) -> RunReport:
    report = RunReport(run_id)
    report.name = f"{outcome} tick {workspace.name}" if outcome == "skipped" else f"{outcome} {workspace.name}"
    report.tags = run_tags(current_tags, workspace, None, outcome)
    if outcome == "skipped":
        report.markdown(f"gep-{key or workspace_key(workspace)}-cycle",
                        f"# Skipped scheduled tick\n\n{reason}\n\n## Signals\n{md_list(signals)}",
                        "Scheduled tick skipped")
    return report


async def publish(report: RunReport) -> None:
    """Send the report: the run's name and tags, every artifact and the original run's update, concurrently.

    Failures are logged, never raised: the event is already stored, and the report is for people."""
    calls: list[Coroutine[Any, Any, Any]] = []
    async with get_client() as client:
        if report.run_id is not None and report.name is not None:
            calls.append(client.update_flow_run(report.run_id, name=report.name, tags=report.tags))
        calls += [a.acreate(client) for a in report.artifacts]
        calls += [_update_original(client, report, original) for original in report.originals]
        results = await asyncio.gather(*calls, return_exceptions=True)
    failed = [r for r in results if isinstance(r, BaseException)]
    if failed:
        get_run_logger().warning("could not publish %d of %d reports to Prefect: %s", len(failed), len(results),
                                 failed[0])


async def _update_original(client: Any, report: RunReport, original: OriginalRun) -> None:
    """The run that started the cycle now tells its real outcome: tags, state and its cycle artifact."""
    from prefect.client.schemas.actions import ArtifactUpdate
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId, ArtifactFilterKey

    run, artifacts = await asyncio.gather(
        client.read_flow_run(original.run_id),
        client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[original.key]),
                                                             flow_run_id=ArtifactFilterFlowRunId(
                                                                 any_=[original.run_id]))))
    event = original.event
    tags = run_tags(list(run.tags or []), original.workspace, event, str(event.outcome.status))
    note = f"\n\nFinished by flow run `{report.run_id}` ({report.name})." if report.run_id else ""
    markdown = original.markdown + note
    artifact = (client.update_artifact(artifacts[0].id, ArtifactUpdate(data=markdown)) if artifacts else
                MarkdownArtifact(key=None, markdown=markdown, description=f"GEP cycle {event.id}: final outcome",
                                 flow_run_id=original.run_id).acreate(client))
    await asyncio.gather(client.update_flow_run(original.run_id, tags=tags),
                         client.set_flow_run_state(original.run_id, states.outcome_state(event, data=False),
                                                   force=True),
                         artifact)


# ------------------------------------------------------------------ review


def review_gate(decision_model: type[Any], timeout_s: int = 24 * 3600,
                on_decision: Callable[[Any, Any], None] | None = None,
                waiting: Callable[[Any], AbstractContextManager[None]] | None = None) -> Callable[[Any], bool]:
    """An approval callback that pauses the flow run until someone answers (`gep approve`/`gep reject` or the
    Prefect UI); the form shows the change (flows/review.py), ``waiting(request)`` is entered for the
    pause (it records and prints what waits) and ``on_decision(request, decision)`` hears the answer."""
    from prefect.flow_runs import pause_flow_run

    from flows.review import review_markdown

    def approve(summary: Any) -> bool:
        get_run_logger().info("validation passed; waiting for approval: %s", summary)
        # no initial decision: the reviewer has to choose one (an untouched Submit is refused by the form)
        form = decision_model.with_initial_data(description=review_markdown(summary))
        with waiting(summary) if waiting is not None else nullcontext():
            # _sync: the stage is sync code inside the async flow; pause from this thread, polling the API
            decision = pause_flow_run(  # type: ignore[call-overload]  # Prefect's stub omits sync_compatible's _sync
                wait_for_input=form, timeout=timeout_s, poll_interval=2, _sync=True)
        get_run_logger().info("review: %s%s", decision.decision, f" ({decision.note})" if decision.note else "")
        if on_decision is not None:
            on_decision(summary, decision)
        return str(decision.decision) == "approve"

    return approve
