"""One name, one type (issue 46, point 2): ``workspace`` is the person's folder (a Path), ``repo`` the opened
repository, ``clone_dir`` the cycle's clone, ``work_tree`` where a mutator makes the change; the stored and
sent forms stay the strings they were."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from source_trees import nodes

from gep.core.models import CycleRun
from gep.cycle.context import CycleContext
from gep.git import Repo
from gep.git.clone import CloneRecord
from gep.git.inplace import InPlaceRecord
from gep.mutators.base import MutationRequest

ROOT = Path(__file__).resolve().parents[1]
# what a field of each name may be declared as (class bodies: pydantic models, dataclasses, named tuples)
ALLOWED = {
    "workspace": {"Path", "Path | None", "StoredPath", "StoredPath | None"},
    "repo": {"Repo"},
    "clone_dir": {"Path", "StoredPath"},
    "work_tree": {"Path", "Path | None"},  # git's --work-tree too
}


def _fields(path: Path) -> list[tuple[str, str, str]]:
    """(where, field name, annotation) of every annotated class attribute in one file."""
    out = []
    for cls in nodes(path):
        if isinstance(cls, ast.ClassDef):
            for node in cls.body:
                if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                    where = f"{path.relative_to(ROOT)}:{cls.name}"
                    out.append((where, node.target.id, ast.unparse(node.annotation)))
    return out


def test_each_name_holds_one_type_in_every_model_of_gep_and_flows() -> None:
    files = sorted([*(ROOT / "gep").rglob("*.py"), *(ROOT / "flows").rglob("*.py")])
    fields = [f for p in files for f in _fields(p)]
    wrong = [f for f in fields if f[1] in ALLOWED and f[2] not in ALLOWED[f[1]]]
    assert wrong == []
    # bench's ``repo`` is a repository's name (owner/name), not an opened one: only its workspaces are checked
    bench = [f for p in sorted((ROOT / "bench").rglob("*.py")) for f in _fields(p) if f[1] == "workspace"]
    assert [f for f in bench if f[2] not in ALLOWED["workspace"]] == []
    # the opened repository is only ever called repo, and no str or Repo is called workspace
    assert [f for f in fields if f[2] == "Repo" and f[1] != "repo"] == []
    assert len([f for f in fields if f[1] == "workspace"]) >= 10  # the scan sees the models


def test_the_cycle_holds_the_repository_as_repo_and_the_mutator_gets_a_work_tree() -> None:
    assert CycleContext.model_fields["repo"].annotation is Repo and "workspace" not in CycleContext.model_fields
    assert "workspace" not in MutationRequest.model_fields
    assert MutationRequest.model_fields["work_tree"].annotation is Path


def test_stored_records_keep_the_strings_they_always_had(tmp_path: Path) -> None:
    """A Path in the code; the run row, the git layer's files and JSON answers hold the same string."""
    ws = tmp_path / "ws"
    run = CycleRun(event_id="evt_1", workspace=ws, head_sha="abc")
    assert isinstance(run.workspace, Path)
    assert json.loads(run.model_dump_json())["workspace"] == str(ws) == run.model_dump()["workspace"]
    assert CycleRun.model_validate_json(run.model_dump_json()).workspace == ws
    # a clone record written before (key "clone", strings) reads as Paths and is written back the same way
    old = {"event_id": "evt_1", "workspace": str(ws), "clone": str(ws / ".gep/worktrees/evt_1"), "baseline": "b",
           "base": "b", "branch": None, "user_refs": {"head_ref": None, "head": None},
           "clone_state": {"head_ref": None, "head": None}}
    rec = CloneRecord.model_validate(old)
    assert rec.clone_dir == rec.path == ws / ".gep/worktrees/evt_1" and rec.workspace == ws
    again = json.loads(rec.model_dump_json())
    keys = ("event_id", "workspace", "clone")
    assert {k: again[k] for k in keys} == {k: old[k] for k in keys}
    assert "clone_dir" not in again
    baseline = InPlaceRecord(event_id="evt_2", workspace=ws, head="h", head_ref=None, index="i", snapshot="s", raw="r")
    assert json.loads(baseline.model_dump_json())["workspace"] == str(ws)
    assert InPlaceRecord.model_validate_json(baseline.model_dump_json()).workspace == ws
