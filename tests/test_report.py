"""`gep report`: the figures computed from a real store (a recorded history, and real cycles), the command
writing the page, the page rendered by headless Chromium, and the charts' markdown for Prefect artifacts."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import sys
import zlib
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import init_repo
from report_helpers import HOST_REASON, demo_history
from test_cli import NO_PREFECT, one_line_error, run

from gep.core.models import EvolutionEvent
from gep.learning.lessons import Lesson, LessonCategory
from gep.report.data import MAX_BINS, RATE_WINDOW, load_report
from gep.report.html import COLORS, render
from gep.store import Store

pytestmark = pytest.mark.timeout(180)
NOW = datetime.now(UTC)


def report_of(*workspaces: Path):
    return load_report(list(workspaces), NOW)


# ------------------------------------------------------------------ the figures


def test_the_figures_of_a_recorded_history(repo: Path):
    events = demo_history(repo, n=40)
    with Store.for_workspace(repo) as store:  # a skipped tick is recorded but never charted
        store.add_event(EvolutionEvent(id="evt_skip", outcome={"status": "skipped"}, meta={"skip_reason": "steady"}))
    [w] = report_of(repo).workspaces
    assert [c.event_id for c in w.cycles] == [e.id for e in events] and w.not_run == 1
    verdicts = Counter(e.meta.fix_verdict for e in events if e.meta.fix_verdict)
    assert w.totals["verified"] == verdicts["verified"] > 0 and w.totals["did_not_hold"] == verdicts["did_not_hold"] > 0
    host = [e.id for e in events if e.meta.failure_reasons == [HOST_REASON]]
    assert [h.event_id for h in w.host_failures] == host and w.totals["host_failure"] == len(host) > 0
    change_failed = [e for e in events if e.outcome.status == "failed" and e.id not in host]
    assert w.totals["failed"] == len(change_failed) > 0  # a validation failure is the change's, not the host's
    assert sum(w.totals.values()) == 40
    # 40 cycles in 20 bins of 2; every cycle in exactly one bin
    assert len(w.bins) == 20 <= MAX_BINS and [(b.first, b.last) for b in w.bins][:2] == [(1, 2), (3, 4)]
    assert sum(sum(b.counts.values()) for b in w.bins) == 40
    last = w.cycles[-RATE_WINDOW:]
    assert w.rate[-1].rate == sum(c.category == "verified" for c in last) / RATE_WINDOW
    assert w.rate[0].window == 1 and w.rate[-1].window == RATE_WINDOW
    uses = Counter(e.genes_used[0] for e in events)
    assert {g.gene_id: g.total for g in w.genes} == dict(uses)
    assert all(sum(g.uses) == g.total for g in w.genes)
    repair = next(g for g in w.genes if g.gene_id == "gene_repair_from_errors")
    first_fb = next(i for i, e in enumerate(events) if e.genes_used == [repair.gene_id] and e.meta.fix_verdict)
    assert all(u is None for u in repair.usefulness[:first_fb // 2])  # no feedback yet: no score drawn
    assert all(u is not None for u in repair.usefulness[first_fb // 2:])
    assert repair.usefulness[-1] is not None and repair.usefulness[-1] > 0.5  # mostly verified: useful
    families = {f.family: sum(f.counts) for f in w.families}
    assert families["errors"] > families["people (behaviour)"] > 0 and "requests" in families
    assert len(w.lessons) == sum(verdicts.values()) and w.lessons[0].category == "fix_verified"
    assert {a.source for a in w.avoid} == {"avoid list", "failed change"}  # the demo repeats failures on a problem


def test_an_interrupted_cycle_and_a_recorded_host_failure_blame_no_change(repo: Path):
    with Store.for_workspace(repo) as store:
        store.add_event(EvolutionEvent(id="e1", outcome={"status": "interrupted"},
                                       meta={"failure_reasons": ["interrupted"], "recovery": "recover"}))
        store.add_event(EvolutionEvent(id="e2", outcome={"status": "failed"},
                                       meta={"failure_reasons": ["constraint: too many files"]}))
        store.add_event(EvolutionEvent(id="e3", outcome={"status": "failed"},
                                       meta={"failure_reasons": ["mutator: 429 Too Many Requests"],
                                             "host_failure": {"kind": "provider", "reason": "429 Too Many Requests"}}))
        store.add_event(EvolutionEvent(id="e4", outcome={"status": "failed"},  # the engine did not say host
                                       meta={"failure_reasons": ["mutator: the agent exited 1 after editing"]}))
    [w] = report_of(repo).workspaces
    assert [(c.event_id, c.category) for c in w.cycles] == [("e1", "host_failure"), ("e2", "failed"),
                                                            ("e3", "host_failure"), ("e4", "failed")]
    assert w.host_failures[1].reason == "provider: 429 Too Many Requests"


def test_the_figures_of_real_cycles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A committed fix, then a cycle that finds its error gone (the fix verified) and ends empty."""
    from learning_helpers import (
        REPAIR,
        agent_workspace,
        committed_fix,
        cycle,
        later,
        log_ok,
        venv_first,
    )

    venv_first(monkeypatch)
    ws = agent_workspace(tmp_path / "ws")
    fixed = committed_fix(ws)
    log_ok(ws, later(1))  # the code that failed ran again, without the error: the fix can be judged
    assert cycle(ws, 2).outcome.status == "empty"  # only the new line is read: nothing to act on (issue 41)
    [w] = report_of(ws).workspaces
    assert [(c.event_id, c.category) for c in w.cycles][0] == (fixed.id, "verified")
    assert w.cycles[1].category == "empty" and w.totals == {"verified": 1, "empty": 1}
    assert w.cycles[0].gene == REPAIR and "errors" in w.cycles[0].families
    assert [x.category for x in w.lessons][:2] == ["success", "fix_verified"] and w.lessons[-1].current
    repair = next(g for g in w.genes if g.gene_id == REPAIR)
    assert repair.verified == 1 and repair.usefulness[0] is not None


# ------------------------------------------------------------------ the command


def test_gep_report_writes_the_page_and_a_line_per_workspace(repo: Path, tmp_path: Path):
    demo_history(repo, n=12)
    other = init_repo(tmp_path / "other")
    out = tmp_path / "page.html"
    result = run("report", "-w", str(repo), "-w", str(other), "-w", str(repo), "--out", str(out))
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"{repo.name}: 12 cycles: ") and "verified fixes" in lines[0]
    assert lines[1:] == ["other: no cycles yet", f"wrote {out}"]
    page = out.read_text()
    assert page.count("<tr data-workspace=") == 2  # the fleet: a row per workspace (listed twice: once)
    assert 'data-chart="outcomes"' in page and "No cycles yet" in page
    assert not (other / ".gep").exists()  # a workspace no cycle ran on is read without making its state


def test_gep_report_defaults_to_the_workspace_here_and_its_state_folder(repo: Path, monkeypatch):
    (repo / "src").mkdir()
    monkeypatch.chdir(repo / "src")
    result = run("report")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == [f"{repo.name}: no cycles yet", f"wrote {repo / '.gep' / 'report.html'}"]
    assert "No cycles yet" in (repo / ".gep" / "report.html").read_text()
    assert subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True).stdout == ""


def test_gep_report_refuses_bad_input_in_one_line(repo: Path, tmp_path: Path):
    one_line_error(run("report", "-w", str(tmp_path / "nope")), "nope")
    one_line_error(run("report", "-w", str(repo), "--out", str(tmp_path)), "is a directory")
    (tmp_path / "ro").mkdir(mode=0o500)
    if os.geteuid() != 0:  # root writes anywhere
        one_line_error(run("report", "-w", str(repo), "--out", str(tmp_path / "ro" / "x.html")), "cannot write")


def test_an_unreadable_store_is_one_line_and_the_others_are_still_shown(repo: Path, tmp_path: Path):
    bad = init_repo(tmp_path / "bad")
    (bad / ".gep").mkdir()
    (bad / ".gep" / "gep.db").write_bytes(b"this is not a sqlite database at all" * 100)
    out = tmp_path / "page.html"
    one_line_error(run("report", "-w", str(bad), "--out", str(out)), "bad: cannot open store")
    assert not out.exists()
    demo_history(repo, n=3)
    both = run("report", "-w", str(repo), "-w", str(bad), "--out", str(out))
    assert both.exit_code == 1 and both.stderr.startswith("gep: bad: cannot open store") and both.stderr.count("\n") == 1
    assert both.stdout.splitlines()[-1] == f"wrote {out}" and "cannot open store" in out.read_text()


def test_gep_report_imports_no_prefect_nor_heavy_modules(repo: Path, tmp_path: Path):
    demo_history(repo, n=3)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    proc = subprocess.run([sys.executable, "-c", NO_PREFECT, "report", "--out", str(tmp_path / "r.html")],
                          cwd=repo, env={**env, "PREFECT_HOME": str(tmp_path / "ph")}, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "NO-PREFECT" in proc.stderr and "NO-HEAVY" in proc.stderr, proc.stderr


def test_text_from_the_store_is_escaped_and_the_page_fetches_nothing(repo: Path):
    with Store.for_workspace(repo) as store:
        store.add_event(EvolutionEvent(id="evt_x", genes_used=["<img src=x onerror=alert(1)>"],
                                       outcome={"status": "failed"}, meta={"failure_reasons": ["mutator: <b>"]}))
        store.append_lesson(Lesson(id="les_x", topic="t", gene_id="g", category=LessonCategory.failure,
                                   content="<script>alert(1)</script>", created_at=NOW))
    page = render(report_of(repo))
    assert "<script" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<img" not in page and "<b>" not in page
    assert not re.search(r"\b(src|href)=\"(?!#)", page)  # no file, image, style or script is fetched
    assert set(re.findall(r"https?://[^\s\"']+", page)) == {"http://www.w3.org/2000/svg"}  # SVG's namespace


# ------------------------------------------------------------------ in a browser


def chromium() -> str | None:
    found = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if found is None and os.environ.get("GEP_REQUIRE_CHROMIUM"):
        pytest.fail("GEP_REQUIRE_CHROMIUM is set but no chromium is installed")
    return found


def browse(exe: str, url: str, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp / "chromium-profile"
    return subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           f"--user-data-dir={profile}", "--no-first-run", *args, url],
                          capture_output=True, text=True, timeout=120, cwd=tmp)


def pixels(png: bytes) -> Counter[tuple[int, int, int]]:
    """The RGB colours of a PNG Chromium wrote (8-bit RGB or RGBA, not interlaced), counted."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, kind = 8, b"", 0, 0, 0
    while pos < len(png):
        size, tag = struct.unpack(">I4s", png[pos:pos + 8])
        chunk = png[pos + 8:pos + 8 + size]
        if tag == b"IHDR":
            width, height, depth, kind = struct.unpack(">IIBB", chunk[:10])
            assert depth == 8 and kind in (2, 6) and chunk[12] == 0
        elif tag == b"IDAT":
            idat += chunk
        pos += size + 12
    bpp = 3 if kind == 2 else 4
    raw, stride, prev, counts = zlib.decompress(idat), width * bpp, bytearray(width * bpp), Counter()
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            p = a + b - c
            pred = (0, a, b, (a + b) // 2, a if abs(p - a) <= min(abs(p - b), abs(p - c)) else
                    b if abs(p - b) <= abs(p - c) else c)[f]
            line[i] = (line[i] + pred) & 0xFF
        counts.update(tuple(line[i:i + 3]) for i in range(0, stride, bpp))  # type: ignore[misc]
        prev = line
    return counts


def rgb(color: str) -> tuple[int, int, int]:
    return int(color[1:3], 16), int(color[3:5], 16), int(color[5:7], 16)


def test_chromium_renders_the_page_with_its_charts(repo: Path, tmp_path: Path):
    exe = chromium()
    if exe is None:
        pytest.skip("chromium is not installed (set GEP_REQUIRE_CHROMIUM=1 to fail instead)")
    demo_history(repo, n=30)
    out = tmp_path / "report.html"
    assert run("report", "-w", str(repo), "--out", str(out)).exit_code == 0
    dom = browse(exe, out.as_uri(), tmp_path, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    charts = re.findall(r'<svg class="chart" data-chart="(\w+)"', dom.stdout)
    assert charts == ["outcomes", "rate", "genes", "usefulness", "families"], charts
    bars = re.findall(r'<rect class="bar" data-series="(\w+)" data-bin="[\d-]+" data-value="(\d+)"', dom.stdout)
    assert sum(int(v) for s, v in bars if s in COLORS) == 30  # the outcome bars stack every cycle once
    assert len(re.findall(r'<circle class="point" data-series="verified-fix rate"', dom.stdout)) == 30
    shot = tmp_path / "shot.png"
    taken = browse(exe, out.as_uri(), tmp_path, f"--screenshot={shot}", "--window-size=1280,1400")
    assert taken.returncode == 0 and shot.is_file(), taken.stderr[-2000:]
    seen = pixels(shot.read_bytes())
    assert len(seen) > 50, "the screenshot is blank"
    for category in ("verified", "failed", "host_failure"):  # the outcome bars are drawn in their colours
        assert seen[rgb(COLORS[category])] > 200, (category, seen.most_common(5))


# ------------------------------------------------------------------ in Prefect


def test_the_artifact_draws_the_charts_in_markdown(repo: Path, tmp_path: Path):
    from flows.report_artifact import SQUARES, markdown

    demo_history(repo, n=30)
    report = load_report([repo, tmp_path / "elsewhere"], NOW)
    text = markdown(report, tmp_path / "page.html")
    assert text.startswith("# GEP report: 30 cycles") and f"`{tmp_path / 'page.html'}`" in text
    assert "## Fleet" in text and "| elsewhere | 0 |" in text and "no such folder here" in text
    rows = re.findall(r"^\| (\d+-\d+|\d+) \| (\S+) \| `([█░]+)` (\d+)% \|$", text, re.M)
    assert len(rows) == 12  # the newest groups of cycles
    w = report.workspaces[0]
    assert [r[1] for r in rows] == ["".join(SQUARES[c] * b.counts.get(c, 0) for c in SQUARES)
                                    for b in w.bins[-12:]]
    assert rows[-1][3] == f"{w.rate[-1].rate * 100:.0f}"
