"""The checked search in one C call (find/native_near.py) answers exactly as the numpy reference path: the same
matches, Jaccards, verdicts, certainties, uncertain list, counts and plan, on indexes with stored texts, with
short texts' exact data only, and with texts in files (some edited or gone after the add, some documents
without a sketch)."""

from __future__ import annotations

import dataclasses
import json
import random
import re
import string

import apsw
import pytest
from test_cli import simq

from simhash_sqlite import Document, SimhashIndex
from simhash_sqlite.errors import InvalidInput
from simhash_sqlite.find.queries import Query
from simhash_sqlite.native import extension, library_path, mode

pytestmark = pytest.mark.skipif(
    not library_path().exists() or not library_path("simhash").exists() or extension.built_without()
    or mode() == "python",
    reason="the C core or the loadable extension (with zlib) is not built, or SIMHASH_SQLITE_CORE=python",
)


def corpus(seed: int) -> dict[str, str]:
    """Families of English-like and Chinese texts, short (kept as short texts' exact data) and long, with cut,
    edited and case-changed copies, so that verdicts fall on both sides of the line by every rule."""
    rng = random.Random(seed)
    words = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 8))) for _ in range(300)]
    hanzi = [chr(rng.randint(0x4E00, 0x4FFF)) for _ in range(400)]
    docs = {}
    for f in range(8):
        size = (12, 40, 300, 300)[f % 4]
        if f % 2:
            base = "".join(rng.choice(hanzi) for _ in range(size * 3))
            pieces = list(base)
        else:
            base = " ".join(rng.choice(words) for _ in range(size))
            pieces = base.split(" ")
        docs[f"f{f}"] = base
        for i, share in enumerate((0.93, 0.82, 0.78, 0.6)):
            docs[f"f{f}t{i}"] = base[: int(len(base) * share)]
        for i, edits in enumerate((1, 4)):
            copy = list(pieces)
            for _ in range(edits):
                copy[rng.randrange(len(copy))] = rng.choice(hanzi if f % 2 else words)
            docs[f"f{f}e{i}"] = ("" if f % 2 else " ").join(copy)
        docs[f"f{f}u"] = base.upper()
    return docs


def same_answer(native: SimhashIndex, reference: SimhashIndex, query: Query, seen: set, **options) -> bool:
    """native's search equals reference's (the numpy path); True where there was an answer. seen: gets the
    counts (CheckSummary) that were not 0."""
    args = dict(fingerprint=query.fingerprint, key=query.key, **options)
    try:
        expected = reference.search(query.text, **args)
    except InvalidInput as exc:
        with pytest.raises(InvalidInput, match=re.escape(str(exc))):
            native.search(query.text, **args)
        return False
    got = native.search(query.text, **args)
    assert dataclasses.replace(got, report=None) == dataclasses.replace(expected, report=None), query
    assert got.report is not None and expected.report is not None
    assert dataclasses.replace(got.report, check_seconds=0) == dataclasses.replace(expected.report, check_seconds=0)
    seen.update(name for name in COUNTS if getattr(got.report, name))
    return True


COUNTS = ("checked", "rejected", "estimated", "estimate_rejected", "unchecked", "too_far", "sure", "uncertain")


def open_pair(db) -> tuple[SimhashIndex, SimhashIndex]:
    native, reference = SimhashIndex(db, readonly=True), SimhashIndex(db, readonly=True)
    assert native._native.usable()
    reference._native._usable = False  # the numpy path, the reference
    return native, reference


def compare(db, queries: list[Query]) -> set[str]:
    """Every query at several k (with forced probes at 24, a limit at 5) by both paths; the counts seen."""
    native, reference = open_pair(db)
    ran, seen = 0, set()
    with native, reference:
        for query in queries:
            for k in (0, 3, 7, 12, 16, 20):
                ran += same_answer(native, reference, query, seen, k=k)
            ran += same_answer(native, reference, query, seen, k=24, plan="index")
            ran += same_answer(native, reference, query, seen, k=5, limit=1)
        assert native._native.usable()
    assert ran > len(queries) * 6
    return seen


def text_queries(docs: dict[str, str], rng: random.Random) -> list[Query]:
    chosen = rng.sample(sorted(docs), 14)
    queries = [Query(text=docs[key]) for key in chosen]
    queries += [Query(text=docs[key][5:] + " and a tail") for key in chosen[:4]]
    return queries + [Query(text="!!! ???")]  # no features: the same error


def test_without_texts_short_texts_exact_long_ones_estimated(tmp_path):
    docs = corpus(1)
    db = tmp_path / "plain.db"
    with SimhashIndex(db, create=True) as index:
        index.add(Document(key, text) for key, text in docs.items())
        fingerprints = [index.get(key).fingerprint for key in sorted(docs)[:6]]
    seen = compare(db, text_queries(docs, random.Random(2)) + [Query(fingerprint=f) for f in fingerprints])
    assert {"checked", "rejected", "estimated", "estimate_rejected", "unchecked", "uncertain"} <= seen


def test_with_stored_texts(tmp_path):
    docs = corpus(3)
    db = tmp_path / "stored.db"
    with SimhashIndex(db, create=True, store_text=True) as index:
        index.add(Document(key, text) for key, text in docs.items())
    seen = compare(db, text_queries(docs, random.Random(4)))
    assert {"checked", "rejected", "estimate_rejected"} <= seen and "estimated" not in seen


def test_with_texts_in_files_some_edited_gone_or_unsketched(runner, tmp_path):
    docs = corpus(5)
    folder = tmp_path / "docs"
    folder.mkdir()
    for key, text in docs.items():
        (folder / f"{key}.txt").write_text(text, encoding="utf-8")
    db = tmp_path / "files.db"
    assert simq(runner, "add", "--db", db, folder).exit_code == 0
    (folder / "f0t1.txt").write_text(docs["f0t1"] + " changed after the add", encoding="utf-8")
    (folder / "f2.txt").unlink()  # a long text gone: estimated
    (folder / "f6.txt").unlink()  # and without a sketch: by distance
    conn = apsw.Connection(str(db))
    with conn:  # as if indexed before sketches
        conn.execute("UPDATE documents SET sketch = NULL WHERE key LIKE '%f4e%' OR key LIKE '%f6.txt'")
    conn.close()
    seen = compare(db, text_queries(docs, random.Random(6)) + [Query(text=docs[key]) for key in ("f2", "f4", "f6")])
    assert {"checked", "rejected", "estimated", "estimate_rejected", "unchecked"} <= seen


def test_with_texts_in_jsonl_lines_some_changed(runner, tmp_path):
    """Documents added from a JSONL file are checked against their lines read again (store.texts.TextReader):
    the C path hands them back to Python as it does files, so both paths give exact verdicts; a line changed
    after the add is estimated by both."""
    docs = corpus(9)
    crawl = tmp_path / "crawl.jsonl"
    lines = [json.dumps({"id": key, "text": text}, ensure_ascii=False) for key, text in docs.items()]
    crawl.write_text("\n".join(lines) + "\n", encoding="utf-8")
    db = tmp_path / "lines.db"
    assert simq(runner, "add", "--db", db, crawl).exit_code == 0
    # f2's line edited in place with the same length: its hash no longer matches, so it is estimated
    raw = crawl.read_bytes()
    at = raw.index(json.dumps(docs["f2"], ensure_ascii=False).encode()) + 2
    crawl.write_bytes(raw[:at] + (b"Z" if raw[at:at + 1] != b"Z" else b"Y") + raw[at + 1:])
    seen = compare(db, text_queries(docs, random.Random(10)) + [Query(text=docs[key]) for key in ("f0", "f2", "f4")])
    assert {"checked", "rejected", "estimated"} <= seen


def test_a_batch_answers_as_single_searches(tmp_path):
    docs = corpus(7)
    db = tmp_path / "batch.db"
    with SimhashIndex(db, create=True) as index:
        index.add(Document(key, text) for key, text in docs.items())
    native, reference = open_pair(db)
    queries = text_queries(docs, random.Random(8)) + [Query(key="f1")]
    with native, reference:
        got = list(native.near_many(queries, k=7))
        expected = list(reference.near_many(queries, k=7))
    assert len(got) == len(expected) == len(queries)
    for (_, mine), (_, theirs) in zip(got, expected):
        if hasattr(mine, "report"):
            assert dataclasses.replace(mine, report=None) == dataclasses.replace(theirs, report=None)
        else:
            assert mine == theirs
