"""Issue 45, point 3: blame holds. A tree cannot stand in for the tool that judges it (C01), nor make its failure
the host's with words (C03, C04); a person's feedback counts once per event (C05), and a revert is what git
shows reverted, not what a message says (C05). Real runner and sandbox, real git, real store."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from conftest import git, init_repo
from typer.testing import CliRunner

from gep.cli.root import app
from gep.core.config import Settings
from gep.core.models import EvolutionEvent
from gep.core.records import MutatorResult
from gep.learning.attribution import mutator_host_failure, validation_host_failure
from gep.learning.feedback import find_reverts, fold
from gep.store import Store
from gep.validation.runner import run_validation

BROKEN_APP = {"app.py": "def add(a, b):\n    return a - b\n",
              "tests/test_app.py": "import app\n\ndef test_add():\n    assert app.add(2, 3) == 5\n"}


@pytest.fixture(autouse=True)
def _venv_python(monkeypatch: pytest.MonkeyPatch) -> None:
    # `python` in validation commands: this interpreter, which has pytest
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")


def _validate(ws: Path, *commands: str, settings: Settings | None = None):  # type: ignore[no-untyped-def]
    return run_validation(commands=list(commands), cwd=ws, settings=settings or Settings(), gene_id="g",
                          report_id="r")


@pytest.mark.parametrize("shadow", [{"pytest.py": "raise SystemExit(0)\n"},
                                    {"pytest/__init__.py": "", "pytest/__main__.py": "raise SystemExit(0)\n"},
                                    {"_pytest/__init__.py": "raise SystemExit(0)\n", "pytest.py": "import _pytest\n"}])
def test_a_module_of_the_tree_cannot_stand_in_for_the_tool(tmp_path: Path, shadow: dict[str, str]) -> None:
    """C01: a change that breaks the code and adds a root pytest.py exiting 0 passed validation and landed."""
    ws = init_repo(tmp_path / "ws", {**BROKEN_APP, **shadow})
    report = _validate(ws, "python -m pytest -q")
    assert not report.overall_ok, report.results[0].stdout
    assert "assert -1 == 5" in report.results[0].stdout  # the real pytest ran the tree's tests
    assert validation_host_failure(report) is None  # the change's failure


def test_the_trees_own_modules_still_import_and_run_under_python_m(tmp_path: Path) -> None:
    """The tree stays first for everything but the tool: tests import it, and its own module runs with -m."""
    ws = init_repo(tmp_path / "ws", {**BROKEN_APP, "app.py": "def add(a, b):\n    return a + b\n",
                                     "mytool/__init__.py": "", "mytool/__main__.py": "import sys\nprint('ARGS', sys.argv[1:])\n"})
    report = _validate(ws, "python -m pytest -q", "python -m mytool one two",
                       settings=Settings(python_modules=["pytest", "mytool"]))
    assert report.overall_ok, [(r.stdout, r.stderr) for r in report.results]
    assert "ARGS ['one', 'two']" in report.results[1].stdout


def test_words_in_the_output_do_not_make_a_module_missing_but_the_sandbox_does(tmp_path: Path) -> None:
    """C03: the shadow printing the interpreter's "No module named pytest" became a host failure."""
    words = f"import sys\nsys.exit('{sys.executable}: No module named pytest')\n"
    ws = init_repo(tmp_path / "ws", {**BROKEN_APP, "pytest.py": words, "checker.py": words})
    report = _validate(ws, "python -m pytest -q")
    assert not report.overall_ok and report.results[0].missing is None
    assert validation_host_failure(report) is None
    said = _validate(ws, "python checker.py")  # the same words from a script: still the change's
    assert "No module named pytest" in said.results[0].stderr and validation_host_failure(said) is None
    really = _validate(ws, "python -m gep_no_such_module_xyz", settings=Settings(python_modules=["gep_no_such_module_xyz"]))
    assert really.results[0].missing == "gep_no_such_module_xyz"
    host = validation_host_failure(really)
    assert host is not None and host.kind == "validation_not_run", really.results[0]
    program = _validate(ws, "gep-no-such-program-xyz", settings=Settings(command_allowlist=["gep-no-such-program-xyz"]))
    assert program.results[0].missing == "gep-no-such-program-xyz" and validation_host_failure(program) is not None


def _agent_error(output: str) -> MutatorResult:
    return MutatorResult(status="error", error="agent command exited with code 1", output=output)


RATE_LIMIT = ("anthropic.RateLimitError: Error code: 429 - {'type': 'error', 'error': {'type': "
              "'overloaded_error', 'message': 'Overloaded'}}")


def test_an_agent_that_edited_and_printed_a_provider_error_failed_at_the_change() -> None:
    """C04: an agent that deleted the tests and printed RateLimitError ... 429 was recorded as a provider
    failure; it is its change's failure now. Before any edit the same words are still the provider's, and
    the anthropic mutator's own API error is the provider's whether or not the model had edited."""
    assert mutator_host_failure(_agent_error(RATE_LIMIT), edited=True) is None
    before = mutator_host_failure(_agent_error(RATE_LIMIT), edited=False)
    assert before is not None and before.kind == "provider"
    api = MutatorResult(status="error", error="Messages API error 429: Overloaded", provider_error=True)
    seen = mutator_host_failure(api, edited=True)
    assert seen is not None and seen.kind == "provider"
    model_said = MutatorResult(status="error", error="turn budget exhausted (8 turns) before finish",
                               output=f"assistant: {RATE_LIMIT}")
    assert mutator_host_failure(model_said, edited=True) is None


def test_ten_identical_verdicts_of_one_person_count_once(repo: Path) -> None:
    """C05: ten identical `gep feedback X not_helpful` counted ten times. A person (the workspace's git
    identity) counts once per event; another person counts too."""
    with Store.for_workspace(repo) as store:
        store.add_event(EvolutionEvent(id="evt_1_abc", signals=["log_error"], genes_used=["gene_repair_from_errors"],
                                       outcome={"status": "success", "score": 0.5}))
    said = [CliRunner().invoke(app, ["feedback", "evt_1_abc", "not_helpful", "--workspace", str(repo)])
            for _ in range(10)]
    assert all(r.exit_code == 0 for r in said), said[0].output
    assert "recorded not_helpful" in said[0].output
    assert "already gave not_helpful on evt_1_abc" in said[1].output and "counts once" in said[9].output
    git(repo, "config", "user.name", "Someone Else")
    assert CliRunner().invoke(app, ["feedback", "evt_1_abc", "helpful", "--workspace", str(repo)]).exit_code == 0
    with Store.for_workspace(repo) as store:
        signals = store.list_feedback()
        lessons = [x for x in store.list_lessons() if x.event_id == "evt_1_abc"]
    assert sorted((s.kind.value, s.author) for s in signals) == [("helpful", "Someone Else"), ("not_helpful", "Test")]
    assert len(lessons) == 2
    assert fold(signals).counts.not_helpful == 1


def _gep_commit(repo: Path, content: str) -> str:
    (repo / "a.py").write_text(content)
    git(repo, "commit", "-qam", "gep(repair): fix a.py\n\nGEP-Event: evt_7\nGEP-Gene: gene_a\n")
    return git(repo, "rev-parse", "HEAD").strip()


def test_a_message_saying_it_reverts_is_no_revert_unless_git_shows_the_change_undone(tmp_path: Path) -> None:
    """C05: commits saying "This reverts commit <sha>" without reverting counted as a person's revert."""
    repo = init_repo(tmp_path / "r", {"a.py": "x = 1\ny = 2\n", "b.py": "z = 3\n"})
    sha = _gep_commit(repo, "x = 10\ny = 2\n")
    (repo / "b.py").write_text("z = 4\n")
    git(repo, "commit", "-qam", f"Revert \"gep(repair): fix a.py\"\n\nThis reverts commit {sha}.\n")
    (repo / "a.py").write_text("x = 11\ny = 2\n")  # touches the same file, undoes nothing
    git(repo, "commit", "-qam", f"tweak\n\nThis reverts commit {sha[:8]}.\n")
    assert find_reverts(repo) == []
    git(repo, "revert", "--no-edit", "HEAD")  # back to x = 10: the GEP commit's state, no revert of it
    git(repo, "revert", "--no-edit", "HEAD~2")  # undo "b.py" change: says it reverts, but not the GEP commit
    assert find_reverts(repo) == []
    git(repo, "revert", "--no-edit", sha)  # a real `git revert` of the GEP commit (its diff reversed)
    found = find_reverts(repo)
    assert [(f.event_id, f.reverted_sha, f.how) for f in found] == [("evt_7", sha, "message")]
