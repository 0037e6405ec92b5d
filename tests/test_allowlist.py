"""The allowlist is a parser per program: each bypass of issue 20 is refused, naming its rule, and never runs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gep.core.config import DEFAULT_ALLOWLIST, Settings
from gep.validation.runner import check_command, run_command

WITH_NPM = Settings(command_allowlist=[*DEFAULT_ALLOWLIST, "npm", "npx"])


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = tmp_path / "ws"
    (w / "tests").mkdir(parents=True)
    (w / "Makefile").write_text("test:\n\t@echo ok\n")
    (w / "tests" / "test_a.py").write_text("def test_a():\n    pass\n")
    return w


def _rule(reason: str | None) -> str:
    assert reason is not None, "accepted"
    assert "[rule: " in reason, reason
    return reason.rsplit("[rule: ", 1)[1].rstrip("]")


# The findings of issue 20, one per line: (command, the rule that refuses it). {o} is a folder outside.
ISSUE_BYPASSES = [
    ('python -mtimeit "open(\'{o}/m\', \'w\')"', "python-glued"),
    ('python -m pdb -c "!open(\'{o}/m\', \'w\')" x.py', "python-debugger"),
    ("npx node -e \"require('fs').writeFileSync('{o}/m', 'x')\"", "npx-exec"),
    ("npm exec -- node -e \"require('fs').writeFileSync('{o}/m', 'x')\"", "npm-subcommand"),
    ("npm run evil", "npm-subcommand"),
    ("make -E 'include {o}/Makefile'", "make-eval"),
    ('make "SHELL=/bin/sh" test', "make-variable"),
    ("make -f {o}/Makefile", "make-file-outside"),
    ("/usr/bin/python3 -m pytest", "program-path"),
    ("pytest --junitxml={o}/report.xml", "path-outside"),
    ("ruff check --fix {o}", "path-outside"),
]

MORE_BYPASSES = [
    ("python -qm timeit 1", "python-glued"),
    ("python -Bc 'print(1)'", "python-inline"),
    ("python -", "python-stdin"),
    ("python", "python-stdin"),
    ("python -m cProfile -m pip", "python-code-runner"),
    ("python -m runpy x", "python-code-runner"),
    ("python -m pip install evil", "python-module"),
    ("python x.py {o}/y", "path-outside"),
    ("python {o}/evil.py", "path-outside"),
    ("python ../evil.py", "path-outside"),
    ("pytest --basetemp=tmp", "pytest-basetemp"),
    ("pytest --basetem=tmp", "pytest-basetemp"),  # argparse-style abbreviation
    ("pytest --pdb", "pytest-debugger"),
    ("pytest --pdbcls=evil:Debugger", "pytest-debugger"),
    ("pytest -p evil_plugin", "pytest-plugin"),
    ("pytest -pevil_plugin", "pytest-plugin"),
    ("pytest -qp evil_plugin", "pytest-plugin"),
    ("pytest -o addopts=-pevil", "pytest-ini-override"),
    ("pytest --override-ini=cache_dir=x", "pytest-ini-override"),
    ("pytest --rootdir={o}", "path-outside"),
    ("pytest -c{o}/pytest.ini", "path-outside"),
    ("pytest --cov-report=xml:{o}/cov.xml", "path-outside"),
    ("pytest --junitxml reports/../../x.xml", "path-outside"),
    ("python -m pytest --junitxml={o}/r.xml", "path-outside"),
    ("python -m pytest -p evil", "pytest-plugin"),
    ("ruff server", "ruff-subcommand"),
    ("ruff clean", "ruff-subcommand"),
    ("ruff format ~/", "path-outside"),
    ("mypy --install-types gep", "mypy-install-types"),
    ("make --eval='include {o}/Makefile'", "make-eval"),
    ("make --ev='include {o}/Makefile'", "make-eval"),  # getopt abbreviation
    ("make -sE 'x'", "make-eval"),
    ("make -f{o}/Makefile", "make-file-outside"),
    ("make --file={o}/Makefile", "make-file-outside"),
    ("make -C {o}", "make-file-outside"),
    ("make MAKEFLAGS=-E", "make-variable"),
    ("make --no-such-option", "make-option"),
    ("make -Z", "make-option"),
    ("node --inspect-brk x.js", "node-debugger"),
    ("node inspect x.js", "node-debugger"),
    ("node --run evil", "node-run"),
    ("node -e 1", "node-inline"),
    ("node", "node-stdin"),
    ("npm test --script-shell=sh", "npm-option"),
    ("npm test --node-options=--eval=1", "npm-option"),
    ("npx tsc", "npx-exec"),
    ("FOO=1 pytest", "env-assignment"),
    ("./pytest", "program-path"),
    ("cargo test", "allowlist"),
]


@pytest.mark.parametrize(("template", "rule"), ISSUE_BYPASSES + MORE_BYPASSES)
def test_bypass_is_refused_naming_the_rule_and_never_runs(template: str, rule: str, ws: Path, outside: Path) -> None:
    cmd = template.format(o=outside)
    (outside / "Makefile").write_text(f"all:\n\ttouch {outside}/m\n")
    (outside / "evil.py").write_text(f"open({str(outside / 'm')!r}, 'w')\n")
    assert _rule(check_command(cmd, WITH_NPM, ws)) == rule
    assert check_command(cmd, WITH_NPM) is not None  # also without knowing the workspace
    res = run_command(cmd, cwd=ws, settings=WITH_NPM.model_copy(update={"sandbox": "none"}))
    assert res.blocked_reason and res.exit_code is None
    assert not (outside / "m").exists()


def test_npm_and_npx_are_off_by_default(ws: Path) -> None:
    assert _rule(check_command("npm test", Settings(), ws)) == "allowlist"
    assert _rule(check_command("npx jest", Settings(), ws)) == "allowlist"
    assert check_command("npm test", WITH_NPM, ws) is None


def test_a_listed_debugger_or_code_runner_is_still_refused(ws: Path) -> None:
    s = Settings(python_modules=["pytest", "pdb", "timeit"])
    assert _rule(check_command("python -m pdb x.py", s, ws)) == "python-debugger"
    assert _rule(check_command("python -m timeit 1", s, ws)) == "python-code-runner"


def test_a_symlink_out_of_the_workspace_is_outside(ws: Path, outside: Path) -> None:
    (ws / "link").symlink_to(outside)
    assert _rule(check_command("ruff check --fix link", Settings(), ws)) == "path-outside"
    assert _rule(check_command("pytest --junitxml=link/r.xml", Settings(), ws)) == "path-outside"
    (ws / "Makefile").unlink()
    (ws / "Makefile").symlink_to(outside / "Makefile")
    (outside / "Makefile").write_text("all:\n\ttrue\n")
    assert _rule(check_command("make", Settings(), ws)) == "make-file-outside"


def test_make_needs_a_makefile_in_the_workspace(tmp_path: Path) -> None:
    assert _rule(check_command("make test", Settings(), tmp_path)) == "make-no-makefile"
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "Makefile").write_text("t:\n\ttrue\n")
    assert check_command("make -C sub t", Settings(), tmp_path) is None


@pytest.mark.parametrize("cmd", [
    "python -m pytest -q",
    "python -m pytest -q -p no:cacheprovider -k 'not slow' -o log_cli=true",
    "python -m compileall -q .",
    "python -q -m compileall .",
    "python -W ignore::DeprecationWarning -m unittest discover -s tests",
    "python tests/test_a.py -c anything",  # after the script, -c is the script's
    "pytest -q tests/test_a.py --junitxml=reports/junit.xml",
    "pytest -x --tb=short -rA",
    "ruff check --fix .",
    "ruff --config pyproject.toml check tests",
    "ruff format --check .",
    "mypy --strict tests",
    "make test",
    "make -j4 -s test",
    "make -j 2 test",
    "node tests/run.js --flag -e",
    "node --test",
    "npm test -- --watch=false",
    "npm --version",
])
def test_ordinary_validation_commands_pass(cmd: str, ws: Path) -> None:
    assert check_command(cmd, WITH_NPM, ws) is None


def test_an_absolute_path_inside_the_workspace_is_inside(ws: Path) -> None:
    assert check_command(f"pytest --junitxml={ws}/r.xml", Settings(), ws) is None
    # without a workspace to compare with, an absolute path is not trusted
    assert _rule(check_command(f"pytest --junitxml={ws}/r.xml", Settings())) == "path-outside"


def test_seed_gene_validation_commands_pass(ws: Path) -> None:
    from gep.assets.gene_files import load_genes_dir, seed_genes_dir

    for gene in load_genes_dir(seed_genes_dir()):
        for cmd in gene.validation:
            assert check_command(cmd, Settings(), ws) is None, (gene.id, cmd)


def test_shell_syntax_refusals_name_their_rule(ws: Path) -> None:
    assert _rule(check_command("pytest; touch x", Settings(), ws)) == "shell-operator"
    assert _rule(check_command("pytest $HOME", Settings(), ws)) == "shell-expansion"
    assert _rule(check_command("pytest `id`", Settings(), ws)) == "shell-substitution"
    assert _rule(check_command("pytest\nid", Settings(), ws)) == "one-command"
    assert _rule(check_command("pytest 'x", Settings(), ws)) == "parse"
    assert _rule(check_command("  ", Settings(), ws)) == "empty"
    assert os.sep == "/"
