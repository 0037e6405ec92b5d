"""The agent as ``gep eval`` runs it: the user's command, timed, and optionally recorded or played back.

Run by the engine as the cycle's agent command (``python -m gep.eval.tape run|record DIR|replay DIR [-- CMD...]``,
the prompt on stdin, the cycle's clone as the current folder). ``record`` runs the agent, then keeps its answer:
the change it made (a binary diff, read with a temporary index: the clone's own index is not touched), its
``GEP_SUMMARY`` line, its exit code and how long it took, under the prompt's key (a hash of the prompt with its
ids, times, paths and commit ids taken out) and under the run's slot (task, arm, seed, attempt), so ``replay``
gives the same answer back without the agent: by the prompt first, else by the slot. Each run appends one line
(the slot, seconds, what happened) to ``GEP_EVAL_STATE`` for the evaluation to read.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from gep.git.plumbing import Git

# what differs between two runs of the same prompt: event ids, times, the scratch folder, commit ids
_VOLATILE = re.compile(r"evt_\w+|\d{4}-\d\d-\d\d[T ][\d:.,]+(Z|[+-]\d\d:?\d\d)?|\b[0-9a-f]{7,64}\b|"
                       r"\d+(\.\d+)?\s?(ms|s)\b")


def prompt_key(prompt: str, root: str = "") -> str:
    text = prompt.replace(root, "<root>") if root else prompt
    return hashlib.sha256(_VOLATILE.sub("#", text).encode()).hexdigest()[:16]


def slot_key(slot: str) -> str:
    return "slot-" + hashlib.sha256(slot.encode()).hexdigest()[:16]


def changes(cwd: Path) -> str:
    """What the agent changed in ``cwd`` against HEAD, new files included, as a binary diff."""
    with tempfile.TemporaryDirectory() as tmp:
        g = Git(cwd).with_(index=Path(tmp) / "index")
        g.run("read-tree", "HEAD")
        g.run("add", "-A", "--", ".")
        return g.run("diff", "--cached", "--binary", "HEAD").text


def _summary(stdout: str) -> str:
    lines = [ln for ln in stdout.splitlines() if ln.strip().startswith("GEP_SUMMARY:")]
    return lines[-1].strip() if lines else ""


def run_agent(argv: list[str], prompt: str) -> tuple[int, str, float]:
    started = time.monotonic()
    done = subprocess.run(argv, input=prompt, text=True, capture_output=True, check=False)
    sys.stderr.write(done.stderr[-4000:])
    return done.returncode, done.stdout, time.monotonic() - started


def record(folder: Path, argv: list[str], prompt: str, slot: str, root: str) -> dict[str, Any]:
    code, stdout, seconds = run_agent(argv, prompt)
    sys.stdout.write(stdout[-4000:])
    answer = {"prompt": prompt, "diff": changes(Path.cwd()), "summary": _summary(stdout), "rc": code,
              "seconds": seconds, "slot": slot}
    folder.mkdir(parents=True, exist_ok=True)
    for name in (prompt_key(prompt, root), slot_key(slot)):
        (folder / f"{name}.json").write_text(json.dumps(answer))
    return {"rc": code, "seconds": seconds, "how": "recorded"}


def replay(folder: Path, prompt: str, slot: str, root: str) -> dict[str, Any]:
    for name, how in ((prompt_key(prompt, root), "replayed"), (slot_key(slot), "replayed by slot")):
        path = folder / f"{name}.json"
        if path.is_file():
            answer = json.loads(path.read_text())
            if answer["diff"].strip():
                Git(Path.cwd()).run("apply", "--binary", "--whitespace=nowarn", input=answer["diff"].encode(), ok=True)
            if answer["summary"]:
                print(answer["summary"])
            return {"rc": int(answer["rc"]), "seconds": float(answer["seconds"]), "how": how}
    return {"rc": 0, "seconds": 0.0, "how": "no recording"}


def main(argv: list[str]) -> int:
    mode, rest = (argv[0], argv[1:]) if argv else ("", [])
    cmd = rest[rest.index("--") + 1:] if "--" in rest else []
    prompt = sys.stdin.read()
    slot, root = os.environ.get("GEP_EVAL_SLOT", ""), os.environ.get("GEP_EVAL_ROOT", "")
    if mode == "run" and cmd:
        code, stdout, seconds = run_agent(cmd, prompt)
        sys.stdout.write(stdout[-4000:])
        done: dict[str, Any] = {"rc": code, "seconds": seconds, "how": "ran"}
    elif mode == "record" and rest and cmd:
        done = record(Path(rest[0]), cmd, prompt, slot, root)
    elif mode == "replay" and rest:
        done = replay(Path(rest[0]), prompt, slot, root)
    else:
        print("usage: python -m gep.eval.tape run -- CMD... | record DIR -- CMD... | replay DIR", file=sys.stderr)
        return 2
    state = os.environ.get("GEP_EVAL_STATE")
    if state:
        with open(state, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"slot": slot, **done}) + "\n")
    return int(done["rc"])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
