"""`gep report`'s charts in Prefect: each fleet run and each distillation run writes the page and shows the
same charts as a markdown artifact of the run.

Prefect's image artifact shows an image from a URL the browser can fetch; a page written on a worker has
none. So the artifact draws the charts in markdown itself (a coloured square per cycle, bars of block
characters for the rates and uses), which the Prefect UI renders, and names the page's path for the full
view. A report that cannot be made never fails the run: it logs one warning.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from prefect import get_run_logger
from prefect.artifacts import acreate_markdown_artifact, create_markdown_artifact

from gep.core.models import utc_now
from gep.prefect_api import prefect_home, workspace_key
from gep.report.data import CATEGORIES, CATEGORY_LABELS, Report, WorkspaceReport, load_report
from gep.report.html import render, write_page

SQUARES = {"verified": "🟩", "did_not_hold": "🟧", "committed": "🟢", "failed": "🟥", "host_failure": "🟪",
           "empty": "⬜", "waiting": "🟦", "other": "🟫"}
BAR = 20  # block characters in a full bar
FLEET_KEY = "gep-fleet-report"
ROWS = 12  # bins shown per workspace in the artifact (the newest)


def publish_workspace(workspace: str | Path) -> Path | None:
    """The distillation run's report: the workspace's page (.gep/report.html) and the run's artifact."""
    path = Path(workspace).expanduser().resolve()
    return _publish([path], path / ".gep" / "report.html", f"gep-{workspace_key(path)}-report")


async def publish_fleet(workspaces: Sequence[str | Path]) -> Path | None:
    """The fleet run's report: every workspace on one page (in PREFECT_HOME/gep-reports/) and one artifact."""
    paths = list(dict.fromkeys(Path(w).expanduser().resolve() for w in workspaces))  # listed twice: one row
    out = prefect_home() / "gep-reports" / "fleet-report.html"
    try:
        report, page = await asyncio.to_thread(_page, paths)
        await asyncio.to_thread(write_page, out, page)
        await acreate_markdown_artifact(key=FLEET_KEY, markdown=markdown(report, out),
                                        description=_description(report))
    except Exception as exc:  # noqa: BLE001 - the report is a view: the fleet's outcome stands without it
        get_run_logger().warning("gep report: not made: %s: %s", type(exc).__name__, exc)
        return None
    return out


def _publish(paths: list[Path], out: Path, key: str) -> Path | None:
    try:
        report, page = _page(paths)
        write_page(out, page)
        create_markdown_artifact(key=key, markdown=markdown(report, out), description=_description(report))
    except Exception as exc:  # noqa: BLE001 - the report is a view: the run's outcome stands without it
        get_run_logger().warning("gep report: not made: %s: %s", type(exc).__name__, exc)
        return None
    return out


def _page(paths: list[Path]) -> tuple[Report, str]:
    report = load_report(paths, utc_now())
    return report, render(report)


def _description(report: Report) -> str:
    return "GEP report: " + "; ".join(w.summary() for w in report.workspaces)


# ------------------------------------------------------------------ the charts in markdown


def markdown(report: Report, out: Path) -> str:
    lines = [f"# GEP report: {report.cycles} cycles", "",
             f"The full page (charts, lessons, avoid entries, host failures): `{out}` (open it in a browser; "
             "it works offline).", "",
             "Legend: " + " ".join(f"{SQUARES[c]} {CATEGORY_LABELS[c]}" for c in CATEGORIES), ""]
    if len(report.workspaces) > 1:
        lines += ["## Fleet", "", "| workspace | cycles | verified | did not hold | failed | host failures | "
                  "verified rate |", "|---|---:|---:|---:|---:|---:|---:|"]
        lines += [_fleet_row(w) for w in report.workspaces] + [""]
    for w in report.workspaces:
        lines += workspace_markdown(w)
    return "\n".join(lines) + "\n"


def _fleet_row(w: WorkspaceReport) -> str:
    t, rate = w.totals, w.verified_rate
    cells = [_cell(w.name), str(len(w.cycles)), *(str(t.get(k, 0)) for k in ("verified", "did_not_hold",
                                                                             "failed", "host_failure")),
             "-" if rate is None else f"{rate:.0%}"]
    return "| " + " | ".join(cells) + " |"


def workspace_markdown(w: WorkspaceReport) -> list[str]:
    head = [f"## {_cell(w.name)}", "", f"`{w.path}`: {_cell(w.summary())}", ""]
    if w.error or not w.cycles:
        return head
    rate_at = {p.n: p.rate for p in w.rate}
    lines = head + ["### Outcomes per cycle and the rolling verified-fix rate", "",
                    "| cycles | outcomes | verified-fix rate (last 10 cycles) |", "|---|---|---|"]
    for b in w.bins[-ROWS:]:
        squares = "".join(SQUARES[c] * b.counts.get(c, 0) for c in CATEGORIES)
        rate = rate_at.get(b.last, 0.0)
        lines.append(f"| {b.label} | {squares} | `{_bar(rate)}` {rate:.0%} |")
    lines += ["", "### Genes", "", "| gene | uses | verified fixes | usefulness now |", "|---|---|---:|---:|"]
    top = max((g.total for g in w.genes), default=1)
    for g in w.genes:
        now = next((u for u in reversed(g.usefulness) if u is not None), None)
        lines.append(f"| {_cell(g.gene_id)} | `{_bar(g.total / top)}` {g.total} | {g.verified} | "
                     f"{'-' if now is None else f'{now:.2f}'} |")
    lines += ["", "### Signal families", "", "| family | cycles |", "|---|---|"]
    most = max((sum(f.counts) for f in w.families), default=1)
    lines += [f"| {_cell(f.family)} | `{_bar(sum(f.counts) / most)}` {sum(f.counts)} |" for f in w.families]
    lines += ["", f"Lessons: {len(w.lessons)} ({sum(x.current for x in w.lessons)} current); avoid entries: "
              f"{len(w.avoid)}; host failures: {len(w.host_failures)}.", ""]
    return lines


def _bar(share: float) -> str:
    full = round(max(0.0, min(share, 1.0)) * BAR)
    return "█" * full + "░" * (BAR - full)


def _cell(text: str) -> str:
    """Text from the store in a markdown table cell: one line, no pipe, no markup."""
    flat = " ".join(text.split()).replace("|", "/")
    return "".join(f"\\{ch}" if ch in "\\`*_[]<>#" else ch for ch in flat)
