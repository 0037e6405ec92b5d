"""Real repositories for the git layer's tests: a user's workspace with everything a person has lying
around (uncommitted edits, untracked, ignored, large and oddly named files), an agent's edit, and a
byte-level picture of the user's side to compare before and after."""

from __future__ import annotations

import random
from pathlib import Path

from crash_driver import git, snapshot

from gep.git import CloneRecord, Repo, clone_change, commit_change

__all__ = ["git", "snapshot"]

FILES = {
    "README.md": "hello\n",
    "app.py": "def add(a, b):\n    return a + b\n",
    "check.py": "import sys\nfrom app import add\nsys.exit(0 if add(2, 3) == 5 else 1)\n",
    "lib/util.py": "def twice(x):\n    return 2 * x\n",
    "MEMORY.md": "# memory\n",
    ".gitignore": ".venv/\n*.log\n__pycache__/\n.env\nbuild/\nnode_modules/\n",
}
BIG = 9 * 1024 * 1024
ODD = "odd\nname.txt"
UNICODE = "ünï cödé.txt"


def make_repo(path: Path, files: dict[str, str] | None = None) -> Path:
    """Two commits (so HEAD~1 exists) of ``FILES`` and the user's own untracked and ignored files."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.name", "Test")
    git(path, "config", "user.email", "test@example.invalid")
    for rel, text in (files or FILES).items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    (path / "MEMORY.md").write_text("# memory\nsecond commit\n")
    git(path, "commit", "-q", "-am", "second")
    user_files(path)
    return path


def user_files(path: Path) -> None:
    """What a person has that git does not track: ignored secrets and builds, an environment, a large
    file, files with a newline and with unicode in their names, an empty folder."""
    (path / "notes.txt").write_text("my own untracked notes\n")
    (path / ".env").write_text("API_KEY=do-not-lose-me\n")
    (path / "build").mkdir(exist_ok=True)
    (path / "build" / "out.bin").write_bytes(bytes(range(256)) * 4)
    (path / ".venv" / "lib").mkdir(parents=True, exist_ok=True)
    (path / ".venv" / "lib" / "site.py").write_text("# an ignored environment\n")
    (path / "big.bin").write_bytes(random.Random(7).randbytes(BIG))
    (path / ODD).write_text("a newline in my name\n")
    (path / UNICODE).write_text("ünïcödé\n")
    (path / "data").mkdir(exist_ok=True)


def user_edits(path: Path) -> None:
    """Uncommitted work: an unstaged edit, a staged edit, a staged new file."""
    (path / "README.md").write_text("hello\nwork in progress\n")
    (path / "lib" / "util.py").write_text(FILES["lib/util.py"] + "# staged tweak\n")
    git(path, "add", "lib/util.py")
    (path / "draft.md").write_text("a staged new file\n")
    git(path, "add", "draft.md")


def agent_edit(clone: Path) -> None:
    """What a mutator does in its clone: edit, create (in a new folder too), delete, leave ignored output."""
    (clone / "app.py").write_text('def add(a, b):\n    """Sum of a and b."""\n    return a + b\n')
    (clone / "feature.py").write_text("VALUE = 1\n")
    (clone / "pkg" / "sub").mkdir(parents=True)
    (clone / "pkg" / "sub" / "new.py").write_text("X = 2\n")
    (clone / "MEMORY.md").unlink()
    (clone / "build.log").write_text("created by the cycle, ignored\n")


AGENT_PATHS = {"app.py", "feature.py", "pkg/sub/new.py", "MEMORY.md"}


def commit_clone(repo: Repo, rec: CloneRecord, event_id: str = "evt_1") -> str:
    change = clone_change(repo, rec)
    return commit_change(repo, rec, change, f"gep(repair): test\n\nGEP-Event: {event_id}\n")


def files_of(snap: dict[str, object]) -> dict[str, object]:
    files = snap["files"]
    assert isinstance(files, dict)
    return files
