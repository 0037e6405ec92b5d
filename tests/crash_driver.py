"""A FULL cycle through the engine's pipeline in a child process that dies (SIGKILL) at a chosen point, or
whenever the test kills it.

    python tests/crash_driver.py WORKSPACE RUN POINT

RUN: ``agent`` (a command agent makes a valid change in the cycle's clone), ``agent_bad`` (its change fails
validation), ``prompt_cycle`` (prompt mode up to awaiting changes), ``prompt_solidify`` (``gep solidify``
of the cycle a person has edited for). POINT: ``before:<stage>`` or ``after:<stage>`` for a stage of
gep.cycle.pipeline (``after:record`` is after the whole cycle), or a point inside one: ``in_validation`` (a slow check writes ``sleepy.pid`` in
the clone and sleeps; the test kills the driver), ``after_commit_object``, ``after_cas`` and
``in_read_tree`` (landing), ``after_landing``, ``in_discard``, ``inplace_after_cas``, ``inplace_in_index``;
``none`` runs to the end; ``random`` pauses between and inside steps, so that a kill from outside at a
random moment can land anywhere. Progress goes to WORKSPACE/../progress ("start" once imported, then each
stage's name).

    python tests/crash_driver.py --agent [bad]

is the agent itself: it reads the prompt on stdin and edits its working directory (the clone).

Also a library for the tests: the scenario repository, the cycle's change and a byte-level snapshot.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

if TYPE_CHECKING:
    from gep.core.models import EvolutionEvent, Gene, Mutation

# what main imports, imported once by a zygote (tests/zygote.py) that forks a child per run
PRELOAD = ["gep", "gep.cycle.pipeline", "gep.cycle.commit_change", "gep.cycle.tree", "gep.git.delivery",
           "gep.git.inplace_commit", "gep.git.landing"]

EVENT_ID = "evt_1700000000000_abc123"

FILES = {
    "README.md": "hello\n",
    "app.py": "def add(a, b):\n    return a + b\n",
    "check.py": "import sys\nfrom app import add\nsys.exit(0 if add(2, 3) == 5 else 1)\n",
    "slow.py": ("import os, sys, time\nopen(sys.argv[1], 'w').write(str(os.getpid()))\ntime.sleep(60)\n"),
    "sleepy.py": ("import os, sys, time\nopen(sys.argv[1], 'w').write(str(os.getpid()))\ntime.sleep(60)\n"),
    "MEMORY.md": "# memory\nthe agent remembers things\n",
    ".gitignore": ".venv/\n*.log\n__pycache__/\n",
}
LOG = "[ERROR] 2026-01-01 app: TypeError: add() failed on None\n"
VALIDATION = "python check.py"  # GEP_VALIDATION for the driver's cycles (the scenario has no test suite)


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "test@example.invalid",
           "GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "test@example.invalid"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def make_scenario(path: Path) -> Path:
    """A committed repo plus what a user has lying around: an untracked note and ignored files."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.name", "Test")
    git(path, "config", "user.email", "test@example.invalid")
    for rel, text in FILES.items():
        (path / rel).write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    (path / "notes.txt").write_text("my own untracked notes\n")
    (path / ".venv" / "lib").mkdir(parents=True)
    (path / ".venv" / "lib" / "site.py").write_text("# an ignored file that must survive\n")
    (path / "debug.log").write_text("an ignored log\n")
    (path / "logs").mkdir()
    (path / "logs" / "app.log").write_text(LOG)  # ignored too: what the cycle's signals come from
    (path / "data").mkdir()  # an empty directory the user made
    return path


def user_dirty_edits(path: Path) -> None:
    """Uncommitted edits of the user's: one unstaged, one staged, one staged new file."""
    (path / "README.md").write_text("hello\nwork in progress\n")
    (path / "check.py").write_text(FILES["check.py"] + "# staged tweak\n")
    git(path, "add", "check.py")
    (path / "draft.md").write_text("a staged new file\n")
    git(path, "add", "draft.md")


def mutate(path: Path) -> None:
    """What a mutator does: edit, create (also in a new dir), delete, and leave an ignored file."""
    (path / "app.py").write_text('def add(a, b):\n    """Sum of a and b."""\n    return a + b\n')
    (path / "feature.py").write_text("VALUE = 1\n")
    (path / "pkg" / "sub").mkdir(parents=True)
    (path / "pkg" / "sub" / "new.py").write_text("X = 2\n")
    (path / "slow.py").unlink()
    (path / "build.log").write_text("created by the cycle, ignored\n")


# gep's models are imported where used: the agent (`--agent`, run once per agent cycle) needs none of them


def gene(validation: list[str] | None = None, **constraints: object) -> Gene:
    from gep.core.models import Gene, GeneConstraints

    return Gene(id="gene_test", category="repair", signals_match=["log_error"],
                constraints=GeneConstraints(**{"max_files": 10, "forbidden_paths": [".venv", "secrets"],
                                               **constraints}),
                validation=["python check.py"] if validation is None else validation)


def mutation() -> Mutation:
    from gep.core.models import Mutation

    return Mutation(id="mut_1700000000000", category="repair", trigger_signals=["log_error"],
                    target="gene:gene_test", expected_effect="fix the error")


def event(event_id: str = EVENT_ID) -> EvolutionEvent:
    from gep.core.models import EvolutionEvent, PersonalityState

    return EvolutionEvent(id=event_id, intent="repair", signals=["log_error", "errsig:boom"],
                          genes_used=["gene_test"], mutation_id="mut_1700000000000",
                          personality_state=PersonalityState(), meta={"personality": {"key": "rigor=0.7", "known": True}})


def tamper(path: Path) -> None:
    """What a cycle must not do: change the user's untracked file, plant a hook, edit git's config."""
    (path / "notes.txt").write_text("rewritten by the cycle\n")
    hook = path / ".git" / "hooks" / "pre-commit"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text("#!/bin/sh\ntouch /tmp/pwned\n")
    hook.chmod(0o755)
    with (path / ".git" / "config").open("a") as fh:
        fh.write("[alias]\n\tst = !touch /tmp/pwned\n")


def snapshot(path: Path) -> dict[str, object]:
    """Everything a user could check: HEAD, branch, status, index, stash, every file's bytes and mode, and
    git's config and hooks."""
    files: dict[str, object] = {}
    dirs: list[str] = []
    for dirpath, dirnames, names in os.walk(path):
        rel_dir = os.path.relpath(dirpath, path)
        if rel_dir == ".":
            dirnames[:] = [d for d in dirnames if d not in (".git", ".gep")]
        else:
            dirs.append(rel_dir)
        for n in names:
            p = Path(dirpath, n)
            rel = os.path.relpath(p, path)
            if p.is_symlink():
                files[rel] = ("link", os.readlink(p))
            else:
                files[rel] = (p.read_bytes(), p.stat().st_mode & 0o777)
    status = [ln for ln in git(path, "status", "--porcelain=v1", "--ignored", "-uall").splitlines()
              if ".gep/" not in ln]
    branch = subprocess.run(["git", "symbolic-ref", "-q", "HEAD"], cwd=path, capture_output=True,
                            text=True).stdout.strip()
    hooks = path / ".git" / "hooks"
    git_meta = {"config": (path / ".git" / "config").read_bytes(),
                "hooks": {str(f.relative_to(hooks)): (f.read_bytes(), f.stat().st_mode & 0o777)
                          for f in sorted(hooks.rglob("*")) if f.is_file()} if hooks.is_dir() else {}}
    return {"head": git(path, "rev-parse", "HEAD").strip(), "branch": branch, "status": status,
            "index": git(path, "ls-files", "-s"), "stash": git(path, "stash", "list", "--format=%H"),
            "files": files, "dirs": sorted(dirs), "git": git_meta}


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def progress(ws: Path, what: str) -> None:
    with open(ws.parent / "progress", "a", encoding="utf-8") as fh:
        fh.write(what + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def read_progress(ws: Path) -> list[str]:
    p = ws.parent / "progress"
    return [line for line in p.read_text().split("\n") if line] if p.exists() else []


def run_and_kill(argv: list[str], ws: Path, kill_after: float | None = None,
                 meanwhile: Callable[[Any], None] | None = None, zygote: Any = None) -> tuple[int, float]:
    """Run a driver: (exit code, seconds from its "start" progress line to its end). ``kill_after``: SIGKILL it
    that many seconds after it started; ``meanwhile(proc)`` runs once it started (and may kill it).
    ``zygote`` (tests/zygote.py, started for this driver): the driver runs in a child it forks, imports done."""
    import time

    if zygote is not None:
        assert Path(argv[1]) == zygote.driver, (argv, zygote.driver)
        proc = zygote.spawn(argv[2:])
    else:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while "start" not in read_progress(ws) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        started = time.monotonic()
        if meanwhile is not None:
            meanwhile(proc)
        try:
            proc.wait(kill_after)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
        _out, err = proc.communicate(timeout=120)
        elapsed = time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode in (0, -signal.SIGKILL), err.decode()
    return proc.returncode, elapsed


def break_app(path: Path) -> None:
    (path / "app.py").write_text("def add(a, b):\n    return a - b\n")
    (path / "helper.py").write_text("HELP = True\n")


def person_edits(path: Path) -> None:
    """What the person does in prompt mode once the prompt is written (the same change as ``mutate``)."""
    mutate(path)


def agent_main(bad: bool) -> int:
    sys.stdin.read()
    (break_app if bad else mutate)(Path.cwd())
    print("GEP_SUMMARY: add a docstring")
    return 0


def _wrap(module: object, name: str, before: object = None, after: object = None) -> None:
    """Replace ``module.name`` by a function that calls ``before()``, the original, then ``after()``."""
    original = getattr(module, name)

    def wrapped(*a: object, **k: object) -> object:
        if callable(before):
            before(*a)
        out = original(*a, **k)
        if callable(after):
            after(*a)
        return out

    setattr(module, name, wrapped)


def _instrument(point: str, pause: float) -> None:
    """Die (or pause) inside the steps where the engine writes: the commit, the landing, the discard."""
    import time

    import gep.cycle.commit_change as delivering
    import gep.cycle.tree as tree
    import gep.git.delivery as delivery
    import gep.git.inplace_commit as inplace_commit
    import gep.git.landing as landing

    def at(name: str) -> object:
        return lambda *_a: _die() if point == name else time.sleep(pause)

    def in_index(g: object, *args: str, input: bytes | None = None) -> str | None:
        if point in ("in_read_tree", "inplace_in_index"):
            git_dir = Path(g.git_dir)
            (git_dir / "index.lock").write_bytes(b"")  # as git holds it while it writes the index
            _die()
        time.sleep(pause)
        return retries(g, *args, input=input)

    retries = landing.with_retries
    _wrap(delivering, "commit_change", after=at("after_commit_object"))
    _wrap(landing, "move_ref", after=at("after_cas"))
    _wrap(inplace_commit, "move_ref", after=at("inplace_after_cas"))
    landing.with_retries = in_index  # type: ignore[assignment]
    inplace_commit.with_retries = in_index  # type: ignore[assignment]
    _wrap(delivery, "close_clone", before=at("after_landing"))
    _wrap(tree, "discard_clone", before=at("in_discard"))
    _die_after_awaiting_run(point)


def _die_after_awaiting_run(point: str) -> None:
    """``awaiting_run_saved``: die once a prompt cycle's run is saved as awaiting changes, before its event is."""
    from gep.store import Store

    save_run = Store.save_run

    def saving(store: Store, run: object) -> None:
        save_run(store, run)  # type: ignore[arg-type]
        if point == "awaiting_run_saved" and getattr(run, "status", "") == "awaiting_changes":
            _die()

    Store.save_run = saving  # type: ignore[method-assign]


def _hooks(ws: Path, point: str, pause: float) -> object:
    import time

    from gep.cycle import pipeline

    class Hooks(pipeline.Hooks):
        def run(self, stage: pipeline.Stage, ctx: object, state: object) -> object:
            progress(ws, stage.name)
            if point == f"before:{stage.name}":
                _die()
            time.sleep(pause)
            out = stage.fn(ctx, state)  # type: ignore[arg-type]
            if point == f"after:{stage.name}":
                _die()
            time.sleep(pause)
            return out

    return Hooks()


def main(argv: list[str]) -> int:
    if argv[:1] == ["--agent"]:
        return agent_main(argv[1:] == ["bad"])
    ws, run, point = Path(argv[0]), argv[1], argv[2]
    pause = 0.03 if point == "random" else 0.0
    from gep import CycleRequest
    from gep.cycle import pipeline

    _instrument(point, pause)
    env = {**os.environ, "GEP_VALIDATION": VALIDATION}
    if point == "in_validation":
        env["GEP_VALIDATION"] = f"{VALIDATION},python sleepy.py sleepy.pid"
    hooks = _hooks(ws, point, pause)
    progress(ws, "start")
    if run.startswith("agent"):
        agent = f"{sys.executable} {Path(__file__).resolve()} --agent" + (" bad" if run == "agent_bad" else "")
        request = CycleRequest(workspace=ws, mutator="command", agent_cmd=agent, seed=1)
        event = pipeline.run_cycle(request, env=env, hooks=hooks)  # type: ignore[arg-type]
    elif run == "prompt_cycle":
        event = pipeline.run_cycle(CycleRequest(workspace=ws, mutator="prompt", seed=1), env=env,
                                   hooks=hooks)  # type: ignore[arg-type]
    else:
        event = pipeline.solidify_pending(CycleRequest(workspace=ws, summary="add a docstring"), env=env,
                                          hooks=hooks)  # type: ignore[arg-type]
    assert event is not None
    progress(ws, f"done {event.outcome.status}")
    print(json.dumps({"status": event.outcome.status, "commit": event.meta.commit, "id": event.id}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
