"""The agents of bench/evolution.py, run by the engine as its ``--agent-cmd`` (command mode: the prompt on stdin,
cwd = the cycle's clone of the workspace).

``solve``  the scripted solver. Its rules (docs/evaluation.md lists them too):
  1. Target: the first of the world's functions named in the prompt's signals (an ``errsig:`` or other signal
     line); if none, one named anywhere else in the prompt (the log excerpt) with probability 0.5. No target:
     a churn edit (a comment in app/__init__.py, passes the tests) with probability 0.6, else nothing.
  2. Approach, by the gene's strategy: a repair gene (id or strategy says repair / root cause) makes
     fix .30, partial .25, superficial .20, broken .10, nothing .15; any other gene fix .12, partial .20,
     superficial .28, broken .20, nothing .20.
  3. What the prompt says about this target: when a lesson, a recent outcome, an avoid line or a person's
     correction in the prompt names the target function together with a failure word ("did not hold", "failed",
     "not_helpful", "rolled back", "avoid", "wrong", "don't"), 0.25 moves from partial and superficial (half
     each) to fix. When the capsule to reuse changed the target, the agent copies the capsule's approach
     (whatever it was: a fix, a partial or a superficial change) one time in two, else it draws as above.
  4. Deterministic per seed: the draw for the n-th attempt on a target uses Random(seed, target, n), and rule 1's
     draw at a tick Random(seed, tick), the same in every arm (common random numbers), so arms differ only by
     what their prompts gave the agent, and a run repeats exactly.
  5. A careful agent (``GEP_BENCH_CAREFUL=1``, ``bench/evolution.py --careful-agent``) leaves a target whose code
     already handles the job's input (the fix variant) alone; by default the agent rewrites it with a fresh draw
     (as an agent sent back to an error line it does not check would), which can undo a fix.
``record DIR -- CMD...``  runs a real agent command, then saves the prompt and the diff it made under DIR, and
  the tokens the agent reports (Claude Code's ``--output-format json`` usage block) for tokens per verified fix.
``replay DIR``  applies the recorded diff whose prompt key (gene and targeted signals) matches; else nothing.
Each run appends what it did to ``$GEP_BENCH_STATE`` (JSON lines: cycle id, target, approach).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

FAIL_WORDS = ("did not hold", "did_not_hold", "failed", "not_helpful", "not helpful", "rolled back", "avoid",
              "wrong", "don't")
REPAIR_ODDS = {"fix": .30, "partial": .25, "superficial": .20, "broken": .10, "nothing": .15}
OTHER_ODDS = {"fix": .12, "partial": .20, "superficial": .28, "broken": .20, "nothing": .20}


def _signal_lines(prompt: str) -> list[str]:
    """The cycle's own signals: the Signals section and the mutation's trigger line."""
    sections = _sections(prompt)
    lines = [line for line in sections.get("mutation", "").splitlines() if line.startswith("trigger signals:")]
    return lines + sections.get("signals", "").splitlines()[1:]


def _sections(prompt: str) -> dict[str, str]:
    """The prompt's ``## `` sections by lower-case title."""
    out: dict[str, str] = {}
    title = ""
    for line in prompt.splitlines():
        if line.startswith("## "):
            title = line[3:].strip().lower()
        out[title] = out.get(title, "") + line + "\n"
    return out


def choose_target(prompt: str, world: dict[str, Any], rng: random.Random) -> dict[str, Any] | None:
    head = "\n".join(_signal_lines(prompt))
    named = [(head.find(p["name"]), p) for p in world["problems"] if p["name"] in head]
    if named:
        return min(named, key=lambda x: x[0])[1]
    anywhere = [(prompt.find(p["name"]), p) for p in world["problems"] if p["name"] in prompt]
    if anywhere and rng.random() < 0.5:
        return min(anywhere, key=lambda x: x[0])[1]
    return None


def odds(prompt: str, target: dict[str, Any]) -> dict[str, float]:
    low = prompt.lower()
    repair = "repair" in low.split("## context")[0] or "root cause" in low
    p = dict(REPAIR_ODDS if repair else OTHER_ODDS)
    name = target["name"]
    told = False
    for title, text in _sections(prompt).items():
        if "capsule" in title or "source" in title or title.startswith(("log", "today")):
            continue
        for line in text.lower().splitlines():
            if name in line and any(w in line for w in FAIL_WORDS):
                told = True
    transcript = "\n".join(t for k, t in _sections(prompt).items() if "session" in k or "transcript" in k).lower()
    if name in transcript and "don't hide" in transcript:
        told = True
    if told:
        move = min(0.25, p["partial"] + p["superficial"])
        p["partial"] -= move / 2
        p["superficial"] -= move / 2
        p["fix"] += move
    return p


def capsule_approach(prompt: str, target: dict[str, Any]) -> str | None:
    """The approach of the capsule to reuse, when its diff changed the target (told by its added lines)."""
    caps = "".join(t for k, t in _sections(prompt).items() if k.startswith("capsule"))
    if f"def {target['name']}(" not in caps:
        return None
    added = {line[1:].strip() for line in caps.splitlines() if line.startswith("+") and not line.startswith("+++")}
    for approach in ("fix", "partial", "superficial", "broken"):
        body = {x.strip() for x in target["sources"][approach].splitlines()} - {
            x.strip() for x in target["sources"]["bug"].splitlines()}
        if body and body <= added:
            return approach
    return None


def _draw(p: dict[str, float], rng: random.Random) -> str:
    x, acc = rng.random(), 0.0
    for k, v in p.items():
        acc += v
        if x < acc:
            return k
    return "nothing"


def _current(target: dict[str, Any]) -> str | None:
    """The target function's source in the clone now."""
    path = Path("app") / f"{target['module']}.py"
    text = path.read_text() if path.exists() else ""
    start, end = f"# --- {target['name']}\n", f"# --- end {target['name']}\n"
    i, j = text.find(start), text.find(end)
    return text[i:j + len(end)] if i >= 0 and j >= 0 else None


def _write_variant(target: dict[str, Any], approach: str) -> bool:
    path = Path("app") / f"{target['module']}.py"
    text = path.read_text()
    start, end = f"# --- {target['name']}\n", f"# --- end {target['name']}\n"
    i, j = text.find(start), text.find(end)
    if i < 0 or j < 0:
        return False
    new = text[:i] + target["sources"][approach] + text[j + len(end):]
    if new == text:
        return False
    path.write_text(new)
    return True


def _attempts(state: Path, name: str) -> int:
    if not state.exists():
        return 0
    return sum(1 for line in state.read_text().splitlines() if json.loads(line).get("target") == name)


def solve(prompt: str) -> dict[str, Any]:
    world = json.loads(Path(os.environ["GEP_BENCH_WORLD"]).read_text())
    state = Path(os.environ["GEP_BENCH_STATE"])
    seed = os.environ.get("GEP_BENCH_SEED", "0")
    cycle = os.environ.get("GEP_CYCLE_ID", "")
    # keyed by the world's tick, not the cycle's id: an event id ends in random digits, which made two runs
    # of the same worlds and seeds differ (and the arms draw differently at the same tick)
    rng = random.Random(f"target:{seed}:{os.environ.get('GEP_BENCH_TICK', cycle)}")
    target = choose_target(prompt, world, rng)
    if target is None:
        if random.Random(f"churn:{seed}:{_attempts(state, '')}").random() < 0.6:
            p = Path("app") / "__init__.py"
            p.write_text(p.read_text() + f"# reviewed {cycle}\n")
            return {"target": "", "approach": "churn"}
        return {"target": "", "approach": "nothing"}
    n = _attempts(state, target["name"])
    if os.environ.get("GEP_BENCH_CAREFUL") == "1" and _current(target) == target["sources"]["fix"]:
        return {"target": target["name"], "approach": "already_fixed"}  # rule 5: a careful agent looks first
    draw = random.Random(f"fix:{seed}:{target['name']}:{n}")
    reused = capsule_approach(prompt, target)
    approach = reused if reused and draw.random() < 0.5 else _draw(odds(prompt, target), draw)
    if approach != "nothing" and _write_variant(target, approach):
        print(f"GEP_SUMMARY: Fix {target['where']}: handle the input the job fails on")
    return {"target": target["name"], "approach": approach}


# ------------------------------------------------------------------ recording and replaying a real agent


def prompt_key(prompt: str) -> str:
    """Which recording a prompt replays: the gene and the signal lines (not ids, times or sources)."""
    gene = re.search(r"gene_[a-z0-9_]+", prompt)
    sigs = sorted(set(re.sub(r"evt_\w+|\d{4}-\d\d-\d\d\S*", "", line).strip() for line in _signal_lines(prompt)))
    return hashlib.sha256(json.dumps([gene.group(0) if gene else "", sigs]).encode()).hexdigest()[:16]


def usage_tokens(stdout: str) -> int:
    """The tokens a real agent says it used: Claude Code's ``--output-format json`` prints one object with a
    ``usage`` block (``stream-json``: the last line is that object). Other output: 0 (not measured)."""
    text = stdout.strip()
    for chunk in (text, *reversed(text.splitlines())):
        try:
            rec = json.loads(chunk)
        except ValueError:
            continue
        usage = rec.get("usage") if isinstance(rec, dict) else None
        if isinstance(usage, dict):  # input, output, cache creation and cache read tokens
            return sum(v for k, v in usage.items() if k.endswith("_tokens") and isinstance(v, int))
    return 0


def record(folder: Path, argv: list[str], prompt: str) -> dict[str, Any]:
    run = subprocess.run(argv, input=prompt, text=True, capture_output=True, check=False)
    sys.stdout.write(run.stdout[-4000:])
    diff = subprocess.run(["git", "diff", "HEAD"], capture_output=True, text=True, check=False).stdout
    folder.mkdir(parents=True, exist_ok=True)
    key, tokens = prompt_key(prompt), usage_tokens(run.stdout)
    (folder / f"{key}.json").write_text(json.dumps({"prompt": prompt, "diff": diff, "rc": run.returncode,
                                                    "tokens": tokens}))
    return {"target": "", "approach": "recorded", "key": key, "rc": run.returncode, "tokens": tokens}


def replay(folder: Path, prompt: str) -> dict[str, Any]:
    key = prompt_key(prompt)
    path = folder / f"{key}.json"
    if not path.exists():
        return {"target": "", "approach": "no_recording", "key": key}
    rec = json.loads(path.read_text())
    if rec["diff"].strip():
        subprocess.run(["git", "apply", "--whitespace=nowarn"], input=rec["diff"], text=True, check=False)
    return {"target": "", "approach": "replayed", "key": key, "tokens": rec.get("tokens", 0)}  # what it cost


def main(argv: list[str]) -> int:
    if argv[:1] in (["-h"], ["--help"]):
        print("usage: evolution_agent.py solve | record DIR -- CMD... | replay DIR   (the prompt on stdin)\n")
        print(__doc__)
        return 0
    prompt = sys.stdin.read()
    if argv[:1] == ["record"]:
        folder, rest = Path(argv[1]), argv[argv.index("--") + 1:]
        done = record(folder, rest, prompt)
    elif argv[:1] == ["replay"]:
        done = replay(Path(argv[1]), prompt)
    else:
        done = solve(prompt)
    state = os.environ.get("GEP_BENCH_STATE")
    if state:
        with open(state, "a") as fh:
            fh.write(json.dumps({"cycle": os.environ.get("GEP_CYCLE_ID", ""), **done}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
