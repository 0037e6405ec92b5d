"""What a cycle shows in Prefect: run name and tags, artifacts, the per-workspace slot, review pauses."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from prefect import get_client, get_run_logger
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.concurrency.sync import concurrency
from prefect.context import FlowRunContext
from prefect.exceptions import ObjectNotFound

from gep.context import CycleContext
from gep.models import EvolutionEvent


def workspace_key(path: Path) -> str:
    """A stable slug for names and artifact keys (lowercase letters, digits, dashes)."""
    name = re.sub(r"[^a-z0-9]+", "-", path.name.lower()).strip("-")[:30] or "ws"
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:8]
    return f"{name}-{digest}"


# ------------------------------------------------------------------ concurrency: one cycle per repository


def ensure_limit(name: str, limit: int = 1) -> None:
    from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate

    with get_client(sync_client=True) as client:
        try:
            client.read_global_concurrency_limit_by_name(name)
        except ObjectNotFound:
            try:
                client.create_global_concurrency_limit(GlobalConcurrencyLimitCreate(name=name, limit=limit))
            except Exception:  # noqa: BLE001 - created concurrently by another run: fine
                client.read_global_concurrency_limit_by_name(name)


@contextmanager
def workspace_slot(path: Path, timeout_s: float) -> Iterator[None]:
    """Hold the workspace's global concurrency slot: overlapping ticks never run two cycles on one repo."""
    name = f"gep-workspace-{workspace_key(path)}"
    ensure_limit(name)
    with concurrency(name, occupy=1, timeout_seconds=timeout_s, strict=True):
        yield


# ------------------------------------------------------------------ run name and tags


def label_run(ctx: CycleContext, event: EvolutionEvent) -> None:
    run_ctx = FlowRunContext.get()
    if not run_ctx or not run_ctx.flow_run:
        return
    gene = event.genes_used[0] if event.genes_used else "no-gene"
    name = f"cycle-{ctx.cycle_number:04d} {event.intent} {gene}"
    tags = {t for t in (run_ctx.flow_run.tags or []) if not t.startswith(("intent:", "gene:", "outcome:"))}
    tags |= {f"workspace:{ctx.workspace.path.name}", f"intent:{event.intent}", f"gene:{gene}"}
    if event.outcome.status != "running":
        tags.add(f"outcome:{event.outcome.status}")
    try:
        with get_client(sync_client=True) as client:
            client.update_flow_run(run_ctx.flow_run.id, name=name, tags=sorted(tags))
    except Exception as exc:  # noqa: BLE001 - a label is cosmetic: never fail the cycle for it
        get_run_logger().warning("could not label the flow run: %s", exc)


# ------------------------------------------------------------------ artifacts


def _md_list(items: list[str]) -> str:
    return "\n".join(f"- `{i}`" for i in items) or "- (none)"


def cycle_markdown(event: EvolutionEvent, prompt_file: str | None = None) -> str:
    m = event.meta
    sel, mut = m.selector, m.mutation
    lines = [
        f"# {event.id}: {event.outcome.status}",
        "",
        f"**Intent** {event.intent} · **Gene** {', '.join(event.genes_used) or '(none)'} · "
        f"**Strategy** {m.strategy or '?'} · **Mutator** {m.mutator or '?'}",
        "",
        "## Signals",
        _md_list(event.signals),
        "",
        "## Selection",
        _md_list(sel.reasons if sel else []),
    ]
    if sel and sel.bans_applied:
        lines += ["", "Bans applied: " + ", ".join(f"`{b.gene_id}`" for b in sel.bans_applied)]
    lines += ["", "## Mutation", f"{mut.category if mut else '?'} · risk {mut.risk_level if mut else '?'} · "
              f"{mut.expected_effect if mut else ''}"]
    lines += ["", "## Blast radius", f"{event.blast_radius.files} files, {event.blast_radius.lines} lines"
              + (f" ({m.blast_severity})" if m.blast_severity else "")]
    if m.validation:
        lines += ["", "## Validation"] + [f"- {'✅' if v.ok else '❌'} `{v.cmd}`" for v in m.validation]
    if m.failure_reasons:
        lines += ["", "## Failure reasons", _md_list(m.failure_reasons)]
    if m.commit:
        lines += ["", f"## Commit\n`{m.commit}`" + (f" on `{m.branch}`" if m.branch else "")]
    if prompt_file:
        lines += ["", f"## Awaiting changes\nPrompt: `{prompt_file}`. Make the change, then run "
                  "`gep solidify --workspace <workspace>`."]
    return "\n".join(lines)


def publish(ctx: CycleContext, event: EvolutionEvent, prompt_file: str | None = None) -> None:
    key = workspace_key(ctx.workspace.path)
    try:
        create_markdown_artifact(key=f"gep-{key}-cycle", markdown=cycle_markdown(event, prompt_file),
                                 description=f"GEP cycle {event.id} on {ctx.workspace.path}")
        create_table_artifact(key=f"gep-{key}-signals",
                              table=[{"signal": s} for s in event.signals] or [{"signal": "(none)"}],
                              description="Signals of the latest cycle")
        rows = [{"command": v.cmd, "ok": v.ok} for v in event.meta.validation or []]
        create_table_artifact(key=f"gep-{key}-validation", table=rows or [{"command": "(not run)", "ok": None}],
                              description="Validation commands of the latest cycle")
        if prompt_file and Path(prompt_file).is_file():
            create_markdown_artifact(key=f"gep-{key}-prompt", markdown=Path(prompt_file).read_text(),
                                     description="The GEP prompt awaiting changes")
    except Exception as exc:  # noqa: BLE001 - artifacts are for people; the event is already stored
        get_run_logger().warning("could not publish artifacts: %s", exc)


def publish_skip(ctx: CycleContext, signals: list[str], reason: str) -> None:
    key = workspace_key(ctx.workspace.path)
    create_markdown_artifact(key=f"gep-{key}-cycle",
                             markdown=f"# Skipped scheduled tick\n\n{reason}\n\n## Signals\n{_md_list(signals)}",
                             description="Scheduled tick skipped under steady state")


# ------------------------------------------------------------------ review


def review_gate(decision_model: type[Any], timeout_s: int = 24 * 3600,
                on_decision: Callable[[Any, Any], None] | None = None) -> Callable[[Any], bool]:
    """An approval callback that pauses the flow run until someone answers in the Prefect UI; the form shows
    the change (flows/review.py) and ``on_decision(request, decision)`` hears the answer."""
    from prefect.flow_runs import pause_flow_run

    from flows.review import review_markdown

    def approve(summary: Any) -> bool:
        get_run_logger().info("validation passed; waiting for approval in the Prefect UI: %s", summary)
        form = decision_model.with_initial_data(description=review_markdown(summary), approve=False)
        decision = pause_flow_run(wait_for_input=form, timeout=timeout_s, poll_interval=2)
        if on_decision is not None:
            on_decision(summary, decision)
        return bool(decision.approve)

    return approve
