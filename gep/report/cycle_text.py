"""A cycle's story in Markdown: what the Prefect artifact of its run says, ending with the one next step that
works for its outcome. Plain text from an event, no Prefect: flows/reporting.py publishes it.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from gep.core.event_ids import short_id
from gep.core.models import EvolutionEvent


def md_list(items: list[str]) -> str:
    return "\n".join(f"- `{i}`" for i in items) or "- (none)"


def cycle_markdown(event: EvolutionEvent, workspace: Path | None = None, prompt_file: str | None = None) -> str:
    m = event.meta
    sel, mut = m.selector, m.mutation
    lines = [
        f"# {event.id}: {event.outcome.status}",
        "",
        f"**Intent** {event.intent} · **Gene** {', '.join(event.genes_used) or '(none)'} · "
        f"**Strategy** {m.strategy or '?'} · **Mutator** {m.mutator or '?'}",
        "",
        "## Signals",
        md_list(event.signals),
        "",
        "## Selection",
        md_list(sel.reasons if sel else []),
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
        lines += ["", "## Failure reasons", md_list(m.failure_reasons)]
    if m.commit:
        lines += ["", f"## Commit\n`{m.commit}`" + (f" on `{m.branch}`" if m.branch else "")]
    lines += ["", "## Next step", next_step(event, workspace, prompt_file)]
    return "\n".join(lines)


def next_step(event: EvolutionEvent, workspace: Path | None, prompt_file: str | None = None) -> str:
    """What happened, in one sentence, and the one next step that works for this outcome."""
    m, status = event.meta, str(event.outcome.status)
    ws = f" --workspace {shlex.quote(str(workspace))}" if workspace else ""
    if status == "awaiting_changes":
        where = f"The prompt is in `{prompt_file}`. " if prompt_file else ""
        return (f"{where}Make the change, then run `{solidify_command(workspace)}` (or give it up with "
                f"`gep solidify{ws} --abandon`).")
    if m.rescued_patch:
        how = f" Bring it back with `{m.rescue_command}`." if m.rescue_command else ""
        return f"The change was not kept: it is saved as `{m.rescued_patch}`.{how}"
    if status == "success" and m.merge_command:
        return (f"Committed on `{m.branch}`, not merged: land it with `gep land {short_id(event.id)}{ws}` "
                f"(or `{m.merge_command}`).")
    if status == "success" and m.commit:
        return (f"Committed `{m.commit[:12]}`. Say whether it helped: "
                f"`gep feedback {short_id(event.id)} helpful{ws}` (or `not_helpful`).")
    if status == "empty":
        return "Nothing needed changing: no next step."
    if status in ("failed", "interrupted"):
        return ("Nothing was changed in your workspace; the reasons are above. The next cycle avoids what "
                "failed here.")
    return "No next step."


def solidify_command(workspace: Path | None) -> str:
    return f"gep solidify --workspace {shlex.quote(str(workspace))}" if workspace else "gep solidify"
