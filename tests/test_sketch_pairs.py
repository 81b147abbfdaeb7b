"""All pairs by the sketch's LSH tables, against brute force."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_sqlite.core.shingles import jaccard
from simhash_sqlite.core.sketch import SCHEME_V1, estimate_many, sketch_many
from simhash_sqlite.find.sketch_pairs import (
    BASE_DOCUMENTS,
    MAX_WINDOW_BITS,
    WINDOW_BITS,
    WINDOW_STEP,
    _windows,
    _words,
    candidate_codes,
    miss_probability,
    sketch_pairs,
    window_keys,
    window_plan,
)

# The windows over the bins, measured on version 1 sketches (960 bins, no size field: random rows are
# valid sketches); window_plan takes the bits of any scheme.
SCHEME = SCHEME_V1
NBITS = SCHEME.bins * SCHEME.bits
# The windows window_plan picks past BASE_DOCUMENTS (2**21, 2**22, 10M documents): tests run them on
# a few rows by passing width and step.
LARGE_PLANS = [window_plan(2**21, NBITS), window_plan(2**22, NBITS), window_plan(10**7, NBITS)]


def _found(rows, threshold, **kw) -> dict[tuple[int, int], float]:
    out = {}
    for part in sketch_pairs(rows, threshold, SCHEME, **kw):
        for a, b, e in zip(part.left.tolist(), part.right.tolist(), part.estimate.tolist()):
            assert a < b and (a, b) not in out
            out[(a, b)] = e
    return out


def _brute(rows, threshold, width=WINDOW_BITS, step=WINDOW_STEP) -> dict[tuple[int, int], float]:
    """Pairs with estimate >= threshold that share a window key (or the whole sketch)."""
    n = len(rows)
    words = _words(rows)
    keys = np.stack([window_keys(words, s, width) for s in _windows(NBITS, width, step)], axis=1)
    out = {}
    for a in range(n):
        for b in range(a + 1, n):
            e = float(estimate_many(rows[a : a + 1], rows[b : b + 1], SCHEME)[0])
            shared = (keys[a] == keys[b]).any() or (rows[a] == rows[b]).all()
            if e >= threshold and shared:
                out[(a, b)] = e
    return out


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(0, 40), copies=st.integers(0, 6), threshold=st.floats(0.3, 1.0),
       plan=st.sampled_from(LARGE_PLANS))
def test_same_pairs_as_brute_force(seed, n, copies, threshold, plan):
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, 256, (n, SCHEME.nbytes), dtype=np.uint8)
    if n:
        for _ in range(copies):  # identical and nearly identical rows
            src, dst = rng.integers(0, n, 2)
            rows[dst] = rows[src]
            if rng.random() < 0.5:
                rows[dst, rng.integers(0, rows.shape[1], 3)] ^= np.uint8(1 << int(rng.integers(0, 8)))
    # Narrow windows so that random rows share keys too.
    assert _found(rows, threshold, width=8, step=8) == _brute(rows, threshold, width=8, step=8)
    assert _found(rows, threshold) == _brute(rows, threshold)  # few rows: 24/12
    width, step = plan
    assert _found(rows, threshold, width=width, step=step) == _brute(rows, threshold, width, step)


def _planted(rng, pairs: int, agree: np.ndarray, unrelated: int = 0) -> np.ndarray:
    """Random rows, then `pairs` rows whose bits agree with row i's with probability agree[i]."""
    rows = rng.integers(0, 256, (pairs + unrelated, SCHEME.nbytes), dtype=np.uint8)
    flip = rng.random((pairs, NBITS)) >= agree[:, None]
    return np.concatenate((rows, rows[:pairs] ^ np.packbits(flip, axis=1, bitorder="little")))


@pytest.mark.parametrize("plan", [(WINDOW_BITS, WINDOW_STEP), *LARGE_PLANS])
def test_candidates_miss_a_pair_at_the_threshold_as_often_as_computed(plan):
    """Measured, not only computed: pairs at J = 0.8 (bits agree with probability 0.9) that share no
    window, against miss_probability (exact for overlapping windows) and 24/12's."""
    width, step = plan
    rng = np.random.default_rng(width)
    pairs = 20_000
    rows = _planted(rng, pairs, np.full(pairs, 0.9))
    codes = candidate_codes(_words(rows), NBITS, width, step)
    n = len(rows)
    planted = np.arange(pairs) * n + np.arange(pairs) + pairs  # codes of the pairs (i, i + pairs)
    missed = pairs - np.isin(planted, codes).sum()
    expected = miss_probability(NBITS, width, step, 0.9)
    assert expected <= miss_probability(NBITS, WINDOW_BITS, WINDOW_STEP, 0.9)
    assert abs(missed - expected * pairs) <= 5 * np.sqrt(expected * pairs) + 1


@pytest.mark.parametrize("plan", LARGE_PLANS)
def test_recall_of_planted_pairs_with_the_windows_of_large_indexes(plan):
    """Pairs at J 0.8-1.0 among unrelated rows, with the windows of 2**21 to 10M documents: the
    candidates (the check's threshold low, so only they decide) find nearly all of them."""
    width, step = plan
    rng = np.random.default_rng(step)
    pairs, unrelated = 2000, 3000
    jaccard_of = rng.uniform(0.8, 1.0, pairs)
    rows = _planted(rng, pairs, (1 + jaccard_of) / 2, unrelated)
    found = _found(rows, 0.5, width=width, step=step)
    recall = np.mean([(i, i + pairs + unrelated) in found for i in range(pairs)])
    assert recall >= 0.995
    assert len(found) <= pairs + 5  # unrelated rows: no estimate near 0.5


def test_window_plan():
    """24/12 up to 2**20 distinct sketches (the measured quality); past it a bit wider per doubling up
    to MAX_WINDOW_BITS, with the largest step that misses a J = 0.8 pair no more often than 24/12."""
    allowed = miss_probability(NBITS, WINDOW_BITS, WINDOW_STEP)
    for n in (0, 1, 2, 1000, BASE_DOCUMENTS - 1, BASE_DOCUMENTS):
        assert window_plan(n, NBITS) == (WINDOW_BITS, WINDOW_STEP)
    previous = WINDOW_BITS
    for doublings in range(1, 12):
        for n in (BASE_DOCUMENTS * 2 ** (doublings - 1) + 1, BASE_DOCUMENTS * 2**doublings):
            width, step = window_plan(n, NBITS)
            assert width == min(WINDOW_BITS + doublings, MAX_WINDOW_BITS) >= previous
            assert miss_probability(NBITS, width, step) <= allowed
            assert step == width or miss_probability(NBITS, width, step + 1) > allowed  # the fewest tables
            assert width + (n - 1).bit_length() <= 64  # candidate_codes packs key and position in 64 bits
            if width < MAX_WINDOW_BITS:  # random candidates per table and document: flat
                assert n / 2**width <= 2 * BASE_DOCUMENTS / 2**WINDOW_BITS
            previous = width
    assert window_plan(10**7, NBITS) == (27, 4)


def test_miss_probability_of_disjoint_windows_is_the_independent_one():
    for width, agree in ((24, 0.9), (27, 0.9), (8, 0.6)):
        tables = len(_windows(NBITS, width, width))
        assert miss_probability(NBITS, width, width, agree) == pytest.approx((1 - agree**width) ** tables, rel=1e-9)
    # Overlapping windows are not independent: 24/12 misses 3.3x as often as 79 independent tables would.
    assert miss_probability(NBITS, 24, 12) == pytest.approx(0.00466, abs=1e-5)


def test_finds_near_duplicate_texts():
    rng = random.Random(3)
    words = [f"w{i}" for i in range(3000)]
    originals = [" ".join(rng.choice(words) for _ in range(rng.randrange(60, 400))) for _ in range(60)]
    texts, pairs = list(originals), set()
    for i, text in enumerate(originals):
        edited = " ".join(w if rng.random() > 0.015 else rng.choice(words) for w in text.split())
        texts.append(edited)
        pairs.add((i, len(texts) - 1))
    rows, _ = sketch_many(texts)
    found = _found(rows, 0.8)
    truth = {(a, b) for a, b in pairs if jaccard(texts[a], texts[b]) >= 0.85}
    assert truth and truth <= set(found)
    assert all(jaccard(texts[a], texts[b]) >= 0.6 for a, b in found)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(1, 60), k=st.integers(0, 64), share=st.floats(0, 1))
def test_pairs_of_unsketched_documents_equal_brute_force(seed, n, k, share):
    from simhash_sqlite.find.check import _pairs_of_unsketched

    rng = np.random.default_rng(seed)
    values = rng.integers(0, 2**64, n, dtype=np.uint64)
    values[rng.integers(0, n, n // 3)] = values[0]  # some identical fingerprints
    unsketched = np.flatnonzero(rng.random(n) < share)
    got = [(a, b) for left, right in _pairs_of_unsketched(values, unsketched, k) for a, b in zip(left, right)]
    want = {(a, b) for a in range(n) for b in range(a + 1, n)
            if (a in unsketched or b in unsketched) and bin(int(values[a] ^ values[b])).count("1") <= k}
    assert len(got) == len(set(got)) and set(got) == want


@pytest.mark.parametrize("merge_every", [1, 7, 1 << 24])
def test_candidates_merged_in_runs_equal_all_at_once(monkeypatch, merge_every):
    """Codes merged every few pairs (as at 10M documents, every MERGE_PAIRS) are every window's pairs, once."""
    import simhash_sqlite.find.sketch_pairs as sketch_pairs_module

    monkeypatch.setattr(sketch_pairs_module, "MERGE_PAIRS", merge_every)
    rng = np.random.default_rng(merge_every)
    rows = rng.integers(0, 256, (300, SCHEME.nbytes), dtype=np.uint8)
    rows[150:] = rows[:150] ^ (rng.random((150, SCHEME.nbytes)) < 0.02).astype(np.uint8)  # near copies
    words = _words(rows)
    codes = candidate_codes(words, NBITS, 10, 5)
    keys = np.stack([window_keys(words, s, 10) for s in _windows(NBITS, 10, 5)], axis=1)
    want = [a * 300 + b for a in range(300) for b in range(a + 1, 300) if (keys[a] == keys[b]).any()]
    assert codes.tolist() == want


@pytest.mark.parametrize("nbytes", [120, 121, 5])
def test_window_keys_are_the_bits_of_the_rows(nbytes):
    """Bit i of a row is bit i % 8 of its byte i // 8, whole words or not."""
    rng = np.random.default_rng(nbytes)
    rows = rng.integers(0, 256, (50, nbytes), dtype=np.uint8)
    bits = np.unpackbits(rows, axis=1, bitorder="little").astype(np.uint64)
    words = _words(rows)
    for width in (1, 8, 24, 27):
        for start in range(0, nbytes * 8 - width + 1, 13):
            want = (bits[:, start : start + width] << np.arange(width, dtype=np.uint64)).sum(axis=1)
            assert (window_keys(words, start, width) == want).all()
