"""A cycle run step by step in a child process that dies (SIGKILL) at a chosen stage.

    python tests/crash_driver.py WORKSPACE STAGE [--allow-dirty]

STAGE: during_stash | after_begin | after_mutation | after_tamper | during_validation | before_commit |
during_rollback | after_commit | none. ``during_validation`` runs a slow validation command that writes
``WORKSPACE/slow.pid`` and sleeps (in the sandbox, so the pid it writes is its namespace's: the test
finds it by its command line); the test kills this process from outside once that file appears. ``during_stash`` dies between recording the run and resetting to the baseline (--allow-dirty);
``after_tamper`` also changes the user's untracked file, plants a git hook and edits .git/config;
``before_commit`` dies with the success prepared but not committed; ``during_rollback`` dies right after
the failed outcome was recorded, before the rollback.

Also a library for the tests: the scenario repository, the cycle's change and a byte-level snapshot.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from gep.models import EvolutionEvent, Gene, GeneConstraints, Mutation, PersonalityState  # noqa: E402

EVENT_ID = "evt_1700000000000_abc123"

FILES = {
    "README.md": "hello\n",
    "app.py": "def add(a, b):\n    return a + b\n",
    "check.py": "import sys\nfrom app import add\nsys.exit(0 if add(2, 3) == 5 else 1)\n",
    "slow.py": ("import os, sys, time\nopen(sys.argv[1], 'w').write(str(os.getpid()))\ntime.sleep(60)\n"),
    "MEMORY.md": "# memory\nthe agent remembers things\n",
    ".gitignore": ".venv/\n*.log\n__pycache__/\n",
}


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


def gene(validation: list[str] | None = None, **constraints: object) -> Gene:
    return Gene(id="gene_test", category="repair", signals_match=["log_error"],
                constraints=GeneConstraints(**{"max_files": 10, "forbidden_paths": [".venv", "secrets"],
                                               **constraints}),
                validation=["python check.py"] if validation is None else validation)


def mutation() -> Mutation:
    return Mutation(id="mut_1700000000000", category="repair", trigger_signals=["log_error"],
                    target="gene:gene_test", expected_effect="fix the error")


def event(event_id: str = EVENT_ID) -> EvolutionEvent:
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


def main(argv: list[str]) -> int:
    from gep.config import load_settings
    from gep.solidify import SolidifyInput, solidify
    from gep.store import Store
    from gep.workspace import Workspace

    ws_path, stage = Path(argv[0]), argv[1]
    allow_dirty = "--allow-dirty" in argv
    ws = Workspace.open(ws_path)
    settings = load_settings(ws.path, env={})
    store = Store.for_workspace(ws.path, settings)
    if stage == "during_stash":
        original_git = Workspace._git

        def git_until_reset(self: Workspace, *a: str, **k: object) -> str:
            if a[:1] == ("reset",) and "--hard" in a:
                _die()  # the run and the stash are recorded; the tree still holds the user's edits
            return original_git(self, *a, **k)  # type: ignore[arg-type]

        Workspace._git = git_until_reset  # type: ignore[method-assign]
    with ws.lock(5):
        ev = event()
        store.add_event(ev)
        run = ws.begin(event_id=ev.id, store=store, allow_dirty=allow_dirty)
        if stage == "after_begin":
            _die()
        mutate(ws.path)
        if stage == "after_mutation":
            _die()
        if stage == "after_tamper":
            tamper(ws.path)
            _die()
        validation = ["python check.py"]
        if stage == "during_rollback":
            (ws.path / "app.py").write_text("def add(a, b):\n    return a - b\n")  # validation fails
            Workspace.rollback = lambda self, run: _die()  # type: ignore[assignment,method-assign]
        if stage == "before_commit":
            Workspace.commit = lambda self, *a, **k: _die()  # type: ignore[assignment,method-assign]
        if stage == "during_validation":
            (ws.path / "slow.py").write_text(FILES["slow.py"])  # the cycle's own slow check
            validation = [f"python slow.py {ws.path / 'slow.pid'}"]
        if stage == "after_commit":
            original = Workspace.commit

            def commit_then_die(self: Workspace, *a: object, **k: object) -> str:
                original(self, *a, **k)  # type: ignore[arg-type]
                _die()
                raise AssertionError("unreachable")

            Workspace.commit = commit_then_die  # type: ignore[method-assign]
        result = solidify(SolidifyInput(workspace=ws, store=store, settings=settings, run=run, event=ev,
                                        gene=gene(validation), mutation=mutation(), summary="add a docstring"))
    print(json.dumps({"status": result.event.outcome.status, "commit": result.commit_sha}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
