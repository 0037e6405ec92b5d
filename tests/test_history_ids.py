"""`gep history` at 80 columns: ids people can type, accepted by `gep show` and `gep feedback` as any unique
prefix (an ambiguous one is one line listing the candidates), hyperlinks only where the terminal shows them,
and a summary line (issue 31, point 2; issue 29's history summary)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from gep.cli.history_cmd import HistoryRow
from gep.cli.history_table import hyperlinks, table
from gep.core.models import EvolutionEvent
from gep.store import Store

GEP = str(Path(sys.executable).with_name("gep"))
OUTCOMES = [("success", "verified"), ("failed", None), ("success", "did_not_hold"), ("success", None)]


def gep(cwd: Path, *args: str, columns: int = 80) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    return subprocess.run([GEP, *args], cwd=cwd, capture_output=True, text=True, timeout=60,
                          env={**env, "COLUMNS": str(columns), "PREFECT_HOME": str(cwd / ".no-prefect")})


@pytest.fixture
def recorded(repo: Path) -> Path:
    with Store.for_workspace(repo) as store:
        for i, (status, verdict) in enumerate(OUTCOMES):
            store.add_event(EvolutionEvent(
                id=f"evt_17643000{i}0123_{'abcd'[i]}{i}f00d", signals=["log_error"],
                genes_used=["gene_repair_from_errors"], outcome={"status": status, "score": 0.5},
                meta={"fix_verdict": verdict, "commit": "c0ffee" if status == "success" else None,
                      "flow_run_id": "6f1c0a4e-3d7b-4d0e-9a43-6f3c2b1e0d9a"}))
    return repo


@pytest.mark.timeout(120)
def test_ids_shown_at_80_columns_are_accepted_by_show_and_feedback(recorded: Path):
    listed = gep(recorded, "history")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80, listed.stdout
    ids = [line.split()[0] for line in lines[2:-1]]
    assert len(ids) == 4 and all(len(i) <= 8 for i in ids), listed.stdout
    assert lines[-1] == "4 cycles: 1 verified fix, 1 did not hold, 1 committed, not yet judged, 1 failed"
    shown = gep(recorded, "show", ids[0])
    assert shown.returncode == 0 and json.loads(shown.stdout)["id"].endswith(ids[0]), shown.stderr
    fed = gep(recorded, "feedback", ids[1][:4], "helpful")
    assert fed.returncode == 0 and "recorded helpful" in fed.stdout, fed.stderr


@pytest.mark.timeout(120)
def test_an_ambiguous_prefix_lists_the_candidates_in_one_line(recorded: Path):
    for args in (["show", "evt_17643"], ["feedback", "evt_17643", "helpful"]):
        proc = gep(recorded, *args)
        assert proc.returncode == 2 and proc.stdout == ""
        assert proc.stderr.count("\n") == 1 and "ambiguous" in proc.stderr, proc.stderr
        assert all(c in proc.stderr for c in ("a0f00d", "b1f00d", "c2f00d", "d3f00d"))


def test_hyperlinks_only_where_the_terminal_shows_them():
    assert not hyperlinks({"TERM": "xterm-256color"}, is_terminal=False)
    assert not hyperlinks({"TERM": "screen", "TERM_PROGRAM": "tmux"}, is_terminal=True)
    assert not hyperlinks({"TERM": "dumb", "TERM_PROGRAM": "WezTerm"}, is_terminal=True)
    assert hyperlinks({"TERM": "xterm-256color", "TERM_PROGRAM": "WezTerm"}, is_terminal=True)
    assert hyperlinks({"TERM": "xterm-256color", "VTE_VERSION": "7600"}, is_terminal=True)
    assert not hyperlinks({"TERM": "xterm-256color", "VTE_VERSION": "7600", "GEP_HYPERLINKS": "0"}, True)
    row = HistoryRow(id="a0f00d", outcome="success", link="http://127.0.0.1:4200/runs/flow-run/x")
    for links in (True, False):
        console = Console(width=80, force_terminal=True, record=True)
        console.print(table([row], 80, wide=False, links=links))
        assert ("\x1b]8;" in console.export_text(styles=True)) is links


@pytest.mark.timeout(180)
def test_history_and_show_say_which_problem_a_fix_was_credited_to_and_judged_on(repo: Path):
    """Issue 28: a fix's verdict follows the problem its change touched; `gep history` (80 columns, --json)
    and `gep show` say which one, beside the verdict."""
    err_a = "errsig:2026-11-28T01:00:00.024Z ERROR app.billing: ZeroDivisionError: division by zero in total"
    err_b = "errsig:2026-11-28T01:00:00.024Z ERROR app.report: KeyError: 'rows' in app.report.summary"
    fixes = [  # (verdict, credit): judged on an error it was not asked about; credited, not judged; missed
        ("verified", {"addressed": ["perf_bottleneck", err_a], "credited": [err_a], "judged": [err_a]}),
        (None, {"addressed": [err_b]}),
        ("did_not_hold", {"addressed": ["log_error"], "missed": [err_b], "judged": [err_b]}),
        (None, {"addressed": ["log_error"], "missed": [err_b]}),
    ]
    with Store.for_workspace(repo) as store:
        for i, (verdict, credit) in enumerate(fixes):
            store.add_event(EvolutionEvent(
                id=f"evt_17643000{i}0123_{'abcd'[i]}{i}f00d", signals=["perf_bottleneck"],
                genes_used=["gene_repair_from_errors"], outcome={"status": "success", "score": 0.5},
                meta={"fix_verdict": verdict, "commit": "c0ffee", "fix_credit": credit,
                      "at": f"2026-11-28T0{i}:00:00Z"}))
    listed = gep(repo, "history")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80, listed.stdout
    said = [line.split(" ", 1)[1] for line in lines[lines.index(next(x for x in lines if x.startswith("4 cycles")))+1:]]
    assert [x.split(": ERROR")[0] for x in said] == [
        "fix not yet judged; touched none of", "fix did not hold; judged on", "fix not yet judged; credited to",
        "fix verified; judged on (not a trigger)"], listed.stdout
    assert said[0].startswith("fix not yet judged; touched none of: ERROR app.report: KeyError: 'rows'")  # no time
    assert said[-1].endswith("\u2026")  # cut at the terminal's width
    as_json = json.loads(gep(repo, "history", "--json").stdout)
    assert [e["meta"]["fix_credit"].get("judged") for e in as_json][-1] == [err_a]
    shown = json.loads(gep(repo, "show", "evt_1764300000123").stdout)
    assert shown["meta"]["fix_verdict"] == "verified" and shown["meta"]["fix_credit"]["credited"] == [err_a]
