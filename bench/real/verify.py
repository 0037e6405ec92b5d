"""Checks every task of bench/real/tasks.json for real: its failing tests fail on the files before the fix and
pass with the fix patch applied, and the tests the project had before the fix pass both times.

``python bench/real/verify.py [TASK_ID ...] [--tasks FILE] [--json]``: one line per task (fails before,
passes after, the tests before the fix, seconds), exit 0 when every task holds, 1 when one does not, 2 on bad
input (an unknown task id, no clone of a task's repository: see bench/real/taskfiles.py).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from taskfiles import (
    TASKS,
    SourceMissing,
    Task,
    apply_patch,
    load_tasks,
    materialize,
    old_tests_args,
    run_tests,
)


@dataclass
class Check:
    id: str
    fails_before: bool  # every failing test fails on the pre-fix files
    passes_after: bool  # every failing test passes with fix.patch applied
    old_tests_hold: bool  # the test file at the parent passes before and after the fix
    seconds: float
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.fails_before and self.passes_after and self.old_tests_hold


def _old_tests(work: Path, folder: Path, task: Task) -> bool:
    """The parent's test file (visible tests) run on the code now in ``work``."""
    old = folder / "before" / task.test_file
    if not old.exists():
        return True  # the fix commit added the test file
    scratch = work.parent / "old"
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(work, scratch)
    shutil.copytree(folder / "before", scratch, dirs_exist_ok=True)
    ok, _ = run_tests(scratch, task, old_tests_args(task))
    return ok


def check(task: Task) -> Check:
    started = time.perf_counter()
    folder = materialize(task)
    with tempfile.TemporaryDirectory(prefix="gep-real-") as tmp:
        work = Path(tmp) / "work"
        shutil.copytree(folder / "pre", work)
        before_ok, before_out = run_tests(work, task, task.failing_tests)
        old_before = _old_tests(work, folder, task)
        applied = apply_patch(work, folder / "fix.patch")
        after_ok, after_out = run_tests(work, task, task.failing_tests) if applied else (False, "patch failed")
        old_after = _old_tests(work, folder, task)
    fails_before = before_out.count("FAILED ") == len(task.failing_tests) and not before_ok
    detail = "" if fails_before else before_out[-300:]
    if not after_ok:
        detail += after_out[-300:]
    return Check(task.id, fails_before, after_ok, old_before and old_after,
                 round(time.perf_counter() - started, 2), detail)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ids", nargs="*", help="task ids (default: all)")
    ap.add_argument("--tasks", type=Path, default=TASKS)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    tasks = load_tasks(args.tasks)
    known = {t.id for t in tasks}
    unknown = [i for i in args.ids if i not in known]
    if unknown:
        print(f"verify.py: unknown task {unknown[0]!r}", file=sys.stderr)
        return 2
    chosen = [t for t in tasks if not args.ids or t.id in args.ids]
    try:
        checks = [check(t) for t in chosen]
    except SourceMissing as exc:
        print(f"verify.py: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([asdict(c) | {"ok": c.ok} for c in checks], indent=1))
    else:
        print(f"{'task':<28}{'fails before':>13}{'passes after':>13}{'old tests':>10}{'s':>6}")
        for c in checks:
            print(f"{c.id:<28}{c.fails_before!s:>13}{c.passes_after!s:>13}{c.old_tests_hold!s:>10}{c.seconds:>6.1f}")
            if not c.ok and c.detail:
                print("  " + c.detail.strip().replace("\n", "\n  ")[-400:])
        held = sum(c.ok for c in checks)
        print(f"{held} of {len(checks)} tasks hold, from {len({t.repo for t in chosen})} repositories")
    return 0 if all(c.ok for c in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
