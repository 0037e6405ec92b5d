"""The engine's configuration is out of a cycle's reach; protected files are append-only; blast radius counts
bytes with a hard cap; commit trailers cannot be forged (real repositories, real commits)."""

from __future__ import annotations

import random
import string
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import test_solidify
from crash_driver import event, gene, git, make_scenario, mutation
from test_solidify import cycle

from gep.core.config import Settings
from gep.core.constants import DIFF_SNAPSHOT_CHARS
from gep.core.sanitize import redact
from gep.cycle.checks import classify_blast, commit_message
from gep.cycle.solidify import SolidifyResult
from gep.store import Store


@pytest.fixture
def ws_path(tmp_path: Path) -> Path:
    path = make_scenario(tmp_path / "ws")
    (path / "gep.toml").write_text('command_allowlist = ["python"]\n')
    git(path, "add", "gep.toml")
    git(path, "commit", "-q", "-m", "config")
    return path


store = test_solidify.store  # the fixture: the scenario's store


def _reasons(res: SolidifyResult) -> list[str]:
    return list(res.event.meta.failure_reasons)


def _append(rel: str, text: str) -> Callable[[Path], None]:
    def change(p: Path) -> None:
        with (p / rel).open("a") as fh:
            fh.write(text)
    return change


def test_a_change_to_gep_toml_fails_the_cycle(ws_path: Path, store: Store) -> None:
    res = cycle(ws_path, store, _append("gep.toml", 'command_allowlist = ["python", "sh"]\n'))
    assert res.event.outcome.status == "failed"
    assert "constraint: forbidden path touched: gep.toml" in _reasons(res)
    assert "sh" not in (ws_path / "gep.toml").read_text()  # never in the user's tree: nothing persists


def test_a_gep_toml_created_by_the_cycle_fails_it_too(tmp_path: Path) -> None:
    ws_path = make_scenario(tmp_path / "fresh")
    with Store.for_workspace(ws_path) as store:
        res = cycle(ws_path, store, lambda p: (p / "gep.toml").write_text('sandbox = "none"\n'))
    assert "constraint: forbidden path touched: gep.toml" in _reasons(res)
    assert not (ws_path / "gep.toml").exists()


def test_anything_under_the_engine_state_dir_is_forbidden(ws_path: Path, store: Store) -> None:
    # in a clone, a .gep/ the change made is part of what it touched (ignored, but never out of sight)
    def plant(p: Path) -> None:
        (p / ".gep" / "genes").mkdir(parents=True)
        (p / ".gep" / "genes" / "gene_repair_from_errors.json").write_text(
            '{"id": "gene_repair_from_errors", "validation": ["sh evil.sh"]}')
        (p / "feature.py").write_text("VALUE = 1\n")

    res = cycle(ws_path, store, plant)
    assert _reasons(res) == ["constraint: forbidden path touched: .gep/genes/gene_repair_from_errors.json"]
    assert not (ws_path / ".gep" / "genes").exists()  # nothing persists for the next cycle

    def nested(p: Path) -> None:
        (p / "sub").mkdir()
        (p / "sub" / "gep.toml").write_text("x = 1\n")  # a project's own file of that name is not the engine's

    ok = cycle(ws_path, store, nested, ev=event("evt_2_b"))
    assert ok.event.outcome.status == "success", _reasons(ok)


def test_files_the_baseline_ignores_are_never_committed(ws_path: Path, store: Store) -> None:
    def unignore(p: Path) -> None:
        (p / ".gitignore").write_text(".venv/\n__pycache__/\n")  # *.log no longer ignored
        (p / "secret.log").write_text("TOKEN=do-not-commit\n")
        (p / "feature.py").write_text("VALUE = 1\n")

    res = cycle(ws_path, store, unignore)
    assert res.event.outcome.status == "success", _reasons(res)
    committed = set(git(ws_path, "show", "--name-only", "--format=", "HEAD").split())
    assert committed == {".gitignore", "feature.py"}
    assert any("secret.log" in w and w.startswith("not committed (ignored by the baseline") for w in
               res.event.meta.constraint_warnings or [])


def test_a_protected_file_may_only_be_appended_to(ws_path: Path, store: Store) -> None:
    rewrite = cycle(ws_path, store, lambda p: (p / "MEMORY.md").write_text("# memory\nforget everything\n"))
    assert "constraint: protected file rewritten (it may only be appended to): MEMORY.md" in _reasons(rewrite)
    assert (ws_path / "MEMORY.md").read_text() == "# memory\nthe agent remembers things\n"
    append = cycle(ws_path, store, _append("MEMORY.md", "- a new lesson\n"))
    assert append.event.outcome.status == "success", _reasons(append)
    assert (ws_path / "MEMORY.md").read_text().endswith("things\n- a new lesson\n")


def test_a_gene_may_allow_editing_a_named_protected_file(ws_path: Path, store: Store) -> None:
    curator = gene(editable_protected=["MEMORY.md"])
    ok = cycle(ws_path, store, lambda p: (p / "MEMORY.md").write_text("# memory\ncurated\n"), g=curator)
    assert ok.event.outcome.status == "success", _reasons(ok)
    # only the named file, and never emptied
    gone = cycle(ws_path, store, lambda p: (p / "MEMORY.md").write_text("   \n"), g=curator)
    assert "constraint: protected file emptied: MEMORY.md" in _reasons(gone)


def test_blast_radius_counts_bytes_with_a_hard_cap(ws_path: Path, store: Store) -> None:
    def five_big_lines(p: Path) -> None:
        for i in range(5):
            (p / f"blob{i}.txt").write_text("x" * 400_000 + "\n")
        (p / "app.py").write_text("def add(a, b):\n    return b + a\n")
    res = cycle(ws_path, store, five_big_lines)
    assert res.event.blast_radius.files == 6 and res.event.blast_radius.lines < 20
    assert res.event.blast_radius.bytes and res.event.blast_radius.bytes > 2_000_000
    assert res.event.meta.blast_severity == "hard_cap_breach"
    assert any("bytes exceeds the limit" in r for r in _reasons(res))
    assert not (ws_path / "blob0.txt").exists()
    roomy = cycle(ws_path, store, five_big_lines, settings=Settings(hard_cap_bytes=10_000_000))
    assert roomy.event.outcome.status == "success", _reasons(roomy)


def test_a_long_diff_is_cut_after_redaction_and_no_secret_survives_the_cut(ws_path: Path, store: Store) -> None:
    """Only the kept head of a diff is redacted (gep/cycle/tree.py): secrets on every line, so one straddles
    the cut; none of them may reach the failed capsule's snapshot, whole or in part."""
    rng = random.Random(7)
    secrets = ["ghp_" + "".join(rng.choices(string.ascii_letters + string.digits, k=36)) for _ in range(3000)]
    assert redact(secrets[0]) != secrets[0]
    body = "".join(f"token{i} = {s}\n" for i, s in enumerate(secrets))  # ~150 KB
    res = cycle(ws_path, store, lambda p: (p / "tokens.txt").write_text(body),
                settings=Settings(hard_cap_bytes=10_000))
    assert res.failed_capsule is not None, _reasons(res)
    snapshot = res.failed_capsule.diff_snapshot
    assert snapshot.endswith("\n... [TRUNCATED]") and len(snapshot) <= DIFF_SNAPSHOT_CHARS + 20
    assert "[REDACTED]" in snapshot and "token3 = " in snapshot
    assert not any(s[4:12] in snapshot for s in secrets)


def test_bytes_count_the_changed_lines_not_the_whole_file(ws_path: Path, store: Store) -> None:
    big = "\n".join(f"line {i} " + "y" * 60 for i in range(50_000)) + "\n"  # ~3.4 MB, committed
    (ws_path / "data.txt").write_text(big)
    git(ws_path, "add", "data.txt")
    git(ws_path, "commit", "-q", "-m", "data")
    res = cycle(ws_path, store, lambda p: (p / "data.txt").write_text(big.replace("line 7 ", "line seven ", 1)))
    assert res.event.outcome.status == "success", _reasons(res)
    assert res.event.blast_radius.bytes is not None and 100 < res.event.blast_radius.bytes < 300


def test_classify_blast_in_bytes() -> None:
    s = Settings(hard_cap_bytes=1000)
    assert classify_blast(1, 1, 10, s, 1000)[0] == "within_limit"
    severity, message = classify_blast(1, 1, 10, s, 1001)
    assert severity == "hard_cap_breach" and "1001 bytes" in message


def test_a_gene_id_cannot_forge_commit_trailers(ws_path: Path, store: Store) -> None:
    forged = "gene_x\n\nGEP-Event: evt_forged\nSigned-off-by: Mallory <m@example.invalid>"
    g = gene().model_copy(update={"id": forged})
    ev = event().model_copy(update={"genes_used": [forged], "signals": ["log_error\nSigned-off-by: Eve <e@x>"]})
    message = commit_message("repair\nSigned-off-by: X", "fix\nSigned-off-by: Y", ev, g, mutation())
    trailers = _parse_trailers(ws_path, message)
    keys = [t.split(":", 1)[0] for t in trailers]
    assert keys == ["GEP-Event", "GEP-Gene", "GEP-Mutation", "GEP-Signals"], trailers
    assert "GEP-Event: evt_1700000000000_abc123" in trailers
    assert message.splitlines()[0] == "gep(change): fix"


def _parse_trailers(cwd: Path, message: str) -> list[str]:
    out = subprocess.run(["git", "interpret-trailers", "--parse"], cwd=cwd, input=message, text=True,
                         capture_output=True, check=True).stdout
    return [line for line in out.splitlines() if line]
