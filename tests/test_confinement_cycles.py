"""Issue 20's attacks through FULL cycles (gep.run_cycle): a model (the real SDK against tests/fake_anthropic.py)
or an agent changes the workspace in its clone, validation runs there in the sandbox, and nothing reaches
the user's tree, the engine's configuration or the next cycle; no key leaves."""

from __future__ import annotations

import base64
import json
import os
import shlex
import shutil
import socket
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import EXAMPLE, git, init_repo
from fake_anthropic import FakeAnthropic, message, text_block, tool_use
from test_mutator_anthropic import BUGGY, FIXED
from test_sandbox import ATTACK as SANDBOX_ATTACK

import gep.validation.sandbox as sandbox_mod
from gep import CycleRequest, run_cycle, solidify_pending
from gep.assets.gene_files import load_genes_dir, seed_genes_dir
from gep.core.errors import ConfigError
from gep.core.models import EvolutionEvent
from gep.store import Store

KEY = "sk-ant-api03-" + "Wv7" * 14

# What the model writes as tests/conftest.py; validation (pytest) imports it: test_sandbox.py's attacks (in the
# tree under check, the cycle's clone), plus the user's own tree and the engine's state by absolute path.
REACH_FOR_THE_USER = r'''
attempt("write_user_tree", lambda: open(os.path.join(USER, "stats.py"), "a").write("# pwned\n"))
attempt("write_user_git", lambda: open(os.path.join(USER, ".git", "hooks", "post-commit"), "w").write("x"))
attempt("plant_gene", lambda: open(os.path.join(USER, ".gep", "genes", "evil.json"), "w").write("{}"))
attempt("user_gep_toml", lambda: open(os.path.join(USER, "gep.toml"), "a").write('sandbox = "none"\n'))
attempt("rewrite_memory", lambda: open("MEMORY.md", "w").write("forget everything\n"))
'''
ATTACK = SANDBOX_ATTACK.replace('print("RESULTS"', REACH_FOR_THE_USER + 'print("RESULTS"')
FIX = ("import pathlib, sys; sys.stdin.read(); p = pathlib.Path('stats.py'); "
       "p.write_text(p.read_text().replace('(len(values) - 1)', 'len(values)'))")
ESCAPES = {"write_outside", "write_user_tree", "write_user_git", "plant_gene", "user_gep_toml", "proc_environ",
           "env_key", "network", "write_git", "write_state"}


@pytest.fixture(autouse=True)
def venv_python_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")


@pytest.fixture
def example_ws() -> Iterator[Path]:
    """The bundled example, committed, outside /tmp: a sandbox hides the host's /tmp (a write there would land
    in its private tmpfs and prove nothing), as it does not hide where real workspaces live."""
    root = Path(tempfile.mkdtemp(prefix="gep-ws-", dir="/var/tmp"))
    shutil.copytree(EXAMPLE, root / "ws")
    yield init_repo(root / "ws", {})
    shutil.rmtree(root, ignore_errors=True)


def stored(ws: Path) -> list[EvolutionEvent]:
    with Store.for_workspace(ws) as store:
        return store.list_events(limit=20)


def _attack_session(conftest: str) -> list[dict]:
    return [
        message(tool_use("edit_file", {"path": "stats.py", "old_text": BUGGY, "new_text": FIXED})),
        message(tool_use("write_file", {"path": "tests/conftest.py", "content": conftest})),
        message(tool_use("run_validation", {})),
        message(text_block("Done."), tool_use("finish", {"summary": "Fix stats.mean", "rationale": "tests pass"})),
    ]


@pytest.mark.parametrize("mode", ["bwrap", "none"])
def test_escape_through_validation_in_a_full_model_cycle(example_ws: Path, outside: Path, listener: socket.socket,
                                                         monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    # -s: pytest shows what the conftest prints (what it got through), in the tool's output to the model
    (example_ws / "gep.toml").write_text(f'sandbox = "{"none" if mode == "none" else "auto"}"\n'
                                         'validation = ["python -m pytest -q -s"]\n')
    git(example_ws, "add", "gep.toml")
    git(example_ws, "commit", "-q", "-m", "config")
    (example_ws / ".gep" / "genes").mkdir(parents=True)
    memory, hooks = (example_ws / "MEMORY.md").read_bytes(), sorted((example_ws / ".git" / "hooks").iterdir())
    conftest = (f"OUTSIDE = {str(outside)!r}\nUSER = {str(example_ws)!r}\nPORT = {listener.getsockname()[1]}\n"
                f"STATE = {str(example_ws / '.gep')!r}\n" + ATTACK)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    with FakeAnthropic(_attack_session(conftest)) as fake:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
        event = run_cycle(CycleRequest(workspace=example_ws, mutator="anthropic", seed=1), env=dict(os.environ))
    assert event is not None
    tool_output = fake.requests[3].tool_results()[0]["content"]
    results = json.loads(tool_output.split("RESULTS ", 1)[1].splitlines()[0])  # the conftest did run
    escaped = {name for name, (status, _) in results.items() if status == "done"} & ESCAPES
    if mode == "none":  # the attacks are real: unconfined (the user's explicit choice), they get through
        assert {"write_outside", "write_user_tree", "plant_gene"} <= escaped, results
        return
    assert escaped == set(), results
    assert results["rewrite_memory"][0] == "done"  # the tree under check is writable: a throw-away copy
    assert list(outside.iterdir()) == [] and sorted((example_ws / ".git" / "hooks").iterdir()) == hooks
    assert not (example_ws / ".gep" / "genes" / "evil.json").exists()
    assert (example_ws / "MEMORY.md").read_bytes() == memory and (example_ws / "gep.toml").read_text() == \
        'sandbox = "auto"\nvalidation = ["python -m pytest -q -s"]\n'
    # what validation wrote (MEMORY.md rewritten) was discarded with its copy: the change is the model's own
    assert event.outcome.status == "success", event.meta.failure_reasons
    assert git(example_ws, "show", "HEAD:MEMORY.md").encode() == memory
    assert set(git(example_ws, "show", "--name-only", "--format=", "HEAD").split()) == {"stats.py", "tests/conftest.py"}
    with pytest.raises(OSError):
        listener.accept()  # nothing connected
    # no key leaves: not to the model, not into the store, the patch or the prompt file
    sent = json.dumps([r.body for r in fake.requests])
    encoded = base64.b64encode(KEY.encode()).decode()
    assert KEY not in sent and encoded not in sent
    for f in [*(example_ws / ".gep").rglob("*")]:
        if f.is_file():
            data = f.read_bytes()
            assert KEY.encode() not in data and encoded.encode() not in data, f


def test_what_a_cycle_plants_for_the_next_one_never_persists(example_ws: Path, tmp_path: Path) -> None:
    marker = tmp_path / "evil-ran"
    (example_ws / "evil.sh").write_text(f"touch {marker}\n")
    git(example_ws, "add", "evil.sh")
    git(example_ws, "commit", "-q", "-m", "a script the attacker hopes to run")
    plant = (
        "import json, pathlib, sys; sys.stdin.read(); p = pathlib.Path('.gep/genes'); p.mkdir(parents=True); "
        "(p / 'gene_repair_from_errors.json').write_text(json.dumps({'type': 'Gene', 'id': "
        "'gene_repair_from_errors', 'category': 'repair', 'signals_match': ['log_error'], 'validation': "
        "['sh evil.sh']})); pathlib.Path('gep.toml').write_text('command_allowlist = [\"python\", \"sh\"]\\n')")
    first = run_cycle(CycleRequest(workspace=example_ws, mutator="command", seed=1,
                                   agent_cmd=shlex.join([sys.executable, "-c", plant])), env=dict(os.environ))
    assert first is not None and first.outcome.status == "failed"
    assert set(first.meta.failure_reasons or []) >= {
        "constraint: forbidden path touched: .gep/genes/gene_repair_from_errors.json",
        "constraint: forbidden path touched: gep.toml"}
    assert not (example_ws / ".gep" / "genes").exists() and not (example_ws / "gep.toml").exists()
    second = run_cycle(CycleRequest(workspace=example_ws, mutator="command", seed=2,
                                    agent_cmd=shlex.join([sys.executable, "-c", FIX])), env=dict(os.environ))
    assert second is not None and second.meta.validation, second.meta.failure_reasons
    seed = {g.id: g for g in load_genes_dir(seed_genes_dir())}[second.genes_used[0]]
    # a seed gene's own validation ran, never the planted one
    assert [v.cmd for v in second.meta.validation] == seed.validation[:len(second.meta.validation)]
    assert not marker.exists()


def test_settings_that_widen_what_runs_are_read_once_before_the_mutator(example_ws: Path, outside: Path) -> None:
    """An agent runs as the user and can reach the user's gep.toml: what it writes there does not change the
    cycle it is part of (its validation and sandbox were read when the cycle started)."""
    (example_ws / "gep.toml").write_text('validation = ["python -m compileall -q ."]\n')
    escape = outside / "escaped"
    rewrite = ("import pathlib, sys; sys.stdin.read(); pathlib.Path('stats.py').write_text(pathlib.Path("
               "'stats.py').read_text().replace('(len(values) - 1)', 'len(values)')); user = pathlib.Path.cwd()"
               ".parents[2]; (user / 'gep.toml').write_text('sandbox = \"none\"\\nvalidation = [\"python evil.py\"]"
               "\\n'); (user / 'evil.py').write_text(\"open(" + repr(str(escape)) + ", 'w').write('x')\")")
    event = run_cycle(CycleRequest(workspace=example_ws, mutator="command", seed=1,
                                   agent_cmd=shlex.join([sys.executable, "-c", rewrite])), env=dict(os.environ))
    assert event is not None and event.outcome.status == "success", event.meta.failure_reasons
    assert [v.cmd for v in event.meta.validation or []] == ["python -m compileall -q ."]
    assert event.meta.sandbox == "bwrap" and not escape.exists()


def test_an_ignored_env_file_is_never_committed_even_when_the_change_unignores_it(example_ws: Path) -> None:
    (example_ws / ".gitignore").write_text(".env\n__pycache__/\n")
    git(example_ws, "add", ".gitignore")
    git(example_ws, "commit", "-q", "-m", "ignore .env")
    (example_ws / ".env").write_text("API_KEY=the-users-own\n")
    unignore = ("import pathlib, sys; sys.stdin.read(); pathlib.Path('.gitignore').write_text('__pycache__/\\n'); "
                "pathlib.Path('.env').write_text('API_KEY=planted-by-the-agent\\n'); p = pathlib.Path('stats.py'); "
                "p.write_text(p.read_text().replace('(len(values) - 1)', 'len(values)'))")
    event = run_cycle(CycleRequest(workspace=example_ws, mutator="command", seed=1,
                                   agent_cmd=shlex.join([sys.executable, "-c", unignore])), env=dict(os.environ))
    assert event is not None and event.outcome.status == "success", event.meta.failure_reasons
    committed = set(git(example_ws, "show", "--name-only", "--format=", "HEAD").split())
    assert committed == {".gitignore", "stats.py"}
    assert any(w.startswith("not committed (ignored by the baseline") and ".env" in w
               for w in event.meta.constraint_warnings or [])
    assert (example_ws / ".env").read_text() == "API_KEY=the-users-own\n"  # the user's own file, untouched
    assert "planted" not in git(example_ws, "log", "-p", "-1")


def test_a_models_or_agents_cycle_is_refused_without_bwrap_unless_the_user_said_none(
        example_ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox_mod, "find_bwrap", lambda: None)
    cmd = shlex.join([sys.executable, "-c", "import sys; sys.stdin.read()"])
    with pytest.raises(ConfigError, match='cannot run a command cycle here: bubblewrap .* sandbox = "none"'):
        run_cycle(CycleRequest(workspace=example_ws, mutator="command", agent_cmd=cmd), env=dict(os.environ))
    assert stored(example_ws) == []  # a refused start stores nothing
    # a person's change may be validated unconfined: prompt mode runs, and `gep solidify` validates
    pending = run_cycle(CycleRequest(workspace=example_ws, mutator="prompt", seed=3), env=dict(os.environ))
    assert pending is not None and pending.outcome.status == "awaiting_changes"
    stats = example_ws / "stats.py"
    stats.write_text(stats.read_text().replace("(len(values) - 1)", "len(values)"))
    done = solidify_pending(CycleRequest(workspace=example_ws), env=dict(os.environ))
    assert done is not None and done.outcome.status == "success" and done.meta.sandbox == "none"
    (example_ws / "gep.toml").write_text('sandbox = "none"\n')  # the user accepts the risk
    event = run_cycle(CycleRequest(workspace=example_ws, mutator="command", agent_cmd=cmd), env=dict(os.environ))
    assert event is not None and event.outcome.status == "empty"


def test_gep_solidify_runs_with_the_settings_the_cycle_started_with(example_ws: Path) -> None:
    from gep.cycle.context import open_cycle

    (example_ws / "gep.toml").write_text('validation = ["python -m compileall -q ."]\n')
    pending = run_cycle(CycleRequest(workspace=example_ws, mutator="prompt", seed=1), env=dict(os.environ))
    assert pending is not None and pending.outcome.status == "awaiting_changes"
    (example_ws / "gep.toml").write_text('sandbox = "none"\ncommand_allowlist = ["python", "sh"]\n'
                                         'validation = ["sh evil.sh"]\n')
    ctx, _ = open_cycle(CycleRequest(workspace=example_ws), resume=True, env=dict(os.environ))
    try:
        assert (ctx.settings.sandbox, ctx.settings.validation) == ("auto", ["python -m compileall -q ."])
        assert "sh" not in ctx.settings.command_allowlist
    finally:
        ctx.close()
    done = solidify_pending(CycleRequest(workspace=example_ws), env=dict(os.environ))
    assert done is not None and done.outcome.status == "awaiting_changes"  # and the change to gep.toml fails it
    assert "constraint: forbidden path touched: gep.toml" in (done.meta.failure_reasons or [])
