"""`gep lessons list` and `gep lessons delete`: the workspace's memory of what was tried and what happened.

Plain store work: never imports Prefect. Lessons are append-only; a delete is the one exception, and it is
recorded (who, when, why, the lesson as it was).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer

from gep.workspace_arg import WorkspaceOpt, workspace_or_here

CONTENT_SHOWN = 110


def lessons_app(friendly: Callable[[Any], Any]) -> typer.Typer:
    """The `lessons` command group; ``friendly`` turns errors into one line (gep.cli's)."""
    app = typer.Typer(help="The lessons cycles wrote (seed 004): list them, or delete one (audited).",
                      no_args_is_help=True)
    app.command("list")(friendly(list_lessons))
    app.command("delete")(friendly(delete))
    return app


def list_lessons(
    workspace: WorkspaceOpt = None,
    topic: Annotated[str | None, typer.Option("--topic", help="Only this topic (<gene id>@<signal key>, as "
                                              "listed), or every topic of one gene (its id).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON on stdout and nothing else.")] = False,
) -> None:
    """List lessons oldest first: when, category, strength, topic and what was learned.

    A lesson another one superseded (its fix was later verified, or did not hold) is marked so; a lesson
    whose conflicts a synthesis reconciled says which one did.
    """
    from gep.api import read_store
    from gep.memory import heads, marker
    from gep.models import utc_now

    with read_store(workspace_or_here(workspace)) as store:
        lessons = store.list_lessons()
    if topic:
        lessons = [x for x in lessons if x.topic == topic or x.gene_id == topic]
    if as_json:
        sys.stdout.write(json.dumps([x.model_dump(mode="json") for x in lessons], ensure_ascii=False) + "\n")
        return
    if not lessons:
        typer.echo("no lessons" + (f" on {topic}" if topic else "") + " yet")
        return
    current = {x.id for x in heads(lessons)}
    now = utc_now()
    for x in lessons:
        state = "" if x.id in current else " (superseded)"
        state += f" (conflicts resolved by {x.resolved_by})" if x.resolved_by else ""
        content = x.content if len(x.content) <= CONTENT_SHOWN else x.content[:CONTENT_SHOWN - 3] + "..."
        typer.echo(f"{x.id}  {x.category.value:<16} {x.strength:>5.2f} {marker(x, now)}{state}\n"
                   f"    {x.topic}\n    {content}")


def delete(
    lesson_id: Annotated[str, typer.Argument(metavar="ID", help="A lesson id as `gep lessons list` shows it.")],
    reason: Annotated[str | None, typer.Option("--reason", help="Why it goes (kept in the audit record).")] = None,
    workspace: WorkspaceOpt = None,
) -> None:
    """Delete one lesson. Needs a reason; the audit table keeps who, when, why and the lesson's content."""
    from gep.api import open_store
    from gep.models import utc_now
    from gep.verdicts import default_author

    with open_store(workspace_or_here(workspace)) as store:
        record = store.delete_lesson(lesson_id, who=default_author(), why=reason or "", at=utc_now())
    typer.echo(f"deleted lesson {record.lesson_id} (recorded: by {record.deleted_by}, because {record.reason})")
