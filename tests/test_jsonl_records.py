"""A JSONL chunk's records from shared work (pipeline/jsonl.py): each text is encoded to UTF-8 once, by the
check for unpaired surrogates, and those bytes are its content hash's and the C core's; json's scanner runs
without json.loads's wrappers; whitespace is folded by str.split. Each is compared here with what it
replaced, on generated text (unpaired surrogates, emoji, NUL, every kind of whitespace, empty)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_sqlite import Document, native
from simhash_sqlite.core.fingerprint import simhash_and_sketch_many, simhash_many
from simhash_sqlite.core.settings import FingerprintSettings
from simhash_sqlite.core.shingles import fold_space
from simhash_sqlite.core.short_texts import short_text_data
from simhash_sqlite.core.sketch import DEFAULT_SCHEME
from simhash_sqlite.pipeline import sources
from simhash_sqlite.pipeline.dedup import Decision, _kept
from simhash_sqlite.pipeline.jsonl import (
    RecordRules,
    _json_object,
    has_lone_surrogate,
    parse_record,
    read_chunk,
    utf8_of,
)
from simhash_sqlite.pipeline.sources import Reader
from simhash_sqlite.store.documents import FingerprintedDocument, fingerprinted
from simhash_sqlite.store.texts import content_hash

# Pieces that make the cases meet: whitespace of every kind (ASCII, the separators \x1c-\x1f, NEL, NBSP,
# ideographic), NUL, unpaired surrogates (a high, a low, a pair written as two escapes), emoji, CJK, marks.
PIECES = ["", "a", "Zz", " ", "  ", "\t", "\n", "\r\n", "\x0b\x0c", "\x1c\x1f", "\x85", "\xa0", "\u1680",
          "\u2000\u200a", "\u2028\u2029", "\u202f", "\u3000", "\x00", "\ud800", "\udfff", "\ud83d\ude00", "😀",
          "中文", "é", "e\u0301", "ß", "ﬁ", ".", "-"]
texts = st.one_of(
    st.lists(st.sampled_from(PIECES), max_size=40).map("".join),
    st.text(st.characters(min_codepoint=0, max_codepoint=sys.maxunicode, exclude_categories=()), max_size=80),
)


def old_fold_space(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def old_has_lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


def test_str_split_takes_the_whitespace_of_the_regular_expression_on_every_code_point():
    space = re.compile(r"\s")
    differ = [hex(c) for c in range(sys.maxunicode + 1) if (space.match(chr(c)) is not None) != chr(c).isspace()]
    assert differ == []


@given(texts)
@settings(max_examples=500, deadline=None)
def test_fold_space_is_the_regular_expression(text):
    assert fold_space(text) == old_fold_space(text)


@given(texts)
@settings(max_examples=500, deadline=None)
def test_one_encoding_is_the_surrogate_check_and_the_content_hash(text):
    utf8 = utf8_of(text)
    assert (utf8 is None) == old_has_lone_surrogate(text) == has_lone_surrogate(text)
    if utf8 is not None:
        assert utf8 == text.encode("utf-8", "surrogatepass")
        assert hashlib.blake2b(utf8, digest_size=16).digest() == content_hash(text)


@pytest.mark.skipif(native.core() is None, reason="the C core is not built")
@given(st.lists(texts, max_size=8))
@settings(max_examples=100, deadline=None)
def test_the_core_given_the_encoded_texts_gives_what_it_gives_encoding_them(batch):
    utf8 = [text.encode("utf-8", "surrogatepass") for text in batch]
    lib = native.core()
    for scheme in (None, DEFAULT_SCHEME):
        made, given_bytes = native.batch(lib, batch, scheme=scheme), native.batch(lib, batch, scheme=scheme, utf8=utf8)
        for a, b in zip(made, given_bytes):
            assert (a is None and b is None) or (a == b).all()
    # The reference refuses unpaired surrogates (the core declines them): JSONL never hands them on.
    clean = [text for text in batch if not old_has_lone_surrogate(text)]
    utf8 = [text.encode("utf-8") for text in clean]
    settings_ = FingerprintSettings()
    assert simhash_and_sketch_many(clean, settings_, utf8=utf8) == simhash_and_sketch_many(clean, settings_)
    assert simhash_many(clean, settings_, utf8=utf8) == simhash_many(clean, settings_)
    with pytest.raises(ValueError, match="encoded texts"):
        native.batch(lib, clean + ["one more"], utf8=utf8)


def json_outcome(function, line: str):
    """(value) or (exception type, message) of function(line)."""
    try:
        return ("value", function(line))
    except (ValueError, RecursionError) as exc:
        return (type(exc).__name__, getattr(exc, "msg", str(exc)))


@st.composite
def json_lines(draw):
    """Lines of JSON and near-JSON: objects with whitespace before and after, trailing data, a byte order
    mark, cut short, other values, raw control characters."""
    record = {"id": draw(st.one_of(st.text(max_size=8), st.integers(), st.none(), st.floats(allow_nan=False))),
              "text": draw(texts)}
    body = json.dumps(record, ensure_ascii=draw(st.booleans()))
    if draw(st.integers(0, 3)) == 0:
        body = json.dumps(draw(st.recursive(st.none() | st.integers() | st.text(max_size=4),
                                            lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                                                st.text(max_size=3), inner, max_size=3))))
    space = st.text(st.sampled_from(" \t\r\n\x0b\xa0\u3000"), max_size=3)
    before, after = draw(space), draw(space)
    cut = draw(st.integers(0, len(body)))
    how = draw(st.sampled_from(["whole"] * 5 + ["cut", "extra", "bom", "raw control"]))
    if how == "cut":
        body = body[:cut]
    elif how == "extra":
        body += draw(st.sampled_from(["x", "{}", ",", "]", "\x00", " 1"]))
    elif how == "bom":
        body = "\ufeff" + body
    elif how == "raw control":
        body = body[:cut] + "\x01" + body[cut:]
    return before + body + after


@given(json_lines())
@settings(max_examples=1000, deadline=None)
def test_the_scanner_without_its_wrappers_is_json_loads(line):
    assert json_outcome(_json_object, line) == json_outcome(json.loads, line)


@given(st.lists(json_lines(), max_size=12), st.booleans())
@settings(max_examples=150, deadline=None)
def test_a_chunks_records_are_what_the_functions_they_replaced_give(lines, final_newline):
    # A raw unpaired surrogate (ensure_ascii=False) becomes bytes that are not UTF-8: a skipped line.
    data = "\n".join(lines).encode("utf-8", "surrogatepass") + (b"\n" if final_newline else b"")
    rules = RecordRules(settings=FingerprintSettings(), short_texts=True, stream_over=40)
    records = read_chunk(data, rules)
    parts = data.split(b"\n")  # the lines with their newlines, as read_chunk reads them
    lines_read = [part + b"\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])
    texts, keys = [], []
    for number in [i for i, line in enumerate(lines_read) if line.strip()]:
        _, key, text, reason = parse_record(lines_read[number], rules)
        assert ((number, reason) in [(s[0], s[1]) for s in records.skips]) == (reason is not None)
        if reason is None:
            texts.append(text)
            keys.append(key)
    assert records.keys == keys
    assert records.lengths == [len(text) for text in texts]
    assert records.hashes == [content_hash(text) for text in texts]
    # The texts over stream_over characters are fingerprinted in pieces (the same numbers: test_streaming.py).
    whole = [i for i, text in enumerate(texts) if len(text) <= 40]
    fingerprints, sketches = simhash_and_sketch_many([texts[i] for i in whole], FingerprintSettings())
    assert [records.fingerprints[i] for i in whole] == fingerprints
    assert [records.sketches[i] for i in whole] == sketches
    assert records.short_texts == [
        None if fp is None or len(text) > 40 else short_text_data(text)
        for text, fp in zip(texts, records.fingerprints)
    ]


def test_a_text_with_an_unpaired_surrogate_or_bad_utf8_is_skipped_and_others_keep_their_bytes():
    rules = RecordRules(settings=FingerprintSettings())
    lines = [
        '{"id": "a", "text": "lone \\ud800 high"}',
        '{"id": "b\\udfff", "text": "a lone low surrogate in the id"}',
        '{"id": "c", "text": "a pair \\ud83d\\ude00 is one emoji"}',
        '{"id": "d", "text": ""}',
        '{"id": "e", "text": "NUL \\u0000 inside"}',
    ]
    data = "\n".join(lines).encode() + b'\n{"id": "f", "text": "raw \xed\xa0\x80 surrogate bytes"}\n'
    records = read_chunk(data, rules)
    assert [(line, reason[:25]) for line, reason, _ in records.skips] == [
        (0, "the JSON holds an unpaire"), (1, "the JSON holds an unpaire"), (5, "not utf-8; try --encoding")]
    assert records.keys == ["c", "d", "e"]
    assert records.hashes == [content_hash("a pair 😀 is one emoji"), content_hash(""), content_hash("NUL \x00 inside")]


def test_repeated_ids_within_and_across_chunks_name_their_first_place(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # keys and places name the file as d.jsonl
    ids = ["a", "b", "a", None, "c", "b", "b", None, "a", "d", "c"]
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"text": f"text {n}"} | ({} if key is None else {"id": key})) + "\n"
                            for n, key in enumerate(ids)))
    cases = [(40, None, 8), (100, None, sources.SEEN_BITS), (1 << 20, None, 8), (100, FingerprintSettings(), 64)]
    for chunk_bytes, index_settings, seen_bits in cases:
        monkeypatch.setattr(sources, "CHUNK_BYTES", chunk_bytes)  # a line or a few a chunk, or all in one
        monkeypatch.setattr(sources, "SEEN_BITS", seen_bits)  # 8: every id may have been seen (all one bit)
        reader = Reader()
        documents = list(reader.documents(reader.expand([str(path)]), index_settings))
        first: dict[str, int] = {}
        expected_keys, expected_duplicates = [], []
        for number, key in enumerate(ids, 1):
            key = key or f"d.jsonl:{number}"
            if key in first:
                expected_duplicates.append((f"d.jsonl:{number}", key, f"d.jsonl:{first[key]}"))
            else:
                first[key] = number
                expected_keys.append(key)
        assert [doc.key for doc in documents] == expected_keys
        assert [(d.where, d.key, d.first) for d in reader.duplicates] == expected_duplicates
        assert reader.duplicate_count == len(expected_duplicates) and reader.keyed_by_line == 2


@given(st.lists(st.sampled_from([b"a", b"{}", b"\n", b"\r", b" ", b"\xff"]), max_size=6).map(b"".join))
@settings(max_examples=300, deadline=None)
def test_a_kept_line_is_written_as_it_was_with_one_newline(raw):
    decision = Decision(Document("k", "t"), raw, 1)
    assert decision.output_line() == raw.rstrip(b"\r\n") + b"\n"


def test_documents_and_decisions_made_without_init_are_the_dataclasses_own():
    made = fingerprinted("k", 7, 3, b"h" * 16, b"s" * 120, None, b"\x00x")
    built = FingerprintedDocument("k", 7, 3, b"h" * 16, b"s" * 120, None, b"\x00x")
    assert made == built and vars(made) == vars(built) and hash(made) == hash(built) and repr(made) == repr(built)
    kept = _kept(built, b"{}\n", 7)
    assert kept == Decision(built, b"{}\n", 7) and vars(kept) == vars(Decision(built, b"{}\n", 7))
    for cls in (FingerprintedDocument, Decision):  # a field, a check or slots added later must be seen here
        assert list(vars(made if cls is FingerprintedDocument else kept)) == [f.name for f in dataclasses.fields(cls)]
        assert not hasattr(cls, "__post_init__") and not hasattr(cls, "__slots__")
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.key = "other"  # type: ignore[misc]
