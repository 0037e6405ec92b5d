"""What a person sees in an 80-column terminal: `--help` without `<bool>` on flags and with summaries
re-wrapped (never broken mid-line), `gep show` indented on a terminal and one line when piped (issue 31, 8)."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from gep.core.models import EvolutionEvent
from gep.store import Store

GEP = str(Path(sys.executable).with_name("gep"))
ENV = {**os.environ, "COLUMNS": "80"}


def help_of(*args: str) -> str:
    proc = subprocess.run([GEP, *args, "--help"], capture_output=True, text=True, timeout=60, env=ENV)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.timeout(120)
def test_help_has_no_bool_metavar_and_rewraps_its_text():
    for args in ([], ["cycle"], ["history"], ["genes", "list"], ["serve"]):
        text = help_of(*args)
        assert "<bool>" not in text, (args, text)
        assert max(len(line) for line in text.splitlines()) <= 80, (args, text)
    cycle = " ".join(help_of("cycle").split())
    assert "has the change made: by Claude or an agent in the cycle's own clone" in cycle
    assert "by Claude or\n" not in help_of("cycle")  # the docstring's own line breaks are not kept


@pytest.mark.timeout(120)
def test_show_is_indented_on_a_terminal_and_one_line_when_piped(repo: Path):
    with Store.for_workspace(repo) as store:
        store.add_event(EvolutionEvent(id="evt_1764300000123_a1b2c3", outcome={"status": "empty", "score": 0}))
    piped = subprocess.run([GEP, "show", "a1b2"], cwd=repo, capture_output=True, text=True, timeout=60, env=ENV)
    assert piped.returncode == 0 and piped.stdout.count("\n") == 1, piped.stderr
    assert json.loads(piped.stdout)["id"] == "evt_1764300000123_a1b2c3"
    leader, follower = pty.openpty()
    proc = subprocess.Popen([GEP, "show", "a1b2"], cwd=repo, stdout=follower, stderr=subprocess.PIPE, env=ENV)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # the terminal closed: the command is done
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    assert proc.wait(60) == 0
    shown = b"".join(chunks).decode().replace("\r\n", "\n")
    assert shown.startswith("{\n  \"type\"") and json.loads(shown)["id"] == "evt_1764300000123_a1b2c3"
