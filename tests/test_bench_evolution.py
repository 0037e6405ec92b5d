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
    told = repair + f"\n## Lessons from earlier cycles\n- the fix for {name} did not hold\n"
    assert evolution_agent.choose_target(plain, world, evolution_agent.random.Random(0)) == target
    odds = [evolution_agent.odds(p, target)["fix"] for p in (plain, repair, told)]
    assert odds[0] < odds[1] < odds[2]
    assert evolution_agent.choose_target("## Signals\nstable_success_plateau\n", world, evolution_agent.random.Random(0)) is None


def test_exact_mcnemar_and_power() -> None:
    assert evolution.binom_two_sided(0, 10) == pytest.approx(2 / 1024)
    assert evolution.binom_two_sided(5, 10) == 1.0
    a = [True] * 12 + [False] * 8
    b = [False] * 12 + [False] * 8
    assert evolution.mcnemar(a, b) == (12, 0, pytest.approx(2 / 4096))
    assert evolution.tasks_needed(0.4, 1.3, 0.3) > evolution.tasks_needed(0.4, 1.6, 0.3) > 0


def test_quick_run_through_the_real_engine(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    assert evolution.main(["--quick", "--jobs", "1", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "paired against full" in text and "target: full / off" in text and "paired tasks detect" in text
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


def test_report_prints_the_paired_table() -> None:
    t = [evolution.TaskResult("w", 1, f"p{i}", 0, fixed=i < 6, first_fixed=None, regressions=0, did_not_hold=0)
         for i in range(8)]
    u = [evolution.TaskResult("w", 1, f"p{i}", 0, fixed=i < 2, first_fixed=None, regressions=0, did_not_hold=0)
         for i in range(8)]
    runs = {"full": [evolution.RunResult("full", "w", 1, 8, tasks=t, open_per_cycle=[3])],
            "off": [evolution.RunResult("off", "w", 1, 8, tasks=u, open_per_cycle=[5])]}
    buf = io.StringIO()
    summary = evolution.report(runs, out=buf)
    assert summary["comparisons"][0]["only_base"] == 4 and summary["verdict"] == "FAIL"  # p = 0.125
    assert "3.00" in buf.getvalue()


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
    from gep.core.learning_switch import MECHANISMS, learning_switch

    # every mechanism a cycle uses has its ablation arm ("context" reaches agent sessions only)
    assert {f"no_{m}" for m in MECHANISMS if m != "context"} <= set(evolution.ARMS)
    for arm, env in evolution.ARMS.items():
        off = env.get("GEP_LEARNING_OFF", "")
        assert all(m in MECHANISMS for m in off.split(",") if m), arm
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
