"""The index is plain SQLite: the stock sqlite3 shell (Debian's, an older SQLite than apsw's) and
Python's sqlite3 module read it without our functions, and the README's pure-SQL block lookup
gives what SimhashIndex.near gives."""

import random
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from simhash_sqlite import SimhashIndex

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
PORTABLE = next(block for block in re.findall(r"```sql\n(.*?)```", README, re.S) if "WITH RECURSIVE" in block)
README_KEY = "'examples/sqlite_intro.txt'"
SQLITE3 = shutil.which("sqlite3")
needs_shell = pytest.mark.skipif(
    SQLITE3 is None, reason="the sqlite3 command-line shell is not installed (Debian: apt-get install sqlite3)"
)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """An index written through apsw (WAL, STRICT tables) and closed; clusters of near-duplicates."""
    rng = random.Random(3)
    centres = [rng.getrandbits(64) for _ in range(40)]
    items = []
    for i in range(400):
        fp = centres[i % 40]
        for _ in range(rng.randint(0, 4)):
            fp ^= 1 << rng.randrange(64)
        items.append((f"doc{i:03}", fp))
    path = tmp_path_factory.mktemp("portable") / "index.db"
    with SimhashIndex(path, create=True) as index:
        index.add_fingerprints(items)
        expected = {
            key: [(key, 0)] + [(m.key, m.distance) for m in index.near(key=key, k=3, check=False)]
            for key, _ in items[:25]
        }
    for rows in expected.values():
        rows.sort(key=lambda row: (row[1], row[0]))
    return path, expected


def shell(path, sql):
    run = subprocess.run([SQLITE3, "-batch", "-bail", str(path)], input=sql, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    return run.stdout


@needs_shell
def test_the_stock_shell_reads_the_closed_index(written):
    path, expected = written
    out = shell(path, "PRAGMA integrity_check; PRAGMA application_id; SELECT count(*) FROM documents;\n.tables\n")
    assert out.split()[:3] == ["ok", str(0x53494D48), "400"]
    assert "documents" in out and "simhash_meta" in out
    version = shell(path, "SELECT sqlite_version();").strip()
    assert version  # the system's SQLite, not apsw's (3.40 on Debian 12)


@needs_shell
def test_the_readme_block_lookup_runs_in_the_stock_shell(written):
    path, expected = written
    script = "".join(PORTABLE.replace(README_KEY, f"'{key}'") for key in expected)
    out = shell(path, ".mode list\n" + script).split()
    rows = [(key, int(d)) for key, d in (line.split("|") for line in out)]
    assert rows == [row for key in expected for row in expected[key]]
    assert any(len(found) > 1 for found in expected.values())  # real neighbours, not just each key itself


@needs_shell
def test_our_functions_are_not_there_and_the_shell_says_so(written):
    path, _ = written
    run = subprocess.run([SQLITE3, str(path), "SELECT hamming(1, 2)"], capture_output=True, text=True)
    assert run.returncode != 0 and "no such function: hamming" in run.stderr


@needs_shell
def test_a_file_analyzed_by_the_stock_shell_still_opens_and_checks(written, tmp_path):
    path, expected = written
    copy = tmp_path / "analyzed.db"
    shutil.copy(path, copy)
    shell(copy, "ANALYZE;")
    with SimhashIndex(copy) as index:
        key = next(iter(expected))
        assert [(key, 0)] + [(m.key, m.distance) for m in index.near(key=key, k=3, check=False)] == expected[key]


def test_pythons_sqlite3_reads_it_and_runs_the_readme_query(written):
    path, expected = written
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        for key, rows in expected.items():
            assert conn.execute(PORTABLE.replace(README_KEY, "?"), (key,)).fetchall() == rows
        with pytest.raises(sqlite3.OperationalError, match="no such function"):
            conn.execute("SELECT simhash('x')")
    finally:
        conn.close()


def test_module_paths_documented_before_the_layers_still_import():
    """docs/python-api.md named these modules before the package was split into layers (CHANGELOG.md)."""
    import importlib
    import warnings

    from simhash_sqlite import simhash
    from simhash_sqlite._moved import MOVED

    for old, new in MOVED.items():
        sys.modules.pop(f"simhash_sqlite.{old}", None)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            module = importlib.import_module(f"simhash_sqlite.{old}")
        assert module is importlib.import_module(f"simhash_sqlite.{new}")
        assert [str(w.message) for w in caught] == [f"simhash_sqlite.{old} moved to simhash_sqlite.{new}"]
    from simhash_sqlite.confirm import keeps
    from simhash_sqlite.fingerprint import simhash_many

    assert simhash_many(["hello world"]) == [simhash("hello world")]
    assert keeps(3, 0.9) and not keeps(3, 0.5)
