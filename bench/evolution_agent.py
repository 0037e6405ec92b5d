"""The agents of bench/evolution.py, run by the engine as its ``--agent-cmd`` (command mode: the prompt on stdin,
cwd = the cycle's clone of the workspace).

``solve``  the scripted solver. Its rules (docs/evaluation.md lists them too, with each suite's odds):
  1. Target: the first of the world's functions named in the prompt's signals (an ``errsig:`` or other signal
     line); if none, one named anywhere else in the prompt (the log excerpt) with probability 0.5. No target:
     a churn edit (a comment in app/__init__.py, passes the tests) with probability 0.6, else nothing.
  2. Approach, by the selected gene's own strategy, read from the prompt's structured head (``## Gene <id>
     (<category>)``), never from words every prompt carries: a gene of the world (bench/evolution_world.py)
     plays its family: on a problem of its family the ``match`` odds, on another the ``mismatch`` odds, the
     ``silence`` gene its own; another repair gene the ``repair`` odds; any other gene the ``other`` odds.
  3. What the prompt says about THIS problem: when its history (any section but the cycle's own inputs, the
     gene, the capsule, the sources and the fixed protocol) names the target function, or a session quoted in
     it has a person's correction naming it, ``informed_move`` (.25; .35 in the lesson suite) moves from
     partial and superficial (in proportion) to fix. When that history shows the diff of an earlier try on
     the function (its added lines are a variant's), that approach, unless it was the fix, is not drawn again.
     When the capsule to reuse made a change of this problem's kind (to this function or to a twin with the
     same problem), the agent copies its approach (whatever it was) 7 times in 10, else draws as above.
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

from evolution_world import ODDS

# sections that every prompt carries or that are the cycle's own inputs: what they say is not what the prompt
# tells about a problem's history (rule 3)
_NOT_HISTORY = ("", "mutation", "signals", "personality", "rules", "objects in the context", "tools", "report")
_HEAD_GENE = re.compile(r"^## Gene (\S+) \(([^)]*)\)", re.M)
_MUTATION_CATEGORY = re.compile(r"category (repair|optimize|innovate)")


def _signal_lines(prompt: str) -> list[str]:
    """The cycle's own signals: the Signals section and the mutation's trigger line."""
    sections = _sections(prompt)
    lines = [line for line in sections.get("mutation", "").splitlines() if line.startswith("trigger signals:")]
    return lines + sections.get("signals", "").splitlines()[1:]


def _sections(prompt: str) -> dict[str, str]:
    """The prompt's ``## `` sections by lower-case title (a title's words after the first two kept off:
    ``## Gene gene_x (repair)`` is ``gene``, ``## Capsule to reuse cap_1`` is ``capsule to reuse``)."""
    out: dict[str, str] = {}
    title = ""
    for line in prompt.splitlines():
        if line.startswith("## "):
            words = line[3:].strip().lower().split()
            title = "gene" if words[:1] == ["gene"] else (
                "capsule" if words[:1] == ["capsule"] else " ".join(words))
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


def selected_gene(prompt: str) -> tuple[str, str]:
    """(gene id, category) from the prompt's structured head: the ``## Gene <id> (<category>)`` line, else the
    mutation's category and no id."""
    m = _HEAD_GENE.search(prompt)
    if m:
        return m.group(1), m.group(2).strip().lower()
    c = _MUTATION_CATEGORY.search(_sections(prompt).get("mutation", ""))
    return "", c.group(1) if c else ""


def gene_odds(prompt: str, target: dict[str, Any], world: dict[str, Any]) -> tuple[str, dict[str, float]]:
    """Rule 2: the odds the selected gene's own strategy gives on this target's kind of problem."""
    gene, category = selected_gene(prompt)
    family = world.get("genes", {}).get(gene)
    if family == "silence":
        role = "silence"
    elif family is not None:
        role = "match" if family == target.get("family") else "mismatch"
    else:
        role = "repair" if category == "repair" else "other"
    return role, dict(world.get("odds", {}).get(role) or ODDS[role])


def history(prompt: str) -> str:
    """What the prompt says beyond the cycle's own inputs and the fixed protocol: lessons, recent outcomes,
    avoid lines, notes, what was tried (every section but those of ``_NOT_HISTORY``, the gene, the capsule and
    the sources)."""
    return "".join(t for k, t in _sections(prompt).items()
                   if k not in _NOT_HISTORY and k not in ("gene", "capsule") and not k.startswith("sources"))


def told_about(prompt: str, target: dict[str, Any]) -> bool:
    """Rule 3: the prompt's history names this function (an earlier try on it, its outcome, a lesson, a
    person's note), or a session quoted in it has a person's correction about it."""
    if target["name"] in history(prompt) or target["where"] in history(prompt):
        return True
    sources = "".join(t for k, t in _sections(prompt).items() if k.startswith("sources")).lower()
    return any(target["name"] in line and "don't hide" in line for line in sources.splitlines())


def tried_before(prompt: str, target: dict[str, Any]) -> str | None:
    """The approach an earlier try on this function took, when the history shows its diff (added lines)."""
    return _approach_in(history(prompt), target, same_function=True)


def odds(prompt: str, target: dict[str, Any], world: dict[str, Any] | None = None) -> dict[str, float]:
    world = world or {}
    _role, p = gene_odds(prompt, target, world)
    if told_about(prompt, target):
        move = min(float(world.get("informed_move", .25)), p["partial"] + p["superficial"])
        share = move / (p["partial"] + p["superficial"]) if p["partial"] + p["superficial"] else 0.0
        p["fix"] += move
        p["partial"] -= p["partial"] * share
        p["superficial"] -= p["superficial"] * share
    return p


def _added_lines(text: str) -> list[str]:
    """Lines a change added, as a diff shows them (``+line``) or as a one-line excerpt of it does (``file f(): -
    old | + new``, a piece cut with "...")."""
    out = []
    for line in text.splitlines():
        if line.startswith("+") and not line.startswith("+++"):
            out.append(line[1:].strip())
        out += [piece.strip()[1:].strip() for piece in line.split(" | ")[1:] if piece.strip().startswith("+")]
    return [x for x in out if x]


def _shows(added: list[str], line: str) -> bool:
    return any(a == line or (a.endswith("...") and line.startswith(a[:-3].rstrip())) for a in added)


def _approach_in(text: str, target: dict[str, Any], same_function: bool) -> str | None:
    """The variant whose own lines (those not in the bug) a change shown in ``text`` added most of (half at
    least), for this function (or, not ``same_function``, for any function of the same kind: the bodies are the
    same but for a key)."""
    if same_function and target["name"] not in text:
        return None
    added = _added_lines(text)
    bug = {x.strip() for x in target["sources"]["bug"].splitlines()}
    best, score = None, (0.0, 0)
    for approach in ("fix", "partial", "superficial", "broken"):
        body = {x.strip() for x in target["sources"][approach].splitlines()} - bug - {""}
        hits = sum(_shows(added, x) for x in body)
        if body and (hits / len(body), hits) > score:  # the larger share, then more lines (cut pieces)
            best, score = approach, (hits / len(body), hits)
    return best if score[0] >= 0.5 else None


def capsule_approach(prompt: str, target: dict[str, Any]) -> str | None:
    """The approach of the capsule to reuse, when its diff made a change of this kind (to this function or
    to another with the same problem: told by its added lines)."""
    caps = "".join(t for k, t in _sections(prompt).items() if k.startswith("capsule"))
    return _approach_in(caps, target, same_function=False)


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
    chances = odds(prompt, target, world)
    approach = reused if reused and draw.random() < 0.7 else _draw(chances, draw)
    before = tried_before(prompt, target)
    if before is not None and approach == before and approach != "fix" and not reused:
        rest = {k: v for k, v in chances.items() if k != before}  # shown that it did not last: not again
        total = sum(rest.values())
        approach = _draw({k: v / total for k, v in rest.items()}, draw) if total > 0 else approach
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
    note_done(done)
    return 0


def note_done(done: dict[str, Any]) -> None:
    """What the agent did, one JSON line in $GEP_BENCH_STATE keyed by the cycle (the bench reads it back)."""
    state = os.environ.get("GEP_BENCH_STATE")
    if state:
        with open(state, "a") as fh:
            fh.write(json.dumps({"cycle": os.environ.get("GEP_CYCLE_ID", ""), **done}) + "\n")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
