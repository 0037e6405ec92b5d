"""`make demo`: one real evolution cycle on a scratch copy of the bundled example workspace.

Without ANTHROPIC_API_KEY the prompt mutator runs: the GEP prompt is written and shown, and the cycle is
recorded as awaiting changes. With the key, Claude makes the change through tools.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
GEP = Path(sys.executable).with_name("gep")


def git(cwd: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "gep demo", "GIT_AUTHOR_EMAIL": "demo@localhost",
           "GIT_COMMITTER_NAME": "gep demo", "GIT_COMMITTER_EMAIL": "demo@localhost"}
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


def main() -> int:
    ws = Path(tempfile.mkdtemp(prefix="gep-demo-")) / "workspace"
    shutil.copytree(HERE / "workspace", ws)
    git(ws, "init", "-q", "-b", "main")
    git(ws, "add", "-A")
    git(ws, "commit", "-q", "-m", "example workspace")
    print(f"demo workspace: {ws}  (a git repo with a buggy stats.py and an error log)")
    env = {**os.environ, "DO_NOT_TRACK": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "PREFECT_LOGGING_LEVEL": os.environ.get("PREFECT_LOGGING_LEVEL", "WARNING")}
    if not env.get("PREFECT_API_URL"):  # every run of the demo goes to one server whose UI stays open
        print("$ gep server start", flush=True)
        rc = subprocess.run([str(GEP), "server", "start"], env=env).returncode
        if rc != 0:
            return rc
    print("running one evolution cycle as a Prefect flow run...", flush=True)
    rc = subprocess.run([str(GEP), "cycle", "--workspace", str(ws)], env=env).returncode
    if rc not in (0, 1):
        return rc
    prompts = sorted((ws / ".gep" / "prompts").glob("*.md"))
    if prompts:
        text = prompts[-1].read_text()
        # the per-cycle part is what differs between cycles; the static protocol text precedes it
        start = text.find("# Cycle ")
        shown = text[start:] if start >= 0 else text
        print(f"\n----- GEP prompt ({len(text)} chars in all; per-cycle part shown): {prompts[-1]} -----")
        print(shown[:6000] + ("\n[... truncated for display ...]" if len(shown) > 6000 else ""))
        print("----- end of prompt -----\n")
    subprocess.run([str(GEP), "history", "--workspace", str(ws), "--limit", "3"], env=env)
    print("\nThe runs are in the Prefect UI (`.venv/bin/gep server status` prints its address; "
          "`.venv/bin/gep server stop` stops it).")
    print("To let Claude make the change: export ANTHROPIC_API_KEY=... and run "
          f"`.venv/bin/gep cycle --workspace {ws} --abandon-pending`; for an external agent: "
          f"`.venv/bin/gep cycle --workspace {ws} --abandon-pending --mutator command --agent-cmd 'claude -p'`.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
