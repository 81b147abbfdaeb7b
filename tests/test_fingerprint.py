"""Fingerprints: pure functions, checked against a scalar reference and by their properties."""

import hashlib
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_sqlite import FingerprintSettings, from_hex, hamming, simhash, to_hex, to_signed, to_unsigned
from simhash_sqlite.core.features import normalize, words
from simhash_sqlite.core.fingerprint import blocks, simhash_of_features

MASK = (1 << 64) - 1
u64 = st.integers(min_value=0, max_value=MASK)
EDGES = [0, MASK, 1, 1 << 63, (1 << 63) - 1]


def reference_simhash(text, s):
    """The scheme written out one feature at a time with Python integers, as in the docs."""

    def mix(h):
        h = ((h ^ (h >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        h = ((h ^ (h >> 27)) * 0x94D049BB133111EB) & MASK
        return h ^ (h >> 31)

    if s.features == "chars":
        norm = normalize(text)
        units = [ord(c) for c in norm] if any(c.isalnum() for c in norm) else []
    else:
        units = [int.from_bytes(hashlib.blake2b(w.encode(), digest_size=8).digest(), "big") for w in words(text)]
    n = min(s.ngram, len(units))
    counts = {}
    for i in range(len(units) - n + 1 if units else 0):
        h = 0x9E3779B97F4A7C15
        for u in units[i : i + n]:
            h = mix(h ^ u)
        counts[h] = counts.get(h, 0) + 1
    if not counts:
        return None
    sums = [0] * 64
    for h, c in counts.items():
        w = {"count": c, "log": round(1000 * (1 + math.log(c))), "binary": 1}[s.weights]
        for bit in range(64):
            sums[bit] += w if (h >> bit) & 1 else -w
    return sum(1 << bit for bit in range(64) if sums[bit] > 0)


texts = st.text(alphabet=st.characters(codec="utf-8", categories=["L", "N", "P", "Zs"]), max_size=80)


@given(texts, st.integers(1, 6), st.sampled_from(["count", "log", "binary"]))
@settings(max_examples=150, deadline=None)
def test_vectorized_chars_equal_the_reference(text, n, weights):
    s = FingerprintSettings(features="chars", ngram=n, weights=weights)
    assert simhash(text, s) == reference_simhash(text, s)


@given(st.text(alphabet="abc xyz,.", max_size=60), st.integers(1, 4))
@settings(max_examples=100, deadline=None)
def test_vectorized_words_equal_the_reference(text, n):
    s = FingerprintSettings(features="words", ngram=n, weights="count")
    assert simhash(text, s) == reference_simhash(text, s)


@given(u64, u64)
def test_hamming_is_symmetric_and_in_range(a, b):
    assert hamming(a, b) == hamming(b, a)
    assert 0 <= hamming(a, b) <= 64
    assert hamming(a, a) == 0
    assert hamming(to_signed(a), to_signed(b)) == hamming(a, b)


def test_hamming_on_signed_forms_masks_to_64_bits():
    # -1 (all ones) against 0: (−1 ^ 0).bit_count() would give 1 without the mask.
    assert hamming(-1, 0) == 64
    assert hamming(to_signed(MASK), 0) == 64
    assert hamming(to_signed(1 << 63), 0) == 1


@given(st.one_of(u64, st.sampled_from(EDGES)))
def test_signed_round_trip(fp):
    s = to_signed(fp)
    assert -(1 << 63) <= s < (1 << 63)
    assert to_unsigned(s) == fp
    assert from_hex(to_hex(fp)) == fp
    assert len(to_hex(fp)) == 16


def test_edges_of_the_signed_form():
    assert to_signed(0) == 0
    assert to_signed(MASK) == -1
    assert to_signed(1 << 63) == -(1 << 63)
    assert to_hex(-1) == "ffffffffffffffff"
    assert blocks(MASK) == (0xFFFF,) * 4
    assert blocks(0x0001000200030004) == (1, 2, 3, 4)
    with pytest.raises(Exception):
        to_signed(1 << 64)
    with pytest.raises(Exception):
        from_hex("xyz")


def test_tie_gives_zero():
    # Two features with complementary hashes and equal weight: every bit sums to 0, so every bit is 0.
    h = np.array([0x0123456789ABCDEF, 0x0123456789ABCDEF ^ MASK], dtype=np.uint64)
    assert simhash_of_features(h, np.array([5, 5])) == 0
    assert simhash_of_features(h, np.array([6, 5])) == 0x0123456789ABCDEF


@pytest.mark.parametrize("text", ["", "   ", "\n\t", "!!! ... ,,,", "。，、！"])
def test_texts_without_features_have_no_fingerprint(text):
    for s in (FingerprintSettings(), FingerprintSettings(features="words", ngram=1)):
        assert simhash(text, s) is None


def test_short_texts_get_a_fingerprint():
    assert simhash("ab") is not None  # shorter than the n-gram: one shorter n-gram
    assert simhash("ab") != simhash("ba")


def test_stable_across_processes():
    # The built-in hash() is salted per process; our fingerprints must not be.
    sample = ["hello world", "近似重复文本检测", "mixed 中文 and English 123"]
    code = (
        "import sys; from simhash_sqlite import simhash, FingerprintSettings as S;"
        "[print(simhash(t), simhash(t, S(features='words', ngram=2))) for t in sys.argv[1:]]"
    )
    outputs = {
        subprocess.run([sys.executable, "-c", code, *sample], capture_output=True, text=True, check=True,
                       env={"PYTHONHASHSEED": seed, "PATH": ""}).stdout
        for seed in ("1", "2")
    }
    assert len(outputs) == 1
    here = "".join(f"{simhash(t)} {simhash(t, FingerprintSettings(features='words', ngram=2))}\n" for t in sample)
    assert outputs == {here}


def test_golden_fingerprints():
    # Pinned texts in, hex out, for several settings. A change here changes every stored index, so
    # it must come with a new ALGORITHM_VERSION. Other implementations (Spark) check the same file.
    golden = Path(__file__).parent / "golden" / "fingerprints.jsonl"
    rows = [json.loads(line) for line in golden.read_text(encoding="utf-8").splitlines()]
    assert len(rows) > 50
    for row in rows:
        fp = simhash(row["text"], FingerprintSettings(**row["settings"]))
        assert (None if fp is None else to_hex(fp)) == row["simhash"], row


def test_normalization_folds_case_width_and_spaces():
    assert simhash("hello world") == simhash("Hello   WORLD")
    assert simhash("ａｂｃ　ＡＢＣ") == simhash("abc abc")


def test_all_64_bits_carry_information():
    # Random words, so that no feature is shared by most texts: what is left is the hash's quality.
    # (Features common to a whole corpus do skew bits; bench/quality.py measures that on real text.)
    rng = np.random.default_rng(7)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    # an array: choice() over a list converts its 5,000 words at every call (0.9 of the test's 1.2 s of CPU)
    vocabulary = np.array(["".join(rng.choice(letters, 7)) for _ in range(5000)])
    fps = [simhash(" ".join(rng.choice(vocabulary, 50))) for _ in range(2000)]
    ones = np.array([[(fp >> b) & 1 for b in range(64)] for fp in fps]).mean(axis=0)
    assert ones.min() > 0.4 and ones.max() < 0.6, ones


def test_similar_texts_are_closer_than_unrelated():
    base = "The quick brown fox jumps over the lazy dog while the farmer watches from the porch. " * 4
    edited = base.replace("farmer", "farmers", 1)
    other = "SQLite is a C library that implements a small, fast, self-contained SQL database engine. " * 4
    assert hamming(simhash(base), simhash(edited)) < hamming(simhash(base), simhash(other))


@given(st.text(min_size=30, max_size=200, alphabet="abcdefghij klmnop"), st.integers(0, 29))
@settings(max_examples=50, deadline=None)
def test_one_character_edit_stays_closer_than_half(text, position):
    edited = text[:position] + "Z" + text[position + 1 :]
    a, b = simhash(text), simhash(edited)
    if a is not None and b is not None:
        assert hamming(a, b) <= 32


def test_mixed_chinese_and_english_words():
    tokens = words("Python编程语言 is GREAT，我们喜欢它。")
    assert "python" in tokens and "great" in tokens and "is" in tokens
    assert "编程语言" in tokens and "我们" in tokens and "喜欢" in tokens
    assert all(t.strip() for t in tokens)


def test_hmm_setting_decides_unknown_words():
    # jieba's own example: with HMM, the unknown word 杭研 is recognized; without, it is split.
    assert "杭研" in words("他来到了网易杭研大厦", hmm=True)
    assert "杭研" not in words("他来到了网易杭研大厦", hmm=False)


def test_word_hashes_from_many_threads_agree_with_one():
    from concurrent.futures import ThreadPoolExecutor

    from simhash_sqlite.core.features import word_hash, word_units

    rng = np.random.default_rng(11)
    batches = [[f"t{int(x)}" for x in rng.integers(0, 200_000, 3000)] for _ in range(40)]
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(word_units, batches))
    for tokens, got in zip(batches, results):
        assert got.tolist() == [word_hash(t) for t in tokens]


@given(st.lists(texts, max_size=12), st.sampled_from(["count", "log", "binary"]), st.integers(1, 5))
@settings(max_examples=80, deadline=None)
def test_simhash_many_equals_one_at_a_time(batch, weights, n):
    from simhash_sqlite.core.fingerprint import simhash_many

    s = FingerprintSettings(ngram=n, weights=weights)
    assert simhash_many(batch, s) == [reference_simhash(t, s) for t in batch]
    for t in batch[:3]:
        assert simhash(t, s) == simhash_many([t], s)[0]


def test_simhash_many_across_chunk_boundaries(monkeypatch):
    from simhash_sqlite.core import fingerprint

    batch = [f"text number {i} with some words {i * 7}" for i in range(50)]
    whole = fingerprint.simhash_many(batch)
    monkeypatch.setattr(fingerprint, "CHUNK_CHARACTERS", 100)  # many small chunks
    assert fingerprint.simhash_many(batch) == whole
