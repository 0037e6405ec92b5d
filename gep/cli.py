"""The `gep` command line. Errors are one line on stderr and a non-zero exit, never a traceback."""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from gep.commands import feedback_cmd
from gep.commands.lessons_cmd import lessons_app
from gep.commands.store_cmd import store_app
from gep.errors import GepError

if TYPE_CHECKING:  # the hook (`gep capture`) must not pay for pydantic
    from gep.records import InputWarning

app = typer.Typer(
    name="gep",
    help="Evolve an AI agent's workspace with GEP cycles: signals from logs and memory, a gene, a change, "
    "validation, then a git commit or a clean rollback. Every cycle is a Prefect flow run.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
genes_app = typer.Typer(help="List and inspect genes (seed genes, workspace genes, imported genes).",
                        no_args_is_help=True)
app.add_typer(genes_app, name="genes")

# when piped, rich assumes 80 columns and truncates ids: give tables room instead
out = Console(soft_wrap=True, width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True, soft_wrap=True)

F = TypeVar("F", bound=Callable[..., Any])

WorkspaceOpt = Annotated[Path, typer.Option("--workspace", "-w", help="The workspace: a git repository an agent works in.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON on stdout and nothing else.")]


def fail(message: str, code: int = 2) -> typer.Exit:
    err.print(f"gep: {message}", markup=False, highlight=False)
    return typer.Exit(code)


def friendly(fn: F) -> F:
    """Turn GepError (and anything unexpected) into one stderr line and a non-zero exit."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except GepError as exc:
            raise fail(str(exc), exc.exit_code) from None
        except (typer.Exit, typer.Abort, KeyboardInterrupt):
            raise
        except Exception as exc:  # noqa: BLE001 - never a traceback at the user
            if os.environ.get("GEP_DEBUG"):
                raise
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise fail(f"{type(exc).__name__}: {text} (set GEP_DEBUG=1 for the traceback)", 1) from None

    return wrapper  # type: ignore[return-value]


app.add_typer(store_app(friendly), name="store")
app.add_typer(lessons_app(friendly), name="lessons")
feedback_cmd.register(app, friendly)


def _warn(warnings: list[InputWarning]) -> None:
    """Inputs skipped (a FIFO or a device among the gene files ...): one stderr line each."""
    for w in warnings:
        err.print(f"gep: warning: {w}", markup=False, highlight=False)


def _emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def _event_line(ev: Any) -> str:
    gene = ",".join(ev.genes_used) or "-"
    return f"{ev.id}  {ev.outcome.status:<17} {ev.intent:<9} {gene}"


def _open_store(workspace: Path) -> Any:
    from gep.api import open_store

    return open_store(workspace)


def _quiet_prefect(json_mode: bool) -> None:
    """Keep Prefect's own console chatter off the terminal when the user asked for JSON."""
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    if json_mode:
        os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")


# ------------------------------------------------------------------ cycle


@app.command()
@friendly
def cycle(
    workspace: WorkspaceOpt,
    mutator: Annotated[str | None, typer.Option(help="anthropic | command | prompt (default: anthropic when "
                                                "ANTHROPIC_API_KEY is set, else prompt).")] = None,
    agent_cmd: Annotated[str | None, typer.Option("--agent-cmd", help="External agent command for --mutator "
                                                  "command; the prompt arrives on stdin and in GEP_PROMPT_FILE.")] = None,
    strategy: Annotated[str | None, typer.Option(help="balanced | innovate | harden | repair-only | "
                                                 "early-stabilize | steady-state (default: automatic).")] = None,
    abandon_pending: Annotated[bool, typer.Option("--abandon-pending", help="Give up a cycle still awaiting "
                                                  "changes first (its change saved as a patch under "
                                                  ".gep/rescued/), and record it as abandoned.")] = False,
    branch: Annotated[str | None, typer.Option(help="Put the commit on this branch instead of yours.")] = None,
    review: Annotated[bool, typer.Option("--review", help="Pause for approval in the Prefect UI before "
                                         "committing.")] = False,
    seed: Annotated[int | None, typer.Option(help="Random seed, to replay a cycle's choices.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Run one evolution cycle on a workspace, as a Prefect flow run.

    Reads the workspace's logs, memory and transcripts, selects a gene, and has the change made: by Claude or
    an agent in the cycle's own clone under .gep/worktrees/ (your working tree, index, stash and files are
    never touched meanwhile, uncommitted work included), validated there in a sandbox, then committed and
    landed on your branch (or kept on gep/<event>, with the command that merges it). A failed change is
    saved as a patch under .gep/rescued/. With the prompt mutator the prompt is written to .gep/prompts/
    and the cycle waits for `gep solidify`. Without PREFECT_API_URL, Prefect starts a temporary local server.

    Exit status: 0 for success, empty or awaiting changes; 1 when the cycle failed; 2 for bad input.
    """
    _quiet_prefect(as_json)
    from gep.context import CycleRequest, hide_agent_cmd, open_cycle

    # refuse bad input (workspace, gep.toml, mutator, strategy, a pending cycle) before Prefect starts
    request = CycleRequest(workspace=workspace, mutator=mutator or None, strategy=strategy or None,
                           agent_cmd=agent_cmd or None, abandon_pending=abandon_pending, branch=branch or None)
    open_cycle(request, check_only=True)
    from flows.cycle import evolution_cycle
    from flows.runtime import foreground_run
    from gep.git import open_repo

    ws = open_repo(workspace).path
    with foreground_run():  # the flow run's parameters keep the agent command redacted
        event = evolution_cycle(workspace=str(ws), mutator=mutator, strategy=strategy,
                                agent_cmd=hide_agent_cmd(agent_cmd), abandon_pending=abandon_pending,
                                branch=branch, review=review, seed=seed)
    _print_outcome(event, as_json, ws)


def _print_outcome(event: Any, as_json: bool, ws: Path) -> None:
    if event is None:
        raise fail("the cycle did not run (skipped or cancelled); see the flow run in Prefect")
    if as_json:
        _emit_json(event.model_dump(mode="json"))
    else:
        _print_event(event, ws)
    status = event.outcome.status
    if status == "awaiting_changes" and event.meta.solidify_attempts:
        raise _not_solidified(event, ws)
    if status in ("failed", "interrupted"):
        raise typer.Exit(1)


def _say(text: str) -> None:
    out.print(text, markup=False, highlight=False)


def _print_event(event: Any, ws: Path) -> None:
    m = event.meta
    _say(_event_line(event))
    for note in m.start_notes or []:
        _say(f"  note: {note}")
    for r in m.failure_reasons or []:
        _say(f"  reason: {r}")
    if m.skip_reason:
        _say(f"  skipped: {m.skip_reason}")
    for w in m.warnings or []:
        _say(f"  warning: {w}")
    if m.commit:
        where = f"kept on {m.branch}" if m.delivery == "kept" else f"landed on {m.branch}" if m.branch else ""
        _say(f"  commit: {m.commit}" + (f" ({where})" if where else ""))
    if m.delivery_note:
        _say(f"  delivery: {m.delivery_note}")
    if m.merge_command:
        _say(f"  merge it with: {m.merge_command}")
    if m.rescued_patch:
        _say(f"  change saved in: {m.rescued_patch}\n  bring it back with: {m.rescue_command}")
    prompt_file = m.mutator_result.prompt_file if m.mutator_result else None
    if event.outcome.status == "awaiting_changes" and prompt_file and not m.solidify_attempts:
        _say(f"  prompt: {prompt_file}\n  next: make the change, then `gep solidify --workspace {ws}`")


def _not_solidified(event: Any, ws: Path) -> typer.Exit:
    """A person's change that did not pass (or could not be validated): kept, still awaiting; one line."""
    m = event.meta
    if m.not_run:
        return fail(f"{m.not_run}; nothing was rolled back: your edits are as they were, the cycle still "
                    f"awaits changes (run `gep solidify --workspace {ws}` again)", 2)
    return fail(f"validation failed (attempt {m.solidify_attempts}); your edits are kept and the cycle still "
                f"awaits changes: fix them and run `gep solidify --workspace {ws}` again, or give up with "
                f"`gep solidify --workspace {ws} --abandon` (your change is saved as a patch)", 1)


@app.command()
@friendly
def solidify(
    workspace: WorkspaceOpt,
    summary: Annotated[str | None, typer.Option("--summary", "-m", help="One line describing your change: the "
                                                "commit subject (default: the mutation's expected effect).")] = None,
    abandon: Annotated[bool, typer.Option("--abandon", help="Give the pending cycle up: your change is saved as "
                                          "a patch under .gep/rescued/ (the `git apply` line that brings it back "
                                          "is printed), then only its files are put back.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Finish a cycle left awaiting changes (prompt mode): validate, then commit your change.

    Runs the gene's validation commands on what changed since the prompt was written; a passing change is
    committed with GEP trailers (only the cycle's files; your other work stays as it is). When it fails, or
    validation cannot run here, nothing is rolled back: fix and run `gep solidify` again, or --abandon.
    Exit status: 0 committed (or abandoned), 1 validation failed, 2 bad input or validation could not run.
    """
    _quiet_prefect(as_json)
    from gep.context import CycleRequest, open_cycle

    # nothing awaiting changes: one line, before Prefect starts
    open_cycle(CycleRequest(workspace=workspace), resume=True, check_only=True)
    from flows.runtime import foreground_run
    from flows.solidify import solidify_pending
    from gep.git import open_repo

    ws = open_repo(workspace).path
    with foreground_run():
        event = solidify_pending(workspace=str(ws), summary=summary, abandon=abandon)
    _print_outcome(event, as_json, ws)


@app.command()
@friendly
def recover(workspace: WorkspaceOpt) -> None:
    """Clean up after crashed cycles and record their outcomes.

    Your working tree was never changed by a dead cycle. Its clone is removed (its change saved as a patch),
    an index.lock the engine left is removed, and the cycle is recorded: as the success it already was when
    its commit is on a branch, awaiting changes again when `gep solidify` was interrupted, else interrupted."""
    from gep.api import recover as do_recover

    done = do_recover(workspace)
    for line in [*done.warnings, *done.actions]:
        _say(line)
    for r in done.runs:
        _say(recovery_line(r))
    if not (done.runs or done.actions or done.warnings):
        out.print("nothing to recover")


def recovery_line(r: Any) -> str:
    if r.commit:
        where = f" (on {r.where})" if r.where else ""
        return f"recovered {r.event_id}: the cycle had committed {r.commit[:12]}{where}; recorded as a success"
    if r.outcome == "interrupted":
        saved = f"; {r.note}" if r.note else ""
        return f"recovered {r.event_id}: your tree was never changed by it{saved}; recorded as interrupted"
    if r.outcome == "awaiting_changes":
        return f"recovered {r.event_id}: {r.note}; it awaits changes again (run `gep solidify`)"
    return f"recovered {r.event_id}: its outcome ({r.outcome}) was already recorded"


# ------------------------------------------------------------------ history


@app.command()
@friendly
def history(
    workspace: WorkspaceOpt,
    limit: Annotated[int, typer.Option(min=1, help="How many events, newest first.")] = 20,
    as_json: JsonOpt = False,
) -> None:
    """List recorded cycles newest first, joined with their Prefect flow runs.

    Columns: event id, outcome, intent, gene, whether its committed fix held (verified / did not hold, as the
    next cycles saw the logs), the flow run (a link to the UI when PREFECT_API_URL is set), its state and
    duration. --json prints the EvolutionEvent objects, each with a `flow_run` object when
    Prefect knows the run (meta.flow_run_id holds the id of the run that recorded it).
    """
    _quiet_prefect(True)
    with _open_store(workspace) as store:
        events = store.list_events(limit=limit)
    from flows.history import flow_runs_for

    runs = flow_runs_for(events)
    if as_json:
        # EvolutionEvent objects; `flow_run` (state, duration, link) is added where Prefect knows the run
        _emit_json([{**e.model_dump(mode="json"),
                     **({"flow_run": runs[rid].model_dump(mode="json")} if (rid := e.meta.flow_run_id)
                        in runs else {})} for e in events])
        return
    table = Table("event", "outcome", "intent", "gene", "fix", "flow run", "state", "duration", show_lines=False)
    for e in events:
        r = runs.get(e.meta.flow_run_id or "")
        table.add_row(e.id, e.outcome.status, e.intent, ",".join(e.genes_used) or "-", fix_shown(e),
                      (r.link if r else None) or (e.meta.flow_run_id or "-"),
                      r.state if r else "-", f"{r.duration_s:.1f}s" if r and r.duration_s is not None else "-")
    out.print(table)
    for e in events:  # a commit kept on its branch: the command that merges it
        if e.meta.merge_command:
            _say(f"{e.id} kept on {e.meta.branch}: {e.meta.merge_command}")


def fix_shown(event: Any) -> str:
    """A committed fix as later cycles judged it: verified, did not hold, or not yet known."""
    verdict = event.meta.fix_verdict
    if verdict:
        return verdict.replace("_", " ")
    return "pending" if event.outcome.status == "success" and event.meta.commit else "-"


@app.command()
@friendly
def show(
    event_id: Annotated[str, typer.Argument(help="An event id as `gep history` lists it (evt_...).")],
    workspace: WorkspaceOpt,
) -> None:
    """Print one recorded event (EvolutionEvent, with meta) as JSON."""
    with _open_store(workspace) as store:
        ev = store.get_event(event_id)
    if ev is None:
        raise GepError(f"no event {event_id!r} in {workspace}")
    _emit_json(ev.model_dump(mode="json"))


# ------------------------------------------------------------------ genes


@genes_app.command("list")
@friendly
def genes_list(
    workspace: Annotated[Path | None, typer.Option("--workspace", "-w", help="Include the workspace's "
                                                   "genes and show active bans.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """List genes with their category, signal patterns and any active ban."""
    from gep.assets import load_genes_dir, seed_genes_dir, workspace_genes

    bans: dict[str, Any] = {}
    if workspace is not None:
        from gep.config import load_settings
        from gep.models import utc_now
        from gep.selector import active_bans

        skipped: list[InputWarning] = []
        with _open_store(workspace) as store:
            genes = workspace_genes(Path(workspace), store, skipped)
            events = store.recent_events(500)
            failed = store.list_failed_capsules()
            settings = load_settings(workspace)
        bans = {b.gene_id: b for b in active_bans(recent_events=events, signals=[], settings=settings,
                                                  failed_capsules=failed, genes=genes, now=utc_now())}
        _warn(skipped)
    else:
        genes = load_genes_dir(seed_genes_dir())
    if as_json:
        _emit_json([{**g.to_asset(), "ban": bans[g.id].model_dump(mode="json") if g.id in bans else None}
                    for g in genes])
        return
    table = Table("id", "category", "signals_match", "ban")
    for g in genes:
        b = bans.get(g.id)
        table.add_row(g.id, g.category, ", ".join(g.signals_match)[:70],
                      (f"banned ({b.cycles_left} cycles left): {b.reason}" if b and b.cycles_left is not None
                       else f"banned: {b.reason}" if b else ""))
    out.print(table)


@genes_app.command("show")
@friendly
def genes_show(
    gene_id: Annotated[str, typer.Argument(help="A gene id as `gep genes list` lists it.")],
    workspace: Annotated[Path | None, typer.Option("--workspace", "-w", help="Also look in the workspace's "
                                                   "genes (.gep/genes/ and imported ones).")] = None,
) -> None:
    """Print one gene as JSON (the asset, with its asset_id)."""
    from gep.assets import load_genes_dir, seed_genes_dir, workspace_genes

    if workspace is not None:
        skipped: list[InputWarning] = []
        with _open_store(workspace) as store:
            genes = workspace_genes(Path(workspace), store, skipped)
        _warn(skipped)
    else:
        genes = load_genes_dir(seed_genes_dir())
    for g in genes:
        if g.id == gene_id:
            _emit_json(g.to_asset())
            return
    raise GepError(f"no gene {gene_id!r} (see `gep genes list`)")


# ------------------------------------------------------------------ import / export


@app.command("import")
@friendly
def import_cmd(
    assets_dir: Annotated[Path, typer.Argument(help="Folder with genes.json, capsules.json, "
                                               "failed_capsules.json, events.jsonl (reference format).")],
    workspace: WorkspaceOpt,
    allow_mismatch: Annotated[bool, typer.Option("--allow-mismatch", help="Import assets whose asset_id does "
                                                 "not match their content (listed) instead of rejecting them.")] = False,
) -> None:
    """Import the reference implementation's asset files into the workspace's store.

    Malformed files stop the import before anything is written; assets whose asset_id does not match their
    content are rejected one by one and listed (or imported as they are with --allow-mismatch).
    """
    from gep.assets import import_assets

    if not assets_dir.is_dir():
        raise GepError(f"{assets_dir}: not a directory")
    with _open_store(workspace) as store:
        report = import_assets(store, assets_dir, allow_mismatch=allow_mismatch)
    out.print(report.summary(), markup=False, highlight=False)


@app.command("export")
@friendly
def export_cmd(
    out_dir: Annotated[Path, typer.Argument(help="Folder to write genes.json, capsules.json, "
                                            "failed_capsules.json and events.jsonl into.")],
    workspace: WorkspaceOpt,
) -> None:
    """Export the store as the reference implementation's asset files (existing files there are replaced).

    `gep import` of the folder into another workspace restores the same genes, capsules and events.
    """
    from gep.assets import export_assets

    with _open_store(workspace) as store:
        report = export_assets(store, out_dir)
    out.print(report.summary(), markup=False, highlight=False)


# ------------------------------------------------------------------ behavioural signals


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def capture(ctx: typer.Context) -> None:
    """Record the behavioural signals of one prompt: a Claude Code UserPromptSubmit hook (its JSON on stdin).

    Usage: gep capture --workspace DIR. Prints nothing and always exits 0; see README "Behavioural signals".
    """
    from gep.capture import main as capture_main

    raise typer.Exit(capture_main(ctx.args))


@app.command("signals")
@friendly
def signals_cmd(
    workspace: WorkspaceOpt,
    date: Annotated[str | None, typer.Option(help="Only this day (YYYY-MM-DD, UTC).")] = None,
    type_: Annotated[str | None, typer.Option("--type", help="Only this type: preference, emotion, "
                                              "correction, approval or style.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """List the behavioural signals captured in the workspace (memory/growth/signals/*.jsonl), oldest first.

    Lines that are not valid signals (written by other tools) are skipped and counted on stderr.
    """
    from datetime import date as Date

    from gep.behavior import SIGNAL_TYPES
    from gep.behavior_files import read_signals

    if not workspace.is_dir():
        raise GepError(f"{workspace}: not a directory")
    if type_ is not None and type_ not in SIGNAL_TYPES:
        raise GepError(f"--type must be one of {', '.join(SIGNAL_TYPES)}, not {type_!r}")
    try:
        day = Date.fromisoformat(date) if date is not None else None
    except ValueError:
        raise GepError(f"--date must be YYYY-MM-DD, not {date!r}") from None
    report = read_signals(workspace, day=day, type_=type_)
    if as_json:
        _emit_json([s.model_dump(mode="json", exclude_none=True) for s in report.signals])
    else:
        table = Table("ts", "type", "intensity", "summary", "context", "source")
        for s in report.signals:
            table.add_row(s.ts, s.type, str(s.intensity), s.summary, s.context or "", s.source or "")
        out.print(table)
    if report.malformed:
        err.print(f"gep: {report.malformed} malformed line(s) skipped", markup=False, highlight=False)
    _warn(report.warnings)


# ------------------------------------------------------------------ serve


@app.command()
@friendly
def serve(
    workspace: WorkspaceOpt,
    cron: Annotated[str, typer.Option(help="Schedule (cron, UTC).")] = "*/30 * * * *",
    mutator: Annotated[str | None, typer.Option(help="anthropic | command | prompt.")] = None,
    strategy: Annotated[str | None, typer.Option(help="Strategy preset (default: automatic).")] = None,
    agent_cmd: Annotated[str | None, typer.Option("--agent-cmd", help="External agent command for "
                                                  "--mutator command.")] = None,
) -> None:
    """Serve scheduled cycles for one workspace until Ctrl-C (needs a Prefect server: PREFECT_API_URL).

    Registers the deployments scheduled-<ws> (on --cron) and evolve-now-<ws> (its Run button in the UI
    triggers a cycle) and runs their flow runs in this process. See docs/deploy.md.
    """
    from gep.git import open_repo

    ws = open_repo(workspace)
    from flows.serve import serve_workspace
    from gep.context import hide_agent_cmd

    # the deployments' parameters keep the agent command redacted; this process runs their flow runs
    serve_workspace(ws.path, cron=cron, mutator=mutator, strategy=strategy, agent_cmd=hide_agent_cmd(agent_cmd))


def main() -> None:
    """The console script: like app(), but usage errors (unknown verb, bad flag value) are one line too."""
    if sys.argv[1:2] == ["capture"]:  # a hook on every prompt: typer's dispatch alone imports pydantic (~0.1 s)
        from gep.capture import main as capture_main

        sys.exit(capture_main(sys.argv[2:]))
    usage_errors, no_args = _click_exception_types()
    try:
        code = app(standalone_mode=False)
    except no_args as exc:
        sys.exit(exc.exit_code)  # the help was printed
    except usage_errors as exc:
        err.print(f"gep: {exc.format_message()} (see `{_command_path(exc)} --help`)", markup=False,
                  highlight=False)
        sys.exit(exc.exit_code)
    except typer.Abort:
        err.print("gep: aborted", markup=False, highlight=False)
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)


def _click_exception_types() -> tuple[tuple[type[Exception], ...], tuple[type[Exception], ...]]:
    """Click's exception classes: typer >= 0.2x raises those of its vendored copy, older ones click's own."""
    import click.exceptions

    modules: list[Any] = [click.exceptions]
    try:
        from typer._click import exceptions as vendored

        modules.append(vendored)
    except ImportError:
        pass
    return (tuple(m.ClickException for m in modules),
            tuple(m.NoArgsIsHelpError for m in modules if hasattr(m, "NoArgsIsHelpError")))


def _command_path(exc: Any) -> str:
    ctx = getattr(exc, "ctx", None)
    return ctx.command_path if ctx is not None else "gep"


if __name__ == "__main__":
    main()
