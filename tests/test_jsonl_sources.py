"""Documents added from JSONL files keep where their line is (migration 0006), so that without stored texts
their pairs are checked by the exact Jaccard, as with --store-text, while the file still holds what was
indexed; an edited, moved, truncated or hostile source gives the estimate, never an error."""

from __future__ import annotations

import json
import os
import random

import apsw
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_cli import simq

from simhash_sqlite import SimhashIndex
from simhash_sqlite.native import SWITCH
from simhash_sqlite.native import documents as native_documents
from simhash_sqlite.pipeline import sources
from simhash_sqlite.pipeline.sources import Reader
from simhash_sqlite.store.texts import TextReader, content_hash, key_path
from simhash_sqlite.web.pages import missing_text_reason

# What makes a file as it was before migration 0006 (with PRAGMA user_version set back by the caller).
WITHOUT_SOURCES = (
    "DROP TABLE sources; ALTER TABLE documents DROP COLUMN source; ALTER TABLE documents DROP COLUMN line_at; "
    "ALTER TABLE documents DROP COLUMN line_bytes; "
)

WORDS = "the quick brown fox jumps over a lazy dog while seven wizards quietly box and judge my vow".split()


def family_texts(seed: int = 5, families: int = 12, copies: int = 4) -> dict[str, str]:
    """Families of near copies (a few words changed each), of lengths short and long, some Chinese."""
    rng = random.Random(seed)
    texts = {}
    for f in range(families):
        length = rng.choice((30, 80, 400))
        base = [rng.choice(WORDS) + str(rng.randrange(50)) for _ in range(length)]
        if f % 4 == 3:
            base = [w + "中文" for w in base]
        for c in range(copies):
            words = list(base)
            for _ in range(c * max(1, length // 60)):
                words[rng.randrange(length)] = rng.choice(WORDS)
            texts[f"d{f}-{c}"] = " ".join(words)
    return texts


def write_jsonl(path, texts: dict[str, str], field: str = "text", extra: bool = True) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for i, (key, text) in enumerate(texts.items()):
            record = {"id": key, field: text, **({"url": f"https://x/{i}", "n": i} if extra else {})}
            f.write(json.dumps(record, ensure_ascii=i % 2 == 0) + ("\r\n" if i % 5 == 0 else "\n"))
            if i % 7 == 0:
                f.write("\n")  # blank lines are neither records nor skips


def pairs(runner, db, *more) -> dict[tuple[str, str], dict]:
    result = simq(runner, "dupes", "--db", db, "--format", "jsonl", *more)
    assert result.exit_code == 0, result.output
    return {(r["first"], r["second"]): r for r in map(json.loads, result.stdout.splitlines())}


def kinds_beyond_short(runner, db) -> set[str]:
    """How the pairs were checked, but for those of two short texts (their exact data is kept in the index,
    core/short_texts.py: exact wherever the source is)."""
    conn = apsw.Connection(str(db))
    short = {key for (key,) in conn.execute("SELECT key FROM documents WHERE short_text IS NOT NULL")}
    conn.close()
    return {r["checked_by"] for pair, r in pairs(runner, db).items() if not set(pair) <= short}


def test_a_jsonl_index_gives_the_exact_verdicts_of_a_store_text_index(runner, tmp_path):
    texts = family_texts()
    source = tmp_path / "crawl.jsonl"
    write_jsonl(source, texts)
    plain, stored = tmp_path / "plain.db", tmp_path / "stored.db"
    assert simq(runner, "add", "--db", plain, source).exit_code == 0
    assert simq(runner, "add", "--db", stored, "--store-text", source).exit_code == 0
    with SimhashIndex(plain) as index:
        reader = TextReader(index)
        assert {key: reader.row(key)[0] for key in texts} == texts  # every line read back, by key
        assert {key: text for key, (text, _) in reader.rows(list(texts)).items()} == texts  # in bulk
    got, want = pairs(runner, plain), pairs(runner, stored)
    assert got == want and len(got) >= 12
    assert {r["checked_by"] for r in got.values()} == {"exact"}
    for key in ("d0-0", "d5-1", "d11-3"):
        near_plain = simq(runner, "near", "--db", plain, "--key", key, "--json")
        near_stored = simq(runner, "near", "--db", stored, "--key", key, "--json")
        assert json.loads(near_plain.stdout) == json.loads(near_stored.stdout)
    explained = simq(runner, "explain", "--db", plain, "d1-0", "d1-1", "--json")
    assert explained.exit_code == 0 and json.loads(explained.stdout)["checked_by"] == "exact", explained.output


def test_the_text_field_and_encoding_of_the_add_are_read_back(runner, tmp_path):
    texts = family_texts(seed=9, families=3)
    source = tmp_path / "body.jsonl"
    write_jsonl(source, texts, field="body")
    db = tmp_path / "x.db"
    assert simq(runner, "add", "--db", db, "--text-field", "body", source).exit_code == 0
    assert {r["checked_by"] for r in pairs(runner, db).values()} == {"exact"}
    conn = apsw.Connection(str(db))
    root = conn.execute("SELECT value FROM simhash_meta WHERE key = 'key_root'").get
    path, field, encoding, errors = conn.execute("SELECT path, text_field, encoding, errors FROM sources").fetchall()[0]
    conn.close()
    assert (field, encoding, errors) == ("body", "utf-8", "strict")
    assert os.path.samefile(key_path(path, root), source)


def test_a_source_edited_moved_or_truncated_falls_back_to_the_estimate(runner, tmp_path):
    texts = family_texts(seed=2, families=8)
    source = tmp_path / "crawl.jsonl"
    write_jsonl(source, texts)
    db = tmp_path / "x.db"
    assert simq(runner, "add", "--db", db, source).exit_code == 0
    exact = pairs(runner, db)
    assert {r["checked_by"] for r in exact.values()} == {"exact"}
    # One long record edited in place (same length: the offsets of the others stand): its pairs are estimated
    # (a short text's pairs stay exact: the index keeps its exact data, core/short_texts.py).
    edit = max(texts, key=lambda key: len(texts[key]))
    data = source.read_bytes()
    at = data.index(json.dumps(texts[edit][:20])[1:-1].encode())
    source.write_bytes(data[:at] + (b"Z" if data[at:at + 1] != b"Z" else b"Y") + data[at + 1:])
    edited = pairs(runner, db)
    for (a, b), r in edited.items():
        assert r["checked_by"] == ("estimated" if edit in (a, b) else "exact"), (a, b, r)
    assert any(edit in pair for pair in edited)
    # Truncated: the lines past the end are out of reach, those before are still exact.
    source.write_bytes(data[: len(data) // 2])
    assert kinds_beyond_short(runner, db) == {"exact", "estimated"}
    # Moved away, or replaced by a folder: every pair of long texts estimated, nothing fails.
    source.unlink()
    assert kinds_beyond_short(runner, db) == {"estimated"}
    checked = simq(runner, "integrity", "--db", db)  # a source gone is said, not a problem
    assert checked.exit_code == 0 and "1 of the files changed or gone" in checked.output, checked.output
    with SimhashIndex(db) as index:  # the pair page says why a text is not shown
        assert f"its line in {source} has changed" in missing_text_reason(index, edit)
    source.mkdir()
    assert kinds_beyond_short(runner, db) == {"estimated"}


def test_hostile_places_never_read_past_the_end_or_fail(runner, tmp_path):
    texts = family_texts(seed=4, families=4)
    source = tmp_path / "crawl.jsonl"
    write_jsonl(source, texts)
    db = tmp_path / "x.db"
    assert simq(runner, "add", "--db", db, source).exit_code == 0
    conn = apsw.Connection(str(db))
    keys = [key for (key,) in conn.execute("SELECT key FROM documents ORDER BY id")]
    hostile = [(-5, 10), (1 << 62, 10), (0, 0), (0, -1), (0, 1 << 40), (os.path.getsize(source) - 3, 100),
               (3, 7), (0, 1)]  # (STRICT: every value an integer)
    other = conn.execute("SELECT line_at, line_bytes FROM documents WHERE key = ?", (keys[-1],)).get
    hostile.append(other)  # another record's line: a text, but not this one's (its content hash differs)
    for key, (at, size) in zip(keys, hostile):
        conn.execute("UPDATE documents SET line_at = ?, line_bytes = ? WHERE key = ?", (at, size, key))
    conn.execute("UPDATE documents SET source = 99 WHERE key = ?", (keys[len(hostile)],))
    conn.execute("UPDATE documents SET line_at = NULL WHERE key = ?", (keys[len(hostile) + 1],))  # not all three
    conn.close()
    checked = simq(runner, "integrity", "--db", db)
    assert checked.exit_code == 1 and "JSONL line is recorded wrongly" in checked.output
    got = pairs(runner, db)
    with SimhashIndex(db) as index:
        reader = TextReader(index)
        for key in keys[: len(hostile) + 2]:
            assert reader.row(key)[0] is None, key
        assert reader.row(keys[-1])[0] == texts[keys[-1]]
    assert "exact" in {r["checked_by"] for r in got.values()}
    # The source replaced by a shorter file: lines past its end are not at hand.
    source.write_text(json.dumps({"id": "x", "text": "short"}) + "\n", encoding="utf-8")
    assert kinds_beyond_short(runner, db) == {"estimated"}


def test_a_source_naming_the_index_file_is_never_opened(runner, tmp_path):
    texts = family_texts(seed=6, families=3)
    source = tmp_path / "crawl.jsonl"
    write_jsonl(source, texts)
    db = tmp_path / "x.db"
    assert simq(runner, "add", "--db", db, source).exit_code == 0
    conn = apsw.Connection(str(db))
    conn.execute("UPDATE sources SET path = ?", (str(db),))
    conn.close()
    assert kinds_beyond_short(runner, db) == {"estimated"}


def test_stdin_and_text_files_record_no_source(runner, tmp_path):
    texts = family_texts(seed=7, families=2)
    source = tmp_path / "crawl.jsonl"
    write_jsonl(source, texts)
    db = tmp_path / "x.db"
    result = simq(runner, "add", "--db", db, "--jsonl", "-", input=source.read_bytes())
    assert result.exit_code == 0, result.output
    (tmp_path / "a.txt").write_text("a text file", encoding="utf-8")
    assert simq(runner, "add", "--db", db, tmp_path / "a.txt").exit_code == 0
    conn = apsw.Connection(str(db))
    assert conn.execute("SELECT count(*) FROM documents WHERE source IS NOT NULL").get == 0
    assert conn.execute("SELECT count(*) FROM sources").get == 0
    conn.close()


def test_a_store_text_index_records_no_lines(runner, tmp_path):
    source = tmp_path / "crawl.jsonl"
    write_jsonl(source, family_texts(seed=8, families=2))
    db = tmp_path / "x.db"
    assert simq(runner, "add", "--db", db, "--store-text", source).exit_code == 0
    conn = apsw.Connection(str(db))
    assert conn.execute("SELECT count(*) FROM documents WHERE source IS NOT NULL").get == 0
    conn.close()


def test_an_index_made_before_sources_is_read_read_only_and_upgraded(runner, tmp_path):
    texts = family_texts(seed=3, families=3)
    source = tmp_path / "crawl.jsonl"
    write_jsonl(source, texts)
    db = tmp_path / "x.db"
    assert simq(runner, "add", "--db", db, source).exit_code == 0
    conn = apsw.Connection(str(db))
    conn.execute(WITHOUT_SOURCES + "PRAGMA user_version = 5")
    conn.close()
    # Read-only: not migrated, its JSONL documents estimated (their short texts exact).
    assert kinds_beyond_short(runner, db) == {"estimated"}
    assert apsw.Connection(str(db)).pragma("user_version") == 5
    # Added again: migrated, and the unchanged documents get their lines (nothing else written).
    added = simq(runner, "add", "--db", db, source)
    assert added.exit_code == 0 and f"{len(texts)} unchanged" in added.stdout, added.output
    assert kinds_beyond_short(runner, db) == {"exact"}
    assert simq(runner, "integrity", "--db", db).exit_code == 0


def test_a_line_that_moved_within_its_file_is_found_again_by_the_next_add(runner, tmp_path):
    texts = family_texts(seed=10, families=4)
    source = tmp_path / "crawl.jsonl"
    write_jsonl(source, texts)
    db = tmp_path / "x.db"
    assert simq(runner, "add", "--db", db, source).exit_code == 0
    write_jsonl(source, dict(reversed(texts.items())), extra=False)  # the same records, elsewhere
    assert kinds_beyond_short(runner, db) == {"estimated"}
    again = simq(runner, "add", "--db", db, source)
    assert again.exit_code == 0 and f"{len(texts)} unchanged" in again.stdout
    assert kinds_beyond_short(runner, db) == {"exact"}


def lines_of(path, reader: Reader, **read) -> dict[str, tuple[int, int]]:
    """key -> (offset, bytes) of every record Reader gives for a JSONL file, through add's path."""
    out = {}
    from simhash_sqlite.core.settings import FingerprintSettings

    for item in reader.packed_documents(reader.expand([str(path)]), FingerprintSettings()):
        for document in item.documents() if hasattr(item, "documents") else [item]:
            assert document.line is not None
            out[document.key] = document.line[1:]
    return out


LINE = st.one_of(
    st.builds(lambda i, t: json.dumps({"id": f"k{i}", "text": t}, ensure_ascii=False),
              st.integers(0, 10**6), st.text(min_size=0, max_size=300)),
    st.sampled_from(["", "   ", "not json", '{"id": "x"}', '{"text": 5}', "[1, 2]", '{"id": 1, "text": "\\ud800"}']),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(LINE, max_size=60), crlf=st.booleans(), chunk=st.sampled_from([64, 300, 4096, 1 << 20]))
def test_offsets_are_each_lines_place_in_c_and_in_python_alike(tmp_path_factory, monkeypatch, lines, crlf, chunk):
    """Every record's (offset, bytes) is its line in the file, newline included, whatever the chunk size, from
    the C document path and from the Python one alike."""
    folder = tmp_path_factory.mktemp("lines")
    path = folder / "in.jsonl"
    data = "".join(line + ("\r\n" if crlf else "\n") for line in lines).encode("utf-8", "surrogatepass")
    path.write_bytes(data)
    monkeypatch.setattr(sources, "CHUNK_BYTES", chunk)
    found = {}
    for core in ("python", "auto"):
        monkeypatch.setenv(SWITCH, core)
        found[core] = lines_of(path, Reader(key_root=str(folder)))
    assert found["python"] == found["auto"]
    seen = set()
    for key, (at, size) in found["auto"].items():
        raw = data[at : at + size]
        assert raw.endswith(b"\n") and data[at - 1 : at] in (b"", b"\n")
        assert json.loads(raw)["id"] == key
        seen.add(key)
    assert seen == set(found["python"])


def test_content_hash_guards_a_line_rewritten_with_other_text(tmp_path):
    """A line whose text changed but not its length is refused by the hash, not by the place."""
    source = tmp_path / "a.jsonl"
    source.write_text(json.dumps({"id": "a", "text": "abcde " * 20}) + "\n", encoding="utf-8")
    db = tmp_path / "x.db"
    reader = Reader(key_root=str(tmp_path))
    with SimhashIndex(db, create=True) as index:
        index.record_key_root(tmp_path)
        index.add(reader.packed_documents(reader.expand([str(source)]), index.settings))
        assert TextReader(index).row("a")[0] == "abcde " * 20
        source.write_text(json.dumps({"id": "a", "text": "abcdf " * 20}) + "\n", encoding="utf-8")
        assert TextReader(index).row("a")[0] is None
        assert content_hash("abcde " * 20) == index.conn.execute("SELECT content_hash FROM documents").get


@pytest.mark.skipif(native_documents.library() is None, reason="the C core's document path is not built")
@pytest.mark.parametrize("seed", range(3))
def test_the_exact_checks_sets_of_lines_are_the_python_paths(runner, tmp_path, monkeypatch, seed):
    """The exact check reads the JSONL lines of UTF-8 sources through one C call (parse, content hash, shingles:
    check._line_sets): the same shingle sets, or None, as the Python path (SIMHASH_SQLITE_CORE=python), for
    lines as added, edited in place (another content hash), made invalid UTF-8 or given a second text field
    (both left to Python), over the longest text read whole, from a source with another text field, and from
    a Latin-1 one (read the Python way). Every outcome of the C call is met."""
    from simhash_sqlite.find import check
    from simhash_sqlite.store import texts as texts_module

    rng = random.Random(seed)
    words = WORDS + ["中文", "文本", "é", "😀", "Ǆ", "ﬁ", "\t", "\\", '"', "\u3000"]
    made = {f"k{i}": " ".join(rng.choice(words) for _ in range(rng.choice((1, 5, 40, 120)))) for i in range(60)}
    made["blank"], made["empty"] = "  \n ", ""
    lines = [json.dumps({"id": key, "text": text, "txet": "other text", "n": i}, ensure_ascii=i % 2 == 0)
             for i, (key, text) in enumerate(made.items())]  # fmt: skip
    crawl = tmp_path / "crawl.jsonl"
    crawl.write_text("\n".join(lines) + "\n", encoding="utf-8")
    body = tmp_path / "body.jsonl"
    write_jsonl(body, {f"b{i}": text for i, text in enumerate(list(made.values())[:20])}, field="body")
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(b"".join(json.dumps({"id": f"l{i}", "text": f"caf\u00e9 {w} " * 9}, ensure_ascii=False)
                               .encode("latin-1") + b"\n" for i, w in enumerate(WORDS[:6])))  # fmt: skip
    db = tmp_path / "x.db"
    assert simq(runner, "add", "--db", db, crawl).exit_code == 0
    assert simq(runner, "add", "--db", db, "--text-field", "body", body).exit_code == 0
    assert simq(runner, "add", "--db", db, "--encoding", "latin-1", latin).exit_code == 0
    data = bytearray(crawl.read_bytes())
    starts = [0] + [i + 1 for i, byte in enumerate(data) if byte == 10][:-1]
    sizes = [len(text) for text in made.values()]
    for n, i in enumerate(rng.sample(range(len(starts)), 18)):  # edits of the same length: the others stay put
        line = starts[i]
        end = data.index(b"\n", line)
        how = ("text", "utf8", "field")[n % 3]
        if how == "text" and not 0 < sizes[i] <= 300:  # (a text too long to read whole is out of reach anyway)
            how = "utf8"
        if how == "text":
            at = data.index(b'"text": "', line) + 9
            if data[at : at + 1] != b'"':
                data[at] = ord("Q") if data[at] != ord("Q") else ord("R")
        elif how == "utf8":
            data[line + rng.randrange(end - line)] = 0xFF
        else:  # a second "text" field: json.loads takes the last, C leaves the line to Python
            at = data.index(b'"txet"', line)
            data[at : at + 6] = b'"text"'
    crawl.write_bytes(bytes(data))
    conn = apsw.Connection(str(db))  # stored hashes of other lengths (a STRICT BLOB column): no text has one
    for key, digest in zip(("k1", "k2", "k3"), (b"short", b"", b"x" * 32)):
        conn.execute("UPDATE documents SET content_hash = ? WHERE key = ?", (digest, key))
    conn.close()
    monkeypatch.setattr(check, "READ_WHOLE_BYTES", 300)
    monkeypatch.setattr(texts_module, "READ_WHOLE_BYTES", 300)
    statuses: list[int] = []
    real = native_documents.shingle_sets

    def counted(*args, **kwargs):
        out = real(*args, **kwargs)
        statuses.extend(out[0] if out is not None else [])
        return out

    monkeypatch.setattr(native_documents, "shingle_sets", counted)
    found = {}
    for core in ("native", "python"):
        monkeypatch.setenv(SWITCH, core)
        with SimhashIndex(db) as index:
            keys = [key for (key,) in index.conn.execute("SELECT key FROM documents")]
            cache = check.ShingleCache(index)
            cache.prefetch(keys)
            found[core] = {key: None if s is None else s.tobytes() for key, s in cache.entries.items()}
    assert found["native"] == found["python"]
    assert len(found["native"]) == 60 + 2 + 20 + 6
    assert {native_documents.SET_MADE, native_documents.SET_LONG, native_documents.SET_CHANGED,
            native_documents.SET_PYTHON} <= set(statuses)  # fmt: skip
