"""`gep lessons list` and `gep lessons delete`: the workspace's memory of what was tried and what happened.

Plain store work: never imports Prefect. Lessons are append-only; a delete is the one exception, and it is
recorded (who, when, why, the lesson as it was).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from gep.cli.store_open import writable_store
from gep.cli.workspace_arg import WorkspaceOpt, workspace_or_here
from gep.core.event_ids import resolve_prefix
from gep.core.json_safe import dumps_finite
from gep.core.text_fit import wrap

if TYPE_CHECKING:
    from gep.learning.injections import ItemScore

CONTENT_SHOWN = 110


def lessons_app(friendly: Callable[[Any], Any]) -> typer.Typer:
    """The `lessons` command group; ``friendly`` turns errors into one line (gep.cli.root's)."""
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
    """List lessons oldest first: when, category, strength, topic and what was learned, and for a lesson
    given to agent sessions (the SessionStart hook, `gep context --session`) how often and whether it helped.

    A lesson another one superseded (its fix was later verified, or did not hold) is marked so; a lesson
    whose conflicts a synthesis reconciled says which one did.
    """
    from gep.api import read_store
    from gep.core.models import utc_now
    from gep.learning.lessons import heads, marker

    workspace = workspace_or_here(workspace)
    with read_store(workspace) as store:
        lessons = store.list_lessons()
    if topic:
        lessons = [x for x in lessons if x.topic == topic or x.gene_id == topic]
    used = _session_use(workspace.expanduser().resolve())
    if as_json:
        rows = [{**x.model_dump(mode="json"), **({"sessions": used[x.id].model_dump(exclude={"ref"})}
                                                 if x.id in used else {})} for x in lessons]
        sys.stdout.write(dumps_finite(rows) + "\n")
        return
    if not lessons:
        typer.echo("no lessons" + (f" on {topic}" if topic else "") + " yet")
        return
    current = {x.id for x in heads(lessons)}
    now = utc_now()
    for x in lessons:  # within the terminal's width: prose wraps, the full lesson is in --json
        state = "" if x.id in current else " (superseded)"
        state += f" (conflicts resolved by {x.resolved_by})" if x.resolved_by else ""
        content = x.content if len(x.content) <= CONTENT_SHOWN else x.content[:CONTENT_SHOWN - 3] + "..."
        u = used.get(x.id)
        asked = f" ({u.recalled} asked for)" if u and u.recalled else ""  # gep mcp's gep_recall
        lines = wrap(f"{x.id}  {x.category.value:<16} {x.strength:>5.2f} {marker(x, now)}{state}", "    ")
        for part in (x.topic, content, *([f"sessions: injected {u.injections}x{asked}, used {u.used}, ignored "
                                          f"{u.ignored}, score {u.score:.2f}"] if u else [])):
            lines += wrap("    " + part, "    ")
        typer.echo("\n".join(lines))


def _session_use(workspace: Path) -> dict[str, ItemScore]:
    """Per lesson: how often agent sessions received it and whether it helped (gep/learning/injections.py)."""
    from gep.core.models import utc_now
    from gep.learning.injections import read_log, scores

    return scores(*read_log(workspace), utc_now())


def delete(
    lesson_id: Annotated[str, typer.Argument(metavar="ID", help="A lesson id as `gep lessons list` shows it (or a unique prefix).")],
    reason: Annotated[str | None, typer.Option("--reason", help="Why it goes (kept in the audit record).")] = None,
    workspace: WorkspaceOpt = None,
) -> None:
    """Delete one lesson. Needs a reason; the audit table keeps who, when, why and the lesson's content."""
    from gep.core.models import utc_now
    from gep.learning.human_verdicts import default_author

    with writable_store(workspace) as store:
        lesson_id = resolve_prefix(lesson_id, [x.id for x in store.list_lessons()], what="lesson",
                                   listing="gep lessons list")
        record = store.delete_lesson(lesson_id, who=default_author(), why=reason or "", at=utc_now())
    typer.echo(f"deleted lesson {record.lesson_id} (recorded: by {record.deleted_by}, because {record.reason})")
