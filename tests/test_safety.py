"""Index files from elsewhere: a file whose schema is not exactly ours is refused before any of its
SQL can run. Each hostile file is crafted with a plain apsw connection, as an attacker would."""

import shutil

import apsw
import pytest
from test_cli import assert_clean_error, simq

from simhash_sqlite import Document, ForeignSchema, NotAnIndex, SchemaTooNew, SimhashIndex
from simhash_sqlite.core.settings import FingerprintSettings
from simhash_sqlite.store import database as storage
from simhash_sqlite.store.functions import register_functions

# Fires on every add; would record a row in simhash_meta through one of our (innocuous) functions.
TRIGGER = """CREATE TRIGGER spy AFTER INSERT ON documents BEGIN
    INSERT OR REPLACE INTO simhash_meta (key, value) VALUES ('spy:' || new.key, hamming(new.fingerprint, 0));
END"""


@pytest.fixture
def good(tmp_path):
    path = tmp_path / "good.db"
    with SimhashIndex(path, create=True) as index:
        index.add([Document("a", "the quick brown fox jumps over the lazy dog")])
    return path


def tamper(path, *statements, pragmas=()):
    conn = apsw.Connection(str(path))
    register_functions(conn, FingerprintSettings())  # the attacker has simhash-sqlite too
    for statement in statements:
        conn.execute(statement)
    for name, value in pragmas:
        conn.pragma(name, value)
    conn.close()


def spied(path) -> list:
    conn = apsw.Connection(str(path))
    try:
        return list(conn.execute("SELECT key FROM simhash_meta WHERE key LIKE 'spy:%'"))
    finally:
        conn.close()


def test_the_trigger_is_live_when_nothing_checks(good, tmp_path):
    """The control: on a connection that skips our checks, the crafted trigger runs our function."""
    tamper(good, TRIGGER)
    copy = tmp_path / "copy.db"
    shutil.copy(good, copy)
    conn = apsw.Connection(str(copy))
    register_functions(conn, FingerprintSettings())
    conn.execute("INSERT INTO documents (key, fingerprint) VALUES ('b', 7)")
    conn.close()
    assert spied(copy) == [("spy:b",)]


def test_a_trigger_calling_our_functions_is_refused_and_never_runs(good, runner):
    tamper(good, TRIGGER)
    before = good.read_bytes()
    with pytest.raises(ForeignSchema, match='trigger "spy" on "documents"'):
        SimhashIndex(good)
    result = simq(runner, "add", "--db", good, "-", input="another text to add, which would fire the trigger")
    assert_clean_error(result, 'trigger "spy"')
    assert_clean_error(simq(runner, "near", "--db", good, "fox", "--k", "64"), "refused")
    assert_clean_error(simq(runner, "shell", good, input="SELECT 1;\n"), "refused")
    assert spied(good) == []
    assert good.read_bytes() == before


@pytest.mark.parametrize(
    "statement, problem",
    [
        ("CREATE VIEW peek AS SELECT key, simhash(text) FROM documents", 'view "peek" was not created'),
        ("CREATE TABLE extra (x)", 'table "extra" was not created'),
        ("CREATE INDEX sneaky ON documents (hamming(fingerprint, 0))", 'index "sneaky" on "documents"'),
        ("DROP INDEX documents_b2", 'index "documents_b2" is missing'),
        ("ALTER TABLE documents ADD COLUMN note TEXT DEFAULT 'x'", 'table "documents" is not defined'),
    ],
)
def test_objects_we_did_not_create_are_refused(good, statement, problem):
    tamper(good, statement)
    before = good.read_bytes()
    with pytest.raises(ForeignSchema, match=problem):
        SimhashIndex(good)
    assert good.read_bytes() == before


def test_a_wrong_application_id_is_refused_and_its_trigger_never_runs(good):
    tamper(good, TRIGGER, pragmas=[("application_id", 1234)])
    with pytest.raises(NotAnIndex, match="not a simhash-sqlite index"):
        SimhashIndex(good, create=True)
    assert spied(good) == []


def test_a_newer_schema_is_refused_and_its_trigger_never_runs(good):
    tamper(good, TRIGGER, pragmas=[("user_version", storage.schema_version() + 1)])
    with pytest.raises(SchemaTooNew):
        SimhashIndex(good)
    assert spied(good) == []


def test_planner_statistics_are_allowed(good):
    tamper(good, "ANALYZE")
    with SimhashIndex(good) as index:
        assert [m.key for m in index.near("the quick brown fox jumps over the lazy dog", k=0, check=False)] == ["a"]


def test_expected_objects_come_from_the_migrations(tmp_path, monkeypatch):
    """A later migration (another issue's 0002) that adds a table and a trigger is accepted at
    version 2 without editing any list; the same trigger in a version-1 file is refused."""
    later = """CREATE TABLE later_things (id INTEGER PRIMARY KEY, size INTEGER NOT NULL) STRICT;
CREATE TRIGGER documents_cluster_gone AFTER DELETE ON documents BEGIN SELECT 1; END;"""
    first = storage.migrations()
    monkeypatch.setattr(storage, "migrations", lambda: (*first, (len(first) + 1, "later_things", later)))
    storage.expected_schema.cache_clear()
    try:
        path = tmp_path / "v2.db"
        SimhashIndex(path, create=True).close()
        SimhashIndex(path).close()  # passes verification at version 2
        old = tmp_path / "v1.db"
        monkeypatch.setattr(storage, "migrations", lambda: first)
        storage.expected_schema.cache_clear()
        SimhashIndex(old, create=True).close()
        tamper(old, "CREATE TRIGGER documents_cluster_gone AFTER DELETE ON documents BEGIN SELECT 1; END")
        with pytest.raises(ForeignSchema, match="documents_cluster_gone"):
            SimhashIndex(old)
    finally:
        storage.expected_schema.cache_clear()


def test_the_shells_open_applies_the_same_checks(good, tmp_path, runner):
    hostile = tmp_path / "hostile.db"
    shutil.copy(good, hostile)
    tamper(hostile, TRIGGER)
    result = simq(runner, "shell", good, input=f".open {hostile}\nSELECT count(*) FROM documents;\n")
    assert result.exit_code == 1 and 'trigger "spy"' in result.stderr
    assert result.stdout.strip() == "1"  # still on the good index
    assert spied(hostile) == []
