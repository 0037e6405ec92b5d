"""What `make test` prepares on the core that mypy leaves idle, before the suite starts: the session's migrated
Prefect database, and the test modules as pytest rewrites them.

mypy runs on one core (~34 s of CPU on a fresh clone); meanwhile this does two pieces of work the suite's
workers would otherwise do on their way in. (1) `prefect server database upgrade` makes the migrated database
the suite's Prefect servers start from (tests/conftest.py ``prefect_db_template``, tests/live_prefect.py): the
same Alembic migrations the first server of a run ran at its start (~11 s of CPU, while the first worker
waited for it). (2) `pytest --collect-only` rewrites the test modules' asserts and caches them in
``tests/__pycache__``, and compiles gep/ and flows/: each xdist worker then collects in ~3 s of CPU instead
of ~10 s on a fresh clone. Either failing costs nothing but the time: the suite then does it as before.

Usage: ``python tests/prepare_run.py TEMPLATE_DIR`` (the database is made as ``TEMPLATE_DIR/prefect.db``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent


def migrated_database(folder: Path) -> bool:
    """Make ``folder/prefect.db`` with Prefect's migrations, as a server does at its first start."""
    from live_prefect import clean_env

    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([str(BIN / "prefect"), "server", "database", "upgrade", "-y"],
                          env=clean_env(PREFECT_HOME=str(folder)), cwd=folder, stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=600)
    return done.returncode == 0 and (folder / "prefect.db").is_file()


def collect() -> bool:
    """Collect the whole suite once in one process: pytest caches the rewritten modules for the workers."""
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:xdist",
                           "-p", "no:cacheprovider", str(TESTS)], cwd=TESTS.parent, stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=600)
    return done.returncode == 0


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python tests/prepare_run.py TEMPLATE_DIR", file=sys.stderr)
        return 2
    sys.path.insert(0, str(TESTS))
    folder = Path(argv[0])
    if not migrated_database(folder):
        (folder / "prefect.db").unlink(missing_ok=True)  # half made: the first server makes it again
        print("prepare_run: no migrated Prefect database; the suite's first server makes it", file=sys.stderr)
    if not collect():
        print("prepare_run: collecting the suite failed; pytest says why when it runs", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
