"""add's document path in C (native/documents.c) against the Python path it stands for: every line of every
chunk gives the same record, skip or blank, bit for bit, on hostile JSON as on plain crawl lines."""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import random
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simhash_sqlite.core.fingerprint import to_hex
from simhash_sqlite.core.settings import FingerprintSettings
from simhash_sqlite.core.short_texts import short_text_data
from simhash_sqlite.core.sketch import SketchScheme
from simhash_sqlite.native import documents as native_documents
from simhash_sqlite.pipeline import jsonl
from simhash_sqlite.pipeline.jsonl import RecordRules, python_chunk, read_chunk

LIB = native_documents.library()
pytestmark = pytest.mark.skipif(LIB is None, reason="the C core's document path is not built")

FIELDS = ("skips", "lines", "starts", "ends", "keys", "lengths", "hashes", "fingerprints", "sketches",
          "short_texts", "failures", "texts")  # fmt: skip
RULES = RecordRules(settings=FingerprintSettings(), short_texts=True, stream_over=1 << 25)


def same_records(data: bytes, rules: RecordRules = RULES) -> native_documents.Rows:
    """read_chunk (C, the Python path for the lines it leaves) gives what python_chunk gives; the C rows."""
    plan = jsonl._native_plan(rules)
    assert plan is not None
    ours, reference = read_chunk(data, rules), python_chunk(data, rules)
    for name in FIELDS:
        assert getattr(ours, name) == getattr(reference, name), name
    rows = native_documents.read_rows(LIB, data, plan)
    assert rows is not None
    return rows


def records_in_c(rows: native_documents.Rows) -> int:
    return int(np.count_nonzero(rows.kind[: rows.lines] == native_documents.LINE_RECORD))


def test_blake2b_is_hashlibs():
    rng = random.Random(3)
    for size in [*range(0, 300), 1000, 4096, 100_000]:
        data = rng.randbytes(size)
        out = ctypes.create_string_buffer(16)
        LIB.shc_blake2b_128(data, len(data), out)
        assert out.raw == hashlib.blake2b(data, digest_size=16).digest(), size


def test_whitespace_is_str_isspace_for_every_code_point():
    spaces = [cp for cp in range(0x110000) if chr(cp).isspace()]
    assert [cp for cp in range(0x110000) if LIB.shc_is_space(cp)] == spaces


def test_plain_crawl_lines_are_all_read_in_c():
    lines = [
        json.dumps({"id": f"p{i}", "text": f"Page {i}: the quick brown fox jumps over the lazy dog " * (i % 7 + 1),
                    "url": f"https://example.com/{i}", "n": i, "tags": ["a", {"b": None}], "f": 1.5e3})
        for i in range(200)
    ]
    chinese = "中文的文本，用来测试压缩的形式。"
    lines += [json.dumps({"id": i, "text": chinese * (i % 5 + 1)}, ensure_ascii=False) for i in range(100)]
    rows = same_records(("\n".join(lines) + "\n").encode())
    assert records_in_c(rows) == 300


def test_escapes_and_surrogates():
    lines = [
        r'{"id": "a\/b", "text": "caf\u00e9 \ud83d\ude00 tab\tnew\nline \"q\" \\ end"}',
        r'{"id": "lone", "text": "x \ud800 y"}',  # lone high surrogate: skipped by the Python path
        r'{"id": "low", "text": "x \udc00 y"}',
        r'{"id": "pair\ud83d\ude00", "text": "emoji key"}',
        r'{"id": "bad", "text": "bad \x escape"}',
        r'{"id": "nul\u0000", "text": "nul in the id"}',
        r'{"id": "t", "text": "nul \u0000 in the text"}',
        r'{"te\u0078t": "escaped field name", "id": "e"}',
        '{"id": "ctl", "text": "raw \x01 control"}',
        '{"id": "-0", "text": "negative zero id"}',
        '{"id": -0, "text": "negative zero number id"}',
        '{"id": 12345678901234567890123, "text": "big integer id"}',
        '{"id": 1.5, "text": "float id"}',
        '{"id": true, "text": "bool id"}',
        '{"id": null, "text": "null id"}',
        '{"text": "no id"}',
        '{"id": "x", "text": 5}',
        '{"id": "x"}',
        '{"id": "dup", "text": "first", "text": "second"}',
        '{"id": "d1", "id": "d2", "text": "two ids"}',
        '{"id": "nan", "text": "t", "v": NaN}',
        '{"id": "inf", "text": "t", "v": -Infinity}',
        '{"id": "num", "text": "t", "v": 01}',
        '{"id": "num2", "text": "t", "v": 1.}',
        '{"id": "num3", "text": "t", "v": 1e5, "w": -0.5E-3}',
        '[1, 2]',
        '"a string"',
        '{"id": "trail", "text": "t"} x',
        '{"id": "trail2", "text": "t"}   \t\r',
        '   {"id": "lead", "text": "leading space"}',
        '\ufeff{"id": "bom", "text": "t"}',
        '{"id": "deep", "text": "t", "v": ' + "[" * 150 + "]" * 150 + "}",
        '{"id": "deeper", "text": "t", "v": ' + "[" * 5000 + "]" * 5000 + "}",
        '{"id": "long number", "text": "t", "v": ' + "9" * 5000 + "}",
        "\x0b\x0c",
        "",
        "   ",
        '{"id": "sym", "text": "!!! ??? ..."}',  # no letter or digit: no fingerprint
        '{"id": "ws", "text": "\\u3000 a\\u00a0b\\u2028c  \\t d\\u0085"}',
        '{"id": "nfkc", "text": "e\\u0301 combining"}',  # the core declines: the reference computes it
    ]
    data = "\n".join(lines).encode("utf-8", "surrogatepass")
    rows = same_records(data)
    assert records_in_c(rows) >= 10


def test_invalid_utf8_and_a_line_without_its_newline():
    data = b'{"id": "a", "text": "ok"}\n{"id": "b", "text": "bad \xff byte"}\n{"id": "c", "text": "\xed\xa0\x80"}\n' \
           b'{"id": "d", "text": "over\xc0\xafong"}\n{"id": "e", "text": "last"}'
    same_records(data)
    same_records(data, replace(RULES, errors="replace"))


def test_rules_the_c_path_follows():
    data = "\n".join(json.dumps({"doc": f"k{i}", "body": "words " * i, "text": "other"}) for i in range(50)).encode()
    for rules in (
        replace(RULES, text_field="body", id_field="doc"),
        replace(RULES, require_id=True, id_field="missing"),
        replace(RULES, content_hashes=False, short_texts=False),
        replace(RULES, sketches=False, short_texts=False),
        replace(RULES, stream_over=20),  # longer texts are fingerprinted in pieces by the Python path
        replace(RULES, max_record_bytes=100),
        replace(RULES, scheme=SketchScheme(bins=960, bits=1, version=1)),
        replace(RULES, settings=FingerprintSettings(weights="log", ngram=3)),
    ):
        same_records(data, rules)


def test_golden_fingerprints_through_the_document_path():
    golden = Path(__file__).parent / "golden" / "fingerprints.jsonl"
    rows = [json.loads(line) for line in golden.read_text(encoding="utf-8").splitlines()]
    for settings_ in {json.dumps(row["settings"], sort_keys=True) for row in rows}:
        chosen = [row for row in rows if json.dumps(row["settings"], sort_keys=True) == settings_]
        fingerprint_settings = FingerprintSettings(**json.loads(settings_))
        if fingerprint_settings.features != "chars":
            continue  # words: the Python path's alone (the core fingerprints character n-grams)
        rules = replace(RULES, settings=fingerprint_settings)
        data = "".join(json.dumps({"id": str(i), "text": row["text"]}) + "\n" for i, row in enumerate(chosen)).encode()
        records = read_chunk(data, rules)
        got = {int(key): fp for key, fp in zip(records.keys, records.fingerprints)}
        for i, row in enumerate(chosen):
            assert (None if got.get(i) is None else to_hex(got[i])) == row["simhash"], row


def _short_texts(texts: list[str]) -> None:
    data = "".join(json.dumps({"id": str(i), "text": t}) + "\n" for i, t in enumerate(texts)).encode()
    records = read_chunk(data, RULES)
    assert records.short_texts == [short_text_data(t) if fp is not None else None
                                   for t, fp in zip(texts, records.fingerprints)]


def test_short_texts_are_short_text_datas_bytes():
    rng = random.Random(5)
    words = ["alpha", "beta", "中文", "文本", "😀", "x", "\u3000", "\t", "  ", "é", "Straße"]
    texts = ["".join(rng.choice(words) + rng.choice(["", " ", "\n"]) for _ in range(rng.randint(1, 300)))
             for _ in range(300)]
    texts += ["a" * n for n in (1, 351, 352, 1023, 1024, 1025)] + ["中" * n for n in (383, 384, 385, 700)]
    _short_texts(texts)


json_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=60) | st.text(max_size=20)


json_value = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | json_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(json_text, inner, max_size=3),
    max_leaves=8,
)
field_names = st.sampled_from(["id", "text", "url", "te\\u0078t", "x"])


@st.composite
def hostile_lines(draw) -> bytes:
    fields = draw(st.lists(st.tuples(field_names, json_value | json_text | st.integers()), max_size=5))
    parts = []
    for name, value in fields:
        encoded = json.dumps(value, ensure_ascii=draw(st.booleans()))
        parts.append(f'"{name}"{draw(st.sampled_from([":", " : ", ":  "]))}{encoded}')
    line = "{" + draw(st.sampled_from([",", ", ", " ,\t"])).join(parts) + "}"
    raw = line.encode("utf-8", "surrogatepass")
    mangle = draw(st.integers(0, 6))
    if mangle == 1 and raw:  # a byte changed anywhere
        at = draw(st.integers(0, len(raw) - 1))
        raw = raw[:at] + bytes([draw(st.integers(0, 255))]) + raw[at + 1 :]
    elif mangle == 2:  # a raw lone surrogate escape in a string
        raw = raw.replace(b'"text": "', b'"text": "\\ud834', 1)
    elif mangle == 3 and raw:  # cut short
        raw = raw[: draw(st.integers(0, len(raw)))]
    return raw


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(hostile_lines(), min_size=1, max_size=8), st.sampled_from(["\n", "\r\n"]))
def test_hostile_lines_read_as_the_python_path_reads_them(lines, newline):
    same_records(newline.encode().join(lines))


FIELDS_OF_LINES = native_documents.LineFields(b"text", b"id", 1 << 27, 1 << 25)


def python_sets(data: list[bytes], kinds: list[int], fields=FIELDS_OF_LINES) -> list[np.ndarray | None | str]:
    """What dedup's exact check makes of each text or line the Python way: its set, None (out of reach), or
    "skip" (a line the reader would not read, bytes that are no str's UTF-8)."""
    from simhash_sqlite.core.shingles import shingle_set
    from simhash_sqlite.pipeline.jsonl import parse_record

    rules = RecordRules(text_field=fields.text_field.decode(), id_field=fields.id_field.decode())
    out: list[np.ndarray | None | str] = []
    for raw, kind in zip(data, kinds):
        try:
            text = raw.decode("utf-8", "surrogatepass") if kind == native_documents.SET_TEXT else parse_record(
                raw, rules)[2]
        except UnicodeDecodeError:  # (not a text Python could hand over)
            text = None
        out.append("skip" if text is None else None if len(text) > fields.whole_most else shingle_set(text))
    return out


def same_sets(data: list[bytes], kinds: list[int], fields=FIELDS_OF_LINES) -> list[int]:
    """shingle_sets (C) makes what the Python way makes of every text it does not leave; their statuses."""
    made = native_documents.shingle_sets(LIB, data, kinds, fields, 5)
    assert made is not None
    for status, ours, reference in zip(*made, python_sets(data, kinds, fields)):
        if status == native_documents.SET_MADE:
            assert isinstance(reference, np.ndarray) and np.array_equal(ours, reference)
            assert ours.dtype == np.uint64
        elif status == native_documents.SET_LONG:
            assert reference is None and ours is None
        else:
            assert status == native_documents.SET_PYTHON and ours is None
    return made[0]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(hostile_lines(), min_size=1, max_size=8), st.sampled_from(["", "\n", "\r\n"]))
def test_the_exact_check_s_sets_of_hostile_lines_are_the_python_paths(lines, newline):
    data = [line + newline.encode() for line in lines]
    same_sets(data, [native_documents.SET_LINE] * len(data))
    texts = [json.dumps(line.decode("utf-8", "replace")).encode() for line in lines]  # (any text, as the text)
    same_sets(texts + data, [native_documents.SET_TEXT] * len(texts) + [native_documents.SET_LINE] * len(data))


def test_the_exact_check_s_sets_of_texts_lines_and_what_c_leaves():
    """Plain and mixed texts are made in C (as their texts and as lines with other fields and escapes); a lone
    surrogate, invalid UTF-8, a line that is not a record are left to Python; a text over whole_most characters is
    out of reach; a text of nothing but spaces or punctuation has its set (empty, or of its characters)."""
    texts = ["Hello,  World", "\uff28\uff45\uff4c\uff4c\uff4f full width", "\u4e2d\u6587\u7684\u6587\u672c\u3002" * 9,
             "   ", "", "!!", "Stra\u00dfe \ufb03 \u00c5", "ab\u0000cd", "x" * 300]
    lines = [json.dumps({"id": i, "text": t, "more": [1, {"a": "\\"}]}, ensure_ascii=i % 2 == 0).encode() + b"\n"
             for i, t in enumerate(texts)]
    kinds = [native_documents.SET_TEXT] * len(texts) + [native_documents.SET_LINE] * len(lines)
    status = same_sets([t.encode() for t in texts] + lines, kinds)
    assert status == [native_documents.SET_MADE] * len(kinds)
    odd = ["\ud800 lone".encode("utf-8", "surrogatepass"), b"\xff\xfe bad", b'{"text": "\\ud800"}', b"[1, 2]",
           b'{"id": 1}', b'{"te\\u0078t": "escaped name"}', b"", b'{"text": "cut']
    status = same_sets(odd, [native_documents.SET_TEXT] * 2 + [native_documents.SET_LINE] * 6)
    assert status == [native_documents.SET_PYTHON] * len(odd)
    short = replace(FIELDS_OF_LINES, whole_most=5)
    status = same_sets([b"123456", b"12345", b'{"text": "\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9"}'],
                       [native_documents.SET_TEXT, native_documents.SET_TEXT, native_documents.SET_LINE], short)
    assert status == [native_documents.SET_LONG, native_documents.SET_MADE, native_documents.SET_LONG]
    other = replace(FIELDS_OF_LINES, text_field="body".encode(), id_field="\u540d".encode())
    status = same_sets([json.dumps({"\u540d": "k", "body": "a text here", "text": "no"}, ensure_ascii=False).encode()],
                       [native_documents.SET_LINE], other)
    assert status == [native_documents.SET_MADE]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(max_size=300), min_size=1, max_size=40), st.integers(1, 2000), st.booleans(),
       st.booleans())  # fmt: skip
def test_sets_made_in_calls_are_one_calls(texts, call_bytes, aside, hashed):
    """sets_in_calls cuts the texts into calls (of at most call_bytes, half of them on another thread) and gives
    each call's span and sets in order: together what one shingle_sets call makes of them all, with or
    without stored content hashes (a text given another's is SET_CHANGED)."""
    from concurrent.futures import ThreadPoolExecutor

    from simhash_sqlite.store.texts import content_hash_of_utf8

    data = [t.encode("utf-8", "surrogatepass") for t in texts]
    kinds = [native_documents.SET_TEXT] * len(data)
    digests = [content_hash_of_utf8(d) if i % 3 else bytes(16) for i, d in enumerate(data)] if hashed else None
    whole = native_documents.shingle_sets(LIB, data, kinds, FIELDS_OF_LINES, 5, digests)
    assert whole is not None
    with ThreadPoolExecutor(1) as helper, pytest.MonkeyPatch.context() as patch:
        patch.setattr(native_documents, "SETS_SPLIT_BYTES", 1)  # (texts this short are split too)
        spans, statuses, sets = [], [], []
        for a, b, made in native_documents.sets_in_calls(LIB, data, kinds, FIELDS_OF_LINES, 5, digests,
                                                         helper if aside else None, call_bytes):  # fmt: skip
            assert made is not None and len(made[0]) == len(made[1]) == b - a
            spans.append((a, b))
            statuses += made[0]
            sets += made[1]
    assert [a for a, _ in spans] == [0] + [b for _, b in spans[:-1]] and spans[-1][1] == len(data)
    for a, b in spans:  # at most call_bytes a call, or one text alone
        assert b - a == 1 or sum(map(len, data[a:b])) <= call_bytes
    assert statuses == whole[0]
    assert all((x is None and y is None) or np.array_equal(x, y) for x, y in zip(sets, whole[1]))


def _index_rows(path) -> list[tuple]:
    import apsw

    conn = apsw.Connection(str(path))
    try:
        return list(conn.execute("SELECT key, fingerprint, b0, b1, b2, b3, length, content_hash, text, sketch, "
                                 "short_text FROM documents ORDER BY id"))
    finally:
        conn.close()


@pytest.mark.parametrize("store_text", [False, True])
def test_columns_write_what_documents_one_by_one_write(tmp_path, monkeypatch, store_text):
    """add() of packed_documents (FingerprintedBatch columns) writes the rows and reports the counts that
    add() of documents() does: new, changed, unchanged and repeated ids, texts without features, batches cut
    across chunks, an add into an index that holds some of the keys."""
    from simhash_sqlite import SimhashIndex
    from simhash_sqlite.pipeline import sources
    from simhash_sqlite.pipeline.sources import Reader

    monkeypatch.setattr(sources, "CHUNK_BYTES", 2048)  # many chunks, batches across them
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text("".join(json.dumps({"id": f"k{i % 180}", "text": f"text {i} " * (i % 9) or "!!"}) + "\n"
                             for i in range(200)))
    second.write_text("".join(json.dumps({"id": f"k{i}", "text": f"text {i} " * (i % 9) if i % 3 else "changed"})
                              + "\n" for i in range(0, 260, 2)))
    results = {}
    for packed in (False, True):
        db = tmp_path / f"{packed}.db"
        reports = []
        with SimhashIndex(db, create=True, store_text=store_text) as index:
            for path in (first, second):
                reader = Reader()
                paths = reader.expand([str(path)])
                documents = (reader.packed_documents(paths, index.settings, store_text, index.sketch_scheme) if packed
                             else reader.documents(paths, index.settings, store_text, index.sketch_scheme))
                report = index.add(documents, batch_size=70)
                reports.append((report.added, report.updated, report.unchanged, report.without_features,
                                report.batches, report.characters, report.short, reader.duplicate_count))
        results[packed] = (_index_rows(db), reports)
    assert results[True] == results[False]
    assert results[True][1][0][7] == 20 and results[True][1][1][1] > 0  # repeated ids, updates: both seen


def test_jsonl_is_read_on_threads_in_c_and_on_processes_the_input_pays_for_in_python(tmp_path, monkeypatch):
    """With the C path, chunks go to threads (no worker to start, nothing to copy), on every core; the Python
    path's processes are bounded by the input's size (sources.processes_for: one per PROCESS_BYTES)."""
    from simhash_sqlite.core import pool
    from simhash_sqlite.pipeline import sources

    path = tmp_path / "small.jsonl"
    path.write_text("".join(json.dumps({"id": str(i), "text": f"text {i}"}) + "\n" for i in range(50)))
    asked = []

    def spy(function, items, **options):
        asked.append((options.get("threads", False), options.get("most")))
        return pool.map_in_order(function, items, **options)

    monkeypatch.setattr(sources, "map_in_order", spy)
    reader = sources.Reader()
    assert len(list(reader.documents(reader.expand([str(path)]), FingerprintSettings()))) == 50
    monkeypatch.setenv("SIMHASH_SQLITE_CORE", "python")
    reader = sources.Reader()
    assert len(list(reader.documents(reader.expand([str(path)]), FingerprintSettings()))) == 50
    assert asked == [(True, None), (False, 1)]
    assert sources.processes_for(None) > 64 and sources.processes_for(0) == 1
    assert sources.processes_for(3 * sources.PROCESS_BYTES) == 4


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, 40), max_size=30), min_size=1, max_size=8), st.data())
def test_jaccards_of_pairs_are_jaccard_of_sets(sets, data):
    """core/shingles.jaccard_of_pairs in C (shc_docs_jaccards: one call for a search's pairs) gives
    jaccard_of_sets's floats bit for bit: empty sets, a set paired with itself, values near 2**64."""
    from simhash_sqlite.core import shingles

    made = [np.unique(np.array(s, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)) for s in sets]
    a = [made[i] for i in data.draw(st.lists(st.integers(0, len(made) - 1), min_size=1, max_size=20))]
    b = [made[data.draw(st.integers(0, len(made) - 1))] for _ in a]
    ours = shingles.jaccard_of_pairs(a, b)
    assert ours.dtype == np.float64
    assert ours.tolist() == [shingles.jaccard_of_sets(x, y) for x, y in zip(a, b)]
    with pytest.MonkeyPatch.context() as patch:  # a call for every three pairs: the same floats, in order
        patch.setattr(shingles, "JACCARD_PAIRS", 3)
        assert shingles.jaccard_of_pairs(a, b).tolist() == ours.tolist()


def test_jaccards_refuse_sets_and_pairs_out_of_range():
    values = np.arange(6, dtype=np.uint64)
    ends, out = np.array([2, 6], dtype=np.int64), np.empty(1)
    f = LIB.shc_docs_jaccards
    f.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p,
                  ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    for pair, count, ending in (((0, 2), 6, ends), ((-1, 0), 6, ends), ((0, 1), 5, ends),
                                ((0, 1), 6, np.array([3, 2], dtype=np.int64))):
        left, right = np.array([pair[0]], dtype=np.int64), np.array([pair[1]], dtype=np.int64)
        assert f(values.ctypes.data, count, ending.ctypes.data, 2, left.ctypes.data, right.ctypes.data, 1,
                 out.ctypes.data) == -1
    left, right = np.array([0], dtype=np.int64), np.array([1], dtype=np.int64)
    assert f(values.ctypes.data, 6, ends.ctypes.data, 2, left.ctypes.data, right.ctypes.data, 1, out.ctypes.data) == 0
    assert out[0] == 0.0


def _sorted_codes(most: int):
    """Sorted codes key << 32 | position, few keys (so that many are shared), positions distinct."""
    return st.lists(st.tuples(st.integers(0, 6), st.integers(0, 60)), max_size=most, unique_by=lambda t: t[1]).map(
        lambda pairs: np.sort(np.array([(k << 32) | p for k, p in pairs], dtype=np.uint64))
    )


def _kept_set_work(run: np.ndarray, queries: np.ndarray) -> tuple[list, ...]:
    """pipeline/dedup's kept-set code work on these codes: candidates, a merge of two runs and a third merged into
    that, a bit map marked."""
    from simhash_sqlite.pipeline import dedup

    q, position = dedup._candidates(run, queries, 64)
    older = dedup._SketchRun(np.zeros((len(run), 1)), np.arange(len(run)), run)
    newer = dedup._SketchRun(np.zeros((len(queries), 1)), np.arange(len(queries)), queries)
    merged = dedup._SketchRun.merged(older, newer)
    first = merged.codes.tolist()
    half = len(queries) // 2
    third = dedup._SketchRun(np.zeros((half, 1)), np.arange(half), queries[:half])
    again = dedup._SketchRun.merged(merged, third)  # (into merged's room, in place, where C merges: merged is spent)
    seen = np.zeros(1 << 6, dtype=np.uint8)
    if len(run):  # (never called with no codes)
        dedup._mark_seen(seen, run, 9)
    assert q.dtype == position.dtype == np.int64
    return q.tolist(), position.tolist(), first, again.codes.tolist(), seen.tolist()


@settings(max_examples=300, deadline=None)
@given(_sorted_codes(40), _sorted_codes(40))
def test_kept_set_code_work_in_c_is_the_numpy_reference(run, queries):
    """dedup's kept-set code work in C (documents.c shc_codes_*: merge, find, mark) gives what its numpy reference in
    pipeline/dedup.py gives (SIMHASH_SQLITE_CORE=python), value for value: keys shared by many codes, empty runs."""
    ours = _kept_set_work(run, queries)
    saved = os.environ.get("SIMHASH_SQLITE_CORE")
    os.environ["SIMHASH_SQLITE_CORE"] = "python"
    try:
        reference = _kept_set_work(run, queries)
    finally:
        if saved is None:
            del os.environ["SIMHASH_SQLITE_CORE"]
        else:
            os.environ["SIMHASH_SQLITE_CORE"] = saved
    assert ours == reference


def test_kept_set_code_work_in_c_refuses_what_would_reach_past_its_arrays():
    """shc_codes_*: a bit past the map, bits out of range or a NULL where values are is refused, nothing written;
    pairs past the room are counted, and the second call with that room gives every pair."""
    from simhash_sqlite.native import codes as native_codes

    seen = np.zeros(2, dtype=np.uint8)  # 16 bits: bits = 4
    assert not native_codes.marked(seen, np.array([1 << 62, 1 << 63], dtype=np.uint64), 4)  # 1 << 63: slot 16
    assert seen.tolist() == [0, 0]
    assert not native_codes.marked(seen, np.array([1], dtype=np.uint64), 2)
    assert native_codes.marked(seen, np.array([0, 15 << 59], dtype=np.uint64), 4)  # slots 0 and 15
    assert seen.tolist() == [1, 128]
    mark = LIB.shc_codes_mark
    mark.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    assert mark(None, 0, None, 1, 4) == -1 and mark(None, 0, None, 0, 4) == 0
    run = np.array([(5 << 32) | p for p in range(300)], dtype=np.uint64)
    queries = np.array([(5 << 32) | 7, (5 << 32) | 9], dtype=np.uint64)
    q, position = native_codes.found(run, queries, 32)  # 600 pairs: more than its first room, found in a second call
    assert q.tolist() == [7] * 300 + [9] * 300 and position.tolist() == list(range(300)) * 2
    top = np.uint64(0xFFFFFFFF00000000)  # the last key there is: its codes run to the run's end
    both = np.array([top | np.uint64(1), top | np.uint64(2)], dtype=np.uint64)
    q, position = native_codes.found(both, both[:1], 32)
    assert (q.tolist(), position.tolist()) == ([1, 1], [1, 2])
    find = LIB.shc_codes_find
    find.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                     ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    count = ctypes.c_size_t()
    assert find(run.ctypes.data, len(run), queries.ctypes.data, 2, 64, None, None, 0, ctypes.byref(count)) == -1
    assert find(run.ctypes.data, len(run), queries.ctypes.data, 2, 32, None, None, 0, ctypes.byref(count)) == 0
    assert count.value == 600  # counted, nothing written
    merge = LIB.shc_codes_merge
    merge.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint64,
                      ctypes.c_void_p]
    assert merge(None, 1, None, 0, 0, None) == -1
    out = np.zeros(5, dtype=np.uint64)
    assert native_codes.merge_into(out, np.array([3, 9], dtype=np.uint64), np.array([0, 7], dtype=np.uint64), 2)
    assert out.tolist() == [2, 3, 9, 9, 0]
    assert native_codes.merge_into(out, out[:4], np.array([1], dtype=np.uint64), 0)  # in place: out begins with older
    assert out.tolist() == [1, 2, 3, 9, 9]
    assert not native_codes.merge_into(out, out[1:3], np.array([1], dtype=np.uint64), 0)  # older inside out, not first
    assert not native_codes.merge_into(out[:2], out[:1], np.array([1, 2], dtype=np.uint64), 0)  # no room
    assert out.tolist() == [1, 2, 3, 9, 9]
