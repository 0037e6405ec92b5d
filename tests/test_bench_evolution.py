"""bench/evolution.py works: its world's truth, its agent's rules, its statistics, a quick A/B run through the real
engine, and a real agent's run recorded and replayed. (Figures are the bench's business, not this test's.)"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import evolution  # noqa: E402
import evolution_agent  # noqa: E402
from evolution_world import TEMPLATES, VARIANTS, build, make_world, truth, variant  # noqa: E402

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(autouse=True)
def _venv_python(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect"))


def test_the_world_tells_each_variant_by_running_it(tmp_path: Path) -> None:
    world = make_world(0, 1, 20)
    ws = tmp_path / "ws"
    build(world, ws)
    assert set(truth(world, ws, 19).values()) == {"bug"}
    kinds = set()
    for p in world.problems:
        kinds.add(p.kind)
        path = ws / "app" / f"{p.module}.py"
        original = path.read_text()
        for v in VARIANTS:
            path.write_text(original.replace(p.source("bug"), p.source(v)))
            assert variant(ws, p) == v, (p.kind, v)
        path.write_text(original)
    assert kinds <= set(TEMPLATES) and len(kinds) >= 4
    ok = subprocess.run([sys.executable, "tests/run_tests.py"], cwd=ws, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout  # the bugs pass the visible tests


def test_eight_worlds_four_log_formats() -> None:
    worlds = [make_world(i, 1, 20) for i in range(8)]
    assert {w.fmt for w in worlds} == {"iso", "pylog", "syslog", "jsonl"}
    assert all(len(w.problems) >= 4 and any(p.arrives > 0 for p in w.problems) for w in worlds)
    assert make_world(3, 2, 20).to_json() == make_world(3, 2, 20).to_json()  # deterministic per seed


def test_the_agents_odds_follow_what_the_prompt_gives_it() -> None:
    world = make_world(0, 1, 20).to_json()
    target = world["problems"][0]
    name = target["name"]
    plain = f"## Gene gene_optimize_code_quality (optimize)\n\n## Signals\nlog_error, errsig:x in app.m.{name}\n"
    repair = plain.replace("gene_optimize_code_quality (optimize)", "gene_repair_from_errors (repair)")
    told = repair + f"\n## Lessons from earlier cycles\n- gene_x changed {name} and it came back\n"
    assert evolution_agent.choose_target(plain, world, evolution_agent.random.Random(0)) == target
    odds = [evolution_agent.odds(p, target, world)["fix"] for p in (plain, repair, told)]
    assert odds[0] < odds[1] < odds[2]
    assert evolution_agent.choose_target("## Signals\nstable_success_plateau\n", world, evolution_agent.random.Random(0)) is None


PROTOCOL = ("# GEP: Genome Evolution Protocol\n## Rules\n1. repair: fix the root cause of the error in the signals.\n"
            "3. History. Do not repeat an approach that recent failed outcomes or lessons record; avoid it.\n")


def test_words_every_prompt_carries_change_no_odds() -> None:
    """The fixed protocol says "repair", "root cause", "avoid", "failed": an optimize gene's odds stay its own,
    and a function named only in the signals is no lesson."""
    world = make_world(0, 1, 20).to_json()
    target = world["problems"][0]
    plain = f"## Gene gene_optimize_code_quality (optimize)\n\n## Signals\nerrsig:x in {target['where']}\n"
    assert evolution_agent.odds(PROTOCOL + plain, target, world) == evolution_agent.odds(plain, target, world)
    assert evolution_agent.gene_odds(PROTOCOL + plain, target, world)[0] == "other"
    assert not evolution_agent.told_about(PROTOCOL + plain, target)


def test_a_world_gene_plays_its_family() -> None:
    from evolution_world import FAMILY

    world = make_world(0, 1, 20, "kinds").to_json()
    assert set(world["genes"]) == {"gene_guard_inputs", "gene_coerce_values"}
    guard = next(p for p in world["problems"] if FAMILY[p["kind"]] == "guard")
    convert = next(p for p in world["problems"] if FAMILY[p["kind"]] == "convert")
    head = "## Gene {} (repair)\n\n## Signals\nerrsig:x\n"
    g, c = head.format("gene_guard_inputs"), head.format("gene_coerce_values")
    assert evolution_agent.gene_odds(g, guard, world)[0] == evolution_agent.gene_odds(c, convert, world)[0] == "match"
    assert evolution_agent.gene_odds(g, convert, world)[0] == evolution_agent.gene_odds(c, guard, world)[0] == "mismatch"
    assert evolution_agent.odds(g, guard, world)["fix"] > evolution_agent.odds(c, guard, world)["fix"] * 5


def test_a_families_world_has_two_kinds_recurring_in_three_functions_each() -> None:
    """The families suite as written before it was run (docs/evaluation.md, "The suites"): a guard kind and a
    convert kind, three functions each, arriving a pair at a time (12 cycles: 0; 2-4; 5-7)."""
    from evolution_world import FAMILY

    for seed in (1, 2, 3):
        for index in range(4):
            world = make_world(index, seed, 12, "families")
            kinds = [p.kind for p in world.problems]
            assert len(kinds) == 6 and len({p.name for p in world.problems}) == 6
            assert sorted(FAMILY[k] for k in set(kinds)) == ["convert", "guard"]
            assert all(kinds.count(k) == 3 for k in set(kinds))
            pairs = [world.problems[i:i + 2] for i in (0, 2, 4)]
            assert all({FAMILY[p.kind] for p in pair} == {"guard", "convert"} for pair in pairs)
            assert all(len({p.arrives for p in pair}) == 1 for pair in pairs)
            arrive = [pair[0].arrives for pair in pairs]
            assert arrive[0] == 0 and 2 <= arrive[1] <= 4 and 5 <= arrive[2] <= 7
            assert {g.id for g in world.genes} == {"gene_guard_inputs", "gene_coerce_values"}
    assert make_world(1, 2, 12, "families").to_json() == make_world(1, 2, 12, "families").to_json()


def test_an_earlier_tries_diff_and_a_capsule_for_a_twin_are_read(tmp_path: Path) -> None:
    world = make_world(0, 1, 20, "capsule").to_json()
    first, twin = world["problems"][0], world["problems"][2]
    assert first["kind"] == twin["kind"] and first["name"] != twin["name"]

    def diff(p: dict, v: str) -> str:
        return "".join(f"+{line}\n" for line in p["sources"][v].splitlines())

    head = f"## Gene gene_repair_from_errors (repair)\n\n## Signals\nerrsig:x in {twin['where']}\n"
    tried = head + f"\n## What was tried on this problem\n{twin['name']}:\n```diff\n{diff(twin, 'partial')}```\n"
    assert evolution_agent.tried_before(tried, twin) == "partial" and evolution_agent.tried_before(head, twin) is None
    # a lesson's one-line excerpt of the change (``file f(): - old | + new``, pieces cut with "...")
    new = [x.strip() for x in twin["sources"]["superficial"].splitlines()[2:]]
    excerpt = f"- app/m.py {twin['name']}(): - old | " + " | ".join(f"+ {x[:12]}..." for x in new)
    lesson = head + f"\n## Lessons from earlier cycles\n```\n{excerpt}\n```\n"
    assert evolution_agent.tried_before(lesson, twin) == "superficial"
    capsule = head.replace("## Signals", f"## Capsule to reuse cap_1\n```diff\n{diff(first, 'fix')}```\n\n## Signals")
    assert evolution_agent.capsule_approach(capsule, twin) == "fix"
    assert evolution_agent.capsule_approach(head, twin) is None


def test_paired_statistics_by_world_seed() -> None:
    assert evolution.sign_flip_p([1, 1, 1, 1, 1, 1, 1, 1]) == pytest.approx(2 / 256)
    assert evolution.sign_flip_p([1, -1, 2, -2]) == 1.0
    assert evolution.sign_flip_p([0, 0, 0]) == 1.0
    assert evolution.sign_flip_p([1.0] * 20) < 0.001  # the sampled test beyond 16 pairs
    lo, hi = evolution.cluster_ratio_ci([2, 2, 2, 2], [1, 1, 1, 1])
    assert lo == hi == 2.0
    lo, hi = evolution.cluster_ratio_ci([4, 0, 2, 2], [1, 1, 1, 1])
    assert lo < 2.0 < hi
    spread, tight = [3, -1, 2, 0, 1, -2], [1, 1, 1, 1, 1, 1]
    assert evolution.min_detectable(spread) > evolution.min_detectable(tight) == 0.0


def test_quick_run_through_the_real_engine(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    assert evolution.main(["--quick", "--jobs", "1", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "by world-seed" in text and "target: full / off" in text and "power: over 2 world-seeds" in text
    data = json.loads(out.read_text())
    runs = data["runs"]
    assert set(runs) == {"full", "off"} and len(runs["full"]) == len(runs["off"]) == 2
    for arm in ("full", "off"):
        statuses = {k for r in runs[arm] for k in r["statuses"]}
        assert statuses & {"success", "failed", "empty"}, statuses  # cycles ran and ended
        assert sum(sum(r["approaches"].values()) for r in runs[arm]) == 2 * 3  # the agent ran every cycle
    keys = [[(t["world"], t["problem"]) for r in runs[a] for t in r["tasks"]] for a in ("full", "off")]
    assert keys[0] == keys[1]  # the same tasks in both arms


def test_a_real_agents_run_is_recorded_and_replayed(tmp_path: Path) -> None:
    rec = tmp_path / "rec"
    real = tmp_path / "agent.sh"  # the scripted solver, then a usage block as `claude -p --output-format json`
    usage = {"type": "result", "result": "done", "usage": {"input_tokens": 1200, "cache_read_input_tokens": 300,
                                                            "output_tokens": 500, "server_tool_use": {"x": 7}}}
    real.write_text(f"#!/bin/sh\n{sys.executable} {evolution.AGENT} solve >/dev/null\necho '{json.dumps(usage)}'\n")
    real.chmod(0o755)
    recorded = evolution.run_world("full", 1, 1, 2, tmp_path / "a", f"{sys.executable} {evolution.AGENT} record {rec} -- {real}")
    replayed = evolution.run_world("full", 1, 1, 2, tmp_path / "b", f"{sys.executable} {evolution.AGENT} replay {rec}")
    assert list(rec.glob("*.json"))
    assert recorded.approaches == {"recorded": 2} and replayed.approaches.get("replayed", 0) >= 1
    assert [t.fixed for t in recorded.tasks] == [t.fixed for t in replayed.tasks]
    assert recorded.open_per_cycle == replayed.open_per_cycle
    assert recorded.tokens == 2 * 2000 and replayed.tokens == 2000 * replayed.approaches["replayed"]


def test_tokens_per_verified_fix_from_the_agents_usage_block() -> None:
    stream = '{"type": "system"}\n{"type": "result", "usage": {"input_tokens": 10, "output_tokens": 5}}'
    assert evolution_agent.usage_tokens(stream) == 15 and evolution_agent.usage_tokens("I fixed it.") == 0 and evolution_agent.usage_tokens("[1, 2]") == 0
    t = [evolution.TaskResult("w", 1, f"p{i}", 0, fixed=i < 2, first_fixed=None, regressions=0, did_not_hold=0)
         for i in range(4)]
    runs = {"full": [evolution.RunResult("full", "w", 1, 4, tasks=t, open_per_cycle=[2], tokens=9000)],
            "off": [evolution.RunResult("off", "w", 1, 4, tasks=t[2:], open_per_cycle=[2], tokens=4000)]}
    buf = io.StringIO()
    figures = evolution.report(runs, out=buf)["figures"]
    assert figures["full"]["tokens_per_fix"] == 4500 and figures["off"]["tokens_per_fix"] is None
    assert "tokens per verified fix (the agent's own usage report): full 4,500; off 4,000 for no fix" in buf.getvalue()


def test_report_compares_world_seeds_not_tasks() -> None:
    """Eight world-seeds where full fixes 3 of 4 and off 1 of 4: 24 against 8 tasks, p = 2/256 by world-seed
    (the tasks of one run are not independent: a task-level test would claim far more)."""
    def run(arm: str, w: int, fixed: int, attempts: int) -> evolution.RunResult:
        tasks = [evolution.TaskResult(f"w{w}", 1, f"p{i}", 0, fixed=i < fixed, first_fixed=None, regressions=0,
                                      did_not_hold=0) for i in range(4)]
        return evolution.RunResult(arm, f"w{w}", 1, 8, tasks=tasks, open_per_cycle=[2], attempts=attempts)

    runs = {"full": [run("full", w, 3, 6) for w in range(8)], "off": [run("off", w, 1, 8) for w in range(8)]}
    buf = io.StringIO()
    summary = evolution.report(runs, out=buf)
    c = summary["comparisons"][0]
    assert (c["units"], c["fixed_base"], c["fixed_arm"], c["ratio"]) == (8, 24, 8, 3.0)
    assert c["p"] == pytest.approx(2 / 256) and summary["verdict"] == "PASS"
    assert c["apf_ratio"] == pytest.approx((48 / 24) / (64 / 8))
    assert "3.00" in buf.getvalue() and "PASS" in buf.getvalue()
    runs["off"] = runs["off"][:3]  # three world-seeds: p cannot go under 0.25, whatever the gain
    assert evolution.report(runs, out=io.StringIO())["verdict"] == "FAIL"


def test_a_careful_agent_leaves_a_fixed_function_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    world = make_world(2, 1, 20)
    ws = tmp_path / "ws"
    build(world, ws)
    p = world.problems[0]
    path = ws / "app" / f"{p.module}.py"
    path.write_text(path.read_text().replace(p.source("bug"), p.source("fix")))
    (tmp_path / "world.json").write_text(json.dumps(world.to_json()))
    monkeypatch.chdir(ws)
    monkeypatch.setenv("GEP_BENCH_WORLD", str(tmp_path / "world.json"))
    monkeypatch.setenv("GEP_BENCH_STATE", str(tmp_path / "state.jsonl"))
    prompt = f"## Gene gene_repair_from_errors (repair)\n\n## Signals\nerrsig:x in {p.where}\n"
    monkeypatch.setenv("GEP_BENCH_CAREFUL", "1")
    assert evolution_agent.solve(prompt) == {"target": p.name, "approach": "already_fixed"}
    assert variant(ws, p) == "fix"
    monkeypatch.setenv("GEP_BENCH_CAREFUL", "0")
    for _ in range(10):  # the default agent draws again, whatever is there
        with open(tmp_path / "state.jsonl", "a") as fh:
            fh.write(json.dumps({"cycle": "c", **evolution_agent.solve(prompt)}) + "\n")
    assert variant(ws, p) in {"fix", "partial", "superficial", "broken"}
    assert any(json.loads(line)["approach"] != "fix" for line in (tmp_path / "state.jsonl").read_text().splitlines())


def test_the_agents_draws_repeat_whatever_the_cycles_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run of the same worlds and seeds repeats exactly: rule 1's draw (a function named only outside the
    signals: taken one time in two) is keyed by the world's tick, not by the event id and its random digits."""
    world = make_world(0, 1, 20)
    (tmp_path / "world.json").write_text(json.dumps(world.to_json()))
    monkeypatch.setenv("GEP_BENCH_WORLD", str(tmp_path / "world.json"))
    monkeypatch.setenv("GEP_BENCH_STATE", str(tmp_path / "state.jsonl"))
    monkeypatch.setenv("GEP_BENCH_SEED", "1")
    prompt = f"## Signals\nlog_error\n\n## Log excerpt\nERROR in {world.problems[0].where}\n"
    picks = {}
    for tick in range(12):
        monkeypatch.setenv("GEP_BENCH_TICK", str(tick))
        seen = set()
        for n in range(8):
            ws = tmp_path / f"t{tick}-{n}"
            build(world, ws)
            monkeypatch.chdir(ws)
            monkeypatch.setenv("GEP_CYCLE_ID", f"evt_1795752000000_{n:06x}")
            seen.add(evolution_agent.solve(prompt)["target"])
        assert len(seen) == 1, (tick, seen)
        picks[tick] = seen.pop()
    assert set(picks.values()) == {"", world.problems[0].name}, picks  # and both sides of the draw happen


def test_an_arm_per_learning_mechanism() -> None:
    from gep.core.config import Settings
    from gep.core.learning_switch import EXPERIMENTAL, MECHANISMS, learning_switch

    # every mechanism a cycle uses has its ablation arm ("context" reaches agent sessions only); an experimental
    # one, off in full, has the arm that switches it on
    assert {f"no_{m}" for m in MECHANISMS if m != "context" and m not in EXPERIMENTAL} <= set(evolution.ARMS)
    assert {f"with_{m}" for m in EXPERIMENTAL} <= set(evolution.ARMS)
    for arm, env in evolution.ARMS.items():
        named = env.get("GEP_LEARNING_OFF", "") + "," + env.get("GEP_LEARNING_ON", "")
        assert all(m in MECHANISMS for m in named.split(",") if m), arm
    on = Settings(learning_on=evolution.ARMS["with_problem_memory"]["GEP_LEARNING_ON"].split(","))
    assert learning_switch(on).on("problem_memory") and not learning_switch(Settings()).on("problem_memory")
    ref = Settings(learning_off=evolution.ARMS["reference_prompt"]["GEP_LEARNING_OFF"].split(","))
    assert {"lessons", "context", "avoid"} <= learning_switch(ref).off


def test_the_person_labels_an_event_the_fresh_store_forgot_without_crashing(tmp_path: Path) -> None:
    from gep.store import Store

    world = make_world(0, 1, 8)
    ws = tmp_path / "ws"
    build(world, ws)
    with Store.for_workspace(ws):
        pass
    committed = [(0, "evt_0_000000", world.problems[0].name)]
    for draw in range(20):  # some draws label it (LABEL_SHARE): none may raise
        evolution._label(ws, world, committed, evolution.LABEL_DELAY, evolution.START, evolution.random.Random(draw))


def test_a_run_cut_short_is_reported_from_its_progress_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = [f"[{k}/40   {k * 9} s] kinds kinds{w}-iso s{s} {arm}: fixed {f}/5, {a} attempts"
             for k, (w, s, arm, f, a) in enumerate([(w, s, arm, 4 if arm == "full" else 2, 9)
                                                    for s in (1, 2) for w in range(4) for arm in ("full", "off")], 1)]
    results = evolution.from_progress(["2 suites x ...", *lines, "wall time 3 s"])
    assert {a: len(r) for a, r in results.items()} == {"full": 8, "off": 8}
    c = evolution.compare(results, "off")
    assert c is not None and (c["units"], c["fixed_base"], c["fixed_arm"]) == (8, 32, 16)
    assert c["p"] == pytest.approx(2 / 256) and c["apf_ratio"] == pytest.approx((72 / 32) / (72 / 16))
    log = tmp_path / "run.log"
    log.write_text("\n".join(lines))
    assert evolution.main(["--from-progress", str(log)]) == 0
    assert "PASS" in capsys.readouterr().out


def test_the_skeptics_arm_is_the_plain_engine_chasing_new_warning_lines() -> None:
    from gep.core.config import load_settings
    from gep.core.learning_switch import PLAIN_ENGINE, learning_switch

    off, skeptic = (load_settings(env=evolution.ARMS[a]) for a in ("off", "off_warnings"))
    assert learning_switch(skeptic).off == learning_switch(off).off and not set(PLAIN_ENGINE) & learning_switch(off).off
    assert skeptic.warning_signals and not off.warning_signals
    runs = {a: [evolution.RunResult(a, f"w{w}", 1, 4, suite=s, tasks=[]) for w in range(2) for s in ("lesson", "kinds")]
            for a in ("full", "off", "off_warnings")}
    rows = evolution._comparison_rows(runs)
    assert {(r["arm"], r["suite"]) for r in rows if r["arm"] == "off_warnings"} >= {("off_warnings", "all")}


def test_the_unseen_suite_silences_without_a_trace(tmp_path: Path) -> None:
    import random
    from datetime import UTC, datetime

    from evolution_world import SUITES, tick

    assert "unseen" in SUITES and evolution.SUITE_ARMS["unseen"] == ("no_feedback",)
    # the feedback suite's worlds, problem for problem; only the superficial variant's code differs
    for seed in (1, 2):
        fb, un = make_world(1, seed, 12, "feedback"), make_world(1, seed, 12, "unseen")
        assert [(p.name, p.module, p.kind, p.arrives) for p in fb.problems] == [
            (p.name, p.module, p.kind, p.arrives) for p in un.problems]
        assert [g.id for g in un.genes] == [g.id for g in fb.genes] == ["gene_quiet_failures"]
    at = datetime(2026, 11, 26, 3, tzinfo=UTC)
    for suite in ("unseen", "feedback"):
        world = make_world(0, 1, 12, suite)
        ws = tmp_path / suite
        build(world, ws)
        for p in world.problems:  # every problem silenced (the repair gene's superficial change too)
            path = ws / "app" / f"{p.module}.py"
            path.write_text(path.read_text().replace(p.source("bug"), p.source("superficial")))
            assert variant(ws, p) == "superficial"  # ground truth: not fixed
            ns: dict[str, object] = {}
            exec(p.source("superficial"), ns)
            inp, out = p.case("job")
            got = ns[p.name](inp)  # type: ignore[operator]
            if suite == "unseen":  # a plausible value of the right type, not None, and wrong
                assert got is not None and type(got) is type(out) and got != out, (p.kind, got)
            else:
                assert got is None, (p.kind, got)
        tick(world, ws, 11, at, random.Random(0))
        named = [p.name for p in world.problems if p.name in (ws / "logs" / "job.log").read_text()]
        assert named == ([] if suite == "unseen" else [p.name for p in world.problems]), suite
    # the other suites' superficial code is the template's, as before
    assert all(p.source("superficial").count("return None") == 1 for p in make_world(0, 1, 12, "feedback").problems
               if p.kind != "timeout")
