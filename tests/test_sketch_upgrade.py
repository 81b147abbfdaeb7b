"""An index made before sketches (schema 2) opens, is sketched where its texts can be reached, and
says where not; its pairs are then checked exactly, by the sketches or by distance."""

from __future__ import annotations

import json

import apsw
from test_cli import simq

from simhash_sqlite import SimhashIndex
from simhash_sqlite.core.fingerprint import blocks, simhash, to_signed
from simhash_sqlite.core.settings import FingerprintSettings
from simhash_sqlite.core.sketch import sketch
from simhash_sqlite.store.database import APPLICATION_ID, migrations
from simhash_sqlite.store.texts import content_hash

BASE = " ".join(f"word{i} of a sentence that goes on" for i in range(60))
TEXTS = {"a": BASE, "b": BASE + " and a little more", "c": BASE.replace("word7 ", "other "), "d": "unrelated " * 40}


def old_index(path, texts: dict[str, str], *, store_text: bool) -> None:
    """A file as simhash-sqlite wrote it before migration 0003: schema 2, no sketch column."""
    conn = apsw.Connection(str(path))
    for number, _name, sql in migrations():
        if number <= 2:
            conn.execute(sql)
    conn.pragma("application_id", APPLICATION_ID)
    conn.pragma("user_version", 2)
    meta = {"fingerprint": FingerprintSettings().to_json(), "store_text": "1" if store_text else "0",
            "created_with": "simhash-sqlite 0.1"}
    conn.executemany("INSERT INTO simhash_meta VALUES (?, ?)", meta.items())
    for key, text in texts.items():
        fp = simhash(text)
        conn.execute(
            "INSERT INTO documents (key, fingerprint, b0, b1, b2, b3, length, content_hash, text) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (key, to_signed(fp), *blocks(fp), len(text), content_hash(text), text if store_text else None),
        )
    conn.execute("INSERT INTO documents (key, fingerprint, b0, b1, b2, b3) VALUES (?, ?, ?, ?, ?, ?)",
                 ("bare", to_signed(simhash(BASE)), *blocks(simhash(BASE))))  # a bare fingerprint: no text
    conn.close()


def test_stored_texts_are_sketched_on_open(tmp_path):
    db = tmp_path / "old.db"
    old_index(db, TEXTS, store_text=True)
    with SimhashIndex(db) as index:
        assert index.sketch_upgrade == (len(TEXTS), 1)  # the bare fingerprint has no text
        stored = dict(index.conn.execute("SELECT key, sketch FROM documents"))
        assert stored == {**{key: sketch(text) for key, text in TEXTS.items()}, "bare": None}
        pairs = list(index.dupes())
        # Not every document has a sketch: candidates within k, each judged by the best check it can get.
        kinds = {frozenset((p.first, p.second)): p.checked_by for p in pairs}
        assert kinds[frozenset(("a", "b"))] in ("exact", "estimated")  # sketched now: the text or the sketch
        assert kinds[frozenset(("a", "bare"))] == "distance"
    with SimhashIndex(db) as index:
        assert index.sketch_upgrade is None  # once


def test_files_are_sketched_where_unchanged_and_the_user_is_told(runner, tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    paths = {}
    for key, text in TEXTS.items():
        paths[key] = folder / f"{key}.txt"
        paths[key].write_text(text, encoding="utf-8")
    db = tmp_path / "old.db"
    old_index(db, {str(paths[key]): text for key, text in TEXTS.items()}, store_text=False)
    paths["c"].unlink()
    searched = simq(runner, "dupes", "--db", db, "--format", "jsonl")  # a search never writes: it says how
    assert searched.exit_code == 1 and "needs a schema upgrade" in searched.stderr, searched.output
    upgraded = simq(runner, "vacuum", "--db", db)
    assert upgraded.exit_code == 0, upgraded.output
    assert f"{len(TEXTS) - 1} documents sketched from their texts, 2 could not be" in upgraded.stderr
    result = simq(runner, "dupes", "--db", db, "--format", "jsonl")
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    by_pair = {frozenset((r["first"], r["second"])): r["checked_by"] for r in rows}
    assert by_pair[frozenset((str(paths["a"]), str(paths["b"])))] in ("exact", "estimated")  # sketched now
    assert by_pair[frozenset((str(paths["a"]), str(paths["c"])))] == "distance"  # c: no text, no sketch
    again = simq(runner, "dupes", "--db", db, "--format", "jsonl")
    assert "sketched" not in again.stderr
