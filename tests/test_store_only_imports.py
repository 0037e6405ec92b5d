"""What the store-only commands import on the way (issue 27: they answer in under 0.5 s, bench/cli.py).

Each module named here cost one of them import time it did not need (docs/performance.md); tests/test_cli.py
checks the heavier ones (Prefect, SQLAlchemy, GitPython, httpx, the anthropic SDK) for every such command.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gep.core.models import EvolutionEvent
from gep.store import Store

LOADED = """
import json, os, sys
from gep.entry import main  # the console script's entry point
sys.argv = ["gep", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(m for m in json.loads(os.environ["NOT_NEEDED"]) if m in sys.modules)), file=sys.stderr)
"""

GIT_MACHINERY = ["gep.git.clone", "gep.git.delivery", "gep.git.crash_repair", "gep.git.inplace"]
SELECTION = ["gep.genes.selector", "gep.genes.eligibility", "gep.learning.feedback", "gep.assets.learned"]
CASES: list[tuple[list[str], list[str]]] = [
    (["history"], ["gep.learning.resolved", "gep.signals.rules", "click", *GIT_MACHINERY]),
    (["show", "evt_0"], ["gep.learning.resolved", "click", *GIT_MACHINERY]),
    (["genes", "list"], [*SELECTION, *GIT_MACHINERY]),
    (["genes", "show", "gene_repair_from_errors"], [*SELECTION, *GIT_MACHINERY]),
    (["lessons", "list"], GIT_MACHINERY),
    (["feedback", "stats"], GIT_MACHINERY),
]


@pytest.mark.timeout(180)
def test_store_only_commands_skip_what_they_do_not_need(repo: Path, tmp_path: Path) -> None:
    with Store.for_workspace(repo) as store:
        store.add_event(EvolutionEvent(id="evt_0", signals=["log_error"], genes_used=["g"],
                                       outcome={"status": "success", "score": 0.85}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    for args, not_needed in CASES:
        proc = subprocess.run([sys.executable, "-c", LOADED, *args], cwd=repo, capture_output=True,
                              text=True, timeout=60, env={**env, "PREFECT_HOME": str(tmp_path / "ph"),
                                                          "NOT_NEEDED": json.dumps(not_needed)})
        assert proc.returncode == 0, (args, proc.stderr)
        assert json.loads(proc.stderr.strip().splitlines()[-1]) == [], args


def test_an_event_builds_the_validators_of_its_own_meta_fields_only() -> None:
    """EventMeta checks each field an event holds against its type (a value of another shape is kept aside):
    one validator per field, built on first use rather than all sixty-odd at import."""
    code = ("from gep.core import models\n"
            "print(models._meta_adapter.cache_info().currsize, len(models.EventMeta.model_fields))\n"
            "event = models.EvolutionEvent(id='e', meta={'commit': 'c0ffee', 'branch': 7})\n"
            "print(models._meta_adapter.cache_info().currsize, event.model_dump(mode='json')['meta']['branch'])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    (at_import, fields), (after_one_event, kept) = (line.split() for line in out.stdout.splitlines())
    assert (at_import, after_one_event) == ("0", "2") and int(fields) > 20
    assert kept == "7"  # a value of another shape is still kept as it was
