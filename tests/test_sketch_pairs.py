"""All pairs by the sketch's LSH tables, against brute force."""

from __future__ import annotations

import random

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_sqlite.shingles import jaccard
from simhash_sqlite.sketch import DEFAULT_SCHEME, estimate_many, sketch_many
from simhash_sqlite.sketch_pairs import WINDOW_BITS, WINDOW_STEP, _words, sketch_pairs, window_keys


def _found(rows, threshold, **kw) -> dict[tuple[int, int], float]:
    out = {}
    for part in sketch_pairs(rows, threshold, **kw):
        for a, b, e in zip(part.left.tolist(), part.right.tolist(), part.estimate.tolist()):
            assert a < b and (a, b) not in out
            out[(a, b)] = e
    return out


def _brute(rows, threshold, width=WINDOW_BITS, step=WINDOW_STEP) -> dict[tuple[int, int], float]:
    """Pairs with estimate >= threshold that share a window key (or the whole sketch)."""
    n = len(rows)
    words = _words(rows)
    keys = np.stack([window_keys(words, s, width) for s in range(0, rows.shape[1] * 8 - width + 1, step)], axis=1)
    out = {}
    for a in range(n):
        for b in range(a + 1, n):
            e = float(estimate_many(rows[a : a + 1], rows[b : b + 1])[0])
            shared = (keys[a] == keys[b]).any() or (rows[a] == rows[b]).all()
            if e >= threshold and shared:
                out[(a, b)] = e
    return out


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(0, 40), copies=st.integers(0, 6), threshold=st.floats(0.3, 1.0))
def test_same_pairs_as_brute_force(seed, n, copies, threshold):
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, 256, (n, DEFAULT_SCHEME.nbytes), dtype=np.uint8)
    if n:
        for _ in range(copies):  # identical and nearly identical rows
            src, dst = rng.integers(0, n, 2)
            rows[dst] = rows[src]
            if rng.random() < 0.5:
                rows[dst, rng.integers(0, rows.shape[1], 3)] ^= np.uint8(1 << int(rng.integers(0, 8)))
    # Narrow windows so that random rows share keys too.
    assert _found(rows, threshold, width=8, step=8) == _brute(rows, threshold, width=8, step=8)
    assert _found(rows, threshold) == _brute(rows, threshold)


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
    from simhash_sqlite.confirm import _pairs_of_unsketched

    rng = np.random.default_rng(seed)
    values = rng.integers(0, 2**64, n, dtype=np.uint64)
    values[rng.integers(0, n, n // 3)] = values[0]  # some identical fingerprints
    unsketched = np.flatnonzero(rng.random(n) < share)
    got = [(a, b) for left, right in _pairs_of_unsketched(values, unsketched, k) for a, b in zip(left, right)]
    want = {(a, b) for a in range(n) for b in range(a + 1, n)
            if (a in unsketched or b in unsketched) and bin(int(values[a] ^ values[b])).count("1") <= k}
    assert len(got) == len(set(got)) and set(got) == want
