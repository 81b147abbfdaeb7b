"""Large files are fingerprinted piece by piece: the result must equal simhash() of the whole text."""

from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_sqlite import FingerprintSettings, SimhashIndex, simhash
from simhash_sqlite.core.pieces import pieces, simhash_and_sketch_pieces, simhash_pieces
from simhash_sqlite.core.sketch import DEFAULT_SCHEME, SCHEME_V1, sketch
from simhash_sqlite.index import FingerprintedDocument
from simhash_sqlite.pipeline.sources import Reader
from simhash_sqlite.store.integrity import problems
from simhash_sqlite.store.texts import content_hash

# Characters that make normalization context-dependent: combining marks, NFKC expansions that start
# with a space (U+00A8), non-breaking and ideographic spaces, ligatures, Hangul jamo that compose.
TRICKY = list("ab xy\n\t.!1") + ["é", "e\u0301", "\u0301", "\u00a0", "\u00a8", "ß", "ﬁ", "Ａ", "中", "文", "가",
                                    "\u1100", "\u1161", "\u3000", "ǅ", "\u0345", "ΐ"]
# Count weights stream without holding features; the others are tested below.
COUNT = FingerprintSettings(weights="count")
SETTINGS = [COUNT, FingerprintSettings(ngram=1, weights="count"), FingerprintSettings(ngram=3, weights="count"),
            FingerprintSettings(features="words", ngram=1, weights="count"),
            FingerprintSettings(features="words", ngram=2, weights="count")]


@given(
    text=st.lists(st.sampled_from(TRICKY), max_size=120).map("".join) | st.text(max_size=120),
    cuts=st.lists(st.integers(0, 120), max_size=6),
    piece_chars=st.integers(1, 12),
    which=st.sampled_from(range(len(SETTINGS))),
)
@settings(max_examples=300, deadline=None)
def test_pieces_give_the_whole_texts_fingerprint(text, cuts, piece_chars, which):
    chosen = SETTINGS[which]
    bounds = sorted({min(c, len(text)) for c in cuts})
    chunks = [text[a:b] for a, b in zip([0, *bounds], [*bounds, len(text)])]
    assert "".join(pieces(chunks, chosen, piece_chars)) == text
    assert simhash_pieces(chunks, chosen, piece_chars=piece_chars) == simhash(text, chosen)


@given(
    text=st.lists(st.sampled_from(TRICKY + ["word ", "中文", "again "]), max_size=200).map("".join),
    cuts=st.lists(st.integers(0, 200), max_size=6),
    piece_chars=st.integers(1, 16),
    weights=st.sampled_from(["count", "log", "binary"]),
)
@settings(max_examples=200, deadline=None)
def test_pieces_give_the_whole_texts_sketch_in_the_same_pass(text, cuts, piece_chars, weights):
    """A sketch is the bin minima of the shingle hashes: the pieces' minima are the whole text's. Its
    distinct-shingle count comes from the distinct features binary and log weights gather; count
    weights gather none, so their streamed sketch records the count as unknown (0)."""
    chosen = FingerprintSettings(weights=weights)
    bounds = sorted({min(c, len(text)) for c in cuts})
    chunks = [text[a:b] for a, b in zip([0, *bounds], [*bounds, len(text)])]
    whole = sketch(text)
    if whole is not None and weights == "count":
        whole = whole[: DEFAULT_SCHEME.bin_bytes] + bytes(DEFAULT_SCHEME.nbytes - DEFAULT_SCHEME.bin_bytes)
    assert simhash_and_sketch_pieces(chunks, chosen, piece_chars=piece_chars) == (simhash(text, chosen), whole)
    old_scheme = simhash_and_sketch_pieces(chunks, chosen, piece_chars=piece_chars, scheme=SCHEME_V1)[1]
    assert old_scheme == sketch(text, SCHEME_V1)  # an older index's streamed texts get its own scheme


def test_settings_of_other_shingles_stream_without_a_sketch():
    text = "words that a sketch would shingle by characters " * 50
    chosen = FingerprintSettings(features="words", ngram=2)
    assert simhash_and_sketch_pieces([text], chosen, piece_chars=64) == (simhash(text, chosen), None)


ALL_WEIGHTS = [FingerprintSettings(), FingerprintSettings(weights="log"), FingerprintSettings(ngram=2),
               FingerprintSettings(features="words", ngram=2), FingerprintSettings(features="words", weights="log")]


@given(
    text=st.lists(st.sampled_from(TRICKY + ["word ", "中文", "again "]), max_size=200).map("".join),
    piece_chars=st.integers(1, 16),
    spill=st.integers(1, 40),
    which=st.sampled_from(range(len(ALL_WEIGHTS))),
)
@settings(max_examples=200, deadline=None)
def test_binary_and_log_weights_stream_too_spilling_to_disk(text, piece_chars, spill, which):
    """Distinct features gathered in memory, or past `spill` hashes in partitioned temporary files:
    the same fingerprint as the whole text's."""
    chosen = ALL_WEIGHTS[which]
    chunks = [text[i : i + 7] for i in range(0, len(text), 7)]
    assert simhash_pieces(chunks, chosen, piece_chars=piece_chars, spill_hashes=spill) == simhash(text, chosen)


def test_a_large_file_is_streamed_and_stored_like_a_small_one(tmp_path):
    text = ("Streaming keeps memory bounded. 流式读取大文件。 " * 3000 + "end\n") * 3
    path = tmp_path / "large.txt"
    path.write_text(text, encoding="utf-8")
    chosen = COUNT
    reader = Reader(stream_over=1000)  # anything over 1000 bytes is streamed
    [document] = list(reader.documents(reader.expand([str(path)]), chosen))
    assert isinstance(document, FingerprintedDocument)
    assert document.fingerprint == simhash(text, chosen)
    assert document.content_hash == content_hash(text) and document.length == len(text)
    with SimhashIndex(tmp_path / "i.db", create=True, weights="count") as index:
        report = index.add([document])
        assert report.added == 1 and report.characters == len(text)
        assert index.get(str(path)).fingerprint == simhash(text, chosen)
        stored = index.conn.execute("SELECT sketch FROM documents WHERE key = ?", (str(path),)).get
        # Checked by its estimate like any other; count weights gather no distinct shingles, so its
        # sketch records their number as unknown (0), and the estimate is the bins' alone.
        bins = DEFAULT_SCHEME.bin_bytes
        assert stored[:bins] == sketch(text)[:bins] and stored[bins:] == b"\0\0"
        # The same file read whole is unchanged: same content hash.
        whole = list(Reader().documents(Reader().expand([str(path)]), chosen))
        assert index.add(whole).unchanged == 1
    assert problems(tmp_path / "i.db") == []


def test_large_files_that_cannot_be_streamed_are_skipped_with_a_reason(tmp_path):
    big = tmp_path / "big.txt"
    big.write_text("some words " * 500)
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ascii " * 1000 + b"\xff" + b" more" * 10)
    nul = tmp_path / "nul.bin"
    nul.write_bytes(b"\x00" * 5000)
    reader = Reader(stream_over=100)
    log = FingerprintSettings(weights="log")
    [streamed] = reader.documents(reader.expand([str(big)]), log)  # every kind of weights streams
    assert streamed.fingerprint == simhash(big.read_text(), log)
    assert list(reader.documents(reader.expand([str(bad), str(nul)]), COUNT)) == []
    reasons = [skip.reason for skip in reader.skipped]
    assert "byte 0xff at offset 6000" in reasons[0]
    assert "binary" in reasons[1]
    stored = Reader(stream_over=100)
    assert list(stored.documents(stored.expand([str(big)]), COUNT, store_text=True)) == []
    assert "texts are stored" in stored.skipped[0].reason


def test_a_long_jsonl_text_is_fingerprinted_and_sketched_in_pieces(tmp_path):
    text = "A JSONL line may hold a whole book. 一行也可以是一整本书。 " * 400
    path = tmp_path / "book.jsonl"
    path.write_text('{"id": "book", "text": "%s"}\n' % text, encoding="utf-8")
    reader = Reader(stream_over=1000)
    [document] = list(reader.documents([(str(path), True)], FingerprintSettings()))
    assert isinstance(document, FingerprintedDocument)
    assert (document.fingerprint, document.sketch) == (simhash(text), sketch(text))
