"""A workspace with two fixes in its history, and a scripted agent, for the `gep eval` tests."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

from conftest import git, init_repo

CALC_V1 = "def mean(xs):\n    return sum(xs) / len(xs)\n"
TEST_V1 = ("import unittest\nfrom calc import mean\n\n\nclass T(unittest.TestCase):\n"
           "    def test_mean(self):\n        self.assertEqual(mean([1, 3]), 2)\n")
CALC_V2 = "def mean(xs):\n    return sum(xs) / len(xs) if xs else 0.0\n"
TEST_V2 = TEST_V1 + "\n    def test_mean_empty(self):\n        self.assertEqual(mean([]), 0.0)\n"
PARSE_BUG = "\n\ndef parse(s):\n    return int(s)\n"
PARSE_FIX = "\n\ndef parse(s):\n    return int(float(s))\n"
TEST_PARSE = ("\nfrom calc import parse  # noqa: E402\n\n\nclass P(unittest.TestCase):\n"
              "    def test_parse(self):\n        self.assertEqual(parse('12'), 12)\n")
TEST_PARSE_FIX = TEST_PARSE + "\n    def test_parse_float(self):\n        self.assertEqual(parse('12.0'), 12)\n"

# The scripted agent: reads the prompt on stdin; fixes what the prompt's log names (a ZeroDivisionError in
# mean, an int() parse of "12.0": not in the off arm, to tell the arms apart), prints GEP_SUMMARY; when
# GEP_TEST_AGENT_LOG is set, one line per run there.
AGENT = '''
import os, sys
prompt = sys.stdin.read()
text = open("calc.py").read()
did = "nothing"
if "ZeroDivisionError" in prompt and "if xs else" not in text:
    text, did = text.replace("return sum(xs) / len(xs)\\n", "return sum(xs) / len(xs) if xs else 0.0\\n"), "mean"
elif "invalid literal" in prompt and "int(float(s))" not in text and os.environ.get("GEP_LEARNING") != "off":
    text, did = text.replace("return int(s)", "return int(float(s))"), "parse"
open("calc.py", "w").write(text)
if os.environ.get("GEP_TEST_AGENT_LOG"):
    with open(os.environ["GEP_TEST_AGENT_LOG"], "a") as fh:
        fh.write(did + "\\n")
print("GEP_SUMMARY: fix " + did)
'''


def history_with_two_fixes(path: Path) -> Path:
    """A repository whose history holds two fixes (each a commit whose tests fail on its parent)."""
    ws = init_repo(path, {"calc.py": CALC_V1, "tests/__init__.py": "", "tests/test_calc.py": TEST_V1,
                          "gep.toml": 'validation = ["python -m unittest discover -s tests -t . -q"]\n',
                          ".gitignore": "logs/\n__pycache__/\n"})
    for files, message in (({"calc.py": CALC_V2, "tests/test_calc.py": TEST_V2}, "mean of nothing is 0"),
                           ({"calc.py": CALC_V2 + PARSE_BUG}, "add parse"),
                           ({"tests/test_calc.py": TEST_V2 + TEST_PARSE}, "test parse"),
                           ({"calc.py": CALC_V2 + PARSE_FIX, "tests/test_calc.py": TEST_V2 + TEST_PARSE_FIX},
                            "parse takes 12.0"),
                           ({"README.md": "calc\n"}, "readme")):
        for rel, content in files.items():
            (ws / rel).write_text(content)
        git(ws, "add", "-A")
        git(ws, "commit", "-q", "-m", message)
    return ws


def write_agent(folder: Path) -> str:
    """The scripted agent as a file; the command line that runs it."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "agent.py"
    script.write_text(AGENT)
    return f"{sys.executable} {script}"


def snapshot(ws: Path) -> dict[str, str]:
    """Everything of the workspace a run could change: refs, HEAD, status, index, stash, and every file's hash
    (the .git folder's and .gep's included)."""
    state = {"refs": git(ws, "for-each-ref", "--format=%(refname) %(objectname)"),
             "head": git(ws, "rev-parse", "HEAD") + git(ws, "symbolic-ref", "-q", "HEAD"),
             "status": git(ws, "status", "--porcelain", "--ignored", "-uall")}
    for root, dirs, files in os.walk(ws):
        dirs.sort()
        for name in sorted(files):
            p = Path(root) / name
            state[str(p.relative_to(ws))] = hashlib.sha256(p.read_bytes()).hexdigest() if not p.is_symlink() else ""
    return state
