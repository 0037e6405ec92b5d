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


def test_the_script_names_its_one_argument(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert capsys.readouterr().err.strip() == "usage: python tests/prepare_run.py TEMPLATE_DIR"
