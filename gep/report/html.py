"""`gep report`'s page: one self-contained HTML file drawn from gep/report/data.py's models, and written
whole or not at all (by `gep report` and by the flows' report artifact alike).

The charts are inline SVG written here (no charting library, no script): the page opens offline in any
browser, weighs a few tens of kB, and needs no dependency. Every text from the store (lessons, reasons,
gene ids) is escaped: a lesson a model wrote is data, never markup.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape
from pathlib import Path

from gep.core.errors import GepError
from gep.report.data import CATEGORIES, CATEGORY_LABELS, Bin, Report, WorkspaceReport

COLORS = {"verified": "#2e7d32", "did_not_hold": "#ef6c00", "committed": "#a5d6a7", "failed": "#c62828",
          "host_failure": "#7b1fa2", "empty": "#bdbdbd", "waiting": "#1e88e5", "other": "#8d6e63"}
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#7f7f7f")
W, H = 640, 220  # a chart's drawing size (it scales to its card)
LEFT, RIGHT, TOP, BOTTOM = 40, 10, 10, 34
CONTENT_SHOWN = 240
ROWS_SHOWN = 20

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;background:#f6f7f9;color:#222}
header{background:#263238;color:#fff;padding:14px 24px}header h1{margin:0;font-size:20px}
header p{margin:4px 0 0;color:#cfd8dc}main{padding:16px 24px;max-width:1400px}
h2{font-size:17px;margin:22px 0 8px}h3{font-size:14px;margin:0 0 6px}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(440px,1fr));gap:14px}
.card{background:#fff;border:1px solid #dde1e6;border-radius:6px;padding:12px 14px}
.card p.note{color:#555;font-size:12px;margin:4px 0 0}svg.chart{width:100%;height:auto;display:block}
svg text{font:11px system-ui,sans-serif;fill:#444}.legend{font-size:12px;margin:4px 0 0}
.legend span{display:inline-block;margin-right:12px}.legend i{display:inline-block;width:10px;height:10px;
margin-right:4px;border-radius:2px;vertical-align:-1px}
table{border-collapse:collapse;width:100%;font-size:13px}th,td{text-align:left;padding:4px 8px;
border-bottom:1px solid #eceff1;vertical-align:top}th{background:#fafafa;font-weight:600}
td.num{text-align:right;font-variant-numeric:tabular-nums}.muted{color:#777}.empty{padding:24px;font-size:16px}
code{font-size:12px}
"""


def render(report: Report) -> str:
    when = report.generated_at.strftime("%Y-%m-%d %H:%M UTC")
    names = ", ".join(w.name for w in report.workspaces)
    body = [fleet_table(report.workspaces)] if len(report.workspaces) > 1 else []
    body += [workspace_section(w) for w in report.workspaces]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
            f"<title>gep report: {escape(names)}</title><style>{CSS}</style></head><body>"
            f"<header><h1>gep report: {escape(names)}</h1><p>{report.cycles} cycles in "
            f"{len(report.workspaces)} workspace{'s' if len(report.workspaces) != 1 else ''}; written {when}"
            "</p></header><main>" + "".join(body) + "</main></body></html>\n")


# ------------------------------------------------------------------ fleet and workspace sections


def fleet_table(workspaces: Sequence[WorkspaceReport]) -> str:
    rows = []
    for w in workspaces:
        t, rate = w.totals, w.verified_rate
        rows.append(f"<tr data-workspace=\"{escape(w.name)}\"><td><a href=\"#ws-{_anchor(w)}\">{escape(w.name)}"
                    f"</a><div class=\"muted\">{escape(w.path)}</div></td><td class=\"num\">{len(w.cycles)}</td>"
                    + "".join(f"<td class=\"num\">{t.get(k, 0)}</td>" for k in
                              ("verified", "did_not_hold", "failed", "host_failure"))
                    + f"<td class=\"num\">{'-' if rate is None else f'{rate:.0%}'}</td>"
                    f"<td>{sparkline(w.bins) if w.bins else escape(w.error or 'no cycles yet')}</td></tr>")
    return ("<h2>Fleet</h2><div class=\"card\"><table class=\"fleet\"><tr><th>workspace</th><th>cycles</th>"
            "<th>verified</th><th>did not hold</th><th>failed</th><th>host failures</th><th>verified rate</th>"
            "<th>outcomes over time</th></tr>" + "".join(rows) + "</table></div>")


def workspace_section(w: WorkspaceReport) -> str:
    head = f"<h2 id=\"ws-{_anchor(w)}\">{escape(w.name)} <span class=\"muted\">{escape(w.path)}</span></h2>"
    if w.error:
        return head + f"<div class=\"card empty\">{escape(w.error)}</div>"
    if not w.cycles:
        return head + ("<div class=\"card empty\">No cycles yet: run <code>gep cycle</code> in this workspace, "
                       "then <code>gep report</code> again.</div>")
    skipped = f"; {w.not_run} skipped or still running (not charted)" if w.not_run else ""
    charts = [
        card("Outcomes per cycle", outcomes_chart(w.bins), legend([(CATEGORY_LABELS[c], COLORS[c])
                                                                   for c in CATEGORIES if w.totals.get(c)]),
             escape(w.summary()) + skipped),
        card("Rolling verified-fix rate", rate_chart(w), "",
             f"Verified fixes per cycle over the last {w.rate[-1].window if w.rate else 0} cycles (window of "
             "10): a fix is verified when the problem it addressed stayed gone in later cycles."),
        card("Gene usage", stacked_chart("genes", w.bins, [(g.gene_id, PALETTE[i % len(PALETTE)], g.uses)
                                                            for i, g in enumerate(w.genes)]),
             legend([(f"{g.gene_id} ({g.total}, {g.verified} verified)", PALETTE[i % len(PALETTE)])
                     for i, g in enumerate(w.genes)]), "Cycles per gene in each group of cycles."),
        card("Gene usefulness", usefulness_chart(w), legend(
            [(g.gene_id, PALETTE[i % len(PALETTE)]) for i, g in enumerate(w.genes) if any(
                u is not None for u in g.usefulness)]),
             "Feedback score (0-1; 0.5 neutral, dashed) at the end of each group of cycles: people's "
             "helpful/not helpful and the engine's implicit signals. No line: no feedback yet."),
        card("Signal families", families_chart(w), "", "Share of cycles in each group whose signals had the "
             "family (darker: more)."),
    ]
    return (head + effect_card(w) + "<div class=\"grid\">" + "".join(charts) + "</div>" + lessons_table(w)
            + avoid_table(w) + host_table(w))


def effect_card(w: WorkspaceReport) -> str:
    """The holdout's measured effect of learning (gep/eval/effect.py), when any cycle was drawn."""
    e = w.learning_effect
    if e is None or not (e.learned.cycles or e.holdout.cycles):
        return ""
    text = "\n".join(e.lines())
    return (f"<h2>Learning effect</h2><div class=\"card\"><pre>{escape(text)}</pre><p class=\"note\">Cycles "
            "drawn at random into the holdout (<code>holdout</code> in gep.toml) ran without what was learned. "
            "The interval holds at every cycle count: it may be read after any cycle.</p></div>")


def card(title: str, chart: str, legend_html: str, note: str) -> str:
    return f"<div class=\"card\"><h3>{escape(title)}</h3>{chart}{legend_html}<p class=\"note\">{note}</p></div>"


def legend(items: Sequence[tuple[str, str]]) -> str:
    return "<div class=\"legend\">" + "".join(f"<span><i style=\"background:{c}\"></i>{escape(t)}</span>"
                                               for t, c in items) + "</div>"


# ------------------------------------------------------------------ charts


def outcomes_chart(bins: Sequence[Bin]) -> str:
    return stacked_chart("outcomes", bins, [(c, COLORS[c], [b.counts.get(c, 0) for b in bins])
                                            for c in CATEGORIES])


def stacked_chart(name: str, bins: Sequence[Bin], series: Sequence[tuple[str, str, Sequence[int]]]) -> str:
    """Stacked bars, one per bin; a rect per (bin, series) with a value, titled with what it counts."""
    top = _nice(max([sum(s[2][i] for s in series) for i in range(len(bins))] or [1]))
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM
    step = pw / max(len(bins), 1)
    bw = max(step * 0.78, 1.0)
    parts = [_y_axis(0, top, integer=True), _x_labels(bins, step)]
    for i, b in enumerate(bins):
        y = float(TOP + ph)
        for label, color, values in series:
            v = values[i]
            if not v:
                continue
            h = v / top * ph
            y -= h
            parts.append(f"<rect class=\"bar\" data-series=\"{escape(label)}\" data-bin=\"{b.label}\" "
                         f"data-value=\"{v}\" x=\"{LEFT + i * step + (step - bw) / 2:.1f}\" y=\"{y:.1f}\" "
                         f"width=\"{bw:.1f}\" height=\"{h:.1f}\" fill=\"{color}\"><title>cycles {b.label}: "
                         f"{v} {escape(CATEGORY_LABELS.get(label, label))}</title></rect>")
    return _svg(name, parts)


def rate_chart(w: WorkspaceReport) -> str:
    xs = [p.n for p in w.rate]
    return line_chart("rate", xs, [("verified-fix rate", COLORS["verified"], [p.rate for p in w.rate])], 1.0)


def usefulness_chart(w: WorkspaceReport) -> str:
    xs = [b.last for b in w.bins]
    series = [(g.gene_id, PALETTE[i % len(PALETTE)], g.usefulness) for i, g in enumerate(w.genes)]
    return line_chart("usefulness", xs, series, 1.0, neutral=0.5)


def line_chart(name: str, xs: Sequence[int], series: Sequence[tuple[str, str, Sequence[float | None]]],
               top: float, neutral: float | None = None) -> str:
    """Lines over cycle numbers, a circle per value (a gap where a value is None)."""
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM
    lo, hi = (min(xs), max(xs)) if xs else (0, 1)
    span = max(hi - lo, 1)

    def at(x: int, v: float) -> tuple[float, float]:
        return LEFT + (x - lo) / span * pw, TOP + ph - v / top * ph

    parts = [_y_axis(0, top, integer=False), _x_ticks(lo, hi, at)]
    if neutral is not None:
        y = at(lo, neutral)[1]
        parts.append(f"<line x1=\"{LEFT}\" x2=\"{W - RIGHT}\" y1=\"{y:.1f}\" y2=\"{y:.1f}\" stroke=\"#999\" "
                     "stroke-dasharray=\"4 3\"/>")
    for label, color, values in series:
        pts = [(x, v) for x, v in zip(xs, values, strict=True) if v is not None]
        if not pts:
            continue
        path = " ".join(f"{'M' if i == 0 else 'L'}{at(x, v)[0]:.1f},{at(x, v)[1]:.1f}" for i, (x, v) in enumerate(pts))
        parts.append(f"<path class=\"line\" data-series=\"{escape(label)}\" d=\"{path}\" fill=\"none\" "
                     f"stroke=\"{color}\" stroke-width=\"2\"/>")
        radius = 2.5 if len(pts) <= 60 else 1.2
        parts += [f"<circle class=\"point\" data-series=\"{escape(label)}\" data-n=\"{x}\" data-value=\"{v:.3f}\" "
                  f"cx=\"{at(x, v)[0]:.1f}\" cy=\"{at(x, v)[1]:.1f}\" r=\"{radius}\" fill=\"{color}\">"
                  f"<title>{escape(label)} at cycle {x}: {v:.2f}</title></circle>" for x, v in pts]
    return _svg(name, parts)


def families_chart(w: WorkspaceReport) -> str:
    """A grid: a row per signal family, a cell per bin, darker the more of the bin's cycles had it."""
    fams = w.families
    label_w, row_h = 130, 20
    height = TOP + row_h * max(len(fams), 1) + BOTTOM
    step = (W - label_w - RIGHT) / max(len(w.bins), 1)
    parts = []
    for r, f in enumerate(fams):
        y = TOP + r * row_h
        parts.append(f"<text x=\"{label_w - 6}\" y=\"{y + row_h * 0.68:.1f}\" text-anchor=\"end\">"
                     f"{escape(f.family)}</text>")
        for i, (b, count) in enumerate(zip(w.bins, f.counts, strict=True)):
            share = count / (b.last - b.first + 1)
            parts.append(f"<rect class=\"cell\" data-series=\"{escape(f.family)}\" data-bin=\"{b.label}\" "
                         f"data-value=\"{count}\" x=\"{label_w + i * step + 1:.1f}\" y=\"{y + 1}\" "
                         f"width=\"{max(step - 2, 1):.1f}\" height=\"{row_h - 2}\" fill=\"#3949ab\" "
                         f"fill-opacity=\"{0.06 + 0.94 * share:.2f}\"><title>cycles {b.label}: {count} with "
                         f"{escape(f.family)}</title></rect>")
    parts.append(_x_labels(w.bins, step, left=label_w, y=height - BOTTOM + 14))
    if not fams:
        parts.append(f"<text x=\"{label_w}\" y=\"{TOP + 14}\">no signals recorded</text>")
    return _svg("families", parts, height)


def sparkline(bins: Sequence[Bin]) -> str:
    """A fleet row's outcomes: small stacked bars, one per bin."""
    w, h = 180, 28
    top = max(sum(b.counts.values()) for b in bins) or 1
    step = w / len(bins)
    parts = []
    for i, b in enumerate(bins):
        y = float(h)
        for c in CATEGORIES:
            v = b.counts.get(c, 0)
            if v:
                bh = v / top * h
                y -= bh
                parts.append(f"<rect class=\"bar\" data-series=\"{c}\" data-value=\"{v}\" x=\"{i * step:.1f}\" "
                             f"y=\"{y:.1f}\" width=\"{max(step - 1, 0.5):.1f}\" height=\"{bh:.1f}\" "
                             f"fill=\"{COLORS[c]}\"/>")
    return (f"<svg class=\"chart spark\" data-chart=\"spark\" viewBox=\"0 0 {w} {h}\" width=\"{w}\" "
            f"height=\"{h}\" xmlns=\"http://www.w3.org/2000/svg\">" + "".join(parts) + "</svg>")


def _svg(name: str, parts: Sequence[str], height: int = H) -> str:
    return (f"<svg class=\"chart\" data-chart=\"{name}\" viewBox=\"0 0 {W} {height}\" "
            f"xmlns=\"http://www.w3.org/2000/svg\" role=\"img\">" + "".join(parts) + "</svg>")


def _nice(top: int) -> int:
    """The integer axis' top: a multiple of its tick step (at most 5 ticks)."""
    step = max(1, math.ceil(top / 4))
    return max(step * math.ceil(top / step), 1)


def _y_axis(lo: float, hi: float, integer: bool) -> str:
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM
    values = (list(range(int(lo), int(hi) + 1, max(1, math.ceil(hi / 4)))) if integer
              else [lo + (hi - lo) * k / 4 for k in range(5)])
    out = []
    for v in values:
        y = TOP + ph - (v - lo) / (hi - lo or 1) * ph
        text = f"{v:.0f}" if integer else f"{v:.0%}" if hi == 1.0 else f"{v:.2f}"
        out.append(f"<line x1=\"{LEFT}\" x2=\"{LEFT + pw}\" y1=\"{y:.1f}\" y2=\"{y:.1f}\" stroke=\"#eceff1\"/>"
                   f"<text x=\"{LEFT - 5}\" y=\"{y + 4:.1f}\" text-anchor=\"end\">{text}</text>")
    return "".join(out)


def _x_labels(bins: Sequence[Bin], step: float, left: int = LEFT, y: float = H - BOTTOM + 14) -> str:
    every = max(1, round(len(bins) / 8))
    out = [f"<text x=\"{left + (i + 0.5) * step:.1f}\" y=\"{y:.1f}\" text-anchor=\"middle\">{b.label}</text>"
           for i, b in enumerate(bins) if i % every == 0 or i == len(bins) - 1 and len(bins) < 8]
    out.append(f"<text x=\"{left + (W - left - RIGHT) / 2:.1f}\" y=\"{y + 16:.1f}\" text-anchor=\"middle\">"
               "cycle</text>")
    return "".join(out)


def _x_ticks(lo: int, hi: int, at: object) -> str:
    pw = W - LEFT - RIGHT
    span = max(hi - lo, 1)
    ticks = sorted({lo + round(span * k / 6) for k in range(7)} & set(range(lo, hi + 1))) if hi > lo else [lo]
    out = [f"<text x=\"{LEFT + (t - lo) / span * pw:.1f}\" y=\"{H - BOTTOM + 14}\" text-anchor=\"middle\">{t}"
           "</text>" for t in ticks]
    out.append(f"<text x=\"{LEFT + pw / 2:.1f}\" y=\"{H - BOTTOM + 30}\" text-anchor=\"middle\">cycle</text>")
    return "".join(out)


# ------------------------------------------------------------------ tables


def lessons_table(w: WorkspaceReport) -> str:
    if not w.lessons:
        return "<h2>Lessons</h2><div class=\"card muted\">No lessons recorded yet.</div>"
    shown = w.lessons[-ROWS_SHOWN:][::-1]
    rows = "".join(f"<tr class=\"lesson\"><td>{x.created_at:%Y-%m-%d %H:%M}</td><td>{escape(x.category)}</td>"
                   f"<td class=\"num\">{x.strength:.2f}</td><td><code>{escape(x.topic)}</code></td>"
                   f"<td>{escape(_short(x.content))}{'' if x.current else ' <span class=muted>(superseded)</span>'}"
                   "</td></tr>" for x in shown)
    more = f" (the newest {ROWS_SHOWN} of {len(w.lessons)})" if len(w.lessons) > ROWS_SHOWN else ""
    return (f"<h2>Lessons{more}</h2><div class=\"card\"><table><tr><th>when</th><th>category</th>"
            f"<th>strength</th><th>topic</th><th>what was learned</th></tr>{rows}</table></div>")


def avoid_table(w: WorkspaceReport) -> str:
    kept = ("Avoid list: a gene whose change failed twice on one problem with no success since (gep/learning/avoid.py); "
            "failed change: a change kept so that later cycles do not repeat it.")
    if not w.avoid:
        return f"<h2>Avoid entries</h2><div class=\"card muted\">None recorded. {kept}</div>"
    rows = "".join(f"<tr class=\"avoid\"><td>{escape(a.source)}</td><td><code>{escape(a.subject)}</code></td>"
                   f"<td>{escape(_short(a.detail))}</td></tr>" for a in w.avoid[-ROWS_SHOWN:][::-1])
    return (f"<h2>Avoid entries</h2><div class=\"card\"><table><tr><th>kind</th><th>gene or topic</th>"
            f"<th>detail</th></tr>{rows}</table><p class=\"note\">{kept}</p></div>")


def host_table(w: WorkspaceReport) -> str:
    note = f"<p class=\"note\">{escape(w.host_note)}</p>"
    if not w.host_failures:
        return f"<h2>Host failures</h2><div class=\"card\"><span class=\"muted\">None.</span>{note}</div>"
    rows = "".join(f"<tr class=\"host\"><td>{f'{h.at:%Y-%m-%d %H:%M}' if h.at else '-'}</td><td><code>"
                   f"{escape(h.event_id)}</code></td><td>{escape(_short(h.reason))}</td></tr>"
                   for h in w.host_failures[-ROWS_SHOWN:][::-1])
    return (f"<h2>Host failures ({len(w.host_failures)})</h2><div class=\"card\"><table><tr><th>when</th>"
            f"<th>event</th><th>reason</th></tr>{rows}</table>{note}</div>")


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= CONTENT_SHOWN else text[:CONTENT_SHOWN - 3] + "..."


def _anchor(w: WorkspaceReport) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in w.path)


def write_page(target: Path, page: str) -> None:
    """Write ``page`` whole or not at all (a reader never sees half a page)."""
    tmp = target.with_name(f".{target.name}.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(page, encoding="utf-8")
        tmp.replace(target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise GepError(f"cannot write {target}: {exc.strerror or exc}") from None
