"""The sketch: its estimate against the exact Jaccard, its batch form, and its stability."""

from __future__ import annotations

import hashlib
import random
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_sqlite.shingles import jaccard
from simhash_sqlite.sketch import (
    DEFAULT_SCHEME,
    SCHEME_V1,
    SketchScheme,
    as_rows,
    estimate_jaccard,
    estimate_many,
    sketch,
    sketch_many,
)

# Lower-case ASCII words: normalization changes nothing, so the exact Jaccard is the sketched one.
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda", "mu",
         "nu", "xi", "omicron", "pi", "rho", "sigma", "tau", "upsilon", "phi", "chi", "psi", "omega"]
# One standard deviation of the 960-bit estimate is at most sqrt(1/960) = 0.032 (at J = 0); 5 of them.
TOLERANCE = 0.16


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) + str(rng.randrange(50)) for _ in range(words))


def _edited(rng: random.Random, text: str, share: float) -> str:
    return " ".join(w if rng.random() >= share else rng.choice(WORDS) for w in text.split())


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**9), words=st.integers(30, 600), share=st.floats(0.0, 0.6))
def test_estimate_is_close_to_the_exact_jaccard(seed, words, share):
    rng = random.Random(seed)
    a = _text(rng, words)
    b = _edited(rng, a, share)
    assert abs(estimate_jaccard(sketch(a), sketch(b)) - jaccard(a, b)) <= TOLERANCE


def test_estimate_is_unbiased_over_many_pairs():
    rng = random.Random(7)
    errors = []
    for _ in range(200):
        a = _text(rng, rng.randrange(50, 400))
        b = _edited(rng, a, rng.uniform(0.0, 0.3))
        errors.append(estimate_jaccard(sketch(a), sketch(b)) - jaccard(a, b))
    assert abs(np.mean(errors)) < 0.01
    assert np.sqrt(np.mean(np.square(errors))) < 0.04  # about 0.02 expected near J = 0.8


def test_identical_unrelated_and_empty():
    rng = random.Random(1)
    a, b = _text(rng, 300), _text(random.Random(2), 300)
    assert estimate_jaccard(sketch(a), sketch(a)) == 1.0
    assert estimate_jaccard(sketch(a), sketch(b)) < TOLERANCE + jaccard(a, b)
    assert sketch("") is None and sketch("  \n\t ") is None and sketch("!!! ...") is None
    assert len(sketch("ab")) == DEFAULT_SCHEME.nbytes
    # Whitespace runs and letter case are folded as in a fingerprint's features.
    assert sketch("Hello   World\n") == sketch("hello world")


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(max_size=300), max_size=12))
def test_batch_equals_one_by_one(texts):
    rows, present = sketch_many(texts)
    assert rows.shape == (len(texts), DEFAULT_SCHEME.nbytes)
    for text, row, there in zip(texts, rows, present):
        one = sketch(text)
        assert there == (one is not None)
        if one is not None:
            assert row.tobytes() == one


@pytest.mark.parametrize("bits", [1, 2, 4, 8, 16])
def test_every_width_estimates(bits):
    scheme = SketchScheme(bins=480 // bits, bits=bits)
    rng = random.Random(bits)
    a = _text(rng, 400)
    b = _edited(rng, a, 0.05)
    rows, _ = sketch_many([a, b, a], scheme)
    estimates = estimate_many(rows[[0, 0]], rows[[1, 2]], scheme)
    assert estimates[1] == 1.0
    assert abs(estimates[0] - jaccard(a, b)) <= 2 * TOLERANCE


def test_rows_from_stored_blobs():
    blobs = [sketch("one text here"), None, sketch("another text")]
    rows, present = as_rows(blobs)
    assert present.tolist() == [True, False, True]
    assert rows[0].tobytes() == blobs[0] and not rows[1].any()
    with pytest.raises(ValueError):
        estimate_jaccard(blobs[0], blobs[0][:-1])


GOLDEN_TEXTS = [
    "The quick brown fox jumps over the lazy dog.", "近似重复检测：同一段文字的两个副本。", "x", "a b c d e f g"
]


@pytest.mark.parametrize("scheme, digest", [(DEFAULT_SCHEME, "GOLDEN_V2"), (SCHEME_V1, "GOLDEN_V1")])
def test_stable_across_processes_and_versions(scheme, digest):
    """The stored formats: the same bytes in another process, and the same as when they were written
    (version 1 is what older index files hold: it must not change either)."""
    here = hashlib.sha256(sketch_many(GOLDEN_TEXTS, scheme)[0].tobytes()).hexdigest()
    code = (
        "import hashlib, sys; from simhash_sqlite.sketch import SketchScheme, sketch_many; "
        f"scheme = SketchScheme.from_json({scheme.to_json()!r}); "
        f"print(hashlib.sha256(sketch_many({GOLDEN_TEXTS!r}, scheme)[0].tobytes()).hexdigest())"
    )
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert here == other == GOLDEN[digest]


GOLDEN = {
    "GOLDEN_V1": "9f6019771fbd3c3b6cd7cd211dce08957662131eb7bc8f6e57446efc82c0ee88",
    "GOLDEN_V2": "4dd0966daeec89a11fac93dc15e47a8a165771ed6cce238d326c8c56caff2da8",
}
