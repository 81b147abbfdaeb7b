"""The fast paths (normalization, byte histograms, count weights without a sort) against the plain
definitions they replace: bit-identical on every input hypothesis finds."""

import re
import unicodedata

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from simhash_sqlite.features import _sorted_within_documents, char_units, normalize, weighted_features
from simhash_sqlite.fingerprint import simhash, simhash_of_features
from simhash_sqlite.settings import FingerprintSettings


def reference_normalize(text: str) -> str:
    return re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text).casefold()).strip()


def reference_simhash(hashes: np.ndarray, weights: np.ndarray) -> int | None:
    if len(hashes) == 0:
        return None
    bits = np.unpackbits(hashes.astype(">u8").view(np.uint8)).reshape(-1, 64)
    w = weights.astype(np.float64)
    return int.from_bytes(np.packbits((2.0 * (w @ bits) - w.sum()) > 0).tobytes(), "big")


# Full-width forms, ideographic and other spaces, ligatures, combining marks, Han, ASCII.
TEXT = st.text(
    alphabet=st.sampled_from(list("abcXYZ 09\t\n\u3000\u00a0，。！Ａｂ９＃ﬁ\u0301\u0308é中文字符测试\u2028\u1680Ⅻ"))
    | st.characters(codec="utf-8"),
    max_size=200,
)


@given(TEXT)
@settings(max_examples=400, deadline=None)
def test_normalize_matches_nfkc_casefold_and_folded_spaces(text):
    assert normalize(text) == reference_normalize(text)


@given(st.lists(st.integers(0, 2**64 - 1), max_size=60), st.data())
@settings(max_examples=200, deadline=None)
def test_byte_histogram_simhash_matches_bit_matrix(values, data):
    hashes = np.array(values, dtype=np.uint64)
    weights = np.array(data.draw(st.lists(st.integers(1, 10**6), min_size=len(values), max_size=len(values))), dtype=np.int64)
    assert simhash_of_features(hashes, weights) == reference_simhash(hashes, weights)


@given(TEXT, st.sampled_from(["chars", "words"]), st.integers(1, 5), st.sampled_from(["count", "binary", "log"]))
@settings(max_examples=200, deadline=None)
def test_fast_weight_paths_match_distinct_features(text, features, ngram, weights):
    s = FingerprintSettings(features=features, ngram=ngram, weights=weights)
    assert simhash(text, s) == reference_simhash(*weighted_features(text, s))


def reference_char_units(text: str) -> np.ndarray:
    norm = reference_normalize(text)
    if not any(c.isalnum() for c in norm):
        return np.empty(0, dtype=np.uint64)
    return np.array([ord(c) for c in norm], dtype=np.uint64)


# Besides TEXT: folds to several characters (ß, İ, ŉ), a mark that folds to a letter (U+0345), code
# points above U+FFFF (math letters, emoji, Han extension B), control characters that are spaces.
CHAR_TEXT = st.text(
    alphabet=st.sampled_from(list("aB 中\u3000\t\x1c\x85\u2029ßİŉ\u0345ＡＺ！～\u0301\U0001d400\U0001f600\U00020000\U00010000\uffff_-"))
    | st.characters(codec="utf-8"),
    max_size=120,
)


@given(TEXT | CHAR_TEXT)
@settings(max_examples=500, deadline=None)
def test_char_units_by_table_match_the_normalized_code_points(text):
    assert np.array_equal(char_units(text), reference_char_units(text))


def test_char_units_of_lone_surrogates_behave_as_the_str_path():
    assert len(char_units("!\ud800!")) == 0  # no letter or digit: no features, as normalize() + search gave
    with pytest.raises(UnicodeEncodeError):
        char_units("ab\ud800")


@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 2**64 - 1) | st.integers(0, 3)), max_size=80))
@settings(max_examples=200, deadline=None)
def test_sorting_each_text_on_its_own_equals_the_lexsort(pairs):
    pairs.sort(key=lambda p: p[0])  # texts in order, features in any order within a text
    docs = np.array([d for d, _ in pairs], dtype=np.intp)
    hashes = np.array([h for _, h in pairs], dtype=np.uint64)
    order = np.lexsort((hashes, docs))
    for min_features in (0, 10**9):  # each text on its own; one lexsort
        got_docs, got_hashes = _sorted_within_documents(docs.copy(), hashes.copy(), min_features)
        assert np.array_equal(got_docs, docs[order]) and np.array_equal(got_hashes, hashes[order])
