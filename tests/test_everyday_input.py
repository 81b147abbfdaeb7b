"""What users do on day one: stdin, JSONL piped in, big texts, keys, and the small surprises (issue 14),
through the real CLI (CliRunner) and, where pipes matter, the venv's simq script in a subprocess."""

import json
import os
import subprocess

import pytest
from test_cli import CHINESE, ENGLISH, assert_clean_error, simq
from unprivileged import simq_command

from simhash_sqlite import Document, FingerprintSettings, SimhashIndex, simhash
from simhash_sqlite.pipeline.sources import path_key
from simhash_sqlite.store import texts as indexed_text
from simhash_sqlite.store.integrity import problems

OTHER = "Gardening notes: tomatoes want sun, water in the morning, and a stake before the fruit comes."


def run(args, *, input=None, cwd=None):
    """The installed simq script, as a shell pipe runs it."""
    return subprocess.run([*simq_command(), *map(str, args)], input=input, capture_output=True, text=True, cwd=cwd)


def keys(db):
    with SimhashIndex(db) as index:
        return sorted(index.keys())


# -- stdin -------------------------------------------------------------------------------------


def test_two_texts_piped_in_are_two_documents(tmp_path):
    db = tmp_path / "i.db"
    first = run(["add", "--db", db, "-"], input=ENGLISH)
    second = run(["add", "--db", db, "-"], input=OTHER)
    assert first.returncode == second.returncode == 0, first.stderr
    assert len(keys(db)) == 2 and all(key.startswith("<stdin:") for key in keys(db))
    assert "stdin added as <stdin:" in first.stderr and "--key NAME" in first.stderr
    again = run(["add", "--db", db, "-"], input=ENGLISH)  # the same text again: the same key, a no-op
    assert "0 added, 0 updated, 1 unchanged" in again.stdout
    named = run(["add", "--db", db, "-", "--key", "notes/garden"], input=OTHER)
    assert named.returncode == 0 and "notes/garden" in keys(db) and "stdin added as" not in named.stderr
    changed = run(["add", "--db", db, "-", "--key", "notes/garden"], input=OTHER + " And mulch.")
    assert "0 added, 1 updated" in changed.stdout  # a named stdin text is updated like a file


def test_key_without_stdin_is_refused(runner, tmp_path):
    (tmp_path / "a.txt").write_text(ENGLISH)
    result = simq(runner, "add", "--db", tmp_path / "i.db", tmp_path / "a.txt", "--key", "x")
    assert_clean_error(result, "--key names the text read from stdin")
    assert not (tmp_path / "i.db").exists()


def test_jsonl_piped_in_is_read_as_jsonl_and_said(runner, tmp_path):
    lines = [json.dumps({"id": "a", "text": ENGLISH}), json.dumps({"id": "b", "text": CHINESE}),
             json.dumps({"id": "c", "text": OTHER})]
    data = "\n".join(lines) + "\n"
    db = tmp_path / "i.db"
    added = run(["add", "--db", db, "-"], input=data)
    assert added.returncode == 0 and keys(db) == ["a", "b", "c"]
    assert "stdin read as JSONL" in added.stderr and "--no-jsonl" in added.stderr
    out = tmp_path / "out.jsonl"
    deduped = run(["dedup", "-", "-o", out], input=data)
    assert deduped.returncode == 0 and "stdin read as JSONL" in deduped.stderr
    assert out.read_text() == data  # the records themselves, byte for byte, not one wrapping the stream
    as_text = simq(runner, "add", "--db", tmp_path / "t.db", "-", "--no-jsonl", input=data)
    assert as_text.exit_code == 0 and len(keys(tmp_path / "t.db")) == 1
    forced = simq(runner, "add", "--db", tmp_path / "f.db", "-", "--jsonl", input=data)
    assert forced.exit_code == 0 and keys(tmp_path / "f.db") == ["a", "b", "c"]
    # Text that starts like JSON but is not a JSON object with the text field stays one text.
    plain = simq(runner, "add", "--db", tmp_path / "p.db", "-", input='{"note": "not a record"}\n' + ENGLISH)
    assert plain.exit_code == 0 and len(keys(tmp_path / "p.db")) == 1 and "JSONL" not in plain.stderr


def test_near_dash_reads_stdin_and_a_path_gets_a_hint(runner, tmp_path):
    db = tmp_path / "i.db"
    doc = tmp_path / "a.txt"
    doc.write_text(ENGLISH)
    assert simq(runner, "add", "--db", db, doc).exit_code == 0
    for args in (["near", "-"], ["near", "-f", "-"]):
        found = run([*args, "--db", db, "--json"], input=ENGLISH)
        assert found.returncode == 0 and [m["key"] for m in json.loads(found.stdout)] == [path_key(str(doc))]
    hinted = simq(runner, "near", str(doc), "--db", db)
    assert hinted.exit_code == 0 and "is a file" in hinted.stderr and f"--file {doc}" in hinted.stderr
    hashed = run(["hash", "-f", "-", "--db", db], input=ENGLISH)
    assert hashed.stdout.strip() == run(["hash", "-f", doc, "--db", db]).stdout.strip() != ""


# -- big texts ---------------------------------------------------------------------------------


@pytest.fixture
def small_limit(monkeypatch):
    """Texts over 4 KiB count as too large to read whole (instead of 32 MiB): the same code paths."""
    monkeypatch.setattr(indexed_text, "READ_WHOLE_BYTES", 4096)


def test_big_texts_with_default_settings_are_taken_every_way(runner, tmp_path, small_limit):
    text = (ENGLISH + "\n" + CHINESE + "\n") * 40  # ~20 KiB
    expected = simhash(text, FingerprintSettings())
    big = tmp_path / "big.txt"
    big.write_text(text)
    db = tmp_path / "i.db"
    assert simq(runner, "add", "--db", db, big).exit_code == 0
    assert simq(runner, "add", "--db", db, "-", "--key", "piped", input=text).exit_code == 0
    line = tmp_path / "one.jsonl"
    line.write_text(json.dumps({"id": "line", "text": text}) + "\n")
    assert simq(runner, "add", "--db", db, line).exit_code == 0
    with SimhashIndex(db) as index:
        for key in (path_key(str(big)), "piped", "line"):
            assert index.get(key).fingerprint == expected and index.get(key).length == len(text)
    hashed = simq(runner, "hash", "--db", db, "-f", big)
    assert hashed.exit_code == 0 and int(hashed.stdout, 16) == expected
    near = simq(runner, "near", "--db", db, "--file", big, "--json")
    assert near.exit_code == 0 and "searched by its fingerprint" in near.stderr
    assert {m["key"] for m in json.loads(near.stdout)} == {path_key(str(big)), "piped", "line"}
    by_key = simq(runner, "near", "--db", db, "--key", "piped", "--json")
    found = json.loads(by_key.stdout)
    assert {m["key"] for m in found} == {path_key(str(big)), "line"}
    assert all(m["checked_by"] == "estimated" for m in found)  # too large to compare whole: by their sketches
    explained = simq(runner, "explain", big, "piped", "--db", db, "--json")
    assert explained.exit_code == 0 and json.loads(explained.stdout)["distance"] == 0
    paths = tmp_path / "queries.txt"
    paths.write_text(f"{big}\n")
    batch = simq(runner, "near", "--batch", paths, "--db", db)
    assert batch.exit_code == 1 and "search for it on its own: simq near --file" in json.loads(batch.stdout)["error"]
    assert problems(db) == []


def test_a_real_file_over_32_mib_is_added_and_found_with_default_settings(tmp_path):
    """The real limit, through the installed script: added, not skipped."""
    line = (ENGLISH + " " + CHINESE + "\n").encode("utf-8")
    big = tmp_path / "big.txt"
    with big.open("wb") as handle:
        for i in range((33 << 20) // len(line) + 1):
            handle.write(line[:-1] + f" {i}\n".encode())
    db = tmp_path / "i.db"
    added = run(["add", "--db", db, big])
    assert added.returncode == 0 and "1 added" in added.stdout and "skipped" not in added.stderr, added.stderr
    with SimhashIndex(db) as index:
        stored = index.get(path_key(str(big)))
    # Pieces give the whole text's fingerprint: tests/test_streaming.py (hypothesis) and the test above.
    assert stored.length == len(big.read_text()) and stored.fingerprint is not None


# -- keys --------------------------------------------------------------------------------------


def test_one_file_has_one_key_however_it_is_named(runner, tmp_path, monkeypatch):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.txt").write_text(ENGLISH)
    (tmp_path / "outside.txt").write_text(OTHER)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(tmp_path)
    for name in ("d/a.txt", "./d/a.txt", str(tmp_path / "d" / "a.txt"), "d"):
        assert simq(runner, "add", "--db", "i.db", name).exit_code == 0
    assert keys("i.db") == [os.path.join("d", "a.txt")]
    monkeypatch.chdir(work)  # keys are relative to the folder the index was made in, from wherever simq runs
    assert simq(runner, "add", "--db", "../i.db", "../outside.txt", "../d/a.txt").exit_code == 0
    assert keys("../i.db") == [os.path.join("d", "a.txt"), "outside.txt"]
    beyond = tmp_path.parent / f"{tmp_path.name}-beyond.txt"  # outside that folder: its absolute path
    beyond.write_text(OTHER)
    try:
        assert simq(runner, "add", "--db", "../i.db", beyond).exit_code == 0
        assert str(beyond) in keys("../i.db")
    finally:
        beyond.unlink()


def test_repeated_jsonl_ids_keep_the_first_and_a_second_add_is_a_no_op(runner, tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in (
        {"id": "a", "text": ENGLISH}, {"id": "b", "text": OTHER}, {"id": "a", "text": CHINESE})) + "\n")
    db = tmp_path / "i.db"
    first = simq(runner, "add", "--db", db, data)
    assert "2 added" in first.stdout and "the first record is kept" in first.stderr
    again = simq(runner, "add", "--db", db, data)
    assert "0 added, 0 updated, 2 unchanged" in again.stdout
    with SimhashIndex(db) as index:
        assert index.get("a").fingerprint == index.fingerprint(ENGLISH)


def test_records_without_an_id_are_reported_or_refused(runner, tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"id": "a", "text": ENGLISH}) + "\n" + json.dumps({"text": OTHER}) + "\n")
    said = simq(runner, "add", "--db", tmp_path / "i.db", data)
    assert said.exit_code == 0 and "1 JSONL record had no 'id' field" in said.stderr and "d.jsonl:2" in said.stderr
    assert keys(tmp_path / "i.db") == sorted(["a", f"{path_key(str(data))}:2"])
    refused = simq(runner, "add", "--db", tmp_path / "r.db", data, "--require-id")
    assert refused.exit_code == 1 and "d.jsonl:2: no id field 'id' (--require-id)" in refused.stderr
    assert keys(tmp_path / "r.db") == ["a"]


# -- smaller surprises -------------------------------------------------------------------------


@pytest.fixture
def small_db(runner, tmp_path):
    db = tmp_path / "i.db"
    for name, text in (("a.txt", ENGLISH), ("b.txt", ENGLISH.replace("library", "module")), ("c.txt", OTHER)):
        (tmp_path / name).write_text(text)
    assert simq(runner, "add", "--db", db, tmp_path / "a.txt", tmp_path / "b.txt", tmp_path / "c.txt").exit_code == 0
    return db


def test_limit_means_the_same_with_and_without_the_check(runner, small_db, tmp_path):
    queries = tmp_path / "q.jsonl"
    queries.write_text(json.dumps({"text": ENGLISH}) + "\n")
    for check in ("--check", "--no-check"):
        assert_clean_error(simq(runner, "near", ENGLISH, "--db", small_db, "--limit", "-1", check), "--limit", 2)
        none = simq(runner, "near", ENGLISH, "--db", small_db, "--limit", "0", "--json", check)
        assert none.exit_code == 0 and json.loads(none.stdout) == []
        one = simq(runner, "near", ENGLISH, "--db", small_db, "--limit", "1", "--json", check)
        assert len(json.loads(one.stdout)) == 1
        batch = simq(runner, "near", "--batch", queries, "--db", small_db, "--limit", "0", check)
        assert batch.exit_code == 0 and json.loads(batch.stdout)["matches"] == []
        assert_clean_error(simq(runner, "near", "--batch", queries, "--db", small_db, "--limit", "-1", check),
                           "--limit", 2)


def test_sql_and_shell_are_read_only_and_create_no_files(runner, small_db, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    before = sorted(os.listdir(tmp_path))
    for sql in ("ATTACH 'zz.db' AS zz", "VACUUM INTO 'vv.db'"):
        assert_clean_error(simq(runner, "sql", sql, "--db", small_db), "does not exist: it would be created")
    missing = simq(runner, "sql", "ATTACH 'nofolder/x.db' AS x", "--db", small_db, "--write")
    assert_clean_error(missing, "nofolder/x.db")
    assert "a file the SQL names cannot be opened" in missing.stderr and "index file" not in missing.stderr
    assert sorted(os.listdir(tmp_path)) == before
    assert simq(runner, "sql", "ATTACH 'mine.db' AS mine; CREATE TABLE mine.t (x)", "--db", small_db,
                "--write").exit_code == 0
    assert (tmp_path / "mine.db").exists()
    script = "DELETE FROM documents;\n"
    shell = run(["shell", small_db], input=script)
    assert shell.returncode == 1 and "read-only; start it with --write" in shell.stderr
    assert len(keys(small_db)) == 3
    written = run(["shell", small_db, "--write"], input=script)
    assert written.returncode == 0 and keys(small_db) == []


def test_rejected_options_make_no_index_file(runner, tmp_path):
    (tmp_path / "a.txt").write_text(ENGLISH)
    db = tmp_path / "i.db"
    for option in (["--features", "bogus"], ["--ngram", "99"], ["--weights", "heavy"],
                   ["--batch-size", "9223372036854775808"], ["--batch-size", "0"]):
        result = simq(runner, "add", "--db", db, tmp_path / "a.txt", *option)
        assert result.exit_code == 2 and "Traceback" not in result.output, result.output
        assert not db.exists() and not list(tmp_path.glob("i.db*"))


def test_check_leaves_no_wal_or_shm_behind(runner, small_db):
    folder = small_db.parent
    before = sorted(os.listdir(folder))
    assert simq(runner, "integrity", "--db", small_db).exit_code == 0
    assert simq(runner, "integrity", "--db", small_db, "--json").exit_code == 0
    assert sorted(os.listdir(folder)) == before
    with SimhashIndex(small_db, readonly=True) as index:  # the web pages' way of opening: the same
        assert len(index.near(key=path_key(str(folder / "a.txt")))) == 1
        with pytest.raises(Exception, match="readonly"):
            index.add([Document("x", ENGLISH)])
    assert sorted(os.listdir(folder)) == before


def test_huge_numbers_give_one_line(runner, small_db):
    huge = "9223372036854775808"
    assert simq(runner, "clusters", "--db", small_db, "--min-size", huge).exit_code == 0
    assert simq(runner, "near", ENGLISH, "--db", small_db, "--limit", huge).exit_code == 0
