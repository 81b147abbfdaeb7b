"""The simq command line: real index files, the real CLI through CliRunner and subprocesses."""

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time

import apsw
import pytest
from conftest import integrity_ok

from simhash_sqlite import SimhashIndex
from simhash_sqlite.cli.app import app
from simhash_sqlite.errors import InvalidArgument
from simhash_sqlite.find.queries import Query
from simhash_sqlite.store.database import schema_version

CHINESE = "SimHash 是一种局部敏感哈希算法，常用于海量网页去重。它把文本映射为六十四位指纹，相似文本的指纹只差几位。"
ENGLISH = (
    "SQLite is a C-language library that implements a small, fast, self-contained, high-reliability, "
    "full-featured SQL database engine. SQLite is the most used database engine in the world."
)


def simq(runner, *args, input=None):
    return runner.invoke(app, [str(a) for a in args], input=input)


def assert_clean_error(result, fragment, code=1):
    """One line on stderr naming the problem, exit code 1 (2: a usage error), no traceback."""
    assert result.exit_code == code, (result.stdout, result.stderr)
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines and lines[-1].startswith("error:"), result.stderr
    assert fragment in result.stderr


@pytest.fixture
def corpus(tmp_path):
    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    (folder / "zh.txt").write_text(CHINESE, encoding="utf-8")
    (folder / "zh_copy.txt").write_text(CHINESE.replace("常用于", "常常用于"), encoding="utf-8")
    (folder / "sub" / "en.txt").write_text(ENGLISH, encoding="utf-8")
    (folder / ".hidden").write_text("not indexed", encoding="utf-8")
    return folder


def test_add_folder_then_near_finds_the_copy(runner, corpus, db_path):
    result = simq(runner, "add", "--db", db_path, corpus)
    assert result.exit_code == 0, result.output
    assert "3 added" in result.stdout
    result = simq(runner, "near", "--db", db_path, "--file", corpus / "zh.txt", "--k", "12", "--json")
    assert result.exit_code == 0, result.output
    matches = json.loads(result.stdout)
    assert [m["key"] for m in matches][:2] == [
        os.path.normpath(corpus / "zh.txt"), os.path.normpath(corpus / "zh_copy.txt")
    ]
    assert matches[0]["distance"] == 0 and len(matches[0]["fingerprint"]) == 16
    assert all(m["distance"] <= 12 for m in matches)
    table = simq(runner, "near", "--db", db_path, CHINESE, "--k", "3")
    assert "zh.txt" in table.stdout and "similarity" in table.stdout


def test_re_adding_is_a_no_op_and_changes_update(runner, corpus, db_path):
    simq(runner, "add", "--db", db_path, corpus)
    assert "0 added, 0 updated, 3 unchanged" in simq(runner, "add", "--db", db_path, corpus).stdout
    (corpus / "sub" / "en.txt").write_text(ENGLISH + " More text.", encoding="utf-8")
    assert "0 added, 1 updated, 2 unchanged" in simq(runner, "add", "--db", db_path, corpus).stdout


def test_globs_stdin_and_jsonl(runner, corpus, db_path, tmp_path):
    assert simq(runner, "add", "--db", db_path, str(corpus / "*.txt")).exit_code == 0
    assert simq(runner, "add", "--db", db_path, "-", input=ENGLISH).exit_code == 0
    data = tmp_path / "data.jsonl"
    data.write_text(
        "\n".join(json.dumps({"doc": f"j{i}", "body": f"{ENGLISH} {i}", "extra": 1}) for i in range(5)) + "\n",
        encoding="utf-8",
    )
    result = simq(runner, "add", "--db", db_path, data, "--text-field", "body", "--id-field", "doc")
    assert result.exit_code == 0, result.output
    assert "5 added" in result.stdout
    stats = json.loads(simq(runner, "stats", "--db", db_path, "--json").stdout)
    assert stats["documents"] == 2 + 1 + 5


def test_malformed_jsonl_lines_are_reported_and_the_rest_added(runner, db_path, tmp_path):
    data = tmp_path / "mixed.jsonl"
    data.write_text('{"id": 1, "text": "good one"}\n{broken\n[1, 2]\n{"id": 2}\n{"id": 3, "text": "good two"}\n')
    result = simq(runner, "add", "--db", db_path, data)
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    for line in (2, 3, 4):
        assert f"mixed.jsonl:{line}" in result.stderr
    assert "2 added" in result.stdout
    assert integrity_ok(db_path)


def test_missing_path_fails_before_touching_the_index(runner, db_path, corpus):
    assert_clean_error(simq(runner, "add", "--db", db_path, corpus, "no/such/file.txt"), "no such file")
    assert not db_path.exists()
    assert_clean_error(simq(runner, "add", "--db", db_path, "nothing-*.txt"), "no files match")


def test_binary_and_non_utf8_files_are_skipped_with_reasons(runner, db_path, tmp_path):
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01\x02binary" * 50)
    (tmp_path / "latin1.txt").write_bytes("café au lait, déjà vu".encode("latin-1"))
    (tmp_path / "ok.txt").write_text(ENGLISH)
    result = simq(runner, "add", "--db", db_path, tmp_path / "blob.bin", tmp_path / "latin1.txt", tmp_path / "ok.txt")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "binary" in result.stderr and "not utf-8" in result.stderr and "--encoding" in result.stderr
    assert "1 added" in result.stdout and "2 skipped" in result.stdout
    result = simq(runner, "add", "--db", db_path, "--encoding", "latin-1", tmp_path / "latin1.txt")
    assert result.exit_code == 0 and "1 added" in result.stdout
    assert integrity_ok(db_path)


def test_binary_files_found_in_a_folder_do_not_fail_the_run(runner, db_path, tmp_path):
    (tmp_path / "image.png").write_bytes(b"\x89PNG\x00\x00" * 20)
    (tmp_path / "ok.txt").write_text(ENGLISH)
    result = simq(runner, "add", "--db", db_path, tmp_path)
    assert result.exit_code == 0
    assert "binary" in result.stderr and "1 added" in result.stdout


def test_empty_files_are_stored_without_a_fingerprint(runner, db_path, tmp_path):
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "punct.txt").write_text("!!! ??? ...")
    result = simq(runner, "add", "--db", db_path, tmp_path)
    assert result.exit_code == 0
    assert "no features" in result.stderr and "2 without features" in result.stdout
    assert json.loads(simq(runner, "near", "--db", db_path, "--hash", "0" * 16, "--k", "64", "--json").stdout) == []
    assert_clean_error(simq(runner, "near", "--db", db_path, "..."), "no features")


def test_not_an_index_and_newer_schema_are_refused(runner, tmp_path, corpus):
    text_file = tmp_path / "notes.txt"
    text_file.write_text("hello")
    assert_clean_error(simq(runner, "add", "--db", text_file, corpus), "not a SQLite database")
    assert text_file.read_text() == "hello"
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE x (y)").connection.commit()
    assert_clean_error(simq(runner, "stats", "--db", other), "not a simhash-sqlite index")
    newer = tmp_path / "newer.db"
    assert simq(runner, "add", "--db", newer, corpus).exit_code == 0
    conn = apsw.Connection(str(newer))
    conn.pragma("user_version", schema_version() + 5)
    conn.close()
    assert_clean_error(simq(runner, "near", "--db", newer, "hello"), "newer")
    assert_clean_error(simq(runner, "stats", "--db", tmp_path / "absent.db"), "no index at")


def test_parameters_that_do_not_match_the_index(runner, db_path, corpus):
    assert simq(runner, "add", "--db", db_path, corpus).exit_code == 0
    assert_clean_error(simq(runner, "add", "--db", db_path, "--features", "words", corpus), "--features chars")
    assert_clean_error(simq(runner, "add", "--db", db_path, "--ngram", "3", corpus), "--ngram 5")
    assert_clean_error(simq(runner, "add", "--db", db_path, "--store-text", corpus), "made with --no-store-text")
    assert_clean_error(simq(runner, "near", "--db", db_path, "text", "--k", "65"), "k must be", 2)
    assert_clean_error(simq(runner, "near", "--db", db_path, "--hash", "xyz"), "hex fingerprint", 2)
    assert_clean_error(simq(runner, "near", "--db", db_path, "--key", "nope"), "no document with key")
    assert_clean_error(simq(runner, "near", "--db", db_path), "give one of", 2)
    result = simq(runner, "add", "--db", tmp_db(db_path), "--features", "nope", corpus)
    assert_clean_error(result, "features must be", 2)
    assert integrity_ok(db_path)


def tmp_db(path):
    return path.with_name("fresh.db")


def test_hash_prints_the_index_fingerprint(runner, db_path, corpus):
    simq(runner, "add", "--db", db_path, "--features", "words", "--ngram", "2", corpus)
    from simhash_sqlite import FingerprintSettings, simhash, to_hex

    result = simq(runner, "hash", "--db", db_path, CHINESE)
    assert result.stdout.strip() == to_hex(simhash(CHINESE, FingerprintSettings(features="words", ngram=2)))
    result = simq(runner, "hash", "--db", db_path / "absent.db", "hello world")
    assert result.stdout.strip() == to_hex(simhash("hello world"))
    # "-" reads stdin (search_commands spells it without importing the reader)
    result = runner.invoke(app, ["hash", "--db", str(db_path), "-"], input=CHINESE)
    assert result.exit_code == 0 and result.stdout.strip() == to_hex(
        simhash(CHINESE, FingerprintSettings(features="words", ngram=2))
    )


def test_db_from_the_environment(runner, corpus, tmp_path, monkeypatch):
    monkeypatch.setenv("SIMQ_DB", str(tmp_path / "env.db"))
    assert simq(runner, "add", corpus).exit_code == 0
    assert (tmp_path / "env.db").exists()


def test_python_dash_m_runs_the_cli(tmp_path, corpus):
    db = tmp_path / "m.db"
    run = subprocess.run(
        [sys.executable, "-m", "simhash_sqlite", "add", "--db", str(db), str(corpus)], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    run = subprocess.run([sys.executable, "-m", "simhash_sqlite", "near", "--db", str(db), "x" * 3, "--k", "0"],
                         capture_output=True, text=True)
    assert run.returncode == 0 and "no documents" in run.stdout


def as_foreground() -> None:
    """preexec_fn of a child that Ctrl-C must reach, as a shell's foreground command: SIGINT at its default.
    A shell without job control (a CI script run with &) starts its background commands with SIGINT
    ignored, every process below inherits that, and Python keeps an ignored SIGINT ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_during_a_large_add_leaves_a_valid_index(tmp_path):
    data = tmp_path / "big.jsonl"
    with data.open("w") as handle:
        for i in range(40_000):
            handle.write(json.dumps({"id": i, "text": f"document {i} " + "lorem ipsum dolor sit amet " * 20}) + "\n")
    db = tmp_path / "big.db"
    command = [sys.executable, "-m", "simhash_sqlite", "add", "--db", str(db), "--batch-size", "500", str(data)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=as_foreground)
    count = 0
    deadline = time.time() + 60
    while count < 1000 and time.time() < deadline and process.poll() is None:
        time.sleep(0.05)
        try:
            count = rows(db, "SELECT count(*) FROM documents")
        except apsw.Error:
            pass
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=60)
    if process.returncode == 0:
        pytest.skip("the add finished before the interrupt arrived")
    assert process.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    assert integrity_ok(db)
    committed = rows(db, "SELECT count(*) FROM documents")
    assert committed % 500 == 0 and committed >= 1000
    rerun = subprocess.run(command, capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr
    assert f"{committed:,} unchanged" in rerun.stdout
    assert rows(db, "SELECT count(*), count(DISTINCT key) FROM documents") == (40_000, 40_000)


def rows(path, sql):
    """One row through a short-lived apsw connection (the library version the writer uses)."""
    conn = apsw.Connection(str(path))
    try:
        return conn.execute(sql).get
    finally:
        conn.close()


@pytest.mark.parametrize("documents", [0, 1])
@pytest.mark.parametrize("command", [["dupes"], ["dupes", "--k", "3"], ["dupes", "--no-check"], ["clusters"],
                                     ["clusters", "--k", "3"]])
def test_dupes_and_clusters_of_an_empty_or_one_document_index(runner, db_path, tmp_path, documents, command):
    """No pairs is an answer, not a traceback (clusters of an empty index raised an IndexError)."""
    from simhash_sqlite import Document, SimhashIndex

    with SimhashIndex(db_path, create=True) as index:
        if documents:
            index.add([Document("only", ENGLISH)])
    result = simq(runner, *command, "--db", db_path)
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    if command[0] == "clusters":
        assert f"{documents} document" in result.output
        with SimhashIndex(db_path) as index:
            assert index.conn.execute("SELECT count(*) FROM clusters").get == documents
    else:
        assert "no pair" in result.output


def test_old_spellings_still_work_and_are_not_shown(tmp_path):
    """--confirm/--no-confirm, --jaccard and `simq check` were renamed (CHANGELOG.md): scripts keep working."""
    from typer.testing import CliRunner

    from simhash_sqlite.cli.app import app

    runner = CliRunner()
    db = str(tmp_path / "old.db")
    (tmp_path / "a.txt").write_text("the quick brown fox jumps over the lazy dog " * 20)
    (tmp_path / "b.txt").write_text("the quick brown fox jumps over the lazy dog " * 20 + "and again")
    assert runner.invoke(app, ["add", "--db", db, str(tmp_path / "a.txt"), str(tmp_path / "b.txt")]).exit_code == 0
    new = runner.invoke(app, ["dupes", "--db", db, "--check", "--threshold", "0.8", "--format", "jsonl"])
    old = runner.invoke(app, ["dupes", "--db", db, "--confirm", "--jaccard=0.8", "--format", "jsonl"])
    assert new.exit_code == old.exit_code == 0 and new.stdout == old.stdout and '"checked": true' in new.stdout
    stricter = runner.invoke(app, ["dupes", "--db", db, "--jaccard", "0.9", "--format", "jsonl"])  # J is 0.83
    assert stricter.exit_code == 0 and stricter.stdout == ""
    unchecked = runner.invoke(app, ["dupes", "--db", db, "--no-confirm", "--format", "jsonl"])
    assert unchecked.exit_code == 0 and '"checked": false' in unchecked.stdout
    assert runner.invoke(app, ["check", "--db", db]).stdout == runner.invoke(app, ["integrity", "--db", db]).stdout
    # A text that happens to look like an old option is searched for as it is after "--".
    from simhash_sqlite import simhash, to_hex

    hashed = runner.invoke(app, ["hash", "--", "--jaccard"])
    assert hashed.exit_code == 0 and to_hex(simhash("--jaccard")) in hashed.stdout
    shown = runner.invoke(app, ["--help"]).stdout + runner.invoke(app, ["dupes", "--help"]).stdout
    assert "--confirm" not in shown and "--jaccard" not in shown and " check " not in shown
    assert "--check" in shown and "--threshold" in shown and "integrity" in shown


BAD_K = {"-1": -1, "65": 65, "3.5": 3.5, "abc": "abc"}


@pytest.mark.parametrize("typed", list(BAD_K))
def test_a_bad_k_gets_one_text_from_the_library_and_every_cli_option(runner, db_path, corpus, typed):
    """k is validated once at each surface (issue 33): the library's entry (settings.validate_k) and the CLI's
    --k option (params: a bounded whole number), with the same text; the planner below trusts it."""
    text = f"k must be a whole number from 0 to 64, not {typed}"
    assert simq(runner, "add", "--db", db_path, corpus).exit_code == 0
    for command in (["near", "some text"], ["near", "--batch", "-"], ["dupes"], ["clusters"]):
        assert_clean_error(simq(runner, *command, "--db", db_path, "--k", typed, input=""), text, 2)
    with SimhashIndex(db_path, readonly=True) as index:
        for call in (lambda k: index.near("some text", k=k), lambda k: index.search("some text", k=k, check=False),
                     lambda k: list(index.near_many([Query(text="some text")], k=k)), index.plan, index.near_sql):
            said = f"k must be a whole number from 0 to 64, not {BAD_K[typed]!r}"
            with pytest.raises(InvalidArgument, match=re.escape(said)):
                call(BAD_K[typed])
