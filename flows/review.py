"""What a reviewer sees and says in a review-mode pause: the change (files and a bounded diff) in the form's
description, and their decision and note kept as feedback on the cycle's gene (gep.cycle.record_learning.record_review)."""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Any

from gep.cycle.context import CycleContext
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


def review_recorder(ctx: CycleContext) -> Callable[[ReviewRequest, Any], None]:
    """What the review gate calls with the reviewer's decision: it becomes feedback with their note."""

    def recorded(request: ReviewRequest, decision: Any) -> None:
        choice = ReviewChoice(decision.decision)
        if choice is ReviewChoice.ask_for_changes:
            return  # not a verdict on the gene: the note is in the run's log (flows/reporting.review_gate)
        record_review(ctx.store, request.event_id, approved=choice is ReviewChoice.approve,
                      note=str(decision.note or ""), now=ctx.clock(), author="reviewer (Prefect UI)")

    return recorded
