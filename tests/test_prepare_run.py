"""tests/prepare_run.py: the database `make test` prepares while mypy runs is the one the suite's servers start
from, and the script's usage."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import prefect_db_template
from prepare_run import main


def test_the_servers_start_from_the_database_make_test_prepared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path_factory: pytest.TempPathFactory) -> None:
    monkeypatch.delenv("GEP_TEST_PREFECT_TEMPLATE", raising=False)
    own = prefect_db_template(tmp_path_factory)
    assert own.name == "prefect.db" and own.parent.name == "prefect-template"  # made by the session's first server
    monkeypatch.setenv("GEP_TEST_PREFECT_TEMPLATE", str(tmp_path))
    assert prefect_db_template(tmp_path_factory) == tmp_path / "prefect.db"


def test_the_script_says_how_it_is_called(capsys: pytest.CaptureFixture[str]) -> None:
    for wrong in ([], ["database"], ["collect", "x"]):
        assert main(wrong) == 2
        assert capsys.readouterr().err.strip() == "usage: python tests/prepare_run.py database TEMPLATE_DIR | collect"


def test_a_template_a_server_made_first_is_kept_and_the_lock_is_free_after(tmp_path: Path) -> None:
    import fcntl

    from prepare_run import migrated_database

    (tmp_path / "prefect.db").write_bytes(b"made by the first server")
    assert migrated_database(tmp_path)
    assert (tmp_path / "prefect.db").read_bytes() == b"made by the first server"
    with open(tmp_path / "prefect.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises when still held
