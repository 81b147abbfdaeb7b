import os

import pytest
from typer.testing import CliRunner
from web_helpers import SCREENSHOTS

from simhash_sqlite import SimhashIndex


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "index.db"


@pytest.fixture
def index(db_path):
    with SimhashIndex(db_path, create=True) as ix:
        yield ix


@pytest.fixture
def runner():
    return CliRunner()


@pytest.fixture(autouse=True)
def _no_db_env(monkeypatch):
    monkeypatch.delenv("SIMQ_DB", raising=False)


def integrity_ok(path) -> bool:
    """SQLite's own integrity check on a file, through a separate connection."""
    import apsw

    conn = apsw.Connection(os.fspath(path))
    try:
        return conn.execute("PRAGMA integrity_check").get == "ok"
    finally:
        conn.close()


def pytest_terminal_summary(terminalreporter, config):
    for folder in config.stash.get(SCREENSHOTS, []):
        terminalreporter.write_line(f"screenshots of the web pages: {folder}")
