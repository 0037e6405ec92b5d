"""Wall time and peak memory of the `gep` commands people, hooks and fleets run, as they run them.

Every command is a new process, measured from start to exit (wall time; peak resident memory from the
kernel's accounting of that process), median of --runs, and also given as a ratio to
`python -c "import pydantic"` measured the same way in the same run, so figures from a busy machine still
compare.

  store-only    `gep history` (with and without a server answering), `gep show`, `gep genes list|show`,
                `gep lessons list`, `gep signals`, `gep feedback stats` and a `gep feedback EVENT helpful`
                (a write), `gep context`, `gep capture` for a prompt and for a new session (SessionStart:
                it prints the context). Targets: <= 0.5 s and <= 80 MB each; `gep capture` <= 0.3 s.
  server        `gep server start` on a fresh PREFECT_HOME (Prefect creates its database), then `gep cycle`
                (prompt mutator) on fresh workspaces with that server running: every cycle after the first
                of a session. Target <= 2.5 s. Then `gep solidify` of those cycles.
  fleet         bench/fleet.py: cycles spread over Prefect workers, the fleet of 100 (target < 100 s).
  reference     with --reference DIR (a checkout of EvoMap/evolver) and node installed: its prompt-only
                cycle, `node index.js run`, on fresh copies of the same workspace. Nothing is said about
                the reference unless it is measured here.

Run: ``.venv/bin/python bench/cli.py [--runs 5] [--reference DIR]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "workspace"
BIN = Path(sys.executable).parent
GEP = str(BIN / "gep")
sys.path.insert(0, str(ROOT / "tests"))  # live_prefect: the same server helper the end-to-end tests use

TARGET_STORE_S, TARGET_STORE_MB, TARGET_CAPTURE_S, TARGET_CYCLE_S = 0.5, 80.0, 0.3, 2.5
HOOK_INPUT = json.dumps({"hook_event_name": "UserPromptSubmit", "session_id": "bench",
                         "prompt": "please keep answers short, and thanks, that fix worked"})
SESSION_START = json.dumps({"hook_event_name": "SessionStart", "session_id": "bench", "source": "startup"})


class Sample:
    """Median wall time (s) and peak memory (MB) of one command over several runs."""

    def __init__(self, walls: list[float], mbs: list[float]) -> None:
        self.wall = statistics.median(walls)
        self.mb = statistics.median(mbs)


def run_once(args: Sequence[str], env: Mapping[str, str], cwd: Path, stdin: str | None = None,
             ok: Sequence[int] = (0,)) -> tuple[float, float]:
    """One process: its wall time and its own peak RSS (wait4 reports that child's rusage)."""
    with tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as inp:
        if stdin is not None:
            inp.write(stdin.encode())
            inp.seek(0)
        started = time.perf_counter()
        proc = subprocess.Popen(list(args), env=dict(env), cwd=cwd, stdin=inp, stdout=subprocess.DEVNULL,
                                stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode not in ok:
            err.seek(0)
            raise SystemExit(f"{' '.join(args)} exited {proc.returncode}:\n{err.read().decode()[-3000:]}")
    return wall, usage.ru_maxrss / 1024  # KiB on Linux


def sample(args: Sequence[str], env: Mapping[str, str], cwd: Path, runs: int, stdin: str | None = None,
           ok: Sequence[int] = (0,)) -> Sample:
    pairs = [run_once(args, env, cwd, stdin, ok) for _ in range(runs)]
    return Sample([w for w, _ in pairs], [m for _, m in pairs])


def fresh_workspace(parent: Path, name: str) -> Path:
    ws = parent / name
    shutil.copytree(EXAMPLE, ws)
    env = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@localhost",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@localhost"}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "example"]):
        subprocess.run(["git", *args], cwd=ws, env=env, check=True, capture_output=True)
    return ws


# ------------------------------------------------------------------ report


class Report:
    def __init__(self, base: Sample) -> None:
        self.base = base
        self.lines = [f"{'':<52} {'wall s':>7} {'MB':>6} {'x wall':>7} {'x MB':>6}  target",
                      self.fmt("python -c 'import pydantic' (the unit)", base)]

    def fmt(self, label: str, s: Sample, target_s: float | None = None, target_mb: float | None = None) -> str:
        verdict = ""
        if target_s is not None:
            good = s.wall <= target_s and (target_mb is None or s.mb <= target_mb)
            verdict = f"<= {target_s:g} s" + (f", <= {target_mb:g} MB" if target_mb else "") + \
                      (" OK" if good else " OVER")
        return (f"  {label:<50} {s.wall:7.3f} {s.mb:6.1f} {s.wall / self.base.wall:7.1f} "
                f"{s.mb / self.base.mb:6.1f}  {verdict}")

    def add(self, label: str, s: Sample, target_s: float | None = None, target_mb: float | None = None) -> None:
        self.lines.append(self.fmt(label, s, target_s, target_mb))
        print(self.lines[-1], flush=True)

    def note(self, text: str) -> None:
        self.lines.append(text)
        print(text, flush=True)


# ------------------------------------------------------------------ parts


def store_only(rep: Report, env: dict[str, str], no_server: dict[str, str], ws: Path, event_id: str,
               runs: int) -> None:
    # the machine's load changes during a run: these ratios use the unit measured again just before them
    rep.base = sample([sys.executable, "-c", "import pydantic"], os.environ, ws, runs)
    rep.note("store-only commands (no Prefect import, no server started)")
    rep.add("python -c 'import pydantic' (the unit, again)", rep.base)
    cases = [("gep history (server answering)", ["history", "--workspace", str(ws)], env),
             ("gep history (no server)", ["history", "--workspace", str(ws)], no_server),
             ("gep history --all (server answering)", ["history", "--workspace", str(ws), "--all"], env),
             ("gep show EVENT", ["show", event_id, "--workspace", str(ws)], env),
             ("gep genes list", ["genes", "list"], env),
             ("gep genes list --workspace", ["genes", "list", "--workspace", str(ws)], env),
             ("gep genes show ID", ["genes", "show", "gene_repair_from_errors"], env)]
    for label, args, e in cases:
        rep.add(label, sample([GEP, *args], e, ws, runs), TARGET_STORE_S, TARGET_STORE_MB)
    w = ["--workspace", str(ws)]
    for label, args in (("gep lessons list", ["lessons", "list", *w]), ("gep signals", ["signals", *w]),
                        ("gep feedback stats", ["feedback", "stats", *w]),
                        ("gep feedback EVENT helpful (a write)", ["feedback", event_id, "helpful", *w])):
        rep.add(label, sample([GEP, *args], env, ws, runs), TARGET_STORE_S, TARGET_STORE_MB)
    rep.add("gep capture (a UserPromptSubmit hook)",
            sample([GEP, "capture", *w], env, ws, runs, stdin=HOOK_INPUT), TARGET_CAPTURE_S, TARGET_STORE_MB)
    rep.add("gep capture (a SessionStart hook: the context)",
            sample([GEP, "capture", *w], env, ws, runs, stdin=SESSION_START), TARGET_CAPTURE_S, TARGET_STORE_MB)
    rep.add("gep context", sample([GEP, "context", *w], env, ws, runs), TARGET_STORE_S, TARGET_STORE_MB)


def cycles(rep: Report, env: dict[str, str], scratch: Path, runs: int) -> tuple[Path, str]:
    """`gep cycle` then `gep solidify` on fresh workspaces; the first workspace and its event for the
    store-only commands."""
    rep.note("with the background server running (no PREFECT_API_URL: gep finds it)")
    walls, mbs, done = [], [], []
    for i in range(runs):
        ws = fresh_workspace(scratch, f"cycle-{i}")
        w, m = run_once([GEP, "cycle", "--workspace", str(ws), "--mutator", "prompt"], env, ws)
        walls.append(w)
        mbs.append(m)
        done.append(ws)
    rep.add("gep cycle --mutator prompt", Sample(walls, mbs), TARGET_CYCLE_S)
    walls, mbs = [], []
    for ws in done:
        stats = ws / "stats.py"
        stats.write_text(stats.read_text().replace("(len(values) - 1)", "len(values)"))
        w, m = run_once([GEP, "solidify", "--workspace", str(ws)], env, ws)
        walls.append(w)
        mbs.append(m)
    rep.add("gep solidify (runs the example's tests)", Sample(walls, mbs))
    events = json.loads(subprocess.run([GEP, "history", "--workspace", str(done[0]), "--json"], env=env,
                                       capture_output=True, text=True, check=True).stdout)
    return done[0], events[0]["id"]


def reference_cycle_s(checkout: Path, scratch: Path, runs: int) -> float | None:
    """Median wall time of the reference's prompt-only cycle here, or None when it cannot be run."""
    node = shutil.which("node")
    if node is None or not (checkout / "index.js").is_file():
        return None
    walls = []
    for i in range(runs):
        ws = fresh_workspace(scratch, f"reference-{i}")
        # EVOLVE_LOAD_MAX: the reference otherwise backs off for a minute when the machine is busy
        env = {**os.environ, "OPENCLAW_WORKSPACE": str(ws), "EVOLVE_LOAD_MAX": "1000"}
        walls.append(run_once([node, "index.js", "run"], env, checkout)[0])
    return statistics.median(walls)


def reference(rep: Report, checkout: Path, scratch: Path, runs: int) -> None:
    """The reference's cycle beside ours, only when measured in this run (nothing is said otherwise)."""
    seconds = reference_cycle_s(checkout, scratch, runs)
    if seconds is not None:
        rep.note(f"  reference: node index.js run ({checkout.name}, prompt only): {seconds:.3f} s "
                 f"({seconds / rep.base.wall:.1f}x the unit)")


def bytecode_as_installed() -> None:
    """Measure commands as an installed gep runs them: with its modules' bytecode cached. A sandbox that sets
    PYTHONDONTWRITEBYTECODE makes every command recompile gep/ and flows/ from source (~0.2 s of CPU)."""
    if os.environ.pop("PYTHONDONTWRITEBYTECODE", None):
        print("PYTHONDONTWRITEBYTECODE unset for the measured commands (an install caches bytecode)")
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "gep"), str(ROOT / "flows")], check=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5, help="runs per command (median)")
    ap.add_argument("--reference", type=Path, help="a checkout of EvoMap/evolver, to time its cycle here")
    args = ap.parse_args()
    bytecode_as_installed()

    from live_prefect import LiveServer, clean_env

    scratch = Path(tempfile.mkdtemp(prefix="gep-bench-cli-"))
    path = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    try:
        rep = Report(sample([sys.executable, "-c", "import pydantic"], os.environ, scratch, args.runs))
        print("\n".join(rep.lines), flush=True)
        server = LiveServer(scratch / "prefect-home")
        started = time.perf_counter()
        with server:
            rep.note(f"`gep server start` on a fresh PREFECT_HOME (creates Prefect's database): "
                     f"{time.perf_counter() - started:.1f} s")
            env = {**server.home_env, "PATH": path}
            no_server = {**clean_env(PREFECT_HOME=str(scratch / "empty-home")), "PATH": path}
            ws, event_id = cycles(rep, env, scratch, args.runs)
            store_only(rep, env, no_server, ws, event_id, args.runs)
        if args.reference:
            reference(rep, args.reference.resolve(), scratch, args.runs)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
