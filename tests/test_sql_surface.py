"""The SQL surface: simhash_near against SimhashIndex.near and `simq near`, simq sql, the shell, simq check."""

import csv
import io
import json
import random
import subprocess
import sys
from pathlib import Path

import apsw
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_cli import assert_clean_error, simq

from simhash_sqlite import Document, SimhashIndex
from simhash_sqlite.core.fingerprint import hamming, to_hex, to_signed
from simhash_sqlite.pipeline import sources
from simhash_sqlite.sql.shell import IndexShell

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def path_key(path) -> str:
    """The key simq add gives a file (relative inside the current folder, else absolute)."""
    return sources.path_key(str(path))
NEAR = "SELECT key, distance, fingerprint FROM simhash_near(?, ?, 0)"  # the distance search alone


@pytest.fixture(scope="module")
def clustered(tmp_path_factory):
    """3,000 fingerprints in clusters of near-duplicates (0-8 flipped bits), so every k has matches."""
    rng = random.Random(6)
    centres = [rng.getrandbits(64) for _ in range(300)]
    items = []
    for i in range(3000):
        fp = centres[i % 300]
        for _ in range(rng.randint(0, 8)):
            fp ^= 1 << rng.randrange(64)
        items.append((f"doc{i:04}", fp))
    path = tmp_path_factory.mktemp("clustered") / "c.db"
    with SimhashIndex(path, create=True) as index:
        index.add_fingerprints(items)
    index = SimhashIndex(path)
    yield index, items, centres
    index.close()


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_simhash_near_equals_index_near(clustered, data):
    index, items, centres = clustered
    k = data.draw(st.sampled_from([0, 1, 3, 4, 7, 8, 12, 20, 40, 64]) | st.integers(0, 64))
    query = data.draw(st.sampled_from(centres) | st.integers(0, (1 << 64) - 1))
    expected = [(m.key, m.distance, to_signed(m.fingerprint)) for m in index.near(fingerprint=query, k=k, check=False)]
    assert index.conn.execute(NEAR, (to_signed(query), k)).fetchall() == expected
    assert expected == sorted(
        ((key, hamming(fp, query), to_signed(fp)) for key, fp in items if hamming(fp, query) <= k),
        key=lambda row: (row[1], row[0]),
    )


def test_join_every_pair_once_equals_brute_force(clustered):
    index, items, _ = clustered
    pairs = index.conn.execute(
        "SELECT a.key, n.key, n.distance FROM documents AS a, simhash_near(a.fingerprint, 2) AS n WHERE n.key > a.key"
    ).fetchall()
    keys = np.array([key for key, _ in items])
    fps = np.array([fp for _, fp in items], dtype=np.uint64)
    distances = np.bitwise_count(fps[:, None] ^ fps[None, :])
    a, b = np.nonzero((distances <= 2) & (keys[None, :] > keys[:, None]))
    brute = [(str(keys[i]), str(keys[j]), int(distances[i, j])) for i, j in zip(a, b)]
    assert len(brute) > 100 and sorted(pairs) == sorted(brute)


def test_texts_from_another_table_search_one_by_one(tmp_path):
    with SimhashIndex(tmp_path / "t.db", create=True) as index:
        index.add(Document(p.name, p.read_text(encoding="utf-8")) for p in sorted(EXAMPLES.glob("*.txt")))
        conn = index.conn
        conn.execute("CREATE TEMP TABLE queries (id INTEGER PRIMARY KEY, body TEXT)")
        bodies = [(EXAMPLES / name).read_text(encoding="utf-8") for name in ("sqlite_intro.txt", "simhash_zh.txt")]
        conn.executemany("INSERT INTO queries (body) VALUES (?)", [(b,) for b in bodies] + [("",), (None,)])
        rows = conn.execute(
            "SELECT q.id, n.key, n.distance FROM queries AS q, simhash_near(q.body, 10) AS n"
            " ORDER BY q.id, n.distance, n.key"
        ).fetchall()
        expected = [(i + 1, m.key, m.distance) for i, body in enumerate(bodies) for m in index.near(body, k=10)]
        assert rows == expected  # the empty text and NULL give no rows instead of failing the query
        assert "sqlite_intro_mirror.txt" in [key for _, key, _ in rows]  # a mirror with a header added
        descending = conn.execute("SELECT key FROM simhash_near(?, 8) ORDER BY distance DESC", (bodies[0],)).fetchall()
        assert [key for (key,) in descending] == [m.key for m in reversed(index.near(bodies[0], k=8))]


def test_simhash_near_equals_simq_near(runner, tmp_path):
    db = tmp_path / "e.db"
    assert simq(runner, "add", "--db", db, EXAMPLES).exit_code == 0
    text = (EXAMPLES / "sqlite_intro.txt").read_text(encoding="utf-8")
    near = json.loads(simq(runner, "near", "--db", db, text, "--k", "10", "--json", "--no-check").stdout)
    assert all(m.pop("jaccard") is None and m.pop("checked") is False and m.pop("checked_by") is None
               and m.pop("certainty") is None for m in near)
    result = simq(
        runner, "sql", "--db", db, "--format", "json", "-p", f"q={text}", "-p", "k=10",
        "SELECT key, distance, similarity, simhash_hex(fingerprint) AS fingerprint FROM simhash_near(:q, :k, 0)",
    )
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [row["similarity"] for row in rows] == pytest.approx([row["similarity"] for row in near], abs=1e-4)
    assert [{**row, "similarity": 0} for row in rows] == [{**row, "similarity": 0} for row in near] and len(near) == 3


def test_simhash_near_usage_errors(runner, db_path, index):
    assert_clean_error(simq(runner, "sql", "--db", db_path, "SELECT * FROM simhash_near"), "needs a query")
    assert_clean_error(simq(runner, "sql", "--db", db_path, "SELECT * FROM simhash_near('x', 65)"), "k must be")
    assert_clean_error(simq(runner, "sql", "--db", db_path, "SELECT * FROM simhash_near(x'00')"), "text or an integer")


# -- simq sql ---------------------------------------------------------------------------------


@pytest.fixture
def small(runner, tmp_path):
    db = tmp_path / "s.db"
    assert simq(runner, "add", "--db", db, EXAMPLES / "garden.txt", EXAMPLES / "tea_zh.txt").exit_code == 0
    return db


def test_sql_output_formats(runner, small):
    query = "SELECT key, length, content_hash, NULL AS absent FROM documents ORDER BY key"
    rows = json.loads(simq(runner, "sql", "--db", small, "--format", "json", query).stdout)
    assert [r["key"] for r in rows] == [path_key(EXAMPLES / "garden.txt"), path_key(EXAMPLES / "tea_zh.txt")]
    assert len(rows[0]["content_hash"]) == 32 and rows[0]["absent"] is None  # blobs as hex
    for fmt, delimiter in (("csv", ","), ("tsv", "\t")):
        text = simq(runner, "sql", "--db", small, "--format", fmt, query).stdout
        parsed = list(csv.reader(io.StringIO(text), delimiter=delimiter))
        assert parsed[0] == ["key", "length", "content_hash", "absent"]
        assert [row[0] for row in parsed[1:]] == [r["key"] for r in rows] and parsed[1][3] == ""
    table = simq(runner, "sql", "--db", small, query)
    assert table.exit_code == 0 and "content_hash" in table.stdout and "NULL" in table.stdout


def test_sql_several_statements_and_parameters(runner, small):
    result = simq(runner, "sql", "--db", small, "--format", "json", "-p", "n=2", "-p", "s=x",
                  "SELECT :n + 1 AS a; SELECT :s AS b, hamming(0, 7) AS c")
    assert result.stdout.splitlines() == ['[{"a": 3}]', '[{"b": "x", "c": 3}]']


def test_sql_is_read_only_unless_asked_and_never_changes_the_schema(runner, small):
    assert_clean_error(simq(runner, "sql", "--db", small, "DELETE FROM documents"), "--write")
    assert_clean_error(simq(runner, "sql", "--db", small, "--write", "CREATE TABLE mine (x)"), "ATTACH")
    assert_clean_error(simq(runner, "sql", "--db", small, "--write", "PRAGMA user_version = 9"), "not authorized")
    assert_clean_error(simq(runner, "sql", "--db", small, "SELEC 1"), "syntax error")
    assert_clean_error(simq(runner, "sql", "--db", small, "SELECT :missing"), "--param")
    assert_clean_error(simq(runner, "sql", "--db", small, "-p", "oops", "SELECT 1"), "NAME=VALUE", 2)
    result = simq(runner, "sql", "--db", small, "--write", "--format", "csv",
                  "CREATE TEMP TABLE t AS SELECT key FROM documents; DELETE FROM documents WHERE key LIKE '%tea%';"
                  "SELECT count(*) AS n FROM documents")
    assert result.exit_code == 0 and result.stdout.splitlines() == ["n", "1"]
    assert simq(runner, "integrity", "--db", small).exit_code == 0


# -- the shell --------------------------------------------------------------------------------

SCRIPT = """.mode list
.header on
SELECT count(*) AS documents FROM documents;
.near "{text}" 8
.hash "hello world"
SELECT simhash_hex(fingerprint) FROM documents WHERE key LIKE '%garden%';
"""


def test_shell_runs_a_script_from_stdin(small):
    text = (EXAMPLES / "garden.txt").read_text(encoding="utf-8").replace("\n", " ").replace('"', "")
    run = subprocess.run(
        [sys.executable, "-m", "simhash_sqlite", "shell", str(small)],
        input=SCRIPT.format(text=text), capture_output=True, text=True, timeout=60,
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[:2] == ["documents", "2"]
    assert lines[2] == "key|distance|similarity|fingerprint|jaccard|checked_by"  # .near checks, as simq near
    assert lines[3].startswith(f"{path_key(EXAMPLES / 'garden.txt')}|") and "|1.0|" in lines[3]
    assert "535e078da051fa3c" in lines
    with SimhashIndex(small) as index:
        assert to_hex(index.get(path_key(EXAMPLES / "garden.txt")).fingerprint) in lines


def test_shell_script_errors_fail_the_run_and_the_schema_stays_ours(runner, small):
    result = simq(runner, "shell", small, input="SELECT nope FROM documents;\nCREATE TABLE mine (x);\nSELECT 42;\n")
    assert result.exit_code == 1
    assert "no such column: nope" in result.stderr and "ATTACH" in result.stderr
    assert "42" in result.stdout  # like sqlite3, the script goes on after an error
    assert simq(runner, "integrity", "--db", small).exit_code == 0


def test_every_dot_command_of_ours_runs(runner, small):
    garden = path_key(EXAMPLES / "garden.txt")
    with SimhashIndex(small) as index:
        fp = to_hex(index.get(garden).fingerprint)
    script = (f".mode list\n.nearkey {garden} 64\n.nearhash {fp} 0\n.plan 8\n.stats\n.functions\n.check\n"
              ".nearhash zz\n.plan x\n")
    result = simq(runner, "shell", small, input=script)
    lines = result.stdout.splitlines()
    assert any(line.startswith(path_key(EXAMPLES / "tea_zh.txt") + "|") for line in lines)  # .nearkey leaves garden out
    assert f"{garden}|0|1.0|{fp}" in lines  # .nearhash
    assert any(line.startswith("-- ") for line in lines) and any("FROM documents" in line for line in lines)  # .plan
    assert "documents:        2" in lines
    assert any(line.startswith("simhash_block:") for line in lines) and "ok    unique keys: ok" in lines
    assert (
        result.exit_code == 1 and "not a 64-bit hex fingerprint" in result.stderr and "at most one K" in result.stderr
    )


def test_shell_help_documents_our_commands(small):
    err = io.StringIO()
    with SimhashIndex(small) as index:
        shell = IndexShell(index, stdin=io.StringIO(""), stdout=io.StringIO(), stderr=err)
        shell.command_help([])
    for usage in (".near TEXT ?K?", ".nearkey KEY ?K?", ".nearhash HEX ?K?", ".hash TEXT", ".plan ?K?", ".check"):
        assert usage in err.getvalue()


# -- simq check -------------------------------------------------------------------------------


def tamper(path, *statements):
    conn = apsw.Connection(str(path))
    for statement in statements:
        conn.execute(statement)
    conn.close()


def test_check_passes_a_sound_index(runner, small):
    result = simq(runner, "integrity", "--db", small, "--json")
    assert result.exit_code == 0
    report = json.loads(result.stdout)
    assert report["ok"] and {c["name"] for c in report["checks"]} >= {
        "integrity_check", "schema", "settings", "unique keys", "blocks match fingerprints"}


@pytest.mark.parametrize(
    "statements, failed, fragment",
    [
        (["UPDATE documents SET b2 = b2 + 1 WHERE key LIKE '%garden%'"], "blocks match fingerprints", "garden.txt"),
        (["DELETE FROM simhash_meta WHERE key = 'fingerprint'"], "settings", "settings are missing"),
        (["UPDATE simhash_meta SET value = '{\"ngram\": 0}' WHERE key = 'fingerprint'"], "settings", "cannot be read"),
        (["UPDATE documents SET text = 'x'"], "texts", "does not store texts"),
        (["CREATE VIEW v AS SELECT 1"], "schema", 'view "v"'),
    ],
)
def test_check_reports_what_is_wrong(runner, small, statements, failed, fragment):
    tamper(small, *statements)
    result = simq(runner, "integrity", "--db", small)
    assert_clean_error(result, failed)
    report = json.loads(simq(runner, "integrity", "--db", small, "--json").stdout)
    bad = [c for c in report["checks"] if not c["ok"]]
    assert [c["name"] for c in bad] == [failed] and fragment in bad[0]["detail"]


def test_check_finds_a_damaged_page(runner, tmp_path):
    db = tmp_path / "d.db"
    with SimhashIndex(db, create=True) as index:
        index.add_fingerprints((f"k{i}", random.Random(i).getrandbits(64)) for i in range(5000))
    conn = apsw.Connection(str(db))
    root = conn.execute("SELECT rootpage FROM sqlite_schema WHERE name = 'documents_b1'").get
    page_size = conn.pragma("page_size")
    conn.close()
    data = bytearray(db.read_bytes())
    offset = (root - 1) * page_size
    # scribble over the index's root page
    data[offset + 8 : offset + page_size] = bytes(range(256)) * (page_size // 256)
    db.write_bytes(bytes(data))
    result = simq(runner, "integrity", "--db", db)
    assert_clean_error(result, "integrity_check")


def test_check_names_a_file_that_is_not_ours(runner, tmp_path):
    other = tmp_path / "other.db"
    tamper(other, "CREATE TABLE t (x)")
    assert_clean_error(simq(runner, "integrity", "--db", other), "simhash-sqlite file")
    assert_clean_error(simq(runner, "integrity", "--db", tmp_path / "missing.db"), "no index")


def test_check_passes_random_fingerprints_and_rehash_finds_a_changed_text(runner, tmp_path):
    db = tmp_path / "r.db"
    with SimhashIndex(db, create=True) as index:
        index.add_fingerprints((f"fp{i}", random.Random(i).getrandbits(64)) for i in range(2000))  # half negative
    assert simq(runner, "integrity", "--db", db).exit_code == 0
    stored = tmp_path / "stored.db"
    assert simq(runner, "add", "--db", stored, "--store-text", EXAMPLES).exit_code == 0
    assert simq(runner, "integrity", "--db", stored, "--rehash").exit_code == 0
    tamper(stored, "UPDATE documents SET text = text || ' changed' WHERE key LIKE '%garden%'")
    assert simq(runner, "integrity", "--db", stored).exit_code == 0  # only re-hashing can notice
    result = simq(runner, "integrity", "--db", stored, "--rehash", "--json")
    assert result.exit_code == 1
    bad = [c for c in json.loads(result.stdout)["checks"] if not c["ok"]]
    assert [c["name"] for c in bad] == ["rehash"] and "garden.txt" in bad[0]["detail"]
