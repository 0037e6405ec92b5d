"""``gep eval``'s paired table as text lines of at most 80 columns."""

from __future__ import annotations

import math

from gep.eval.run import EvalReport


def duration(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{seconds:.1f}s"


def _num(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.2f}"


def lines(report: EvalReport) -> list[str]:
    tasks, seeds = len(report.tasks), report.seeds
    out = [f"gep eval: {tasks} task(s) from the history of {report.workspace}"[:80]]
    if seeds > 1:
        out[-1] = out[-1][:68] + f", {seeds} seeds"
    out += ["", f"{'arm':<8}{'tasks':>7}{'fixed':>7}{'rate':>7}{'attempts':>10}{'agent time':>12}"]
    for name, arm in report.arms.items():
        n, fixed = len(arm.results), sum(r.fixed for r in arm.results)
        rate = f"{fixed / n:.2f}" if n else "-"
        out.append(f"{name:<8}{n:>7}{fixed:>7}{rate:>7}{sum(r.attempts for r in arm.results):>10}"
                   f"{duration(sum(r.agent_seconds for r in arm.results)):>12}")
    out += ["", _task_header(report)]
    for i, task in enumerate(report.tasks):
        cells = []
        for arm in report.arms.values():
            runs = arm.results[i::tasks]  # this task under every seed
            cells.append(f"{sum(r.fixed for r in runs)}/{len(runs)} in {sum(r.attempts for r in runs)}")
        out.append((f"{task.id:<11}" + "".join(f"{c:<12}" for c in cells) + task.subject)[:80])
    if report.compared and report.p_value is not None:
        a, b = report.compared
        out += ["", f"{a} vs {b}: {report.only_first} fixed only by {a}, {report.only_second} only by {b}; "
                    f"exact McNemar p = {report.p_value:.3g}"]
        if report.ratio is not None and report.ratio_ci is not None:
            lo, hi = report.ratio_ci
            out.append(f"ratio of fixes {a}/{b}: {_num(report.ratio)} (95% bootstrap interval {_num(lo)} to "
                       f"{_num(hi)})")
        else:
            out.append(f"ratio of fixes {a}/{b}: undefined (neither arm fixed a task)")
    return out


def _task_header(report: EvalReport) -> str:
    return f"{'task':<11}" + "".join(f"{name:<12}" for name in report.arms) + "subject (fixed/runs in cycles)"
