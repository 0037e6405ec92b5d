"""`gep feedback EVENT_ID helpful|not_helpful` and `gep feedback stats`: people steer gene selection.

Plain store work: never imports Prefect (the `feedback` flow in flows/feedback.py does the same from the UI).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from gep.cli.workspace_arg import WorkspaceOpt, workspace_or_here
from gep.core.errors import GepError
from gep.core.json_safe import dumps_finite

STATS = "stats"
VERDICTS = ("helpful", "not_helpful")


def register(app: typer.Typer, friendly: Callable[[Any], Any]) -> None:
    """Add the `feedback` command to ``app``; ``friendly`` turns errors into one line (gep.cli.root's)."""
    app.command("feedback")(friendly(feedback))


def feedback(
    target: Annotated[str, typer.Argument(metavar="EVENT_ID|stats", help="The event to judge (an id as "
                                          "`gep history` lists it, or a unique prefix), or `stats` for the scores.")],
    verdict: Annotated[str | None, typer.Argument(metavar="[helpful|not_helpful]",
                                                  help="Your verdict on the event's change.")] = None,
    note: Annotated[str | None, typer.Option("--note", help="Why (kept with the feedback and in a lesson the "
                                             "next prompt for this gene can recall).")] = None,
    workspace: WorkspaceOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="stats: print JSON on stdout and nothing else.")] = False,
) -> None:
    """Tell GEP whether a cycle's change helped, or show what feedback says about each gene.

    `gep feedback evt_... helpful --note "fixed the report"` (or not_helpful) moves the score of the gene the
    event used, in the event's signal situation and overall; selection weighs it beside the gene's record
    (usefulness_weight). Each person's verdict on an event counts once (a person: the workspace's git
    user.name, else user.email, else the login name). `gep feedback stats` lists per gene the global and
    per-situation scores, the count of each signal (used, ignored, helpful, not_helpful) and the last
    signal's time.
    """
    workspace = workspace_or_here(workspace)
    if target == STATS:
        if verdict is not None or note is not None:
            raise GepError("`gep feedback stats` takes no verdict or --note")
        _stats(workspace, as_json)
        return
    if verdict not in VERDICTS:
        raise GepError(f"say whether {target} was helpful or not_helpful "
                       f"(`gep feedback {target} helpful|not_helpful`), not {verdict!r}" if verdict
                       else f"say whether {target} was helpful or not_helpful (`gep feedback {target} helpful`)")
    from gep.api import feedback_store
    from gep.core.models import iso, utc_now
    from gep.learning.feedback import FeedbackIndex
    from gep.learning.human_verdicts import give_feedback, person

    now = utc_now()
    from gep.core.event_ids import resolve

    with feedback_store(workspace) as store:
        target = resolve(target, store.event_ids())
        signal = give_feedback(store, target, verdict, now=now, note=note, author=person(workspace))
        use = FeedbackIndex(store.list_feedback()).usefulness(signal.gene_id, signal.situation, now)
    if signal.created_at != now:  # this person judged the event before: it counts once
        typer.echo(f"you ({signal.author}) already gave {signal.kind.value} on {target} at {iso(signal.created_at)}: "
                   "a person's feedback on an event counts once (nothing recorded)")
        return
    typer.echo(f"recorded {verdict} on {target} ({signal.gene_id}); its usefulness here is now "
               f"{use.score:.2f} ({use.scope}, {use.signals} signal(s))")


def _stats(workspace: Path, as_json: bool) -> None:
    from gep.api import read_store
    from gep.core.models import iso, utc_now
    from gep.learning.feedback import feedback_stats

    with read_store(workspace) as store:
        stats = feedback_stats(store.list_feedback(), utc_now())
    if as_json:
        sys.stdout.write(dumps_finite([s.model_dump(mode="json") for s in stats]) + "\n")
        return
    if not stats:
        typer.echo("no feedback yet (cycles and `gep feedback EVENT_ID helpful|not_helpful` add it)")
        return
    typer.echo(f"{'gene / situation':<60} {'score':>5} {'used':>5} {'ignored':>7} {'helpful':>7} "
               f"{'not_helpful':>11}  last signal")
    for g in stats:
        rows = [(g.gene_id, g.score, g.counts, g.last_signal_at)]
        rows += [("  " + (", ".join(s.situation) or "(no signals)")[:56], s.score, s.counts, s.last_signal_at)
                 for s in g.situations]
        for name, score, c, last in rows:
            typer.echo(f"{name:<60} {score:>5.2f} {c.used:>5} {c.ignored:>7} {c.helpful:>7} {c.not_helpful:>11}  "
                       f"{iso(last) if last else '-'}")
