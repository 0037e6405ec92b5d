"""What a reviewer sees and says in a review-mode pause: the change (files and a bounded diff) in the form's
description, the wait recorded and printed on the terminal with the commands that answer it (`gep approve`,
`gep reject`: gep/cycle/review_wait.py), and their decision and note kept as feedback on the cycle's gene
(gep.cycle.record_learning.record_review)."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Any

from prefect.context import FlowRunContext
from prefect.settings import get_current_settings

from gep.cycle.context import CycleContext
from gep.cycle.review_wait import ReviewWait, announce, clear
from gep.cycle.solidify import ReviewRequest
from gep.learning.human_verdicts import record_review
from gep.mutators.gep_prompt import fence


class ReviewChoice(StrEnum):
    """A reviewer's explicit decision (the form's required field)."""

    approve = "approve"  # commit it; the gene counts it helpful, with the note
    reject = "reject"  # roll it back (a patch under .gep/rescued/); not helpful, the note in the reviewer's words
    ask_for_changes = "ask for changes"  # not committed (the patch is kept), nothing counts against the gene


FORM_DIFF_CHARS = 6_000  # the form is read in a browser; the full diff stays in the capsule or the repository
FORM_FILES = 50


def review_markdown(request: ReviewRequest) -> str:
    """The pause form's description: the commit message, the files and the (already redacted) diff."""
    diff = request.diff if len(request.diff) <= FORM_DIFF_CHARS else \
        request.diff[:FORM_DIFF_CHARS] + f"\n... [{len(request.diff) - FORM_DIFF_CHARS} more characters]"
    files = [f"- `{f}`" for f in request.changed_files[:FORM_FILES]]
    if len(request.changed_files) > FORM_FILES:
        files.append(f"- ... and {len(request.changed_files) - FORM_FILES} more")
    opening, closing = fence(diff, "diff")
    return "\n".join([
        f"# Review {request.event_id}", "", f"**{request.message.splitlines()[0]}**", "",
        f"Validation passed. {request.files} file(s), {request.lines} line(s) changed:", *files, "",
        opening + diff.rstrip("\n") + closing,
        "Choose a decision (there is no default): **approve** commits it; **reject** rolls it back (the change is "
        "saved as a patch under `.gep/rescued/`) and counts as not helpful for the gene, your note kept as your "
        "words; **ask for changes** keeps it out too (the patch is saved) without counting against the gene, "
        "your note logged with the run. The next cycles on this gene can recall an approve or reject note."])


@contextmanager
def announced_wait(ctx: CycleContext, request: ReviewRequest) -> Iterator[None]:
    """For the pause: the wait recorded in the store (what `gep status`, `gep approve` and `gep reject` read)
    and said at once on the terminal that started the cycle, with the commands that decide it."""
    run = FlowRunContext.get()
    url = get_current_settings().api.url
    wait = ReviewWait(event_id=request.event_id, flow_run_id=str(run.flow_run.id) if run and run.flow_run else None,
                      api_url=str(url).rstrip("/") if url else None, subject=request.message.splitlines()[0],
                      files=list(request.changed_files), lines=request.lines)
    announce(ctx.store, wait)
    here = Path.cwd().resolve() == ctx.repo.path.resolve()
    arg = "" if here else f" -w {shlex.quote(str(ctx.repo.path))}"
    print("\n".join(wait.notice(arg)), file=sys.stderr, flush=True)
    try:
        yield
    finally:
        clear(ctx.store, request.event_id)


def review_recorder(ctx: CycleContext) -> Callable[[ReviewRequest, Any], None]:
    """What the review gate calls with the reviewer's decision: it becomes feedback with their note."""

    def recorded(request: ReviewRequest, decision: Any) -> None:
        choice = ReviewChoice(decision.decision)
        if choice is ReviewChoice.ask_for_changes:
            return  # not a verdict on the gene: the note is in the run's log (flows/reporting.review_gate)
        record_review(ctx.store, request.event_id, approved=choice is ReviewChoice.approve,
                      note=str(decision.note or ""), now=ctx.clock(), author="reviewer")

    return recorded
