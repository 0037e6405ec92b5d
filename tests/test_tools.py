"""Workspace tools: confinement to the workspace, forbidden paths, and each tool's contract."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from gep.core.config import Settings
from gep.mutators.tools import TOOL_NAMES, TOOL_SPECS, WorkspaceTools, is_forbidden

FORBIDDEN = [".git", ".gep", ".venv", "node_modules", "MEMORY.md", "secrets/", "/top.txt", "config/local.toml"]


def make_tools(ws: Path, validation: list[str] | None = None) -> WorkspaceTools:
    return WorkspaceTools(ws, forbidden_paths=FORBIDDEN, validation_commands=validation or [],
                          settings=Settings(), gene_id="gene_test", cycle_id="evt_t")


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    d = tmp_path / "outside"
    d.mkdir()
    (d / "target.txt").write_text("outside content\n")
    return d


def test_tool_specs_are_declared_once_each() -> None:
    assert TOOL_NAMES == ["list_files", "read_file", "search", "write_file", "edit_file", "run_validation",
                          "finish"]
    for spec in TOOL_SPECS:
        assert spec.input_schema["type"] == "object"
        assert set(spec.input_schema["required"]) <= set(spec.input_schema["properties"])


@pytest.mark.parametrize(("rel", "expected"), [
    (".git", True), (".git/config", True), ("sub/.git/HEAD", True), (".gitignore", False),
    (".gep/prompts/x.md", True), ("MEMORY.md", True), ("docs/MEMORY.md", True), ("MEMORY.md.bak", False),
    ("secrets/key.txt", True), ("src/secrets/key.txt", True), ("stats.py", False), ("top.txt", True),
    ("sub/top.txt", False), ("config/local.toml", True), ("src/config/local.toml", False),
    ("node_modules/x/index.js", True), ("src/app.py", False),
])
def test_is_forbidden_matches_like_gitignore(rel: str, expected: bool) -> None:
    assert is_forbidden(rel, FORBIDDEN) is expected


def test_is_forbidden_wildcards() -> None:
    assert is_forbidden("config/prod.env", ["*.env"])
    assert is_forbidden("memory/persona_a.md", ["memory/persona_*.md"])
    assert not is_forbidden("other/persona_a.md", ["memory/persona_*.md"])


def test_escapes_and_forbidden_paths_are_refused_and_counted(example_ws: Path, outside: Path) -> None:
    (example_ws / "link_out").symlink_to(outside)
    (example_ws / "file_out.txt").symlink_to(outside / "target.txt")
    tools = make_tools(example_ws)
    attempts = [
        ("read_file", {"path": "../../etc/passwd"}),
        ("read_file", {"path": "/etc/passwd"}),
        ("read_file", {"path": "~/.ssh/id_rsa"}),
        ("read_file", {"path": "link_out/target.txt"}),
        ("read_file", {"path": "file_out.txt"}),
        ("write_file", {"path": "link_out/new.txt", "content": "x"}),
        ("write_file", {"path": "file_out.txt", "content": "overwritten"}),
        ("edit_file", {"path": "file_out.txt", "old_text": "outside", "new_text": "hacked"}),
        ("read_file", {"path": ".git/config"}),
        ("write_file", {"path": ".git/hooks/pre-commit", "content": "#!/bin/sh\n"}),
        ("write_file", {"path": "./sub/../../x.txt", "content": "x"}),
        ("edit_file", {"path": "MEMORY.md", "old_text": "MEMORY", "new_text": "X"}),
        ("write_file", {"path": ".gep/state.json", "content": "{}"}),
        ("list_files", {"path": "link_out"}),
        ("search", {"pattern": "outside", "path": "link_out"}),
    ]
    for name, args in attempts:
        out = tools.call(name, args)
        assert out.is_error and out.refused, (name, args, out.content)
        assert out.content.startswith("refused:")
    assert tools.refusals == len(attempts)
    assert tools.changed == set()
    # nothing outside (or forbidden inside) was touched
    assert sorted(p.name for p in outside.iterdir()) == ["target.txt"]
    assert (outside / "target.txt").read_text() == "outside content\n"
    assert not (example_ws / ".git" / "hooks" / "pre-commit").exists()
    assert (example_ws / "MEMORY.md").read_text().startswith("# MEMORY")
    assert not (example_ws.parent / "x.txt").exists()


def test_symlink_inside_the_workspace_is_allowed(repo: Path) -> None:
    (repo / "docs").mkdir()
    (repo / "docs" / "a.txt").write_text("alpha\n")
    (repo / "alias").symlink_to(repo / "docs")
    tools = make_tools(repo)
    out = tools.call("read_file", {"path": "alias/a.txt"})
    assert not out.is_error and "alpha" in out.content


def test_read_file_numbers_lines_and_honours_a_range(example_ws: Path) -> None:
    tools = make_tools(example_ws)
    whole = tools.call("read_file", {"path": "stats.py"})
    assert not whole.is_error
    assert "8\t    return sum(values) / (len(values) - 1)" in whole.content
    part = tools.call("read_file", {"path": "stats.py", "start_line": 4, "end_line": 5})
    assert part.content.splitlines() == ["4\tdef mean(values):",
                                         '5\t    """Arithmetic mean of a non-empty sequence."""']
    missing = tools.call("read_file", {"path": "nope.py"})
    assert missing.is_error and not missing.refused
    bad = tools.call("read_file", {"path": "stats.py", "start_line": 9, "end_line": 2})
    assert bad.is_error and "line range" in bad.content
    assert tools.refusals == 0


def test_list_files_skips_forbidden_and_git(example_ws: Path) -> None:
    tools = make_tools(example_ws)
    listed = tools.call("list_files", {}).content.splitlines()
    assert "stats.py" in listed and "tests/test_stats.py" in listed
    assert not any(p.startswith(".git/") for p in listed)
    assert "MEMORY.md" not in listed
    sub = tools.call("list_files", {"path": "tests"}).content.splitlines()
    assert sub == ["tests/__init__.py", "tests/test_stats.py"]


def test_search_finds_lines_and_rejects_bad_regex(example_ws: Path) -> None:
    tools = make_tools(example_ws)
    out = tools.call("search", {"pattern": r"len\(values\) - 1"})
    assert out.content.splitlines() == ["stats.py:8:     return sum(values) / (len(values) - 1)"]
    only_tests = tools.call("search", {"pattern": "def test_", "glob": "test_*.py"})
    assert len(only_tests.content.splitlines()) == 4
    none = tools.call("search", {"pattern": "zzz_not_there"})
    assert not none.is_error and none.content.startswith("no match")
    bad = tools.call("search", {"pattern": "(unclosed"})
    assert bad.is_error and "pattern refused: not a supported regular expression" in bad.content


def test_search_results_are_bounded(repo: Path) -> None:
    (repo / "big.txt").write_text("hit\n" * 5000)
    out = make_tools(repo).call("search", {"pattern": "hit"})
    assert len(out.content.splitlines()) <= 81
    assert "narrow the search" in out.content


def test_write_and_edit_file(repo: Path) -> None:
    tools = make_tools(repo)
    out = tools.call("write_file", {"path": "pkg/new.py", "content": "a = 1\nb = 2\nb = 2\n"})
    assert not out.is_error and out.content.startswith("created pkg/new.py")
    assert (repo / "pkg" / "new.py").read_text() == "a = 1\nb = 2\nb = 2\n"
    twice = tools.call("edit_file", {"path": "pkg/new.py", "old_text": "b = 2", "new_text": "c = 3"})
    assert twice.is_error and "2 times" in twice.content
    absent = tools.call("edit_file", {"path": "pkg/new.py", "old_text": "zzz", "new_text": "y"})
    assert absent.is_error and "not found" in absent.content
    ok = tools.call("edit_file", {"path": "pkg/new.py", "old_text": "a = 1\n", "new_text": "a = 10\n"})
    assert not ok.is_error
    assert (repo / "pkg" / "new.py").read_text() == "a = 10\nb = 2\nb = 2\n"
    assert tools.changed == {"pkg/new.py"}
    assert tools.refusals == 0


def test_tool_output_is_redacted(repo: Path) -> None:
    key = "sk-ant-api03-" + "A1b2C3d4E5f6G7h8I9j0" * 2
    (repo / "settings.py").write_text(f'ANTHROPIC_KEY = "{key}"\n')
    tools = make_tools(repo)
    for out in (tools.call("read_file", {"path": "settings.py"}), tools.call("search", {"pattern": "ANTHROPIC_KEY"})):
        assert key not in out.content and "[REDACTED]" in out.content
    # the search runs over the redacted text: a pattern cannot tell whether a secret is there
    assert tools.call("search", {"pattern": "sk-ant"}).content.startswith("no match")


def test_unknown_tool_and_bad_input_are_errors_not_exceptions(repo: Path) -> None:
    tools = make_tools(repo)
    assert tools.call("rm_rf", {}).is_error
    assert tools.call("read_file", ["not", "a", "dict"]).is_error
    assert tools.call("read_file", {"path": 42}).is_error
    assert tools.call("write_file", {"path": "a.txt", "content": None}).is_error
    assert tools.call("finish", {"summary": "  "}).is_error and tools.finished is None
    fin = tools.call("finish", {"summary": "Fix mean\nsecond line", "rationale": "because"})
    assert not fin.is_error and tools.finished is not None and tools.finished.summary == "Fix mean"


def test_run_validation_uses_the_safe_runner(example_ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    tools = make_tools(example_ws, ["python -m compileall -q .", "python -m pytest -q", "python -c 'print(1)'"])
    out = tools.call("run_validation", {})
    assert not out.is_error  # a failing validation is information for the model, not a tool error
    assert out.content.startswith("validation FAILED")
    assert "python -m pytest -q  (exit 1, failed)" in out.content
    assert "test_mean" in out.content
    (example_ws / "stats.py").write_text((example_ws / "stats.py").read_text().replace(
        "(len(values) - 1)", "len(values)"))
    again = tools.call("run_validation", {})
    assert "(exit 0, ok)" in again.content
    assert "blocked: python -c runs inline code [rule: python-inline]" in again.content
    # what validation wrote (byte code, caches) is gone again: it must not end up in the commit
    assert not list(example_ws.rglob("__pycache__")) and not (example_ws / ".pytest_cache").exists()
    assert make_tools(example_ws).call("run_validation", {}).content == \
        "the gene declares no validation commands"
