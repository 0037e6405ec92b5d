"""Issue 32, finding 11 (part): inputs that killed or hung a command, or made it print invalid JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_anthropic import FakeAnthropic, message, tool_use
from test_mutator_anthropic import KEY, MODEL, request

from gep.assets.gene_files import import_assets
from gep.core.config import Settings
from gep.core.errors import AssetError
from gep.core.json_safe import dumps_finite
from gep.mutators.anthropic_mutator import AnthropicMutator
from gep.mutators.tools import WorkspaceTools
from gep.store import Store

DEEP = "/".join(["a"] * 2000) + "/f.txt"


def test_a_2000_level_path_is_a_tool_error_not_a_dead_mutator(repo: Path) -> None:
    tools = WorkspaceTools(repo, forbidden_paths=[], validation_commands=[], settings=Settings(), gene_id="g",
                           cycle_id="evt_t")
    for name, args in (("write_file", {"path": DEEP, "content": "x"}), ("read_file", {"path": DEEP}),
                       ("edit_file", {"path": DEEP, "old_text": "x", "new_text": "y"}), ("list_files", {"path": DEEP})):
        out = tools.call(name, args)
        assert out.is_error and "path has 2001 levels; at most 64" in out.content, (name, out.content)
    finish = tool_use("finish", {"summary": "Nothing to change", "rationale": "ok"})
    with FakeAnthropic([message(tool_use("write_file", {"path": DEEP, "content": "x"}),
                                tool_use("list_files", {"path": "."})), message(finish)]) as fake:
        mut = AnthropicMutator(Settings(model=MODEL), {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": fake.url})
        result = mut.apply(request(repo))
    assert result.status == "no_change", result.error  # the session went on to finish
    assert "at most 64" in json.dumps(fake.requests[1].tool_results())


def _event_line(score: object) -> str:
    return ('{"type": "EvolutionEvent", "id": "evt_1700000000000_nan", "intent": "repair", "signals": [], '
            f'"genes_used": [], "outcome": {{"status": "success", "score": {score}}}}}')


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_an_imported_event_with_nan_is_refused_and_json_output_stays_valid(tmp_path: Path, constant: str) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "events.jsonl").write_text(_event_line(constant) + "\n")
    with Store.open(f"sqlite:///{tmp_path / 'gep.db'}") as store:
        with pytest.raises(AssetError, match=f"events.jsonl:1: not valid JSON \\({constant} is not a JSON number"):
            import_assets(store, tmp_path / "a")
        assert store.list_events(limit=5) == []
    text = dumps_finite({"score": float(constant.replace("Infinity", "inf")), "deep": [[1.5, float("nan")]]})
    assert json.loads(text, parse_constant=lambda c: pytest.fail(c)) == {"score": None, "deep": [[1.5, None]]}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("command", [["history"], ["genes", "list"], ["feedback", "stats"], ["show", "evt_1"]])
def test_a_store_holding_a_recursive_view_is_refused_in_one_line(repo: Path, command: list[str]) -> None:
    import sqlite3
    import subprocess
    import sys

    from gep.store.engine import default_db

    with Store.for_workspace(repo):
        pass
    conn = sqlite3.connect(default_db(repo))
    for table in ("events", "genes", "feedback"):
        conn.execute(f"ALTER TABLE {table} RENAME TO {table}_moved")
        conn.execute(f"CREATE VIEW {table} AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
                     f"SELECT m.* FROM {table}_moved m, c")
    conn.commit()
    conn.close()
    gep = Path(sys.executable).with_name("gep")
    done = subprocess.run([str(gep), *command, "-w", str(repo)], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "holds view 'events'" in lines[0] and "which gep never creates" in lines[0], lines


def test_a_server_gep_did_not_start_is_never_adopted_gep_starts_its_own_beside_it(
        live_prefect, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Issue 44: another Prefect on the port (a person's own, another user's: here the session's live server)
    is left alone, and `gep server start` starts gep's own on a free port and says where, instead of exiting 1
    with advice."""
    import shutil
    import subprocess
    import sys

    from conftest import prefect_db_template

    from gep.prefect_api import healthy
    from gep.server import read_record

    home = tmp_path / "home"
    home.mkdir()
    shutil.copyfile(prefect_db_template(tmp_path_factory), home / "prefect.db")  # migrated: a quicker start
    port = live_prefect.port
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PREFECT_HOME": str(home),
           "PREFECT_SERVER_API_PORT": str(port), "DO_NOT_TRACK": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    gep = str(Path(sys.executable).with_name("gep"))
    try:
        done = subprocess.run([gep, "server", "start"], env=env, capture_output=True, text=True, timeout=240)
        assert done.returncode == 0, done.stderr
        rec = read_record(env)
        assert rec is not None and rec.pid and rec.port != port and healthy(rec.api_url)
        assert f"port {port} is taken by a Prefect server gep did not start (left alone)" in done.stderr
        assert f"starting gep's own at http://127.0.0.1:{rec.port}" in done.stderr
        assert f"UI http://127.0.0.1:{rec.port}" in done.stdout
        status = subprocess.run([gep, "server", "status"], env=env, capture_output=True, text=True, timeout=60)
        assert status.returncode == 0 and f"running at http://127.0.0.1:{rec.port}" in status.stdout
    finally:
        subprocess.run([gep, "server", "stop"], env=env, capture_output=True, timeout=60)
    assert read_record(env) is None and healthy(live_prefect.api_url)  # the other server is untouched


def test_the_users_words_reach_neither_a_commit_trailer_nor_the_signals_file() -> None:
    from crash_driver import event, gene, mutation

    from gep.core.sanitize import redact
    from gep.cycle.checks import commit_message
    from gep.signals.behavior import BehaviorSignal

    said = "user_preference:I always want tabs over spaces in the parser module"
    ev = event().model_copy(update={"signals": ["log_error", said, "user_correction:no, use the other flag"]})
    message = commit_message("repair", "Fix the parser", ev, gene(), mutation())
    trailer = next(line for line in message.splitlines() if line.startswith("GEP-Signals:"))
    assert trailer == "GEP-Signals: log_error, user_preference, user_correction", trailer
    for text in ("my passphrase is correct horse battery staple", "the password was tiger lily river. ok",
                 "Passphrase: correct horse battery staple", '{"text": "my password is open sesame now"}'):
        out = redact(text)
        assert not {"correct", "horse", "battery", "staple", "tiger", "lily", "river", "open", "sesame"} \
            & set(out.replace('"', " ").replace(".", " ").split()), out
    stored = BehaviorSignal(ts="2026-11-28T01:00:00+00:00", type="correction", intensity=3,
                            summary="said my passphrase is correct horse battery staple")
    assert "horse" not in stored.model_dump_json()


def test_gep_chooses_a_free_port_when_another_program_listens_on_its_own() -> None:
    import socket

    from gep.server import choose_port, port_taken

    said: list[str] = []
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert port_taken(port)
        chosen = choose_port(port, {}, said.append)
        assert chosen != port and not port_taken(chosen)
    assert said == [f"port {port} is taken by another program (left alone): starting gep's own at "
                    f"http://127.0.0.1:{chosen}"]
    assert choose_port(chosen, {}, said.append) == chosen and len(said) == 1  # a free port is kept, silently
