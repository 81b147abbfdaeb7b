"""Index files: creation, migrations, and refusing files that are not ours or are too new."""

import os
import sqlite3
import threading
import time

import apsw
import pytest

import simhash_sqlite
from simhash_sqlite import FingerprintSettings, IndexNotFound, NotAnIndex, SchemaTooNew, SimhashIndex
from simhash_sqlite.store.database import APPLICATION_ID, connect, migrations, schema_version


def test_new_index_is_marked_and_migrated(db_path):
    SimhashIndex(db_path, create=True).close()
    conn = sqlite3.connect(db_path)  # Python's own sqlite3: the file is plain, portable SQLite
    assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    assert conn.execute("PRAGMA user_version").fetchone()[0] == schema_version()
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    settings = dict(conn.execute("SELECT key, value FROM simhash_meta"))
    assert '"features"' in settings["fingerprint"]
    conn.close()


def test_a_new_file_is_opened_while_another_connection_holds_its_write_lock(tmp_path):
    """Two adds starting at once on a new file: the one that finds the other writing the file waits for it.

    Turning the new file into WAL (PRAGMA journal_mode=wal) needs the write lock, which the pragma takes by
    upgrading a read transaction: SQLite runs no busy handler for that, so it failed at once with "database
    is locked" (simq: "the index is locked by another process for too long") instead of waiting.
    """
    path = str(tmp_path / "new.db")
    creating = apsw.Connection(path)  # the other process, between its first write and its COMMIT
    creating.execute("BEGIN IMMEDIATE")
    started = time.monotonic()
    released = threading.Timer(1.0, lambda: creating.execute("ROLLBACK"))
    released.start()
    try:
        conn = connect(path, create=True)
    finally:
        released.join()
        creating.close()
    assert time.monotonic() - started >= 1.0  # it could only go on once the lock was let go
    assert conn.pragma("journal_mode") == "wal"
    assert (conn.pragma("application_id"), conn.pragma("user_version")) == (APPLICATION_ID, schema_version())
    conn.close()


def test_a_reader_of_a_file_whose_add_has_not_written_its_schema_is_told_so(tmp_path):
    """What a reader meets while an add is creating the file (or after one killed before its schema): an
    empty WAL database. Read-only it is not "a file that needs a schema upgrade"."""
    path = tmp_path / "new.db"
    conn = apsw.Connection(str(path))
    conn.pragma("journal_mode", "wal")
    conn.close()
    before = path.read_bytes()
    with pytest.raises(IndexNotFound, match="never finished"):
        SimhashIndex(path, readonly=True)
    assert path.read_bytes() == before
    with pytest.raises(IndexNotFound, match="never finished"):  # as a reader that could write is told
        SimhashIndex(path)


def test_migrations_are_found_where_the_package_is_installed():
    assert migrations() and migrations()[0][0] == 1
    package_dir = os.path.dirname(simhash_sqlite.__file__)
    if "site-packages" in package_dir:  # a real (non-editable) install must carry them inside
        assert os.path.isdir(os.path.join(package_dir, "migrations"))


def test_missing_index_is_not_created_by_readers(tmp_path):
    with pytest.raises(IndexNotFound):
        SimhashIndex(tmp_path / "nope.db")
    assert not (tmp_path / "nope.db").exists()


def test_a_file_that_is_not_sqlite_is_refused_untouched(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_bytes(b"just some text, not a database\n" * 100)
    before = path.read_bytes()
    with pytest.raises(NotAnIndex):
        SimhashIndex(path, create=True)
    assert path.read_bytes() == before


def test_someone_elses_sqlite_file_is_refused_untouched(tmp_path):
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(NotAnIndex, match="not a simhash-sqlite index"):
        SimhashIndex(path, create=True)
    assert path.read_bytes() == before


def test_an_index_from_a_newer_schema_is_refused(db_path):
    SimhashIndex(db_path, create=True).close()
    conn = apsw.Connection(str(db_path))
    conn.pragma("user_version", schema_version() + 1)
    conn.close()
    with pytest.raises(SchemaTooNew, match="newer"):
        SimhashIndex(db_path)


def test_a_directory_is_refused(tmp_path):
    with pytest.raises(NotAnIndex):
        SimhashIndex(tmp_path, create=True)


def test_a_new_index_gets_its_schema_and_its_settings_in_one_transaction(tmp_path):
    """An add killed while it creates an index leaves an empty file (the next add creates it) or a whole
    index, never a schema without settings (which integrity reports and searches refuse as never
    finished): the migrations and the first simhash_meta rows are one transaction."""
    statements: list[str] = []

    def trace(conn):
        def record(cursor, sql, bindings):
            statements.append(" ".join(sql.split()).upper())
            return True

        conn.exec_trace = record

    apsw.connection_hooks.append(trace)
    try:
        SimhashIndex(tmp_path / "new.db", create=True).close()
    finally:
        apsw.connection_hooks.remove(trace)
    first = next(i for i, sql in enumerate(statements) if sql.startswith("CREATE TABLE"))
    begin = max(i for i, sql in enumerate(statements[:first]) if sql.startswith("BEGIN"))
    end = next(i for i, sql in enumerate(statements) if i > first and sql.startswith(("COMMIT", "ROLLBACK")))
    inside = statements[begin:end]
    assert any(sql.startswith("INSERT INTO SIMHASH_META") for sql in inside)
    assert sum(sql.startswith("CREATE TABLE") for sql in inside) == sum(
        sql.startswith("CREATE TABLE") for sql in statements)  # every table in it, none after
    with SimhashIndex(tmp_path / "new.db") as index:
        assert index.settings == FingerprintSettings()
