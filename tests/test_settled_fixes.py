"""A verified fix of a problem no signal shows is not recounted in the prompt (gep/learning/settled_fixes.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from learning_helpers import LOG, agent_workspace, committed_fix, cycle, later, log_again, log_ok, venv_first

from gep.core.models import EvolutionEvent, Outcome
from gep.learning.settled_fixes import recounted

pytestmark = pytest.mark.timeout(300)

ZERO = "errsig:2026-12-06T03:21:54Z ERROR app.billing: ZeroDivisionError: division by zero in app.billing.total"


def _fix(verdict: str | None, signals: list[str], files: list[str]) -> EvolutionEvent:
    e = EvolutionEvent(id="evt_1", signals=signals, genes_used=["gene_repair_from_errors"],
                       outcome=Outcome(status="success"))
    e.meta.fix_verdict = verdict  # type: ignore[assignment]
    e.meta.changed_files = files
    return e


def _settled(event: EvolutionEvent, signals: list[str], *others: EvolutionEvent) -> bool:
    return event not in recounted([event, *others], signals)


def test_only_a_problem_a_verified_fix_settled_and_nothing_shows_like_it_is_left_out() -> None:
    fix = _fix("verified", ["log_error", ZERO], ["app/billing.py"])
    assert _settled(fix, ["perf_bottleneck"])  # nothing live: the line would name code that works
    assert not _settled(fix, ["log_error", ZERO.replace("03:21:54", "05:00:01")])  # the same problem, back
    other = "errsig:ERROR app.users: ZeroDivisionError: division by zero in app.users.mean"
    assert not _settled(fix, [other])  # a similar one (the same family): what worked on it is worth reading
    same_file = "errsig:ERROR app.billing: KeyError: 'region' in app.billing.first"
    assert not _settled(fix, [same_file])  # another problem in the file it changed
    assert _settled(fix, ["errsig:ERROR app.users: KeyError: 'region' in app.users.first"])
    for verdict in ("did_not_hold", None):  # an unheld or not yet judged fix, alone, is recounted
        assert not _settled(_fix(verdict, ["log_error", ZERO], ["app/billing.py"]), ["perf_bottleneck"])
    # a failed try on a problem a later fix settled names the fixed function too; a try on another problem stays
    failed = _fix(None, ["log_error", ZERO.replace("03:21:54", "01:00:00")], [])
    assert _settled(failed, ["perf_bottleneck"], fix)
    assert not _settled(_fix(None, ["errsig:ERROR app.users: KeyError: 'x' in app.users.first"], []),
                        ["perf_bottleneck"], fix)
    assert not _settled(_fix(None, ["perf_bottleneck"], []), ["perf_bottleneck"], fix)  # no problem named


def _outcomes(event: EvolutionEvent) -> str:
    prompt = Path(event.meta.mutator_result.prompt_file).read_text()  # type: ignore[union-attr]
    return prompt.split("## Recent outcomes", 1)[1].split("\n## ", 1)[0] if "## Recent outcomes" in prompt else ""


def test_a_cycle_with_no_live_problem_is_not_told_about_the_fixed_function(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    venv_first(monkeypatch)
    ws = agent_workspace(tmp_path / "ws")
    fixed = committed_fix(ws)
    log_ok(ws, later(1))
    with (ws / LOG).open("a") as fh:  # a generic line: something to do, no problem named
        fh.write(f"{later(2).strftime('%Y-%m-%dT%H:%M:%SZ')} WARNING job: request took 6.2s, slow response\n")
    idle = cycle(ws, 2)
    assert [(c.event_id, c.verdict) for c in idle.meta.fix_checks or []] == [(fixed.id, "verified")]
    assert idle.meta.mutator_result is not None, (idle.outcome.status, idle.signals)
    assert fixed.id not in _outcomes(idle) and "mean()" not in _outcomes(idle), _outcomes(idle)
    log_again(ws, later(3))  # the problem is back: the try is recounted with its change
    back = cycle(ws, 3, abandon_pending=True)
    assert fixed.id in _outcomes(back) and "changed: stats.py mean():" in _outcomes(back), _outcomes(back)
