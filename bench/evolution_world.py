"""The benchmark worlds of bench/evolution.py: small Python projects with recurring problems, generated from
compact specs (deterministic per world and seed), and the world's own ground truth.

A world is a package ``app/`` whose functions each carry one problem (a bug a nightly job keeps hitting), a
visible test file the bugs pass (the job's failing inputs are not in the tests), a log the job appends to
between cycles in the world's log format, and sessions where a person corrects the agent. Every rule is here
and in docs/evaluation.md; nothing in it reads the engine's store or verdicts.

A problem's code is in one of five variants, told apart by running it (:func:`truth`), never by markers:
  bug          the job's input raises: an error line every tick
  fix          right on the job's input and on the rare input: no line (the only "really fixed" variant)
  partial      right on the job's input, raises on the rare input: the error comes back on 35% of ticks
               (a fix that does not hold)
  superficial  swallows the error and returns a wrong value: no error line, a generic warning every tick
               (passes the tests); in the ``unseen`` suite a plausible value of the right type and no line at
               all (:data:`UNSEEN_SUPERFICIAL`)
  broken       fails a visible test (validation rolls it back)
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

# A template: the function's parameter, its variants' bodies, the visible test (input, expected), the job's input
# and the rare one (with the right answers), and the error line the job writes on the bug.
TEMPLATES: dict[str, dict[str, Any]] = {
    "zero_division": {
        "arg": "pair",
        "bug": "total, count = pair\n    return total / count",
        "fix": "total, count = pair\n    return total / count if count else 0.0",
        "partial": "total, count = pair\n    return total / count if count or total else 0.0",
        "superficial": "try:\n        total, count = pair\n        return total / count\n    except Exception:\n        return None",
        "broken": "total, count = pair\n    return total // count",
        "visible": ((7, 2), 3.5), "job": ((0, 0), 0.0), "rare": ((5, 0), 0.0),
        "error": "ZeroDivisionError: division by zero in {where}",
    },
    "missing_key": {
        "arg": "cfg",
        "bug": "return cfg[\"{key}\"]",
        "fix": "return cfg.get(\"{key}\", 30)",
        "partial": "return cfg[\"{key}\"] if \"{key}\" in cfg or cfg else 30",
        "superficial": "try:\n        return cfg[\"{key}\"]\n    except Exception:\n        return None",
        "broken": "return 30",
        "visible": ({"{key}": 5}, 5), "job": ({}, 30), "rare": ({"other": 1}, 30),
        "error": "KeyError: '{key}' in {where}",
    },
    "none_attr": {
        "arg": "name",
        "bug": "return name.strip().lower()",
        "fix": "return str(name if name is not None else \"\").strip().lower()",
        "partial": "return \"\" if name is None else name.strip().lower()",
        "superficial": "try:\n        return name.strip().lower()\n    except Exception:\n        return None",
        "broken": "return name.strip()",
        "visible": ("  AbC ", "abc"), "job": (None, ""), "rare": (42, "42"),
        "error": "AttributeError: 'NoneType' object has no attribute 'strip' in {where}",
    },
    "index": {
        "arg": "items",
        "bug": "return items[0]",
        "fix": "return items[0] if len(items) else \"\"",
        "partial": "return items[0] if items != [] else \"\"",
        "superficial": "try:\n        return items[0]\n    except Exception:\n        return None",
        "broken": "return items[-1]",
        "visible": (["a", "b"], "a"), "job": ([], ""), "rare": ((), ""),
        "error": "IndexError: list index out of range in {where}",
    },
    "int_parse": {
        "arg": "text",
        "bug": "return int(text)",
        "fix": "return int(float(text.strip() or 0))",
        "partial": "return int(float(text))",
        "superficial": "try:\n        return int(text)\n    except Exception:\n        return None",
        "broken": "return int(text) + 1",
        "visible": ("7", 7), "job": ("12.0", 12), "rare": (" ", 0),
        "error": "ValueError: invalid literal for int() with base 10: '12.0' in {where}",
    },
    "timeout": {
        "arg": "elapsed",
        "bug": "if elapsed > 5:\n        raise TimeoutError(\"timed out after 5s\")\n    return \"ok\"",
        "fix": "if elapsed > 60:\n        raise TimeoutError(\"timed out after 60s\")\n    return \"ok\"",
        "partial": "if elapsed > 10:\n        raise TimeoutError(\"timed out after 10s\")\n    return \"ok\"",
        "superficial": "return \"ok\" if elapsed <= 5 else None",
        "broken": "return \"OK\"",
        "visible": (1, "ok"), "job": (8, "ok"), "rare": (30, "ok"),
        "error": "TimeoutError: {where} timed out after 5s",
    },
}
# the unseen suite (docs/evaluation.md, "The suites"): the superficial variant swallows the failure and returns a
# plausible value of the right type, so the job logs nothing for it; still wrong on the job's and the rare input
UNSEEN_SUPERFICIAL: dict[str, str] = {
    "zero_division": "try:\n        total, count = pair\n        return total / count\n    except Exception:\n"
                     "        return 1.0",
    "missing_key": "try:\n        return cfg[\"{key}\"]\n    except Exception:\n        return 0",
    "none_attr": "try:\n        return name.strip().lower()\n    except Exception:\n        return \"unknown\"",
    "index": "try:\n        return items[0]\n    except Exception:\n        return \"unknown\"",
    "int_parse": "try:\n        return int(text)\n    except Exception:\n        return -1",
    "timeout": "return \"ok\" if elapsed <= 5 else \"skipped\"",
}
VARIANTS = ("bug", "fix", "partial", "superficial", "broken")
FORMATS = ("iso", "pylog", "syslog", "jsonl")
MODULES = ("billing", "ingest", "report", "users", "export", "sync", "search", "notify")
VERBS = ("load", "parse", "total", "resolve", "fetch", "format", "average", "lookup", "first", "read")
NOUNS = ("invoice", "record", "batch", "profile", "rate", "entry", "order", "item", "limit", "score")
PARTIAL_RETURN = 0.35  # a partial fix: share of ticks on which the rare input comes and the error is back
GENERIC = (("WARNING", "request took {s:.1f}s, slow response from upstream"),
           ("WARNING", "retrying after connection reset"), ("INFO", "job finished in {s:.1f}s"))


@dataclass
class Problem:
    name: str  # the function, unique in the world
    module: str
    kind: str
    arrives: int  # the cycle from which the job hits it (0: from the start)
    key: str = "timeout_s"
    quiet: bool = False  # the unseen suite: a superficial change returns a plausible value and logs nothing

    @property
    def where(self) -> str:
        return f"app.{self.module}.{self.name}"

    def body(self, variant: str) -> str:
        quiet = self.quiet and variant == "superficial"
        return (UNSEEN_SUPERFICIAL[self.kind] if quiet else TEMPLATES[self.kind][variant]).replace("{key}", self.key)

    def source(self, variant: str) -> str:
        arg = TEMPLATES[self.kind]["arg"]
        return f"# --- {self.name}\ndef {self.name}({arg}):\n    {self.body(variant)}\n# --- end {self.name}\n"

    def error_line(self) -> str:
        return TEMPLATES[self.kind]["error"].replace("{where}", self.where).replace("{key}", self.key)

    def case(self, which: str) -> tuple[Any, Any]:
        inp, out = TEMPLATES[self.kind][which]
        if isinstance(inp, dict):
            inp = {k.replace("{key}", self.key): v for k, v in inp.items()}
        return inp, out


@dataclass
class WorldGene:
    """A gene the world adds to the workspace (``.gep/genes/<id>.json``): a strategy the scripted agent plays
    by its ``family`` (bench/evolution_agent.py, rule 2)."""

    id: str
    family: str  # "guard", "convert" or "silence"
    summary: str
    strategy: list[str]

    def to_gene(self) -> dict[str, Any]:  # JSON edge: a gene file as gep/assets/gene_folders.py reads it
        return {"type": "Gene", "id": self.id, "category": "repair", "signals_match": list(REPAIR_MATCH),
                "preconditions": ["signals contain error indicators (log_error, errsig:, recurring_error)"],
                "strategy": self.strategy, "constraints": {"max_files": 6, "forbidden_paths": [".git", ".gep"]},
                "validation": ["python tests/run_tests.py"], "summary": self.summary, "schema_version": "1.6.0"}


# the seed repair gene's own match list: a world gene ties with it on every error signal, so only what selection
# learned (or drift) tells them apart
REPAIR_MATCH = ("error|exception|traceback|failed|错误|异常|エラー", "log_error", "errsig", "recurring_error",
                "test_failure")
FAMILY = {"missing_key": "guard", "none_attr": "guard", "index": "guard",
          "int_parse": "convert", "timeout": "convert", "zero_division": "convert"}
GUARD = WorldGene("gene_guard_inputs", "guard", "Guard the function against the input it fails on.",
                  ["Find the input that raises in the error line", "Check for it at the top of the function and "
                   "return the documented default", "Run the tests"])
CONVERT = WorldGene("gene_coerce_values", "convert", "Convert values and relax limits the job exceeds.",
                    ["Find the value the error line says is out of shape", "Convert or widen it where it is read",
                     "Run the tests"])
SILENCE = WorldGene("gene_quiet_failures", "silence", "Keep the job running when a step fails.",
                    ["Find the step that stops the job", "Make it tolerate the failure so the job goes on",
                     "Run the tests"])
SUITES = ("classic", "kinds", "lesson", "capsule", "feedback", "families", "unseen")
# the scripted agent's odds (bench/evolution_agent.py, rule 2) by what the gene is to the problem
ODDS: dict[str, dict[str, float]] = {
    "repair": {"fix": .30, "partial": .25, "superficial": .20, "broken": .10, "nothing": .15},
    "other": {"fix": .12, "partial": .20, "superficial": .28, "broken": .20, "nothing": .20},
    "match": {"fix": .45, "partial": .20, "superficial": .10, "broken": .10, "nothing": .15},
    "mismatch": {"fix": .05, "partial": .15, "superficial": .30, "broken": .30, "nothing": .20},
    "silence": {"fix": .05, "partial": .05, "superficial": .70, "broken": .05, "nothing": .15},
}
# the lesson suite: a first try on a function seldom fixes it, what the prompt says about an earlier try does
LESSON_ODDS = {"repair": {"fix": .15, "partial": .45, "superficial": .10, "broken": .15, "nothing": .15}}
INFORMED_MOVE = {"lesson": .35}  # else .25 (rule 3)


@dataclass
class World:
    name: str
    seed: int
    fmt: str
    problems: list[Problem] = field(default_factory=list)
    suite: str = "classic"
    genes: list[WorldGene] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:  # JSON edge: what the scripted agent reads
        odds = {**ODDS, **(LESSON_ODDS if self.suite == "lesson" else {})}
        return {"name": self.name, "seed": self.seed, "suite": self.suite, "odds": odds,
                "informed_move": INFORMED_MOVE.get(self.suite, .25),
                "genes": {g.id: g.family for g in self.genes},
                "problems": [{"name": p.name, "module": p.module, "kind": p.kind, "key": p.key, "where": p.where,
                              "family": FAMILY[p.kind], "sources": {v: p.source(v) for v in VARIANTS}}
                             for p in self.problems]}


def _kinds(suite: str, rng: random.Random) -> list[str]:
    """The problem kinds of a world of ``suite``, in arrival order (the last two arrive later)."""
    if suite == "kinds":  # both families, two of each at least, mixed
        guard = rng.sample([k for k in sorted(TEMPLATES) if FAMILY[k] == "guard"], 2)
        convert = rng.sample([k for k in sorted(TEMPLATES) if FAMILY[k] == "convert"], 2)
        kinds = [guard[0], convert[0], guard[1], convert[1]]
        return kinds + rng.sample([k for k in sorted(TEMPLATES) if k not in kinds], rng.randint(0, 1))
    if suite == "families":
        return _family_kinds(rng)
    if suite == "capsule":  # twins: each kind twice, the second of each pair among the late ones
        a, b = rng.sample(sorted(TEMPLATES), 2)
        return [a, b, a, b]
    return rng.sample(sorted(TEMPLATES), rng.randint(4, 6))


def _family_kinds(rng: random.Random) -> list[str]:
    """The families suite: one guard kind and one convert kind, each in three functions, as three pairs (one of
    each kind a pair, in random order within it)."""
    guard = rng.choice([k for k in sorted(TEMPLATES) if FAMILY[k] == "guard"])
    convert = rng.choice([k for k in sorted(TEMPLATES) if FAMILY[k] == "convert"])
    return [k for _ in range(3) for k in rng.sample([guard, convert], 2)]


def family_arrivals(cycles: int, rng: random.Random) -> list[int]:
    """The families suite's arrival cycles, a pair at a time: the first pair at 0, the second at a cycle drawn
    from [cycles//6, cycles//3], the third from [cycles//2 - 1, 2*cycles//3 - 1] (12 cycles: 0; 2-4; 5-7)."""
    second = rng.randint(cycles // 6, cycles // 3)
    third = rng.randint(max(0, cycles // 2 - 1), max(0, 2 * cycles // 3 - 1))
    return [0, 0, second, second, third, third]


def make_world(index: int, seed: int, cycles: int, suite: str = "classic") -> World:
    """World ``index`` of ``suite`` under ``seed``: 4-6 problems, two of them arriving later (docs/evaluation.md)."""
    same = "feedback" if suite == "unseen" else suite  # the unseen suite: the feedback suite's worlds, quiet
    rng = random.Random(f"world:{index}:{seed}" if suite == "classic" else f"world:{same}:{index}:{seed}")
    fmt = FORMATS[index % len(FORMATS)]
    kinds = _kinds(suite, rng)
    arrivals = family_arrivals(cycles, rng) if suite == "families" else None
    names: set[str] = set()
    problems = []
    for i, kind in enumerate(kinds):
        name = ""
        while not name or name in names:
            name = f"{rng.choice(VERBS)}_{rng.choice(NOUNS)}"
        names.add(name)
        late = i >= len(kinds) - 2
        arrives = arrivals[i] if arrivals else rng.randint(cycles // 4, cycles // 2) if late else 0
        problems.append(Problem(name=name, module=rng.choice(MODULES[:4 + index % 4]), kind=kind, arrives=arrives,
                                key=rng.choice(("timeout_s", "region", "currency", "retries")),
                                quiet=suite == "unseen"))
    genes = {"kinds": [GUARD, CONVERT], "families": [GUARD, CONVERT], "feedback": [SILENCE],
             "unseen": [SILENCE]}.get(suite, [])
    prefix = "w" if suite == "classic" else suite
    return World(name=f"{prefix}{index}-{fmt}", seed=seed, fmt=fmt, problems=problems, suite=suite, genes=genes)


# ------------------------------------------------------------------ the workspace


GEP_TOML = """[gep]
validation = ["python tests/run_tests.py"]
transcript_max_age_hours = 0
log_globs = ["logs/*.log"]
"""


# the tests run without pytest: its start-up would be most of a cycle's time
RUNNER = """import sys
sys.path.insert(0, ".")
sys.path.insert(0, "tests")
import test_app
failed = 0
for name in sorted(dir(test_app)):
    if name.startswith("test_"):
        try:
            getattr(test_app, name)()
        except Exception as exc:
            failed += 1
            print(f"FAILED {name}: {exc!r}")
print(f"{failed} failed")
sys.exit(1 if failed else 0)
"""


def build(world: World, ws: Path) -> None:
    """The world's repository at cycle 0: every problem in its bug variant, committed."""
    if ws.exists():
        shutil.rmtree(ws)
    (ws / "app").mkdir(parents=True)
    (ws / "tests").mkdir()
    (ws / "logs").mkdir()
    (ws / "sessions").mkdir()
    (ws / "app" / "__init__.py").write_text("")
    by_module: dict[str, list[Problem]] = {}
    for p in world.problems:
        by_module.setdefault(p.module, []).append(p)
    tests = [f"import app.{m}\n" for m in sorted(by_module)]
    for m, ps in sorted(by_module.items()):
        (ws / "app" / f"{m}.py").write_text(f'"""The {m} jobs."""\n\n\n' + "\n\n".join(p.source("bug") for p in ps))
        for p in ps:
            inp, out = p.case("visible")
            tests.append(f"\n\ndef test_{p.name}():\n    assert app.{m}.{p.name}({inp!r}) == {out!r}\n")
    (ws / "tests" / "test_app.py").write_text("".join(tests))
    (ws / "tests" / "run_tests.py").write_text(RUNNER)
    (ws / "gep.toml").write_text(GEP_TOML)
    (ws / "AGENTS.md").write_text(f"# {world.name}\nA small service; its nightly job logs to logs/job.log.\n")
    (ws / ".gitignore").write_text("logs/\nsessions/\n__pycache__/\n.gep/\n")
    write_genes(world, ws)
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["-c", "user.name=bench", "-c", "user.email=b@x",
                                                                "commit", "-qm", "the world at cycle 0"]):
        subprocess.run(["git", *args], cwd=ws, check=True, capture_output=True)


def write_genes(world: World, ws: Path) -> None:
    """The world's genes, where a workspace keeps its own (again after the fresh arm wipes ``.gep``)."""
    if world.genes:
        (ws / ".gep" / "genes").mkdir(parents=True, exist_ok=True)
    for g in world.genes:
        (ws / ".gep" / "genes" / f"{g.id}.json").write_text(json.dumps(g.to_gene(), indent=1))


def _function_source(text: str, name: str) -> str | None:
    start, end = f"# --- {name}\n", f"# --- end {name}\n"
    i = text.find(start)
    j = text.find(end, i)
    return text[i:j + len(end)] if i >= 0 and j >= 0 else None


def variant(ws: Path, p: Problem) -> str:
    """What the problem's code does now, found by running it on the job's, the rare and the visible input."""
    path = ws / "app" / f"{p.module}.py"
    src = _function_source(path.read_text(), p.name) if path.exists() else None
    if src is None:
        return "broken"
    ns: dict[str, Any] = {}
    try:
        exec(compile(src, str(path), "exec"), ns)  # the world's own generated code, or the agent's
        fn = ns[p.name]
        results = {}
        for which in ("visible", "job", "rare"):
            inp, out = p.case(which)
            try:
                results[which] = "ok" if fn(inp) == out else "wrong"
            except Exception:  # noqa: BLE001 - whatever the job's input raises is the bug showing
                results[which] = "raise"
    except Exception:  # noqa: BLE001 - code that does not even define the function
        return "broken"
    if results["visible"] != "ok":
        return "broken"
    if results["job"] == "raise":
        return "bug"
    if results["job"] == "wrong" or results["rare"] == "wrong":
        return "superficial"
    return "fix" if results["rare"] == "ok" else "partial"


def truth(world: World, ws: Path, cycle: int) -> dict[str, str]:
    """Each arrived problem's variant in the workspace now (the ground truth)."""
    return {p.name: variant(ws, p) for p in world.problems if p.arrives <= cycle}


# ------------------------------------------------------------------ between cycles: the job runs, people talk


def _line(fmt: str, at: datetime, level: str, logger: str, msg: str) -> str:
    if fmt == "iso":
        return f"{at.strftime('%Y-%m-%dT%H:%M:%S.%f')[:-3]}Z {level} {logger}: {msg}"
    if fmt == "pylog":
        return f"{at.strftime('%Y-%m-%d %H:%M:%S')},{at.microsecond // 1000:03d} - {logger} - {level} - {msg}"
    if fmt == "syslog":
        return f"{at.strftime('%b %d %H:%M:%S')} host app[{1000 + at.minute}]: {level} {logger}: {msg}"
    return json.dumps({"ts": at.isoformat().replace("+00:00", "Z"), "level": level.lower(), "logger": logger,
                       "msg": msg})


def tick(world: World, ws: Path, cycle: int, at: datetime, rng: random.Random) -> None:
    """The nightly job runs before cycle ``cycle``: a line per problem that shows, generic lines besides, and now and
    then a person who corrects the agent about a swallowed error."""
    lines = []
    t = at
    for p in world.problems:
        if p.arrives > cycle:
            continue
        v = variant(ws, p)
        t += timedelta(seconds=rng.randint(1, 50), microseconds=rng.randint(0, 999_999))
        if v == "bug" or (v == "partial" and rng.random() < PARTIAL_RETURN):
            lines.append(_line(world.fmt, t, "ERROR", f"app.{p.module}", p.error_line()))
        elif v == "superficial":
            if not p.quiet:  # the unseen suite's silenced function logs nothing
                lines.append(_line(world.fmt, t, "WARNING", f"app.{p.module}", f"{p.name} returned no result"))
            if rng.random() < 0.3:
                _correction(ws, p, t)
    for _ in range(rng.randint(1, 2)):
        t += timedelta(seconds=rng.randint(1, 50))
        level, msg = rng.choice(GENERIC)
        lines.append(_line(world.fmt, t, level, "app.job", msg.format(s=rng.uniform(2, 9))))
    with (ws / "logs" / "job.log").open("a") as fh:
        fh.write("".join(line + "\n" for line in lines))


def _correction(ws: Path, p: Problem, at: datetime) -> None:
    """A person in an agent session: the swallowed error is not a fix."""
    msgs = [{"type": "user", "timestamp": at.isoformat(), "message": {"role": "user", "content":
             f"No, that's wrong: {p.name} in app/{p.module}.py now swallows the error and returns "
             f"{'a made-up value' if p.quiet else 'None'}. "
             "Don't hide exceptions, fix the actual input handling."}},
            {"type": "assistant", "timestamp": at.isoformat(), "message": {"role": "assistant", "content":
             [{"type": "text", "text": "You're right, I'll fix the input handling instead."}]}}]
    with (ws / "sessions" / f"s-{p.name}.jsonl").open("a") as fh:
        fh.write("".join(json.dumps(m) + "\n" for m in msgs))


def main() -> int:
    """Print the suite's worlds (their problems, kinds and arrival cycles) for a seed: the world to judge."""
    import argparse

    ap = argparse.ArgumentParser(description="the worlds of bench/evolution.py, as generated for one seed")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cycles", type=int, default=16)
    ap.add_argument("--worlds", type=int, default=8)
    ap.add_argument("--suite", choices=SUITES, default="classic")
    args = ap.parse_args()
    for i in range(args.worlds):
        w = make_world(i, args.seed, args.cycles, args.suite)
        print(f"{w.name} (seed {w.seed}): " + "; ".join(
            f"{p.where} {p.kind}" + (f" from cycle {p.arrives}" if p.arrives else "") for p in w.problems)
            + (f"; genes {', '.join(g.id for g in w.genes)}" if w.genes else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
