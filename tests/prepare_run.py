"""What `make test` prepares while mypy checks types on one core, work the suite's workers did on their way in:
the migrated Prefect database the suite's servers start from, and the test modules as pytest rewrites them.

- ``database DIR``: `prefect server database upgrade` makes ``DIR/prefect.db`` (tests/conftest.py
  ``prefect_db_template``, tests/live_prefect.py), the Alembic migrations the first server of a run ran at its
  start (~11 s of CPU, while the first worker waited for it). It holds the template's lock as it works, the lock
  a server takes to copy the template: the suite may start meanwhile, its first server waits for the copy.
- ``collect``: `pytest --collect-only` rewrites the test modules' asserts into ``tests/__pycache__`` and compiles
  gep/ and flows/: each xdist worker then collects in ~3 s of CPU instead of ~10 s on a fresh clone.

Either failing costs only time: the suite then does the work as before.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
USAGE = "usage: python tests/prepare_run.py database TEMPLATE_DIR | collect"


def migrated_database(folder: Path) -> bool:
    """Make ``folder/prefect.db`` with Prefect's migrations (as a server does at its first start), holding the
    lock the suite's servers copy it under; True when it is there."""
    from live_prefect import clean_env

    folder.mkdir(parents=True, exist_ok=True)
    db, work = folder / "prefect.db", folder / "upgrade"
    with open(db.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if db.exists():  # a server of the suite was first: it made the template itself
            return True
        work.mkdir(exist_ok=True)
        done = subprocess.run([str(BIN / "prefect"), "server", "database", "upgrade", "-y"],
                              env=clean_env(PREFECT_HOME=str(work)), cwd=work, stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=600)
        if done.returncode == 0 and (work / "prefect.db").is_file():
            (work / "prefect.db").replace(db)  # whole or not at all: a server copies it only once it is there
        shutil.rmtree(work, ignore_errors=True)
        return db.exists()


def collect() -> bool:
    """Collect the whole suite once in one process: pytest caches the rewritten modules for the workers."""
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:xdist",
                           "-p", "no:cacheprovider", str(TESTS)], cwd=TESTS.parent, stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=600)
    return done.returncode == 0


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(TESTS))
    if argv[:1] == ["database"] and len(argv) == 2:
        if not migrated_database(Path(argv[1])):
            print("prepare_run: no migrated Prefect database; the suite's first server makes it", file=sys.stderr)
        return 0
    if argv == ["collect"]:
        if not collect():
            print("prepare_run: collecting the suite failed; pytest says why when it runs", file=sys.stderr)
        return 0
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
