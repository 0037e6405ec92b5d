"""A cycle through the git layer in a child process that dies (SIGKILL) at a chosen point, or whenever the
test kills it.

    python tests/git_crash_driver.py WORKSPACE POINT

POINT: after_clone | after_mutation | after_commit | after_cas | in_read_tree | after_landing |
inplace_after_cas | inplace_in_index | none | random. ``random`` runs the whole cycle with short pauses
between (and inside) its steps, so that a kill from outside at a random moment can land anywhere.
Progress is appended to WORKSPACE/../progress ("start" once imported, then "clone", "mutation", "commit",
"delivered <status>").
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# what main imports, imported once by a zygote (tests/zygote.py) that forks a child per run
PRELOAD = ["gep.git", "gep.git.delivery", "gep.git.inplace_commit", "gep.git.landing", "git_scenario"]
EVENT_ID = "evt_1700000000000_abc123"
MESSAGE = f"gep(repair): add a docstring\n\nGEP-Event: {EVENT_ID}\n"


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _progress(ws: Path, what: str) -> None:
    with open(ws.parent / "progress", "a", encoding="utf-8") as fh:
        fh.write(what + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def _instrument(point: str, pause: float) -> None:
    """Die (or pause) inside the landing and the in-place commit, where the user's index is written."""
    import gep.git.inplace_commit as inplace_commit
    import gep.git.landing as landing

    move, retries = landing.move_ref, landing.with_retries
    calls = {"move": 0}

    def move_then(g: Any, ref: str, new: str, old: str, why: str) -> bool:
        ok = move(g, ref, new, old, why)
        calls["move"] += 1
        if point in ("after_cas", "inplace_after_cas") and calls["move"] == 1:
            _die()
        time.sleep(pause)
        return ok

    def retries_then(g: Any, *args: str, input: bytes | None = None) -> str | None:
        if point in ("in_read_tree", "inplace_in_index"):
            (Path(g.git_dir) / "index.lock").write_bytes(b"")  # as git holds it while writing
            if point == "in_read_tree":  # and read-tree had written one file before the kill
                blob = g.run("rev-parse", f"{args[-1]}:app.py").line()
                (Path(g.cwd) / "app.py").write_bytes(g.run("cat-file", "blob", blob).out)
            _die()
        time.sleep(pause)
        return retries(g, *args, input=input)

    landing.move_ref = move_then  # type: ignore[assignment]
    landing.with_retries = retries_then  # type: ignore[assignment]
    inplace_commit.move_ref = move_then  # type: ignore[assignment]
    inplace_commit.with_retries = retries_then  # type: ignore[assignment]


def _step(ws: Path, point: str, name: str, pause: float) -> None:
    _progress(ws, name)
    if point == f"after_{name}":
        _die()
    time.sleep(pause)


def isolated(ws: Path, point: str, pause: float) -> None:
    from git_scenario import agent_edit

    import gep.git.delivery as delivery
    from gep.git import clone_change, commit_change, deliver, open_clone, open_repo, workspace_lock

    if point == "after_landing":
        delivery.close_clone = lambda *a, **k: _die()  # type: ignore[assignment]
    repo = open_repo(ws)
    with workspace_lock(repo, 5):
        rec = open_clone(repo, EVENT_ID, [".venv"])
        _step(ws, point, "clone", pause)
        agent_edit(rec.path)
        _step(ws, point, "mutation", pause)
        change = clone_change(repo, rec)
        subprocess.run([sys.executable, "check.py"], cwd=rec.path, check=True)  # the validation
        commit = commit_change(repo, rec, change, MESSAGE)
        _step(ws, point, "commit", pause)
        d = deliver(repo, rec, commit)
        _progress(ws, f"delivered {d.status}")


def in_place(ws: Path, point: str, pause: float) -> None:
    from gep.git import begin_in_place, commit_in_place, in_place_change, open_repo, workspace_lock

    repo = open_repo(ws)
    with workspace_lock(repo, 5):
        rec = begin_in_place(repo, EVENT_ID, [".venv"])
        (ws / "app.py").write_text('def add(a, b):\n    """Sum of a and b."""\n    return a + b\n')
        (ws / "feature.py").write_text("VALUE = 1\n")
        ch = in_place_change(repo, rec)
        commit_in_place(repo, rec, ch, MESSAGE)
        _progress(ws, "delivered landed")


def main(argv: list[str]) -> int:
    ws, point = Path(argv[0]), argv[1]
    pause = 0.05 if point == "random" else 0.0
    _instrument(point, pause)
    _progress(ws, "start")
    run: Callable[[Path, str, float], None] = in_place if point.startswith("inplace") else isolated
    run(ws, point, pause)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
