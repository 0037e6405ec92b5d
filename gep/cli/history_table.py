"""How `gep history` prints its rows: an 80-column table of ids people can type, the flow-run link as a
terminal hyperlink where the terminal shows one, the run's columns when there is room (or --wide), and a
one-line summary of the cycles listed."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from gep.cli.history_cmd import HOLDOUT_LEGEND, HistoryRow
from gep.core.models import EvolutionEvent

WIDE_FROM = 120  # columns from which the run's link, state and duration fit beside the cycle's own
# terminals known to show OSC 8 hyperlinks (others print them as garbage or drop them silently)
_LINK_PROGRAMS = ("iTerm.app", "WezTerm", "vscode", "Hyper", "ghostty", "kitty", "Tabby", "rio")


def hyperlinks(env: Mapping[str, str], is_terminal: bool) -> bool:
    """Whether to print OSC 8 links: GEP_HYPERLINKS=1/0 decides, else only a terminal known to show them."""
    forced = env.get("GEP_HYPERLINKS", "").strip().lower()
    if forced in ("1", "yes", "true", "on"):
        return True
    if forced in ("0", "no", "false", "off") or not is_terminal or env.get("TERM", "") in ("", "dumb"):
        return False
    return bool(env.get("TERM_PROGRAM") in _LINK_PROGRAMS or env.get("VTE_VERSION", "0").isdigit()
                and int(env.get("VTE_VERSION", "0")) >= 5000 or env.get("WT_SESSION") or env.get("KITTY_WINDOW_ID")
                or env.get("KONSOLE_VERSION") or "kitty" in env.get("TERM", ""))


def table(rows: Sequence[HistoryRow], width: int, wide: bool, links: bool) -> Table:
    wide = wide or width >= WIDE_FROM
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, collapse_padding=True)
    t.add_column("id", no_wrap=True)
    t.add_column("outcome", overflow="fold")
    t.add_column("intent", no_wrap=True)
    t.add_column("gene", overflow="fold")
    t.add_column("fix", overflow="fold")
    if wide:
        for name in ("flow run", "state", "duration"):
            t.add_column(name, overflow="fold")
    else:
        t.add_column("took", no_wrap=True, justify="right")
    for r in rows:
        ident = Text(r.id, style=f"link {r.link}" if links and r.link else "")
        gene = r.gene.removeprefix("gene_") if not wide else r.gene
        cells: list[str | Text] = [ident, r.outcome, r.intent, gene, r.fix]
        cells += [r.run, r.state, r.duration] if wide else [r.duration]
        t.add_row(*cells)
    return t


def summary(events: Sequence[EvolutionEvent]) -> str:
    """One line over the cycles listed: how many, verified fixes, fixes that did not hold, failures."""
    from gep.cli.history_cmd import fix_shown
    from gep.core.learned import NOT_JUDGED

    fixes = [fix_shown(e) for e in events]
    parts = [f"{fixes.count('verified')} verified fix{'es' if fixes.count('verified') != 1 else ''}",
             f"{fixes.count('did not hold')} did not hold"]
    if pending := fixes.count(NOT_JUDGED):
        parts.append(f"{pending} committed, not yet judged")
    failed = sum(1 for e in events if str(e.outcome.status) == "failed")
    if failed:
        parts.append(f"{failed} failed")
    return f"{len(events)} cycle{'s' if len(events) != 1 else ''}: " + ", ".join(parts)


def print_history(console: Console, rows: Sequence[HistoryRow], events: Sequence[EvolutionEvent],
                  wide: bool) -> None:
    links = hyperlinks(os.environ, console.is_terminal)
    console.print(table(rows, console.width, wide, links))
    console.print(summary(events), markup=False, highlight=False)
    if any(e.meta.holdout for e in events):
        console.print(HOLDOUT_LEGEND, markup=False, highlight=False)
    for line in credit_lines(events, console.width):
        console.print(line, markup=False, highlight=False, overflow="ellipsis", no_wrap=True)


def credit_lines(events: Sequence[EvolutionEvent], width: int) -> list[str]:
    """Per committed fix, newest first, the problem it was credited to or judged on (one line each)."""
    from gep.cli.history_cmd import credit_shown
    from gep.core.event_ids import short_ids

    names = short_ids(e.id for e in events)
    lines = [f"{names[e.id]} {shown}" for e in events if (shown := credit_shown(e))]
    return [line if len(line) <= width else line[: max(1, width - 1)] + "\u2026" for line in lines]
