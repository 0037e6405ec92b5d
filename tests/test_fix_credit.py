"""A fix's verdict follows the problem the change addressed (issue 28): the errors whose file and function the
commit touched (real git repositories), not the signals that triggered the cycle."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from conftest import git, init_repo

from gep.core.config import Settings
from gep.git.change_scope import change_scope
from gep.learning.fix_credit import credit_change, live_errors, sites_in
from gep.learning.resolved import check_resolutions, resolution_for_commit
from gep.signals.sources import collect_tails, file_marks

BILLING = '''def total_invoice(pair):
    total, count = pair
    return total / count


def money(x):
    return f"{x:.2f}"
'''
T0 = datetime(2026, 11, 28, 2, 0, tzinfo=UTC)
ERR = "ZeroDivisionError: division by zero in app.billing.total_invoice"
ERR_LINE = f"2026-11-28T01:00:00.024Z ERROR app.billing: {ERR}"
TRACEBACK = [
    "2026-11-28 01:00:00,024 - app.job - ERROR - job failed",
    "Traceback (most recent call last):",
    '  File "/srv/checkout/app/billing.py", line 3, in total_invoice',
    "    return total / count",
    "ZeroDivisionError: division by zero",
]


def repo(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "app").mkdir(parents=True)
    (ws / "app" / "__init__.py").write_text("")
    (ws / "logs").mkdir()
    (ws / ".gitignore").write_text("logs/\n")
    return init_repo(ws, {"app/billing.py": BILLING})


def commit(ws: Path, old: str, new: str) -> str:
    p = ws / "app" / "billing.py"
    p.write_text(p.read_text().replace(old, new))
    git(ws, "commit", "-qam", "change")
    return git(ws, "rev-parse", "HEAD").strip()


def fix_total(ws: Path) -> str:
    return commit(ws, "return total / count", "return total / count if count else 0.0")


def churn_helper(ws: Path) -> str:
    return commit(ws, 'return f"{x:.2f}"', 'return format(x, ".2f")')


def test_sites_in_the_formats_logs_use() -> None:
    assert [(s.file, s.line, s.function) for s in sites_in(TRACEBACK[2])] == [
        ("/srv/checkout/app/billing.py", 3, "total_invoice")]
    pytest_node = sites_in("FAILED tests/test_billing.py::test_total - ZeroDivisionError")
    assert [(s.file, s.function, s.test) for s in pytest_node if s.test] == [("tests/test_billing.py", "test_total", True)]
    js = sites_in("    at totalInvoice (/srv/app/billing.js:12:7)")
    assert [(s.file, s.line, s.function) for s in js] == [("/srv/app/billing.js", 12, "totalInvoice")]
    record = json.dumps({"ts": "2026-11-28T01:00:00Z", "levelname": "ERROR", "funcName": "total_invoice",
                         "pathname": "/srv/app/billing.py", "lineno": 3, "msg": "division by zero"})
    assert any((s.file, s.function) == ("/srv/app/billing.py", "total_invoice") for s in sites_in(record))
    assert any(s.dotted == "app.billing.total_invoice" for s in sites_in(ERR_LINE))


def test_the_scope_of_a_commit_is_its_files_and_the_functions_its_hunks_fall_in(tmp_path: Path) -> None:
    ws = repo(tmp_path)
    scope = change_scope(ws, fix_total(ws))
    assert scope is not None and [(f.path, f.functions) for f in scope.files] == [("app/billing.py", ["total_invoice"])]
    assert "app/billing.py" in scope.repo_files
    helper = change_scope(ws, churn_helper(ws))
    assert helper is not None and helper.files[0].functions == ["money"]
    assert change_scope(ws, "0" * 40) is None


def test_a_generic_trigger_that_fixed_a_live_errors_function_is_credited_to_that_error(tmp_path: Path) -> None:
    ws = repo(tmp_path)
    for lines in ([ERR_LINE], TRACEBACK):  # the dotted name on the line, or the traceback's frame
        credit = credit_change(["perf_bottleneck"], live_errors(lines), change_scope(ws, fix_total(ws)))
        assert credit.credited == [live_errors(lines)[-1].signal] and "perf_bottleneck" in credit.addressed
        git(ws, "reset", "-q", "--hard", "HEAD~1")


def test_an_unrelated_helper_change_is_not_a_fix_of_the_error(tmp_path: Path) -> None:
    ws = repo(tmp_path)
    errors = live_errors([ERR_LINE])
    trigger = ["log_error", errors[0].signal]
    credit = credit_change(trigger, errors, change_scope(ws, churn_helper(ws)))
    assert credit.missed == [errors[0].signal] and credit.credited == []
    assert credit.addressed == ["log_error"]
    # a failing test the change made pass is credited when its validation ran pytest and passed
    node = live_errors(["FAILED tests/test_billing.py::test_total - ZeroDivisionError: division by zero"])
    (ws / "tests").mkdir()
    (ws / "tests" / "test_billing.py").write_text("def test_total():\n    pass\n")
    git(ws, "add", "-A")
    git(ws, "commit", "-qm", "tests")
    scope = change_scope(ws, fix_total(ws))
    assert credit_change([], node, scope, tests_passed=True).credited == [node[0].signal]
    assert credit_change([], node, scope, tests_passed=False).credited == []
    # that failing test, re-run by the change's validation and passing, is evidence the fix held (issue 44)
    assert credit_change([node[0].signal], node, scope, tests_passed=True).rerun == [node[0].signal]
    assert credit_change([], node, scope, tests_passed=True).rerun == [node[0].signal]
    assert credit_change([node[0].signal], node, scope, tests_passed=False).rerun == []


def _judge(ws: Path, commit_sha: str, trigger: list[str], recur: bool) -> list[tuple[str, list[str]]]:
    """Commit-time credit, then the next cycle's check over the real log: (verdict, problems judged)."""
    settings = Settings()
    log = ws / "logs" / "job.log"
    log.write_text(ERR_LINE + "\n")
    errors = live_errors([t.text for t in collect_tails(ws, settings, T0)[0].lines])
    credit = credit_change(trigger, errors, change_scope(ws, commit_sha))
    res = resolution_for_commit(event_id="e1", gene_id="g", signals=credit.addressed, commit_sha=commit_sha,
                                committed_at=T0, files=file_marks(ws, settings, T0), missed=credit.missed,
                                credited=credit.credited)
    assert res is not None
    later = T0 + timedelta(hours=1)
    with log.open("a") as fh:
        fh.write(f"{later:%Y-%m-%dT%H:%M:%S}.5Z " + ("ERROR app.billing: " + ERR if recur else "INFO job ok") + "\n")
    check = check_resolutions(["perf_bottleneck"], [res], collect_tails(ws, settings, later), later)
    return [(v.verdict, v.judged) for v in check.verdicts]


def test_verdicts_follow_the_error_the_change_touched(tmp_path: Path) -> None:
    ws = repo(tmp_path)
    sig = live_errors([ERR_LINE])[0].signal
    # fixed in a perf_bottleneck cycle: judged on the error, verified while it stays away, not on the trigger
    assert _judge(ws, fix_total(ws), ["perf_bottleneck"], recur=False) == [("verified", [sig])]
    git(ws, "reset", "-q", "--hard", "HEAD~1")
    assert _judge(ws, fix_total(ws), ["perf_bottleneck"], recur=True) == [("did_not_hold", [sig])]
    git(ws, "reset", "-q", "--hard", "HEAD~1")
    # helper churn in the error's cycle: never verified by the error going quiet, and did not hold when it is back
    assert _judge(ws, churn_helper(ws), ["log_error", sig], recur=False) == []
    git(ws, "reset", "-q", "--hard", "HEAD~1")
    assert _judge(ws, churn_helper(ws), ["log_error", sig], recur=True) == [("did_not_hold", [sig])]


def test_the_fix_event_records_what_it_was_credited_to_and_judged_on(tmp_path: Path) -> None:
    """remember_commit keeps the credit on the fix's event; the next cycle's verdict adds what it judged."""
    from gep.core.models import EventMeta, EvolutionEvent, Outcome
    from gep.core.request import CycleRequest
    from gep.cycle.context import CycleContext
    from gep.cycle.fixes import check_fixes, remember_commit
    from gep.git import open_repo
    from gep.store import Store

    ws = repo(tmp_path)
    log = ws / "logs" / "job.log"
    log.write_text(ERR_LINE + "\n")
    sha = fix_total(ws)
    sig = live_errors([ERR_LINE])[0].signal
    event = EvolutionEvent(id="evt_fix", genes_used=["gene_perf"], signals=["perf_bottleneck"],
                           outcome=Outcome(status="success", score=0.8),
                           meta=EventMeta(commit=sha, solidified_at=T0.isoformat()))
    with Store.for_workspace(ws) as store:
        store.add_event(event)
        ctx = CycleContext(request=CycleRequest(workspace=ws), settings=Settings(), repo=open_repo(ws),
                           store=store, event_id="evt_fix", cycle_number=1, seed=1, started_at=T0, clock=lambda: T0)
        remember_commit(ctx, event)
        stored = store.get_event("evt_fix")
        assert stored is not None and stored.meta.fix_credit is not None
        assert stored.meta.fix_credit.credited == [sig] and stored.meta.fix_credit.judged is None
        later = T0 + timedelta(hours=1)
        with log.open("a") as fh:
            fh.write(f"{later:%Y-%m-%dT%H:%M:%S}.5Z ERROR app.billing: {ERR}\n")
        check_fixes(ctx.model_copy(update={"started_at": later, "clock": lambda: later}), ["perf_bottleneck"])
        judged = store.get_event("evt_fix")
    assert judged is not None and judged.meta.fix_verdict == "did_not_hold"
    assert judged.meta.fix_credit is not None and judged.meta.fix_credit.judged == [sig]
