"""`make demo`: the engine's whole loop on a scratch copy of the bundled example workspace.

1. cycle 1 reads the example's error log and writes the GEP prompt (prompt mode: awaiting changes);
2. the demo plays the person and applies the one-line fix to ``stats.mean``;
3. ``gep solidify`` validates the change and commits it (the commit carries GEP trailers);
4. cycle 2 reads only what the log got since the fix landed (nothing) and does not repair the fixed error again;
5. ``gep history`` lists both cycles: the fix committed, not yet judged (nothing ran after it).

Each step prints the command a person would type. The demo exits non-zero when a step does not end as it
should, naming the step. Its temporary folder is removed at the end unless ``--keep`` (or GEP_DEMO_KEEP=1).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
GEP = Path(sys.executable).with_name("gep")
IDENTITY = {"user.name": "GEP example", "user.email": "example@gep.invalid"}
BUG, FIX = "return sum(values) / (len(values) - 1)", "return sum(values) / len(values)"


class DemoFailed(Exception):
    """A step did not end as the loop needs: the one line the demo exits with."""


def say(text: str = "") -> None:
    print(text, flush=True)


def git(ws: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ws, capture_output=True, text=True)
    if done.returncode != 0:
        raise DemoFailed(f"git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


def gep(env: dict[str, str], *args: str, shown: bool = True, ok: tuple[int, ...] = (0,)) -> str:
    """Run gep as a person would type it (the command is printed first); its output is shown as it comes."""
    if shown:
        say(f"\n$ gep {shlex.join(args)}")
    done = subprocess.run([str(GEP), *args], env=env, stdout=subprocess.PIPE, text=True)
    if shown and done.stdout:
        sys.stdout.write(done.stdout)
        sys.stdout.flush()
    if done.returncode not in ok:
        raise DemoFailed(f"`gep {shlex.join(args)}` exited with {done.returncode}")
    return done.stdout


def newest_event(env: dict[str, str], ws: Path) -> dict:
    events = json.loads(gep(env, "history", "--workspace", str(ws), "--limit", "1", "--json", shown=False))
    if not events:
        raise DemoFailed("no cycle was recorded")
    return events[0]


def make_workspace(root: Path) -> Path:
    ws = root / "workspace"
    shutil.copytree(HERE / "workspace", ws, ignore=shutil.ignore_patterns("__pycache__"))
    git(ws, "init", "-q", "-b", "main")
    for key, value in IDENTITY.items():
        git(ws, "config", key, value)
    git(ws, "add", "-A")
    git(ws, "commit", "-q", "-m", "example workspace")
    say(f"demo workspace: {ws}")
    say("  a git repository with a buggy stats.py (mean divides by n-1) and a log of the errors it causes")
    return ws


def ensure_server(env: dict[str, str]) -> None:
    if env.get("PREFECT_API_URL"):  # the user's own server: every run goes there
        return
    gep(env, "server", "start")  # says what it waits for on a first start (Prefect creates its database)


def cycle_one(env: dict[str, str], ws: Path) -> None:
    say("\n== 1. a cycle reads the logs and writes the GEP prompt for a person (or an agent) to act on")
    gep(env, "cycle", "--workspace", str(ws), "--mutator", "prompt")
    event = newest_event(env, ws)
    if event["outcome"]["status"] != "awaiting_changes":
        raise DemoFailed(f"cycle 1 ended {event['outcome']['status']}, not awaiting changes")
    prompt = Path(event["meta"]["mutator_result"]["prompt_file"])
    text = prompt.read_text()
    start = text.find("# Cycle ")  # the per-cycle part; the static protocol text precedes it
    part = text[start:] if start >= 0 else text
    say(f"\n----- the prompt's per-cycle part ({len(text)} chars in all: {prompt}) -----")
    say(part[:2500] + ("\n[... shortened for the demo ...]" if len(part) > 2500 else ""))
    say("----- end of prompt -----")


def person_fixes(ws: Path) -> None:
    say("\n== 2. the demo plays the person: it makes the one-line fix the prompt asks for, in stats.py")
    path = ws / "stats.py"
    source = path.read_text()
    if BUG not in source:
        raise DemoFailed("stats.py does not have the line the demo fixes")
    path.write_text(source.replace(BUG, FIX))
    say("$ git diff")
    say(git(ws, "diff").rstrip())


def solidify(env: dict[str, str], ws: Path) -> str:
    say("\n== 3. gep solidify validates the change (the example's tests) and commits it")
    gep(env, "solidify", "--workspace", str(ws), "--summary", "stats.mean divides by n, not n-1")
    event = newest_event(env, ws)
    if event["outcome"]["status"] != "success" or not event["meta"].get("commit"):
        raise DemoFailed(f"solidify ended {event['outcome']['status']}, not committed")
    say("\n$ git log -1")
    say(git(ws, "log", "-1").rstrip())
    return event["meta"]["commit"]


def cycle_two(env: dict[str, str], ws: Path, commit: str) -> None:
    say("\n== 4. a second cycle reads what the log got since the fix landed: nothing, so no error to repair")
    gep(env, "cycle", "--workspace", str(ws), "--mutator", "prompt")
    event = newest_event(env, ws)
    if event["outcome"]["status"] in ("failed", "interrupted"):
        raise DemoFailed(f"cycle 2 ended {event['outcome']['status']}")
    still = [s for s in event["signals"] if s.startswith("errsig") or s == "log_error"]
    if still:
        raise DemoFailed(f"cycle 2 still saw the fixed error as live: {still}")
    # the log's lines were all written before commit {commit}: the engine reads only lines written after it
    say(f"  the log's lines predate {commit[:12]}: the fixed error is not repaired again")
    say(f"  cycle 2 chose {event['intent']} with {', '.join(event['genes_used']) or 'no gene'} instead")


def history(env: dict[str, str], ws: Path) -> None:
    say("\n== 5. the history of both cycles (the same runs are in the Prefect UI)")
    gep(env, "history", "--workspace", str(ws), "--limit", "5")
    say("  The fix is committed, not yet judged: nothing has run since it. Once the code")
    say("  that failed logs again without the error, the next cycle calls it verified")
    say("  (if the error comes back: did not hold).")


def closing(ws: Path, kept: bool) -> None:
    say("\nWith Claude making the change instead of a person: export ANTHROPIC_API_KEY=... and run "
        "`gep cycle --workspace DIR`; with another agent: `gep cycle --workspace DIR --mutator command "
        "--agent-cmd 'claude -p'`.")
    say("`gep server status` prints the Prefect UI's address; `gep server stop` stops it. "
        "(`gep` is .venv/bin/gep: `source .venv/bin/activate` puts it on PATH.)")
    if kept:
        say(f"The demo workspace is kept: {ws}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the temporary demo workspace")
    keep = parser.parse_args(argv).keep or os.environ.get("GEP_DEMO_KEEP", "") not in ("", "0")
    env = {**os.environ, "DO_NOT_TRACK": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "PREFECT_LOGGING_LEVEL": os.environ.get("PREFECT_LOGGING_LEVEL", "WARNING")}
    env["PATH"] = f"{GEP.parent}{os.pathsep}{env.get('PATH', '')}"  # validation's `python` has pytest
    # gep's output is captured, then shown: its tables fit the person's terminal (80 columns when piped), not
    # the 200 columns gep gives a pipe
    env.setdefault("COLUMNS", str(shutil.get_terminal_size().columns))
    root = Path(tempfile.mkdtemp(prefix="gep-demo-"))
    ws = root / "workspace"
    try:
        ws = make_workspace(root)
        ensure_server(env)
        cycle_one(env, ws)
        person_fixes(ws)
        commit = solidify(env, ws)
        cycle_two(env, ws, commit)
        history(env, ws)
        closing(ws, keep)
        return 0
    except DemoFailed as exc:
        print(f"demo: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("demo: interrupted", file=sys.stderr)
        return 130
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
