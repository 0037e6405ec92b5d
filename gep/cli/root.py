"""The `gep` command line. Errors are one line on stderr and a non-zero exit, never a traceback."""

from __future__ import annotations

import functools
import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from gep.cli import context_cmd, eval_cmd, feedback_cmd, fleet_cmd, init_cmd, mcp_cmd, report_cmd
from gep.cli.genes_cmd import genes_app
from gep.cli.land_cmd import register as register_land
from gep.cli.lessons_cmd import lessons_app
from gep.cli.prefect_console import VerboseOpt, quiet_prefect_console
from gep.cli.prefect_link import err, prefect_api_for_run
from gep.cli.prefect_link import say as _say
from gep.cli.review_cmd import register as register_review
from gep.cli.status_cmd import register as register_status
from gep.cli.store_cmd import store_app
from gep.cli.store_open import emit_json, out, store_only, warn, writable_store
from gep.cli.workspace_arg import WorkspaceOpt, folder_or_here, workspace_or_here
from gep.core.errors import ConfigError, GepError

if TYPE_CHECKING:  # the hook (`gep capture`) must not pay for pydantic
    from click.exceptions import ClickException, NoArgsIsHelpError

    from gep.cycle.handoff import Opened


# `gep --help` lists the commands in the order a person uses them: a cycle, what waits on them and its review,
# the history; then fleets and serving, setting up and checking (init, doctor, server), the learning's views,
# the agent's side, moving data. A command not named here is listed after these.
HELP_ORDER = ("cycle", "status", "approve", "reject", "solidify", "history", "show", "feedback", "undo", "land",
              "recover", "fleet", "serve", "init", "doctor", "server", "report", "eval", "genes", "lessons",
              "signals", "context", "capture", "mcp", "store", "import", "export")


class _InOrderOfUse(typer.core.TyperGroup):
    """The command group whose help lists the commands in HELP_ORDER."""

    def list_commands(self, ctx: Any) -> list[str]:
        rank = {name: i for i, name in enumerate(HELP_ORDER)}
        return sorted(super().list_commands(ctx), key=lambda name: rank.get(name, len(rank)))


app = typer.Typer(
    name="gep",
    cls=_InOrderOfUse,
    help="Evolve an AI agent's workspace with GEP cycles: signals from logs and memory, a gene, a change, "
    "validation, then a git commit or a clean rollback. Every cycle is a Prefect flow run.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # click's help: paragraphs re-wrapped to the terminal, flags without a <bool> metavar
)
server_app = typer.Typer(help="One local Prefect server in the background: every `gep` run reports to it and "
                         "its UI shows them.", no_args_is_help=True)

F = TypeVar("F", bound=Callable[..., Any])

HereOpt = WorkspaceOpt  # every command defaults to the repository the current directory is in
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
        except Exception as exc:  # never a traceback at the user (re-raised as one line)
            if os.environ.get("GEP_DEBUG"):
                raise
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise fail(f"{type(exc).__name__}: {text} (set GEP_DEBUG=1 for the traceback)", 1) from None

    return wrapper  # type: ignore[return-value]


app.add_typer(genes_app(friendly), name="genes")  # `gep --help` lists them in HELP_ORDER
app.add_typer(server_app, name="server")
app.add_typer(store_app(friendly), name="store")
app.add_typer(lessons_app(friendly), name="lessons")
feedback_cmd.register(app, friendly)
fleet_cmd.register(app, friendly)
context_cmd.register(app, friendly)
report_cmd.register(app, friendly)
eval_cmd.register(app, friendly)
mcp_cmd.register(app, friendly)
init_cmd.register(app, friendly)
register_status(app, friendly)  # issue 44: the terminal is enough
register_review(app, friendly)
register_land(app, friendly)


def _event_line(ev: Any) -> str:
    gene = ",".join(ev.genes_used) or "-"
    return f"{ev.id}  {ev.outcome.status:<17} {ev.intent:<9} {gene}"


def _quiet_prefect(json_mode: bool) -> None:
    """Keep Prefect's own console chatter off the terminal when the user asked for JSON."""
    if json_mode:
        os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")


def _build_cycle_models() -> None:
    """A cycle validates with dozens of the engine's models: build them now, held models first, rather than
    each on first use (gep/core/prebuild.py)."""
    import gep.cycle.pipeline  # noqa: F401 - the stages' models too
    from gep.core.prebuild import build_models

    build_models()


def _run_flow(call: Callable[[], Any], opened: Opened, as_json: bool, agent_cmd: str | None = None) -> Any:
    """Run a cycle's flow (``call`` makes the coroutine) against a server, handing it what the check
    ``opened`` (gep/cycle/handoff.py; closed here when the run ends); the event it recorded.

    When Prefect fails after the cycle recorded its outcome (the server went away mid-run), the outcome is
    read from the store: a recorded success is never reported as a failure."""
    _quiet_prefect(as_json)
    api_url = prefect_api_for_run()
    from flows.runtime import foreground_run, run_flow
    from flows.states import event_of
    from gep.cycle.handoff import handing_off

    with opened, handing_off(opened, agent_cmd) as handoff:
        try:
            with foreground_run(api_url):
                state = run_flow(call())
            if state.is_cancelled():
                raise GepError(f"the cycle did not run: {state.message}")
            return event_of(state), api_url
        except GepError:
            raise
        except Exception as exc:  # Prefect failed: the store may already hold the outcome, else re-raised
            event = opened.store.get_event(handoff.recorded) if handoff.recorded else None
            if event is None:
                raise
            _say(f"Prefect failed after the cycle was recorded ({type(exc).__name__}: {exc}); "
                 "its outcome is read from the store")
            return event, None


MutatorOpt = Annotated[str | None, typer.Option(help="anthropic | command | prompt (default: anthropic when "
                                                "ANTHROPIC_API_KEY is set, else prompt).")]
StrategyOpt = Annotated[str | None, typer.Option(help="balanced | innovate | harden | repair-only | "
                                                 "early-stabilize | steady-state (default: automatic).")]
AgentCmdOpt = Annotated[str | None, typer.Option("--agent-cmd", help="External agent command for --mutator "
                                                 "command; the prompt arrives on stdin and in GEP_PROMPT_FILE.")]


@app.command()
@friendly
def cycle(
    workspace: WorkspaceOpt = None,
    mutator: MutatorOpt = None,
    agent_cmd: AgentCmdOpt = None,
    strategy: StrategyOpt = None,
    abandon_pending: Annotated[bool, typer.Option("--abandon-pending", help="Give up a cycle still awaiting "
                                                  "changes first (its change saved as a patch under "
                                                  ".gep/rescued/), and record it as abandoned.")] = False,
    branch: Annotated[str | None, typer.Option(help="Put the commit on this branch instead of yours (a cycle "
                                               "made in a clone; a prompt cycle commits on your current "
                                               "branch).")] = None,
    review: Annotated[bool, typer.Option("--review", help="Pause for approval before committing: it prints the "
                                         "`gep approve ID` / `gep reject ID --note` to run from another "
                                         "terminal (or answer in the Prefect UI).")] = False,
    seed: Annotated[int | None, typer.Option(min=0, help="Random seed, to replay a cycle's choices.")] = None,
    llm_signals: Annotated[bool, typer.Option("--llm-signals", help="Also ask Claude for behavioural signals in "
                                              "the exchanges the rules found nothing in (needs "
                                              "ANTHROPIC_API_KEY; as llm_signals = true in gep.toml).")] = False,
    as_json: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Run one evolution cycle on a workspace, as a Prefect flow run.

    Reads the workspace's logs, memory and transcripts, selects a gene, and has the change made: by Claude or
    an agent in the cycle's own clone under .gep/worktrees/ (your working tree, index, stash and files are
    never touched meanwhile, uncommitted work included), validated there in a sandbox, then committed and
    landed on your branch (or kept on gep/<event>, with the command that merges it). A failed change is
    saved as a patch under .gep/rescued/. With the prompt mutator the prompt is written to .gep/prompts/
    and the cycle waits for `gep solidify`. The run reports to PREFECT_API_URL when set, else to gep's
    background server (`gep server start`), which the first run starts.

    Exit status: 0 for success, empty or awaiting changes; 1 when the cycle failed; 2 for bad input.
    """
    from gep.core.request import CycleRequest, parse_request
    from gep.cycle.context import check_cycle
    from gep.cycle.handoff import shown_agent_cmd

    workspace = workspace_or_here(workspace)
    quiet_prefect_console(verbose)
    _build_cycle_models()
    # refuse bad input (workspace, gep.toml, mutator, strategy, a pending cycle) before Prefect starts
    request = parse_request(CycleRequest, dict(
        workspace=workspace, mutator=mutator, strategy=strategy, agent_cmd=agent_cmd,
        abandon_pending=abandon_pending, branch=branch, review=review, seed=seed, llm_signals=llm_signals))
    opened = check_cycle(request)  # handed to the flow's run, which takes it over
    ws = checked_path(workspace)
    # the flow run's parameters keep the agent command redacted (the hand-off carries the real one)
    shown = request.model_copy(update={"workspace": ws, "agent_cmd": shown_agent_cmd(request.agent_cmd)})

    def call() -> Any:
        from flows.cycle import evolution_cycle

        return evolution_cycle(request=shown, return_state=True)

    event, api_url = _run_flow(call, opened, as_json, request.agent_cmd)
    _print_outcome(event, as_json, ws, api_url)


def checked_path(workspace: Path) -> Path:
    """The workspace a successful check opened: open_repo refuses any path that is not its repository's
    top, so the repository's path is this one, resolved (opening it again would run git three more times)."""
    return workspace.expanduser().resolve()


def _print_outcome(event: Any, as_json: bool, ws: Path, api_url: str | None = None) -> None:
    if event is None:
        raise fail("the cycle did not run (skipped); see its flow run in the Prefect UI", 1)
    if as_json:
        emit_json(event.model_dump(mode="json"))
    else:
        _print_event(event, ws)
        run_id = event.meta.solidify_flow_run_id or event.meta.flow_run_id
        if api_url and run_id:
            from gep.prefect_api import run_link

            _show(f"  flow run: {run_link(api_url, run_id)}")
    status = event.outcome.status
    if status == "awaiting_changes" and event.meta.solidify_attempts:
        raise _not_solidified(event, ws)
    if status in ("failed", "interrupted"):
        raise typer.Exit(1)


def _show(text: str) -> None:
    """A line of the command's own output (stdout); _say is for notes on stderr."""
    out.print(text, markup=False, highlight=False)


def _print_event(event: Any, ws: Path) -> None:
    from gep.core.event_ids import short_id

    m = event.meta
    _show(_event_line(event))
    for note in m.start_notes or []:
        _show(f"  note: {note}")
    for r in m.failure_reasons or []:
        _show(f"  reason: {r}")
    if m.skip_reason:
        _show(f"  skipped: {m.skip_reason}")
    for w in m.warnings or []:
        _show(f"  warning: {w}")
    if m.commit:
        where = f"kept on {m.branch}" if m.delivery == "kept" else f"landed on {m.branch}" if m.branch else ""
        _show(f"  commit: {m.commit}" + (f" ({where})" if where else ""))
    if m.delivery_note:
        _show(f"  delivery: {m.delivery_note}")
    if m.merge_command:
        _show(f"  merge it with: {_merge_hint(ws, event)}")
        _show(f"  or land it with: gep land {short_id(event.id)}")
    if m.rescued_patch:
        _show(f"  change saved in: {m.rescued_patch}\n  bring it back with: {m.rescue_command}")
    prompt_file = m.mutator_result.prompt_file if m.mutator_result else None
    if event.outcome.status == "awaiting_changes" and prompt_file and not m.solidify_attempts:
        _show(f"  prompt: {prompt_file}\n  next: make the change, then run: gep solidify --workspace {shlex.quote(str(ws))}")


def _merge_hint(ws: Path, event: Any) -> str:
    """The kept commit's merge command, naming first the files of it the person has edits to (gep/git/kept.py)."""
    from gep.git.kept import kept_branch
    from gep.git.repo import open_repo

    try:
        return kept_branch(open_repo(ws), event.id, event.meta.branch).hint() or event.meta.merge_command
    except GepError:
        return str(event.meta.merge_command)


def _not_solidified(event: Any, ws: Path) -> typer.Exit:
    """A person's change that did not pass (or could not be validated): kept, still awaiting; one line."""
    m = event.meta
    q = shlex.quote(str(ws))  # the commands below run as printed, from anywhere
    if m.not_run:
        return fail(f"{m.not_run}; nothing was rolled back: your edits are as they were, the cycle still "
                    f"awaits changes (run `gep solidify --workspace {q}` again)", 2)
    return fail(f"validation failed (attempt {m.solidify_attempts}); your edits are kept and the cycle still "
                f"awaits changes: fix them and run `gep solidify --workspace {q}` again, or give up with "
                f"`gep solidify --workspace {q} --abandon` (your change is saved as a patch)", 1)


@app.command()
@friendly
def solidify(
    workspace: WorkspaceOpt = None,
    summary: Annotated[str | None, typer.Option("--summary", "-m", help="One line describing your change: the "
                                                "commit subject (default: the mutation's expected effect).")] = None,
    abandon: Annotated[bool, typer.Option("--abandon", help="Give the pending cycle up: your change is saved as "
                                          "a patch under .gep/rescued/ (the `git apply` line that brings it back "
                                          "is printed), then only its files are put back.")] = False,
    as_json: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Finish a cycle left awaiting changes (prompt mode): validate, then commit your change.

    Runs the gene's validation commands on what changed since the prompt was written; a passing change is
    committed with GEP trailers (only the cycle's files; your other work stays as it is). When it fails, or
    validation cannot run here, nothing is rolled back: fix and run `gep solidify` again, or --abandon.
    The flow run that started the cycle is updated with its final outcome.
    Exit status: 0 committed (or abandoned), 1 validation failed, 2 bad input or validation could not run.
    """
    from gep.core.request import CycleRequest
    from gep.cycle.context import check_cycle

    workspace = workspace_or_here(workspace)
    quiet_prefect_console(verbose)
    _build_cycle_models()
    # nothing awaiting changes: one line, before Prefect starts
    opened = check_cycle(CycleRequest(workspace=workspace), resume=True)  # handed to the flow's run
    ws = checked_path(workspace)

    def call() -> Any:
        from flows.solidify import solidify_pending
        from gep.core.sanitize import redact

        # redacted before it becomes a flow-run parameter in Prefect's database (the commit redacts it too)
        return solidify_pending(workspace=str(ws), summary=redact(summary or ""), abandon=abandon,
                                return_state=True)

    event, api_url = _run_flow(call, opened, as_json)
    _print_outcome(event, as_json, ws, api_url)


@app.command()
@friendly
def recover(workspace: WorkspaceOpt = None) -> None:
    """Clean up after crashed cycles and record their outcomes.

    Your working tree was never changed by a dead cycle. Its clone is removed (its change saved as a patch),
    an index.lock the engine left is removed, and the cycle is recorded: as the success it already was when
    its commit is on a branch, awaiting changes again when `gep solidify` was interrupted, else interrupted."""
    from gep.api import recover as do_recover

    done = do_recover(workspace_or_here(workspace))
    for line in [*done.warnings, *done.actions]:
        _show(line)
    for r in done.runs:
        _show(recovery_line(r))
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
    workspace: HereOpt = None,
    limit: Annotated[int, typer.Option(min=1, help="How many events, newest first.")] = 20,
    show_all: Annotated[bool, typer.Option("--all", help="Also list the runs that recorded no cycle: "
                                           "skipped scheduled ticks and refused runs (from Prefect).")] = False,
    wide: Annotated[bool, typer.Option("--wide", help="Also the flow run's link, state and duration (shown "
                                       "anyway from 120 columns).")] = False,
    as_json: JsonOpt = False,
) -> None:
    """List recorded cycles newest first, joined with their Prefect flow runs.

    Columns: the event's short id (what `gep show`, `gep feedback` take; a link to its flow run where the
    terminal shows links), outcome, intent, gene, whether its committed fix held (verified / did not hold, as
    the next cycles saw the logs) and the run's duration; --wide (or 120 columns) adds the flow run's link
    and state. The summary line follows; then, per committed fix, the problem it was credited to (the error
    whose code it touched) or, once judged, the problem its verdict was given on.
    Flow-run states come from PREFECT_API_URL or gep's background server in one request when it answers,
    and show as "-" otherwise. --json prints the EvolutionEvent objects, each with a `flow_run` object when
    Prefect knows the run (meta.flow_run_id holds the id of the run that recorded it).
    """
    from gep.cli import history_cmd

    with store_only(workspace) as (path, store):
        events = store.list_events(limit=limit) if store is not None else []
    view = history_cmd.HistoryView.load(path, events, limit=limit, include_runs=show_all)
    if view.note:
        _say(view.note)
    if as_json:
        emit_json(view.as_json())
        return
    if not view.rows:
        out.print(f"no cycles recorded in {path} yet (start one with `gep cycle --workspace "
                  f"{shlex.quote(str(path))}`)", markup=False, highlight=False)
        return
    from gep.cli.history_table import print_history

    print_history(out, view.rows, events, wide)
    _history_notes(events, path)


def _history_notes(events: list[Any], path: Path) -> None:
    """Below the table, by short id and within the terminal's width: how to land a commit kept on its branch
    and not merged yet (gep/cli/history_cmd.py), and what failed on the host."""
    from gep.cli import history_cmd  # deferred as in history: store-only commands skip it
    from gep.core.event_ids import short_ids
    from gep.core.text_fit import wrap

    for hint in history_cmd.kept_hints(path, events):
        for line in wrap(hint, "  "):
            _show(line)
    names = short_ids(e.id for e in events)
    for e in events:
        if e.meta.host_failure:  # not the gene's doing (gep/learning/attribution.py): what failed on the host
            for line in wrap(f"{names[e.id]} host failure ({e.meta.host_failure.kind}): {e.meta.host_failure.reason}"):
                _show(line)


@app.command()
@friendly
def show(
    event_id: Annotated[str, typer.Argument(help="An event id as `gep history` lists it (or any unique "
                                            "prefix of it), or its run's name in Prefect's UI (cycle-0003).")],
    workspace: HereOpt = None,
) -> None:
    """Print one recorded event (EvolutionEvent, with meta) as JSON: indented on a terminal, one line when
    piped."""
    from gep.core.event_ids import resolve_in

    with store_only(workspace) as (path, store):
        ev = store.get_event(resolve_in(event_id, store)) if store is not None else None
    if ev is None:
        raise GepError(f"no event {event_id!r} in {path}")
    emit_json(ev.model_dump(mode="json"), indent=2 if sys.stdout.isatty() else None)  # piped: one line


# ------------------------------------------------------------------ genes


# ------------------------------------------------------------------ import / export


@app.command("import")
@friendly
def import_cmd(
    assets_dir: Annotated[Path, typer.Argument(help="Folder with genes.json, capsules.json, "
                                               "failed_capsules.json, events.jsonl (reference format).")],
    workspace: WorkspaceOpt = None,
    allow_mismatch: Annotated[bool, typer.Option("--allow-mismatch", help="Import assets whose asset_id does "
                                                 "not match their content (listed) instead of rejecting them.")] = False,
) -> None:
    """Import the reference implementation's asset files into the workspace's store.

    Malformed files stop the import before anything is written; assets whose asset_id does not match their
    content are rejected one by one and listed (or imported as they are with --allow-mismatch).
    """
    from gep.assets.gene_files import import_assets

    if not assets_dir.is_dir():
        raise GepError(f"{assets_dir}: not a directory")
    with writable_store(workspace) as store:
        report = import_assets(store, assets_dir, allow_mismatch=allow_mismatch)
    out.print(report.summary(), markup=False, highlight=False)


@app.command("export")
@friendly
def export_cmd(
    out_dir: Annotated[Path, typer.Argument(help="Folder to write genes.json, capsules.json, "
                                            "failed_capsules.json and events.jsonl into.")],
    workspace: WorkspaceOpt = None,
) -> None:
    """Export the store as the reference implementation's asset files (existing files there are replaced).

    `gep import` of the folder into another workspace restores the same genes, capsules and events.
    """
    from gep.assets.gene_files import export_assets

    with writable_store(workspace) as store:
        report = export_assets(store, out_dir)
    out.print(report.summary(), markup=False, highlight=False)


# ------------------------------------------------------------------ behavioural signals


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def capture(ctx: typer.Context) -> None:
    """Record the behavioural signals of one prompt: a Claude Code UserPromptSubmit hook (its JSON on stdin).

    Usage: gep capture --workspace DIR. Prints nothing and always exits 0; see README "Behavioural signals".
    Writes one file a day in DIR/memory/growth/signals/ (the folder ignores itself in git: its .gitignore is
    '*'; delete that file to track them); `gep signals` lists them.
    """
    from gep.sessions.capture import main as capture_main

    if {"--help", "-h"} & set(ctx.args):  # a person asking, not a hook: it would wait for a payload on stdin
        typer.echo(ctx.get_help())
        raise typer.Exit(0)
    raise typer.Exit(capture_main(ctx.args))


@app.command("signals")
@friendly
def signals_cmd(
    workspace: WorkspaceOpt = None,
    date: Annotated[str | None, typer.Option(help="Only this day (YYYY-MM-DD, UTC).")] = None,
    type_: Annotated[str | None, typer.Option("--type", help="Only this type: preference, emotion, "
                                              "correction, approval or style.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """List the behavioural signals captured in the workspace (memory/growth/signals/*.jsonl), oldest first.

    Lines that are not valid signals (written by other tools) are skipped and counted on stderr.
    """
    from datetime import date as Date

    from gep.signals.behavior import SIGNAL_TYPES
    from gep.signals.behavior_log import read_signals

    workspace = folder_or_here(workspace)  # capture writes in any folder; what it wrote is listed there too
    if type_ is not None and type_ not in SIGNAL_TYPES:
        raise GepError(f"--type must be one of {', '.join(SIGNAL_TYPES)}, not {type_!r}")
    try:
        day = Date.fromisoformat(date) if date is not None else None
    except ValueError:
        raise GepError(f"--date must be YYYY-MM-DD, not {date!r}") from None
    report = read_signals(workspace, day=day, type_=type_)
    if as_json:
        emit_json([s.model_dump(mode="json", exclude_none=True) for s in report.signals])
    else:
        from gep.core.text_fit import wrap

        for s in report.signals:  # a signal a few lines, wrapped to the terminal: --json has each field
            lines = wrap(f"{s.ts}  {s.type} (intensity {s.intensity})" + (f"  {s.source}" if s.source else ""),
                         "    ")
            for part in (s.summary, *([f"context: {s.context}"] if s.context else [])):
                lines += wrap(f"    {part}", "    ")
            _show("\n".join(lines))
    if report.malformed:
        err.print(f"gep: {report.malformed} malformed line(s) skipped", markup=False, highlight=False)
    warn(report.warnings)


# ------------------------------------------------------------------ serve


@app.command()
@friendly
def serve(
    workspace: WorkspaceOpt = None,
    cron: Annotated[str, typer.Option(help="Schedule (cron, UTC).")] = "*/30 * * * *",
    mutator: MutatorOpt = None,
    strategy: StrategyOpt = None,
    agent_cmd: AgentCmdOpt = None,
) -> None:
    """Serve scheduled cycles for one workspace until Ctrl-C (needs a running Prefect server: `gep server
    start`, or PREFECT_API_URL).

    Registers the deployments evolution-cycle/scheduled-<ws> (on --cron) and evolution-cycle/evolve-now-<ws>
    (its Run button in the UI triggers a cycle), <ws> being the workspace's folder name and a short hash,
    and runs their flow runs in this process. See docs/deploy.md.
    """
    from gep import prefect_api, server
    from gep.core.request import ScheduledRequest, parse_request
    from gep.git import open_repo

    ws = open_repo(workspace_or_here(workspace))
    # what needs no Prefect is checked before importing it (~2.5 s of CPU): a wrong choice (read as `gep cycle`
    # reads it) or a server that does not answer is one line at once
    parse_request(ScheduledRequest, {"workspace": str(ws.path), "mutator": mutator, "strategy": strategy})
    configured = prefect_api.configured_api_url()
    if configured and not prefect_api.healthy(configured, timeout_s=5.0):
        raise ConfigError(f"cannot reach the Prefect server at {configured} (PREFECT_API_URL): "
                          f"{server.START_SERVER}")
    from flows.serve import ServeRequest, serve_workspace
    from gep.cycle.handoff import shown_agent_cmd

    # the deployments' parameters keep the agent command redacted
    request = ServeRequest.checked(ws.path, cron=cron, mutator=mutator, strategy=strategy,
                                   agent_cmd=shown_agent_cmd(agent_cmd))
    url = configured or server.running_api_url()
    if url is None:
        raise ConfigError(f"gep serve needs a running Prefect server: {server.START_SERVER}")
    os.environ["PREFECT_API_URL"] = url  # the runner's flow-run processes report there too
    serve_workspace(request, api_url=url, say=_say)


# ------------------------------------------------------------------ server


@server_app.command("start")
@friendly
def server_start() -> None:
    """Start one local Prefect server in the background (or find the one running) and print its UI address.

    `gep cycle`, `gep solidify`, `gep serve` and `gep history` use it when PREFECT_API_URL is not set. The
    port is PREFECT_SERVER_API_PORT (default 4200); its pid and port are kept in $PREFECT_HOME/gep-server.json
    and its log in gep-server.log beside it.
    """
    from gep import prefect_api, server

    rec, started = server.start(progress=_say)
    verb = "started" if started else "already running"
    out.print(f"Prefect server {verb}: UI {rec.ui_url}  (API {rec.api_url})", markup=False, highlight=False)
    configured = prefect_api.configured_api_url()
    if configured and configured != rec.api_url:
        _say(f"PREFECT_API_URL is set to {configured}: gep reports to that server, not to this one")


@server_app.command("stop")
@friendly
def server_stop() -> None:
    """Stop the Prefect server `gep server start` started (with its child processes)."""
    from gep import server

    out.print(server.stop(), markup=False, highlight=False)


@server_app.command("status")
@friendly
def server_status() -> None:
    """Say whether the background Prefect server is running, and its UI address. Exit 0 running, 1 not."""
    from gep import server

    st = server.status()
    out.print(st.line(), markup=False, highlight=False)
    if not st.running:
        raise typer.Exit(1)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            out.print(f"gep {version('gep-engine')}", markup=False, highlight=False)
        except PackageNotFoundError:
            out.print("gep (not installed as a package)", markup=False, highlight=False)
        raise typer.Exit(0)


@app.callback()
def _root(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                                help="Print gep's version and exit.")] = False) -> None:
    """Evolve an AI agent's workspace with GEP cycles (see `gep COMMAND --help`)."""


def main() -> None:
    """Every command but the hook (gep.entry dispatches `gep capture` first): like app(), but usage errors
    (unknown verb, bad flag value) are one line too."""
    _defer_model_builds()
    usage_errors, no_args = _click_exception_types()
    try:
        code = app(standalone_mode=False)
    except no_args as exc:  # `gep`, `gep genes`: the help, on stdout (click leaves it to its caller)
        if exc.ctx is not None:
            out.print(exc.ctx.get_help(), markup=False, highlight=False)
        code = exc.exit_code
    except usage_errors as exc:
        err.print(f"gep: {exc.format_message()} (see `{_command_path(exc)} --help`)", markup=False,
                  highlight=False)
        code = exc.exit_code
    except typer.Abort:
        err.print("gep: aborted", markup=False, highlight=False)
        code = 1
    _exit(code if isinstance(code, int) else 0)


def _defer_model_builds() -> None:
    """A command is a short process that validates with a few of the hundreds of pydantic models it imports
    (the engine's, typer's, Prefect's for a cycle): each is built on first use instead of at import, which
    halves a store-only command's time (bench/cli.py). Process-wide, so only the console script does it,
    never ``import gep``."""
    from pydantic import BaseModel

    BaseModel.model_config["defer_build"] = True


def _exit(code: int) -> None:
    """End the process. After a flow run, Prefect's log and event workers are emptied into the server
    first, then the process ends without the second of interpreter teardown thousands of loaded modules
    and Prefect's threads would cost; other commands exit as usual."""
    if "flows.runtime" not in sys.modules:
        sys.exit(code)
    from flows.runtime import drain

    drain()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _click_exception_types() -> tuple[tuple[type[ClickException], ...], tuple[type[NoArgsIsHelpError], ...]]:
    """Click's exception classes: typer >= 0.2x raises those of its vendored copy (imported with typer
    already), older ones click's own (imported only then: ~0.02 s)."""
    modules: list[Any] = []
    try:
        from typer._click import exceptions as vendored

        modules.append(vendored)
    except ImportError:
        import click.exceptions  # deferred: only for a typer that has no copy of click (see above)

        modules.append(click.exceptions)
    return (tuple(m.ClickException for m in modules),
            tuple(m.NoArgsIsHelpError for m in modules if hasattr(m, "NoArgsIsHelpError")))


def _command_path(exc: Any) -> str:
    ctx = getattr(exc, "ctx", None)
    return ctx.command_path if ctx is not None else "gep"


if __name__ == "__main__":
    main()
