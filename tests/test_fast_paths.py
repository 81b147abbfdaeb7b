"""The fast paths (normalization, byte histograms, count weights without a sort) against the plain
definitions they replace: bit-identical on every input hypothesis finds."""

import re
import unicodedata

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_sqlite.core.features import normalize, weighted_features
from simhash_sqlite.core.fingerprint import simhash, simhash_of_features
from simhash_sqlite.core.settings import FingerprintSettings


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
    weights = np.array(
        data.draw(st.lists(st.integers(1, 10**6), min_size=len(values), max_size=len(values))), dtype=np.int64
    )
    assert simhash_of_features(hashes, weights) == reference_simhash(hashes, weights)


@given(TEXT, st.sampled_from(["chars", "words"]), st.integers(1, 5), st.sampled_from(["count", "binary", "log"]))
@settings(max_examples=200, deadline=None)
def test_fast_weight_paths_match_distinct_features(text, features, ngram, weights):
    s = FingerprintSettings(features=features, ngram=ngram, weights=weights)
    assert simhash(text, s) == reference_simhash(*weighted_features(text, s))
