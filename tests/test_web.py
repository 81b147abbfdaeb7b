"""The web side without a browser: the SQL function table on sqlite3 connections (Datasette's,
sqlite-utils'), the pages' answers against the CLI's, hostile input, and the real `simq serve` over HTTP.
tests/test_web_browser.py looks at the pages in a real browser."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.parse
from collections import Counter
from pathlib import Path

import apsw
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_cli import assert_clean_error, simq
from unprivileged import run_unprivileged
from web_helpers import file_index, free_port, get, serving, stored_index, web_extra

from simhash_sqlite import Document, InvalidInput, SimhashIndex, to_signed
from simhash_sqlite.analysis.explain import verdicts
from simhash_sqlite.store.functions import FUNCTIONS, prepare_sqlite3_connection
from simhash_sqlite.web.pages import pair_view, query_text, search, side_by_side
from simhash_sqlite.web.plots import cluster_sizes, size_bands


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    folder = tmp_path_factory.mktemp("web")
    db = folder / "index.db"
    docs = stored_index(db)
    return db, {d.key: d.text for d in docs}


# -- one function table for apsw and sqlite3 ------------------------------------------------------


def _ours(rows, bare) -> set:
    return {row for row in rows if row[0] not in bare}


def test_the_function_table_registers_the_same_functions_on_apsw_and_sqlite3(stored):
    db, _ = stored
    bare_apsw = {name for name, *_ in apsw.Connection(":memory:").execute("SELECT name FROM pragma_function_list")}
    bare_sqlite3 = {name for (name,) in sqlite3.connect(":memory:").execute("SELECT name FROM pragma_function_list")}
    listing = "SELECT name, narg, flags & 0x800 FROM pragma_function_list"  # 0x800: SQLITE_DETERMINISTIC
    with SimhashIndex(db) as index:
        on_apsw = _ours(index.conn.execute(listing).fetchall(), bare_apsw)
    conn = sqlite3.connect(db)
    prepare_sqlite3_connection(conn)
    on_sqlite3 = _ours(conn.execute(listing).fetchall(), bare_sqlite3)
    assert on_apsw == on_sqlite3
    assert {name for name, *_ in on_sqlite3} == {f.name for f in FUNCTIONS}
    for function in FUNCTIONS:  # the documented examples give the documented results on sqlite3 too
        assert conn.execute(function.example).fetchone()[0] == function.result, function.example


def test_sqlite3_connections_fingerprint_with_the_index_settings(tmp_path):
    db = tmp_path / "words.db"
    text = "数据库是按照数据结构来组织、存储和管理数据的仓库 and some English words"
    with SimhashIndex(db, create=True, features="words", ngram=2) as index:
        index.add([Document("a", text)])
        expected = to_signed(index.fingerprint(text))
    conn = sqlite3.connect(db)
    prepare_sqlite3_connection(conn)
    assert conn.execute("SELECT simhash(?)", (text,)).fetchone()[0] == expected
    assert conn.execute("SELECT hamming(fingerprint, simhash(?)) FROM documents", (text,)).fetchone()[0] == 0
    plain = sqlite3.connect(tmp_path / "other.db")  # not an index: the default settings
    prepare_sqlite3_connection(plain)
    assert plain.execute("SELECT simhash_hex(simhash('hello world'))").fetchone()[0] == "535e078da051fa3c"


@web_extra
def test_sqlite_utils_query_runs_our_functions(stored):
    db, texts = stored
    sqlite_utils = Path(sys.executable).with_name("sqlite-utils")
    query = "select key, hamming(fingerprint, simhash(:t)) as d from documents where key = :k"
    key = "family1/original.txt"
    result = subprocess.run(
        [str(sqlite_utils), "query", str(db), query, "-p", "t", texts[key], "-p", "k", key],
        check=False, capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [{"key": key, "d": 0}]


# -- the pages' answers ----------------------------------------------------------------------------


@pytest.mark.parametrize("confirm", [True, False])
def test_search_answers_as_simq_near(runner, stored, confirm):
    db, texts = stored
    query = texts["family2/copy0.txt"] + " and a few words more"
    flag = "--check" if confirm else "--no-check"
    for args, kwargs in (((query,), {}), ((), {"key": "family2/original.txt"})):
        cli = simq(runner, "near", "--db", db, "--json", flag, *args, *(["--key", kwargs["key"]] if kwargs else []))
        assert cli.exit_code == 0, cli.output
        with SimhashIndex(db, readonly=True) as index:
            answer = search(index, *args, check=confirm, **kwargs)
        expected = [(m["key"], m["distance"], m["jaccard"], m["certainty"]) for m in json.loads(cli.stdout)]
        got = [(r.key, r.distance, None if r.jaccard is None else round(r.jaccard, 4),
                None if r.certainty is None else round(r.certainty, 4)) for r in answer.rows]
        assert got == expected and len(got) >= 1
        # The same words for the same check: sure estimates, and the texts for the unsure (stored here).
        words = {"exact": "exact Jaccard", "estimated": "estimated Jaccard (stored sketch)", None: "not checked"}
        assert [r.check for r in answer.rows] == [words[m["checked_by"]] for m in json.loads(cli.stdout)]
        assert all(r.check != "distance only (text out of reach)" for r in answer.rows)


def test_pair_view_reads_only_keys_of_the_index(stored, tmp_path):
    db, _ = stored
    outside = tmp_path / "secret.txt"
    outside.write_text("a secret that is not in the index", encoding="utf-8")
    with SimhashIndex(db, readonly=True) as index:
        for name in (str(outside), "/etc/passwd", "../secret.txt", "family1/../family1/original.txt"):
            with pytest.raises(InvalidInput, match="not a key in this index"):
                pair_view(index, name, "family1/original.txt")
        view = pair_view(index, "family1/original.txt", "family1/copy0.txt")
    assert view.explanation.exact_jaccard is not None and view.left and view.right
    assert view.verdicts == verdicts(view.explanation) and view.verdicts  # what simq explain says


def test_pages_say_where_texts_are_not_stored_and_files_are_gone(tmp_path):
    db = tmp_path / "files.db"
    paths = file_index(tmp_path / "docs", db)
    kept, deleted, edited = (str(paths[r]) for r in ("kept", "deleted", "edited"))
    with SimhashIndex(db, readonly=True) as index:
        view = pair_view(index, kept, deleted)
        assert view.explanation.distance is not None and not view.left
        assert view.missing == [(deleted, view.missing[0][1])] and "no file" in view.missing[0][1]
        view = pair_view(index, kept, edited)
        assert "has changed since it was indexed" in view.missing[0][1]
        answer = search(index, key=kept)
    checks = {row.key: row.check for row in answer.rows}
    # The files of the others are gone or changed: their sketches, stored at add time, stand in.
    assert checks.get(deleted, "estimated Jaccard (stored sketch)") == "estimated Jaccard (stored sketch)"
    assert all(check == "estimated Jaccard (stored sketch)" for key, check in checks.items() if key != kept)


@given(st.text(alphabet="ab c\n中文<>&", max_size=60), st.text(alphabet="ab c\n中文<>&", max_size=60))
@settings(max_examples=300, deadline=None)
def test_side_by_side_keeps_every_character_and_marks_only_differences(a, b):
    left, right = side_by_side(a, b)
    assert "".join(s.text for s in left) == a and "".join(s.text for s in right) == b
    same_a = "".join(s.text for s in left if not s.changed)
    same_b = "".join(s.text for s in right if not s.changed)
    assert same_a == same_b  # what is not marked is common to both, in order


def test_side_by_side_marks_the_edited_words():
    left, right = side_by_side("one two three four\nfive six\n", "one two THREE four\nfive six\n")
    assert [s.text for s in left if s.changed] == ["three"]
    assert [s.text for s in right if s.changed] == ["THREE"]


def test_uploaded_files_are_read_as_simq_near_reads_files():
    assert query_text("héllo".encode()) == "héllo"
    with pytest.raises(InvalidInput, match="not UTF-8"):
        query_text(b"caf\xe9")
    with pytest.raises(InvalidInput, match="binary"):
        query_text(b"ab\x00cd")


def test_cluster_size_bands_count_every_cluster(stored):
    db, _ = stored
    with SimhashIndex(db, readonly=True) as index:
        sizes = cluster_sizes(index.conn)
        brute = Counter(Counter(c for (c,) in index.conn.execute("SELECT cluster FROM clusters")).values())
    assert dict(sizes) == dict(brute)
    bands = size_bands(sizes)
    assert sum(b.clusters for b in bands) == sum(brute.values())
    assert sum(b.documents for b in bands) == sum(size * n for size, n in brute.items())
    for band in bands:
        assert band.clusters == sum(n for size, n in brute.items() if band.low <= size <= band.high)


# -- simq serve, for real, over HTTP ---------------------------------------------------------------


@web_extra
def test_serve_is_read_only_and_refuses_paths_and_markup(stored, tmp_path):
    db, texts = stored
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    (tmp_path / "secret.txt").write_text("TOP-SECRET-MARKER", encoding="utf-8")
    with serving(db, cwd=tmp_path) as base:
        page = f"{base}/index/-/simhash"
        status, body = get(f"{base}/-/databases.json")
        # read live (Datasette's read-only mode=ro connections through the WAL, so writers beside the server
        # are seen), and nothing can write through it (below; and the file's hash is the same at the end)
        assert status == 200 and json.loads(body)[0]["is_mutable"] is True
        status, body = get(f"{base}/index.json?" + urllib.parse.urlencode({"sql": "DELETE FROM documents"}))
        assert status == 400 and "Statement must be a SELECT" in body
        status, body = get(f"{base}/index.json?" + urllib.parse.urlencode({"sql": "SELECT hamming(-1, 0) AS h"}))
        assert status == 200 and json.loads(body)["rows"] == [[64]]
        status, body = get(f"{base}/index.json?" + urllib.parse.urlencode({"sql": "SELECT 1; DROP TABLE clusters"}))
        assert status == 400
        for name in ("secret.txt", str(tmp_path / "secret.txt"), "../" * 12 + "etc/passwd"):
            status, body = get(f"{page}/pair?" + urllib.parse.urlencode({"a": name, "b": "family1/original.txt"}))
            assert status == 400 and "is not a key in this index" in body
            assert "TOP-SECRET-MARKER" not in body and "root:x:0:0" not in body
        status, body = get(f"{page}/search?" + urllib.parse.urlencode({"text": texts["hostile/copy.html"]}))
        assert status == 200 and "hostile/&lt;script&gt;.html" in body
        assert "<script>alert(" not in body and "&lt;script&gt;alert(" in body
        pair = urllib.parse.urlencode({"a": "hostile/<script>.html", "b": "hostile/copy.html"})
        status, body = get(f"{page}/pair?{pair}")
        assert status == 200 and "<script>alert(" not in body and "<img src=x" not in body
        assert "&lt;img src=x onerror=alert(2)&gt;" in body
        status, body = get(f"{page}/clusters")
        assert status == 200 and "family0/original.txt" in body
        for where in ("/index", "/-/simhash"):  # the database page's menu, and the list of indexes
            status, body = get(base + where)
            assert status == 200 and 'href="/index/-/simhash/clusters"' in body, where
        form = (b'--b\r\nContent-Disposition: form-data; name="file"; filename="x.txt"\r\n\r\ncaf\xe9\r\n--b--\r\n')
        status, body = get(f"{page}/search", data=form, headers={"Content-Type": "multipart/form-data; boundary=b"})
        assert status == 400 and "the file is not UTF-8 text (byte 0xe9 at offset 3)" in body
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    assert not os.path.exists(f"{db}-wal") or os.path.getsize(f"{db}-wal") == 0


def test_serve_without_datasette_is_one_clean_line(stored):
    db, _ = stored
    code = (
        "import sys; sys.modules['datasette'] = None; sys.argv = ['simq', 'serve', '--db', sys.argv[1]]; "
        "from simhash_sqlite.cli.app import main; main()"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(db)], check=False, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines == ["error: simq serve needs Datasette: pip install 'simhash-sqlite[web]'"]


def test_serve_refuses_what_is_not_an_index(runner, tmp_path):
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE t (x)")
    result = simq(runner, "serve", "--db", other)
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert simq(runner, "serve", "--db", tmp_path / "missing.db").exit_code == 1


@web_extra
def test_serve_open_opens_the_clusters_page(stored, tmp_path):
    db, _ = stored
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser"  # what webbrowser runs for $BROWSER: records the URL it was given
    browser.write_text(f"#!/bin/sh\necho \"$1\" > {opened}\n", encoding="utf-8")
    browser.chmod(0o755)
    with serving(db, tmp_path, "--open", env={"BROWSER": str(browser)}) as base:
        for _ in range(100):
            if opened.exists() and opened.read_text().strip():
                break
            time.sleep(0.1)
        url = opened.read_text().strip()
        assert url == f"{base}/index/-/simhash/clusters"
        status, body = get(url)
        assert status == 200 and "Near-duplicate clusters in index" in body


@web_extra
def test_serve_refuses_an_index_with_changes_still_in_its_wal_where_it_cannot_read_them(tmp_path):
    """Where the folder can be written the server reads the WAL live (tests/test_faults.py); in a folder it
    cannot write, the file is served immutable, which a WAL with commits would make wrong: refused."""
    folder = tmp_path / "shared"
    folder.mkdir()
    db = folder / "busy.db"
    with SimhashIndex(db, create=True) as index:
        index.add_fingerprints([("a", 1)])
    writer = apsw.Connection(str(db))  # a writer still at work: its commit is in the WAL only
    try:
        writer.execute("PRAGMA wal_autocheckpoint = 0")
        writer.execute("UPDATE documents SET length = 1")
        os.chmod(folder, 0o555)
        result = run_unprivileged(["serve", "--db", db, "--port", free_port()], cwd=tmp_path)
    finally:
        os.chmod(folder, 0o755)
        writer.close()
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert "holds changes not yet" in result.stderr and result.stderr.startswith("error:"), result.stderr


@web_extra
def test_serve_on_a_port_in_use_is_a_clean_error(runner, stored):
    db, _ = stored
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        result = simq(runner, "serve", "--db", db, "--port", taken.getsockname()[1])
    assert_clean_error(result, "give another --port")


def test_an_index_opened_read_only_refuses_writes(stored, tmp_path):
    db, _ = stored
    before = db.read_bytes()
    with SimhashIndex(db, readonly=True) as index:
        assert len(index.near(key="family1/original.txt")) >= 1
        with pytest.raises(apsw.ReadOnlyError):
            index.add([Document("new", "a new text to add")])
        with pytest.raises(apsw.ReadOnlyError):
            index.remove(["family1/original.txt"])
    assert db.read_bytes() == before
    with pytest.raises(InvalidInput, match="read-only cannot be created"):
        SimhashIndex(tmp_path / "new.db", create=True, readonly=True)
