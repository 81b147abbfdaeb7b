"""The one normalisation (core.features.normalize) behind the fingerprint, the sketch and the exact Jaccard.

Short texts are stored with whitespace folded only (core/short_texts.py, format 1, what older indexes and
the C writer hold); the check normalises them when read. That is only the same as normalising the original
text if normalize(fold_space(x)) == normalize(x) for every x: checked here for every code point, in the
contexts where folding could change what NFKC composes, and for generated strings."""

from __future__ import annotations

import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_sqlite.core.features import normalize
from simhash_sqlite.core.shingles import fold_space, jaccard, shingle_set
from simhash_sqlite.core.short_texts import short_text_data, short_text_shingles

# Around each code point: whitespace runs that folding shortens or strips, a letter that could compose with
# a mark, and a combining mark that could compose with it.
CONTEXTS = ("{}", " {} ", "a\u2003\u00a0{}\t\tb", "{}\u0301", "e{}", "\u3000{}\u3000\u3000x", "{}\u00a0\u0308")


def test_folding_whitespace_first_changes_nothing_for_any_code_point():
    # Every code point in every context, 4,096 at a time between whitespace runs (separators that fold
    # and compose with nothing); a block that differs is looked at one code point at a time.
    differ = []
    for context in CONTEXTS:
        for start in range(0, sys.maxunicode + 1, 4096):
            pieces = [context.format(chr(code)) for code in range(start, min(start + 4096, sys.maxunicode + 1))]
            text = " \u00a0\n".join(pieces)
            if normalize(fold_space(text)) != normalize(text):
                differ += [(hex(start + i), context) for i, piece in enumerate(pieces)
                           if normalize(fold_space(piece)) != normalize(piece)] or [(hex(start), "block")]
    assert differ == []


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from(" \t\n\u00a0\u3000\u2003\u0301\u0308\uff0c")))
def test_folding_whitespace_first_changes_nothing_for_any_text(text):
    assert normalize(fold_space(text)) == normalize(text)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from(" \t\n\u3000\uff0cAbC"), min_size=1))
def test_a_stored_short_text_gives_the_shingles_of_its_original(text):
    data = short_text_data(text)
    if data is not None:
        assert (short_text_shingles(data) == shingle_set(text)).all()


def test_the_exact_jaccard_ignores_case_width_and_whitespace():
    text = "The quick brown fox jumps over the lazy dog, again and again."
    assert jaccard(text, text.upper()) == 1.0
    assert jaccard(text, "  The quick\tbrown   fox\njumps over the lazy dog, again and again.  ") == 1.0
    assert jaccard("ＡＢＣ１２３ full width", "ABC123 full width") == 1.0
    assert jaccard("中文标点，句号。括号（测试）：冒号", "中文标点,句号。括号(测试):冒号") == 1.0
    # Not everything is folded: other words are other shingles.
    assert jaccard(text, text.replace("lazy", "sleepy")) < 1.0
