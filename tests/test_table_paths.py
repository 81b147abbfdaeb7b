"""The speed paths of issue 5 (code points folded by table look-up, each text's features sorted on
its own) against the plain definitions they replace: bit-identical on every input hypothesis finds.
tests/test_fast_paths.py and the golden file check the whole fingerprint, unchanged."""

import re
import unicodedata

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_sqlite.core.features import _sorted_within_documents, char_units


def reference_char_units(text: str) -> np.ndarray:
    """normalize() as first written (NFKC, casefold, whitespace runs folded), then its code points;
    empty without a letter or digit."""
    norm = re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text).casefold()).strip()
    if not any(c.isalnum() for c in norm):
        return np.empty(0, dtype=np.uint64)
    return np.array([ord(c) for c in norm], dtype=np.uint64)


# Full-width forms and the ideographic space (folded before the NFKC check), characters that fold to
# several (ß, İ, ŉ), a mark that folds to a letter (U+0345), a combining accent, code points at and
# above U+FFFF (the tables' edge; math letters, emoji, Han extension B), controls that are spaces.
CHAR_TEXT = st.text(
    alphabet=st.sampled_from(
        list("aB 09中文\u3000\t\n\x1c\x85\u00a0\u2028\u2029ßİŉ\u0345ＡＺ９！～\u0301\ufb01Ⅻ"
             "\U0001d400\U0001f600\U00020000\U00010000\uffff_-，。")
    )
    | st.characters(codec="utf-8"),
    max_size=120,
)


@given(CHAR_TEXT)
@settings(max_examples=500, deadline=None)
def test_char_units_by_table_match_the_normalized_code_points(text):
    assert np.array_equal(char_units(text), reference_char_units(text))


def test_char_units_of_lone_surrogates_behave_as_the_str_path():
    assert len(char_units("!\ud800!")) == 0  # no letter or digit: no features, as before
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
