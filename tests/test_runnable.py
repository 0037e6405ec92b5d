"""Genes that can run here: command checks against a real workspace and PATH, retire/restore, the selection filter."""

from __future__ import annotations

import json
import random
import stat
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gep.assets.gene_files import load_genes_dir, seed_genes_dir
from gep.core.config import Settings
from gep.core.models import Gene
from gep.genes.eligibility import (
    GeneStatusError,
    InMemoryGeneStatuses,
    command_problem,
    gene_runnability,
    restore_gene,
    retire_gene,
    runner_check,
    selectable_genes,
)
from gep.genes.selector import select_gene_and_capsule

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SIGNALS = ["log_error", "errsig:TypeError: x is undefined", "recurring_error"]
NODE_GENE = Gene(id="gene_imported_node", signals_match=["log_error", "errsig", "recurring_error", "error"],
                 validation=["node scripts/validate-modules.js ./src/gep/solidify"])


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """A workspace with tests, a script, a package.json and a Makefile."""
    root = tmp_path / "ws"
    files = {
        "tests/test_ok.py": "def test_ok():\n    assert True\n",
        "scripts/check.js": "console.log('ok')\n",
        "tool.py": "print('ok')\n",
        "lib/index.js": "module.exports = 1\n",
        "package.json": json.dumps({"scripts": {"test": "node scripts/check.js", "lint": "true"}}),
        "Makefile": "test:\n\tpython -m pytest -q\n\n.PHONY: test lint\ncheck build: test\n",
        "ruff.toml": "line-length = 100\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def bin_dir(tmp_path: Path, *programs: str) -> dict[str, str]:
    """An environment whose PATH is one folder holding executables named ``programs`` (not run)."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    for name in programs:
        exe = folder / name
        exe.write_text("#!/bin/sh\nexit 0\n")
        exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return {"PATH": str(folder)}


# npm and npx are off by default (they run any script or package): these checks are for a user who allowed them
WITH_NPM = Settings(command_allowlist=[*Settings().command_allowlist, "npm", "npx"])


def test_npm_is_not_runnable_with_the_default_allowlist(ws: Path, tmp_path: Path) -> None:
    got = command_problem("npm test", workspace=ws, settings=Settings(), env=bin_dir(tmp_path, "npm"))
    assert got is not None and got.startswith("blocked by the runner: program 'npm' is not on the allowlist")


@pytest.mark.parametrize("cmd, problem", [
    # python resolves to this interpreter when PATH has none, as the runner does
    ("python -m pytest -q", None),
    ("python -m pytest -q tests/test_ok.py", None),
    ("python -m pytest -q tests/test_ok.py::test_ok", None),
    ("python -m pytest -q -k 'not slow' -p no:cacheprovider tests", None),
    ("python -m pytest --junitxml out/report.xml tests", None),  # the report is written, need not exist
    ("python -m pytest tests/test_missing.py", "tests/test_missing.py not found in the workspace"),
    ("python -m pytest -q 'tests/*.py'", None),  # a glob is not second-guessed
    ("python3 tool.py --flag", None),
    ("python script.py", "script.py not found in the workspace"),
    ("python -q -m pytest tests/nope", "tests/nope not found in the workspace"),
    ("python -m compileall -q .", None),
    ("python -m compileall -q lib/missing.py", "lib/missing.py not found in the workspace"),
    ("node scripts/check.js", None),
    ("node scripts/check", None),  # node resolves the .js
    ("node lib", None),  # a folder's index.js
    ("node scripts/validate-modules.js ./src/gep/solidify", "scripts/validate-modules.js not found in the workspace"),
    ("npm test", None),
    ("npm run lint", "blocked by the runner: npm run is not allowed"),  # runs any script (issue 20)
    ("make test", None),
    ("make check", None),
    ("make lint", None),  # declared .PHONY
    ("make deploy", "make target 'deploy' not defined in Makefile"),
    ("make -f other.mk test", "other.mk not found in the workspace"),
    ("ruff check --config ruff.toml lib/index.js", None),
    ("ruff check --config missing.toml .", "missing.toml not found in the workspace"),
    ("npx eslint .", "blocked by the runner: npx (npm exec) runs any package's program"),
    ("python -m pytest -q; rm -rf /", "blocked by the runner: shell operator ';' is not allowed: commands run "
                                     "without a shell"),
    ("python -c 'print(1)'", "blocked by the runner: python -c runs inline code [rule: python-inline]"),
    ("curl http://example.invalid", "blocked by the runner: program 'curl' is not on the allowlist"),
])
def test_command_problem(ws: Path, tmp_path: Path, cmd: str, problem: str | None) -> None:
    env = bin_dir(tmp_path, "node", "npm", "make", "ruff", "npx")
    got = command_problem(cmd, workspace=ws, settings=WITH_NPM, env=env)
    if problem is None or got is None:
        assert got == problem
    else:
        assert got.startswith(problem), got


def test_program_must_be_on_the_runner_path(ws: Path, tmp_path: Path) -> None:
    settings = Settings()
    assert command_problem("node scripts/check.js", workspace=ws, settings=settings,
                           env=bin_dir(tmp_path, "npm")) == "node not found"
    assert command_problem("make test", workspace=ws, settings=settings, env={"PATH": ""}) == "make not found"
    assert command_problem("node scripts/check.js", workspace=ws, settings=settings,
                           env=bin_dir(tmp_path, "node")) is None
    # a program given as a path is refused by the runner (it is looked up on PATH)
    got = command_problem("./bin/python -m pytest", workspace=ws, settings=settings, env={})
    assert got is not None and got.endswith("[rule: program-path]")


def test_npm_without_package_json(tmp_path: Path) -> None:
    ws = tmp_path / "empty"
    ws.mkdir()
    assert command_problem("npm test", workspace=ws, settings=WITH_NPM,
                           env=bin_dir(tmp_path, "npm")) == "package.json not found in the workspace"


def test_runner_check_uses_the_settings_allowlist() -> None:
    assert runner_check("ruff check .", Settings()) is None
    reason = runner_check("ruff check .", Settings(command_allowlist=["python"]))
    assert reason is not None and "not on the allowlist" in reason


def test_gene_runnability_names_the_first_command_that_cannot_run(ws: Path, tmp_path: Path) -> None:
    env = bin_dir(tmp_path, "npm")  # no node
    r = gene_runnability(NODE_GENE, workspace=ws, settings=Settings(), env=env)
    assert (r.runnable, r.reason) == (False, "not runnable here: node not found")
    assert r.command == NODE_GENE.validation[0]
    env = bin_dir(tmp_path, "node")
    r = gene_runnability(NODE_GENE, workspace=ws, settings=Settings(), env=env)
    assert r.reason == "not runnable here: scripts/validate-modules.js not found in the workspace"
    # every seed gene runs in a Python workspace with tests
    for g in load_genes_dir(seed_genes_dir()):
        assert gene_runnability(g, workspace=ws, settings=Settings(), env={}).runnable, g.id
    assert gene_runnability(Gene(id="g_none"), workspace=ws, settings=Settings(), env={}).runnable


def test_the_check_never_changes_a_gene(ws: Path) -> None:
    before = NODE_GENE.to_asset()
    pool = selectable_genes([NODE_GENE], statuses=[], workspace=ws, settings=Settings(), env={})
    assert pool.genes == [] and "gene_imported_node" in pool.excluded
    assert NODE_GENE.to_asset() == before  # the imported commands stay as they are: exports are lossless


# ------------------------------------------------------------------ retire / restore


def test_retire_and_restore_keep_the_history() -> None:
    repo = InMemoryGeneStatuses()
    known = {"gene_a", "gene_b"}
    st = retire_gene(repo, "gene_a", reason="  misfires on  timeouts ", now=NOW, known_ids=known)
    assert (st.retired, st.reason, st.changed_at) == (True, "misfires on timeouts", NOW)
    later = NOW + timedelta(days=2)
    st = restore_gene(repo, "gene_a", now=later, reason="fixed upstream")
    assert (st.retired, st.reason, st.changed_at) == (False, None, later)
    assert [(h.action, h.reason, h.at) for h in repo.get_gene_status("gene_a").history] == [
        ("retire", "misfires on timeouts", NOW), ("restore", "fixed upstream", later)]
    retire_gene(repo, "gene_a", reason="again", now=later, known_ids=known)  # reversible both ways
    assert repo.get_gene_status("gene_a").retired


@pytest.mark.parametrize("gene_id, reason, message", [
    ("gene_zzz", "why", "no gene with id 'gene_zzz'"),
    ("gene_a", "   ", "retiring a gene needs a reason (--reason TEXT)"),
])
def test_retire_refuses_bad_requests(gene_id: str, reason: str, message: str) -> None:
    with pytest.raises(GeneStatusError, match=message.replace("(", r"\(").replace(")", r"\)")):
        retire_gene(InMemoryGeneStatuses(), gene_id, reason=reason, now=NOW, known_ids={"gene_a"})


def test_retire_twice_and_restore_unretired_are_refused() -> None:
    repo = InMemoryGeneStatuses()
    retire_gene(repo, "gene_a", reason="noisy", now=NOW, known_ids={"gene_a"})
    with pytest.raises(GeneStatusError, match="already retired"):
        retire_gene(repo, "gene_a", reason="noisy", now=NOW, known_ids={"gene_a"})
    with pytest.raises(GeneStatusError, match="is not retired"):
        restore_gene(repo, "gene_b", now=NOW)


# ------------------------------------------------------------------ the selection filter


def draws(genes: list[Gene], excluded: dict[str, str], n: int = 1000) -> Counter[str | None]:
    picks: Counter[str | None] = Counter()
    settings = Settings()
    for seed in range(n):
        sel = select_gene_and_capsule(genes=genes, capsules=[], failed_capsules=[], signals=SIGNALS,
                                      recent_events=[], settings=settings, rng=random.Random(seed), now=NOW,
                                      drift=seed % 2 == 0, excluded=excluded)
        picks[sel.gene.id if sel.gene else None] += 1
    return picks


def test_a_non_runnable_gene_is_never_selected(ws: Path, tmp_path: Path) -> None:
    runnable = Gene(id="gene_python_repair", signals_match=["log_error"], validation=["python -m pytest -q"])
    genes = [NODE_GENE, runnable]
    env = bin_dir(tmp_path, "npm")  # node is not installed here
    # without the filter the Node gene (the better match) wins most draws
    assert draws(genes, {})["gene_imported_node"] > 500
    pool = selectable_genes(genes, statuses=[], workspace=ws, settings=Settings(), env=env)
    assert pool.excluded == {"gene_imported_node": "not runnable here: node not found"}
    assert [g.id for g in pool.genes] == ["gene_python_repair"]
    assert draws(genes, pool.excluded) == Counter({"gene_python_repair": 1000})
    sel = select_gene_and_capsule(genes=genes, capsules=[], failed_capsules=[], signals=SIGNALS, recent_events=[],
                                  settings=Settings(), rng=random.Random(1), now=NOW, excluded=pool.excluded)
    assert "not selectable gene_imported_node: not runnable here: node not found" in sel.decision.reasons


def test_a_retired_gene_is_never_selected_until_restored(ws: Path) -> None:
    a = Gene(id="gene_a", signals_match=["log_error", "errsig"], validation=["python -m pytest -q"])
    b = Gene(id="gene_b", signals_match=["log_error"], validation=["python -m pytest -q"])
    repo = InMemoryGeneStatuses()
    retire_gene(repo, "gene_a", reason="made things worse", now=NOW, known_ids={"gene_a", "gene_b"})
    pool = selectable_genes([a, b], statuses=repo.list_gene_statuses(), workspace=ws, settings=Settings(), env={})
    assert pool.excluded == {"gene_a": "retired: made things worse"}
    assert draws([a, b], pool.excluded) == Counter({"gene_b": 1000})
    restore_gene(repo, "gene_a", now=NOW)
    pool = selectable_genes([a, b], statuses=repo.list_gene_statuses(), workspace=ws, settings=Settings(), env={})
    assert pool.excluded == {} and draws([a, b], pool.excluded)["gene_a"] > 0


def test_nothing_selectable_leaves_selection_empty(ws: Path) -> None:
    pool = selectable_genes([NODE_GENE], statuses=[], workspace=ws, settings=Settings(), env={"PATH": ""})
    assert draws([NODE_GENE], pool.excluded, n=50) == Counter({None: 50})
