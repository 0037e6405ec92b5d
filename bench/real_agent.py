"""The scripted agent of the real world (bench/real_world.py), run by the engine as its ``--agent-cmd``
(command mode: the prompt on stdin, cwd = the cycle's clone of the task's workspace).

Its rules (docs/evaluation.md, "Real tasks", lists them too; they were written before the first run):
  1. Target: the task, when the prompt's signals (an ``errsig:`` or other signal line, the mutation's trigger
     line) name one of its failing tests or the test file; when only the rest of the prompt (the log excerpt)
     names them, with probability 0.5. No target: nothing.
  2. Approach, by the gene's strategy: a repair gene (id or strategy says repair / root cause) makes
     fix .30, partial .25, wrong .20, broken .10, nothing .15; any other gene fix .12, partial .20,
     wrong .28, broken .20, nothing .20, where
       fix      the real fix commit's patch (``git apply``)
       partial  the patch's first hunk only (tasks whose patch has one hunk, or whose first hunk alone passes the
                failing tests: a change to another function instead, as ``wrong``)
       wrong    a change to another function of the fixed module that leaves the bug as it is (a guard comment
                and a no-op line in the first other function), passes the old tests
       broken   a half-done refactor that makes the module fail to import (validation rolls it back)
  3. What the prompt says about this problem: when a lesson, a recent outcome, an avoid line or a person's
     correction names one of the task's failing tests (or its test file) together with a failure word
     ("did not hold", "failed", "not_helpful", "rolled back", "avoid", "wrong", "don't"), 0.25 moves from partial
     and wrong (half each) to fix.
  4. Deterministic: the n-th attempt on a task draws from Random(seed, task, n); rule 1's draw at a tick from
     Random(seed, task, tick): the same in every arm, so arms differ only by what their prompts gave the agent.
Each run appends what it did to ``$GEP_BENCH_STATE`` (JSON lines: cycle id, target, approach).
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from evolution_agent import _attempts, _draw, note_done  # the written worlds' agent (beside this file)

FAIL_WORDS = ("did not hold", "did_not_hold", "failed", "not_helpful", "not helpful", "rolled back", "avoid",
              "wrong", "don't")
TOLD_IN = ("lesson", "recent outcome", "avoid", "session", "transcript", "correction")  # rule 3's sections
REPAIR_ODDS = {"fix": .30, "partial": .25, "wrong": .20, "broken": .10, "nothing": .15}
OTHER_ODDS = {"fix": .12, "partial": .20, "wrong": .28, "broken": .20, "nothing": .20}


def _sections(prompt: str) -> dict[str, str]:
    """The prompt's ``## `` sections by lower-case title."""
    out: dict[str, str] = {}
    title = ""
    for line in prompt.splitlines():
        if line.startswith("## "):
            title = line[3:].strip().lower()
        out[title] = out.get(title, "") + line + "\n"
    return out


def _signal_text(prompt: str) -> str:
    sections = _sections(prompt)
    trigger = [line for line in sections.get("mutation", "").splitlines() if line.startswith("trigger signals:")]
    return "\n".join(trigger + sections.get("signals", "").splitlines()[1:])


def names(task: dict[str, Any]) -> list[str]:
    """What names the task in a prompt: its failing tests' names and its test file."""
    return [n.split("::")[-1] for n in task["failing_tests"]] + [task["test_file"]]


def targeted(prompt: str, task: dict[str, Any], rng: random.Random) -> bool:
    if any(n in _signal_text(prompt) for n in names(task)):
        return True
    return any(n in prompt for n in names(task)) and rng.random() < 0.5


def odds(prompt: str, task: dict[str, Any]) -> dict[str, float]:
    low = prompt.lower()
    repair = "repair" in low.split("## context")[0] or "root cause" in low
    p = dict(REPAIR_ODDS if repair else OTHER_ODDS)
    told = False
    for title, text in _sections(prompt).items():
        if not any(k in title for k in TOLD_IN):  # the signals' own FAILED line tells nothing about attempts
            continue
        for line in text.lower().splitlines():
            if any(n.lower() in line for n in names(task)) and any(w in line for w in FAIL_WORDS):
                told = True
    if told:
        move = min(0.25, p["partial"] + p["wrong"])
        p["partial"] -= move / 2
        p["wrong"] -= move / 2
        p["fix"] += move
    return p


def _apply(patch: str) -> bool:
    run = subprocess.run(["git", "apply", "--whitespace=nowarn", "-"], input=patch, text=True, capture_output=True,
                         check=False)
    return run.returncode == 0


def wrong_change(task: dict[str, Any]) -> bool:
    """A guard in another function of the fixed module: the first ``def`` the fix's hunks do not touch."""
    path = Path(task["source"][0])
    lines = path.read_text().splitlines(keepends=True)
    touched = set(task["touched_lines"])
    for i, line in enumerate(lines):
        m = re.match(r"(\s*)def \w+\(.*\):\s*$", line)
        if m and i + 1 not in touched and not any(i < t <= i + 40 for t in touched):
            pad = m.group(1) + "    "
            lines.insert(i + 1, f"{pad}# guard: the nightly failure is handled here\n{pad}pass\n")
            path.write_text("".join(lines))
            return True
    return False


def act(task: dict[str, Any], approach: str) -> bool:
    if approach == "fix":
        return _apply(task["fix_patch"])
    if approach == "partial" and task["partial_patch"]:
        return _apply(task["partial_patch"])
    if approach in ("partial", "wrong"):
        return wrong_change(task)
    if approach == "broken":
        path = Path(task["source"][0])
        path.write_text(path.read_text() + "\nraise ImportError('half-done refactor: moved to a new module')\n")
        return True
    return False


def solve(prompt: str) -> dict[str, Any]:
    task = json.loads(Path(os.environ["GEP_BENCH_WORLD"]).read_text())
    state = Path(os.environ["GEP_BENCH_STATE"])
    seed = os.environ.get("GEP_BENCH_SEED", "0")
    rng = random.Random(f"target:{seed}:{task['id']}:{os.environ.get('GEP_BENCH_TICK', '')}")
    if not targeted(prompt, task, rng):
        return {"target": "", "approach": "nothing"}
    n = _attempts(state, task["id"])
    approach = _draw(odds(prompt, task), random.Random(f"fix:{seed}:{task['id']}:{n}"))
    if approach != "nothing" and act(task, approach):
        print(f"GEP_SUMMARY: Fix {task['failing_tests'][0]}: handle the case the nightly job fails on")
    return {"target": task["id"], "approach": approach}


def main(argv: list[str]) -> int:
    if argv[:1] in (["-h"], ["--help"]):
        print("usage: real_agent.py solve   (the prompt on stdin; $GEP_BENCH_WORLD, $GEP_BENCH_STATE)\n")
        print(__doc__)
        return 0
    done = solve(sys.stdin.read())
    note_done(done)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
