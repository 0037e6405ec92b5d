"""Issue 45, point 1 (F01-F04): validation sees no credential and no other repository, while the tools it runs
still run. Real bubblewrap, fake homes built here (under /var/tmp: /tmp is the sandbox's own private tmpfs).
Each probe also runs with ``sandbox = "none"``, where everything is readable, so the tests can fail."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from conftest import git, init_repo
from test_sandbox import needs_bwrap

from gep.core.config import Settings
from gep.cycle.tree import CycleTree
from gep.cycle.validate import validate_tree
from gep.git import open_repo
from gep.validation.runner import run_validation
from gep.validation.sandbox import Sandbox

pytestmark = needs_bwrap

PROBE = """import subprocess
for p in {secrets!r}:
    try:
        print("SEEN", open(p).read().strip())
    except OSError:
        pass
for tool in {tools!r}:
    try:
        print("RAN", subprocess.run([tool], capture_output=True, text=True).stdout.strip())
    except OSError as exc:
        print("MISSING", tool, exc.strerror)
"""


@pytest.fixture
def var_tmp() -> Iterator[Path]:
    """A folder outside /tmp (which the sandbox replaces), removed afterwards."""
    d = Path(tempfile.mkdtemp(prefix="gep-creds-", dir="/var/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def _secret(path: Path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")
    return str(path)


def _probe(ws: Path, mode: str) -> str:
    settings = Settings(sandbox=mode)  # type: ignore[arg-type]
    rep = run_validation(commands=["python probe.py"], cwd=ws, settings=settings, gene_id=None, report_id="r",
                         sandbox=Sandbox.resolve(ws, settings))
    res = rep.results[0]
    assert res.exit_code == 0 and res.sandbox == ("none" if mode == "none" else "bwrap"), (res.stdout, res.stderr)
    return res.stdout


def _python_path(monkeypatch: pytest.MonkeyPatch, *folders: Path) -> None:
    monkeypatch.setenv("PATH", os.pathsep.join([*map(str, folders), str(Path(sys.executable).parent), "/usr/bin",
                                                "/bin"]))


def test_tool_folders_in_the_home_show_their_tools_and_never_their_credentials(
        tmp_path: Path, var_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """F01: with ``~/.cargo/bin`` on PATH all of ``~/.cargo`` was bound (``credentials.toml`` readable); so were
    ``~/.gem``, ``~/.pulumi`` and ``~/.fly`` with their credentials."""
    home = var_tmp / "home"
    rustc = _script(home / ".rustup" / "toolchains" / "stable" / "bin" / "rustc", "echo rustc-ok")
    (home / ".rustup" / "settings.toml").write_text('default_toolchain = "stable"\n')
    _script(home / ".cargo" / "bin" / "cargo", f"exec {rustc}")  # rustup's proxy runs the toolchain
    (home / ".cargo" / "registry" / "index").mkdir(parents=True)
    _script(home / ".gem" / "ruby" / "3.1.0" / "bin" / "rake",
            f"cat {home}/.gem/ruby/3.1.0/gems/rake/VERSION")  # a gem's program reads its own files
    _secret(home / ".gem" / "ruby" / "3.1.0" / "gems" / "rake" / "VERSION", "rake-ok")
    _script(home / ".pulumi" / "bin" / "pulumi", "echo pulumi-ok")
    _script(home / ".fly" / "bin" / "flyctl", "echo flyctl-ok")
    secrets = [_secret(home / ".cargo" / "credentials.toml", '[registry]\ntoken = "CARGOSECRET"'),
               _secret(home / ".cargo" / "config.toml", "CARGOCONFIGSECRET"),
               _secret(home / ".gem" / "credentials", ":rubygems_api_key: GEMSECRET"),
               _secret(home / ".pulumi" / "credentials.json", '{"accessToken": "PULUMISECRET"}'),
               _secret(home / ".fly" / "config.yml", "access_token: FLYSECRET")]
    monkeypatch.setenv("HOME", str(home))
    paths = [home / ".cargo" / "bin", home / ".gem" / "ruby" / "3.1.0" / "bin", home / ".pulumi" / "bin",
             home / ".fly" / "bin"]
    _python_path(monkeypatch, *paths)
    ws = init_repo(tmp_path / "ws", {"probe.py": PROBE.format(secrets=secrets,
                                                              tools=["cargo", "rake", "pulumi", "flyctl"])})
    assert _probe(ws, "none").count("SEEN") == len(secrets)  # unconfined: all readable
    boxed = _probe(ws, "auto")
    assert "SECRET" not in boxed and "SEEN" not in boxed, boxed
    for ok in ("rustc-ok", "rake-ok", "pulumi-ok", "flyctl-ok"):  # the tools still run
        assert f"RAN {ok}" in boxed, boxed


def test_a_path_folder_inside_another_repository_shows_nothing_of_it(
        tmp_path: Path, var_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """F02: ``~/src/dotfiles/bin`` on PATH bound the whole repository ``~/src/dotfiles``, its ``.env`` included;
    a ``bin`` of a repository outside the home showed that folder of it."""
    home = var_tmp / "home"
    dotfiles = init_repo(home / "src" / "dotfiles", {".gitignore": ".env\n", "notes.md": "NOTESECRET\n"})
    _script(dotfiles / "bin" / "mytool", "echo mytool")
    elsewhere = init_repo(var_tmp / "project", {"README.md": "x\n"})
    _script(elsewhere / "bin" / "projtool", "echo PROJTOOLSECRET")
    secrets = [_secret(dotfiles / ".env", "DOTENVSECRET"), str(dotfiles / "notes.md"),
               str(elsewhere / "bin" / "projtool")]
    monkeypatch.setenv("HOME", str(home))
    _python_path(monkeypatch, dotfiles / "bin", elsewhere / "bin")
    ws = init_repo(tmp_path / "ws", {"probe.py": PROBE.format(secrets=secrets, tools=[])})
    assert _probe(ws, "none").count("SEEN") == len(secrets)
    boxed = _probe(ws, "auto")
    assert "SECRET" not in boxed and "SEEN" not in boxed, boxed


@pytest.mark.skipif(not os.access("/usr/local/bin", os.W_OK), reason="/usr/local/bin is not writable here")
def test_a_link_on_path_to_a_script_at_a_repository_root_shows_the_script_alone(
        tmp_path: Path, var_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """F03: a ``/usr/local/bin`` link to a script at a repository's root bound the script's folder: the repository."""
    repo = init_repo(var_tmp / "scripts", {".gitignore": ".env\n", "deploy.sh": "#!/bin/sh\necho deploy-ok\n"})
    (repo / "deploy.sh").chmod(0o755)
    secrets = [_secret(repo / ".env", "LINKENVSECRET"), _secret(repo / "notes.txt", "LINKNOTESECRET")]
    link = Path("/usr/local/bin") / f"gep-deploy-{var_tmp.name}"
    link.symlink_to(repo / "deploy.sh")
    try:
        _python_path(monkeypatch, Path("/usr/local/bin"))
        ws = init_repo(tmp_path / "ws", {"probe.py": PROBE.format(secrets=secrets, tools=[link.name])})
        assert _probe(ws, "none").count("SEEN") == len(secrets)
        boxed = _probe(ws, "auto")
        assert "SECRET" not in boxed and "RAN deploy-ok" in boxed, boxed  # the script runs, alone
    finally:
        link.unlink()


def test_in_prompt_mode_an_untracked_file_git_would_not_commit_is_not_shown(
        tmp_path: Path, var_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """F04: in prompt mode validation ran on a copy of every untracked file git does not ignore: the person's
    untracked ``.env`` (no .gitignore) was readable. Only what the change would commit is shown now."""
    _python_path(monkeypatch)
    ws = init_repo(var_tmp / "ws", {"probe.py": (
        "import os\nprint('ENV', os.path.exists('.env'), 'NOTES', os.path.exists('drafts/notes.txt'),"
        " 'NEW', os.path.exists('test_new.py'), 'APP', open('app.py').read().strip())\n"), "app.py": "X = 1\n"})
    (ws / ".env").write_text("API_TOKEN=PROMPTSECRET\n")  # untracked, not ignored: there before the cycle
    _secret(ws / "drafts" / "notes.txt", "DRAFTSECRET")
    tree = CycleTree.open(open_repo(ws), "evt_1", Settings(), "in_place", "person")
    try:
        (ws / "app.py").write_text("X = 2\n")  # the person's change, and a new test file it adds
        (ws / "test_new.py").write_text("def test_x():\n    assert True\n")
        (ws / ".env").write_text("API_TOKEN=PROMPTSECRET2\n")  # edited meanwhile: still theirs, never committed
        tc = tree.read()
        assert sorted(tc.paths) == ["app.py", "test_new.py"]
        # (the throw-away copy validation runs in leaves them out even unconfined, where their own path is open)
        for mode in ("none", "auto"):
            v = validate_tree(tree, tc, commands=["python probe.py"], settings=Settings(sandbox=mode),  # type: ignore[arg-type]
                              gene_id="g", report_id=f"r-{mode}", now=datetime.now)
            out = v.report.results[0].stdout
            assert "ENV False NOTES False NEW True APP X = 2" in out, (mode, out, v.report.results[0].stderr)
    finally:
        tree.close()
    assert git(ws, "status", "--porcelain").count("??") == 3  # nothing of theirs moved


def test_a_virtualenv_made_as_a_dot_folder_of_the_home_still_runs(var_tmp: Path, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A guard beside F01: ``python -m venv ~/.venv`` is an environment, shown though it is a dot-folder of the
    home (its ``pyvenv.cfg`` says so); the rest of the home stays hidden."""
    home = var_tmp / "home"
    home.mkdir()
    base = next(p for p in ("/usr/bin/python3", sys.executable) if os.access(p, os.X_OK))
    subprocess.run([base, "-m", "venv", "--without-pip", str(home / ".venv")], check=True)
    secrets = [_secret(home / ".netrc", "machine x password NETRCSECRET")]
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("VIRTUAL_ENV", str(home / ".venv"))
    monkeypatch.setenv("PATH", f"{home / '.venv' / 'bin'}{os.pathsep}/usr/bin{os.pathsep}/bin")
    ws = init_repo(tmp_path / "ws", {"probe.py": "import sys\nprint('VENV', sys.prefix.endswith('/.venv'), sys.prefix != sys.base_prefix)\n" +
                                     PROBE.format(secrets=secrets, tools=[])})
    boxed = _probe(ws, "auto")
    assert "VENV True True" in boxed and "SEEN" not in boxed, boxed


def _attack_home(var_tmp: Path) -> tuple[Path, list[str]]:
    """A home with credentials, another repository and a tool folder, as the trials below name them."""
    home = var_tmp / "home"
    other = init_repo(home / "src" / "other", {"lib/mod.py": "X = 1\n", "notes.md": "OTHERSECRET\n"})
    _script(other / "bin" / "t", "echo t")
    (home / "bin").symlink_to(other / "bin")  # ~/bin is a link into another repository
    secrets = [_secret(home / ".aws" / "credentials", "AWSSECRET"), _secret(home / ".netrc", "NETRCSECRET"),
               _secret(home / ".cargo" / "credentials.toml", "CARGOSECRET"), str(other / "notes.md"),
               _secret(other / ".env", "OTHERENVSECRET"), _secret(home / ".ssh" / "id_ed25519", "SSHSECRET")]
    return home, secrets


TRIALS = {  # environment a tree's code could make validation run with (gep.toml validation_env, a shell's PATH)
    "PATH through a link into another repository": {"PATH": "{home}/bin"},
    "PYTHONPATH into another repository": {"PYTHONPATH": "{home}/src/other/lib"},
    "NODE_PATH at another repository": {"NODE_PATH": "{home}/src/other"},
    "PATH at a dot-folder holding credentials": {"PATH": "{home}/.cargo"},
    "PATH at a private dot-folder": {"PATH": "{home}/.aws"},
    "PATH at ~/.ssh": {"PATH": "{home}/.ssh"},
    "VIRTUAL_ENV at another repository": {"VIRTUAL_ENV": "{home}/src/other"},
    "PATH at the home itself": {"PATH": "{home}"},
}


@pytest.mark.parametrize("trial", sorted(TRIALS))
def test_environment_trials_show_no_credential_and_no_other_repository(
        tmp_path: Path, var_tmp: Path, monkeypatch: pytest.MonkeyPatch, trial: str) -> None:
    """Issue 45, point 1, tried again as an attacker would: each environment names a credential or another
    repository for validation to bind; none of it is shown (unconfined, every secret is read)."""
    home, secrets = _attack_home(var_tmp)
    monkeypatch.setenv("HOME", str(home))
    for name, value in TRIALS[trial].items():
        value = value.format(home=home)
        monkeypatch.setenv(name, f"{value}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}/usr/bin:/bin"
                           if name == "PATH" else value)
    ws = init_repo(tmp_path / "ws", {"probe.py": PROBE.format(secrets=secrets, tools=[])})
    settings = Settings(validation_env=[n for n in TRIALS[trial] if n != "PATH"])
    assert _probe(ws, "none").count("SEEN") == len(secrets)
    rep = run_validation(commands=["python probe.py"], cwd=ws, settings=settings, gene_id=None, report_id="r",
                         sandbox=Sandbox.resolve(ws, settings))
    assert rep.results[0].sandbox == "bwrap" and "SEEN" not in rep.results[0].stdout, rep.results[0]
