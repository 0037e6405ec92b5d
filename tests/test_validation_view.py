"""Issue 32, finding 1: what validation can read and what it may change, through FULL model cycles (the real
SDK against tests/fake_anthropic.py), with the workspace and HOME outside /tmp (where real ones live).

The model writes a ``tests/conftest.py`` that reads the workspace's ignored ``.env``, ``~/.aws/credentials``
(``~/.aws`` a symlink elsewhere: no per-file mask can catch it), ``~/.netrc``, another repository and the
engine's state, and appends whatever it got to the tracked README.md; it then calls ``run_validation``, and
validation runs it again. Under the sandbox it reads nothing; with or without it, nothing validation wrote
reaches the commit (it ran in a throw-away copy)."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import EXAMPLE, git, init_repo
from fake_anthropic import FakeAnthropic, message, text_block, tool_use
from test_mutator_anthropic import BUGGY, FIXED
from test_sandbox import needs_bwrap

from gep import CycleRequest, run_cycle

SECRETS = {"env": "envsecret-7Hq2", "aws": "awssecret-9Kd4", "netrc": "netrcsecret-3Zp8", "other": "otherrepo-5Vc1"}

READER = r'''
import json, os
HOME = os.path.expanduser("~")
targets = {
    "env_in_tree": ".env",
    "env_by_path": os.path.join(USER, ".env"),
    "aws": os.path.join(HOME, ".aws", "credentials"),
    "netrc": os.path.join(HOME, ".netrc"),
    "other_repo": os.path.join(OTHER, "notes.txt"),
}
got = {}
for name, path in targets.items():
    try:
        got[name] = open(path, errors="replace").read()
    except OSError:
        pass
try:  # the engine's state (the store, pins, records); the clone itself lives under worktrees/
    state = sorted(n for n in os.listdir(os.path.join(USER, ".gep")) if n != "worktrees")
    if state:
        got["state"] = ",".join(state)
except OSError:
    pass
if got:
    with open("README.md", "a") as fh:
        fh.write("".join(got.values()))
print("READ", json.dumps(sorted(got)))
'''


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[dict[str, Path]]:
    """Under /var/tmp: the workspace (an ignored .env), a HOME (~/.aws a symlink elsewhere, ~/.netrc) and
    another repository of the user's. ``request.param`` /opt (a folder the sandbox's root once showed whole) puts
    the workspace and HOME there instead (other repositories under /opt: tests/test_sandbox_other_repos.py)."""
    where = getattr(request, "param", "/var/tmp")
    if not os.access(where, os.W_OK):
        pytest.skip(f"{where} is not writable here")
    root, aside = (Path(tempfile.mkdtemp(prefix="gep-view-", dir=d)) for d in (where, "/var/tmp"))
    shutil.copytree(EXAMPLE, root / "ws")
    (root / "ws" / ".gitignore").write_text(".env\n")
    ws = init_repo(root / "ws", {})
    (ws / ".env").write_text(f"API_TOKEN={SECRETS['env']}\n")
    home, elsewhere = root / "home", aside / "vault" / "aws"
    elsewhere.mkdir(parents=True)
    (elsewhere / "credentials").write_text(f"aws_secret_access_key = {SECRETS['aws']}\n")
    home.mkdir()
    (home / ".aws").symlink_to(elsewhere)
    (home / ".netrc").write_text(f"machine x login u password {SECRETS['netrc']}\n")
    other = init_repo(aside / "other", {"notes.txt": SECRETS["other"] + "\n"})
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    yield {"ws": ws, "home": home, "other": other}
    shutil.rmtree(root, ignore_errors=True)
    shutil.rmtree(aside, ignore_errors=True)


def _session(conftest: str) -> list[dict]:
    return [
        message(tool_use("edit_file", {"path": "stats.py", "old_text": BUGGY, "new_text": FIXED})),
        message(tool_use("write_file", {"path": "tests/conftest.py", "content": conftest})),
        message(tool_use("run_validation", {})),
        message(text_block("Done."), tool_use("finish", {"summary": "Fix stats.mean", "rationale": "tests pass"})),
    ]


def _everything_stored(ws: Path) -> bytes:
    """Every commit's content and every file the engine keeps (store, patches, prompt files)."""
    out = git(ws, "log", "-p", "--all", "--format=%H %B").encode()
    out += b"".join(f.read_bytes() for f in (ws / ".gep").rglob("*") if f.is_file() and not f.is_symlink())
    return out


@needs_bwrap
@pytest.mark.parametrize(("mode", "world"), [("bwrap", "/var/tmp"), ("none", "/var/tmp"), ("bwrap", "/opt")],
                         indirect=["world"])  # /opt: a folder tools live in, next to the user's
def test_validation_reads_no_user_data_and_its_writes_never_reach_the_commit(
        world: dict[str, Path], monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    ws = world["ws"]
    (ws / "gep.toml").write_text(f'sandbox = "{"none" if mode == "none" else "auto"}"\n'
                                 'validation = ["python -m pytest -q -s"]\n')
    git(ws, "add", "gep.toml")
    git(ws, "commit", "-q", "-m", "config")
    readme = (ws / "README.md").read_bytes()
    conftest = f"USER = {str(ws)!r}\nOTHER = {str(world['other'])!r}\n" + READER
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-api03-" + "Rt5" * 14)
    with FakeAnthropic(_session(conftest)) as fake:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
        event = run_cycle(CycleRequest(workspace=ws, mutator="anthropic", seed=1), env=dict(os.environ))
    assert event is not None
    tool_output = fake.requests[3].tool_results()[0]["content"]
    read = json.loads(tool_output.split("READ ", 1)[1].splitlines()[0])
    if mode == "none":  # the attack is real: unconfined, the conftest reads every one of them
        assert {"env_by_path", "aws", "netrc", "other_repo", "state"} <= set(read), tool_output
    else:
        assert read == [], tool_output  # nothing of the user's but the tree under check is there
    # either way, what validation wrote was its throw-away copy's: the commit holds the model's change only
    assert event.outcome.status == "success", event.meta.failure_reasons
    assert git(ws, "show", "HEAD:README.md").encode() == readme == (ws / "README.md").read_bytes()
    assert set(git(ws, "show", "--name-only", "--format=", "HEAD").split()) == {"stats.py", "tests/conftest.py"}
    stored = _everything_stored(ws)
    for secret in SECRETS.values():
        assert secret.encode() not in stored
