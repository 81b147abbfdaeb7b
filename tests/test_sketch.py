"""The sketch: its estimate against the exact Jaccard, its batch form, and its stability."""

from __future__ import annotations

import hashlib
import json
import random
import subprocess
import sys

import numpy as np
import pytest
from golden_sketches import GOLDEN as GOLDEN_SKETCHES
from golden_sketches import SCHEMES as GOLDEN_SCHEMES
from golden_sketches import digest as golden_digest
from golden_sketches import golden_texts
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_sqlite.core import sketch as sketch_module
from simhash_sqlite.core.fingerprint import simhash_and_sketch_many
from simhash_sqlite.core.pieces import simhash_and_sketch_pieces
from simhash_sqlite.core.settings import FingerprintSettings
from simhash_sqlite.core.shingles import jaccard
from simhash_sqlite.core.sketch import (
    _EMPTY,
    DEFAULT_SCHEME,
    SCHEME_V1,
    SketchScheme,
    _densify,
    _probe,
    as_rows,
    estimate_jaccard,
    estimate_many,
    ratio_may_reach,
    recorded_size_codes,
    reference_estimate_many,
    size_ratios,
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
        "import hashlib, sys; from simhash_sqlite.core.sketch import SketchScheme, sketch_many; "
        f"scheme = SketchScheme.from_json({scheme.to_json()!r}); "
        f"print(hashlib.sha256(sketch_many({GOLDEN_TEXTS!r}, scheme)[0].tobytes()).hexdigest())"
    )
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert here == other == GOLDEN[digest]


GOLDEN = {
    "GOLDEN_V1": "9f6019771fbd3c3b6cd7cd211dce08957662131eb7bc8f6e57446efc82c0ee88",
    "GOLDEN_V2": "4dd0966daeec89a11fac93dc15e47a8a165771ed6cce238d326c8c56caff2da8",
}


def _golden_sketches() -> tuple[list[str], dict[tuple[int, int], list[dict]]]:
    rows = [json.loads(line) for line in GOLDEN_SKETCHES.read_text(encoding="utf-8").splitlines()]
    by_scheme: dict[tuple[int, int], list[dict]] = {}
    for row in rows:
        by_scheme.setdefault((row["bins"], row["bits"]), []).append(row)
    return golden_texts(), by_scheme


def test_golden_sketches_byte_for_byte():
    """Stored sketches must stay comparable: every path that makes one (a batch, one text, the sketch
    made beside the fingerprint, a text streamed in pieces) gives the bytes pinned in the golden file,
    for many-empty-bin short texts as for long ones, every field width and small bin counts."""
    texts, by_scheme = _golden_sketches()
    assert set(by_scheme) == set(GOLDEN_SCHEMES) and len(by_scheme[GOLDEN_SCHEMES[0]]) == len(texts) > 300
    for (bins, bits), pinned in by_scheme.items():
        scheme = SketchScheme(bins=bins, bits=bits)
        chosen = texts if (bins, bits) == GOLDEN_SCHEMES[0] else texts[::4]
        assert [golden_digest(t) for t in chosen] == [row["text"] for row in pinned], "the golden texts changed"
        rows, present = sketch_many(chosen, scheme)
        got = [row.tobytes().hex() if there else None for row, there in zip(rows, present.tolist())]
        assert got == [row["sketch"] for row in pinned], (bins, bits)
    # The golden file pins version 1 (what older indexes hold; 960 bins, no size): every path, named so.
    assert (SCHEME_V1.bins, SCHEME_V1.bits, SCHEME_V1.size_bits) == (*GOLDEN_SCHEMES[0], 0)
    pinned = [row["sketch"] for row in by_scheme[GOLDEN_SCHEMES[0]]]
    _, beside = simhash_and_sketch_many(texts, None, SCHEME_V1)
    assert [None if s is None else s.hex() for s in beside] == pinned
    for text, want in list(zip(texts, pinned))[::7]:
        one = sketch(text, SCHEME_V1)
        assert (None if one is None else one.hex()) == want
        streamed = simhash_and_sketch_pieces(iter([text[:3], text[3:50], text[50:]]), FingerprintSettings(),
                                             piece_chars=64, scheme=SCHEME_V1)[1]
        assert (None if streamed is None else streamed.hex()) == want


def _densified_by_definition(mins: np.ndarray) -> np.ndarray:
    """Optimal densification as defined: each empty bin of a row with a filled bin takes the value of
    the first filled bin of its probe sequence (sketch._probe, attempts 1, 2, ...)."""
    out = mins.copy()
    occupied = mins != _EMPTY
    for row in np.flatnonzero(occupied.any(axis=1) & ~occupied.all(axis=1)):
        empty = np.flatnonzero(~occupied[row])
        attempt = 1
        while len(empty):
            source = _probe(mins.shape[1], attempt)[empty]
            hit = occupied[row, source]
            out[row, empty[hit]] = mins[row, source[hit]]
            empty, attempt = empty[~hit], attempt + 1
    return out


def _random_minima(rng: np.random.Generator, count: int, bins: int, fills: np.ndarray) -> np.ndarray:
    mins = np.full((count, bins), _EMPTY, dtype=np.uint32)
    for row, fill in enumerate(fills.tolist()):
        where = rng.choice(bins, size=fill, replace=False)
        mins[row, where] = rng.integers(0, int(_EMPTY), size=fill, dtype=np.uint32)
    return mins


@pytest.mark.parametrize("bins", [1, 2, 3, 8, 60, 960, 1000])
def test_densify_equals_its_definition(bins):
    """Every path of _densify (one filled bin, ranks, probes one attempt at a pass and in blocks) fills
    exactly as the definition: rows from empty to full, mostly sparse ones."""
    rng = np.random.default_rng(bins)
    for count in (1, 5, 80):
        fills = np.minimum(bins, rng.geometric(rng.choice([0.5, 0.1, 0.02]), size=count) - 1)
        fills[: min(count, 3)] = [0, bins, 1][: min(count, 3)]
        mins = _random_minima(rng, count, bins, fills)
        got = mins.copy()
        _densify(got)
        assert (got == _densified_by_definition(mins)).all(), (bins, count)


def test_densify_ranks_and_their_overflow_equal_the_definition(monkeypatch):
    """Sparse rows densified by ranks whose table is too short for some bins (probed on from there),
    and the table grown later: the same as the definition."""
    monkeypatch.setattr(sketch_module, "_first_hits", {})
    monkeypatch.setattr(sketch_module, "_MOST_RANKED_ATTEMPTS", 300)
    monkeypatch.setattr(sketch_module, "_ranks_pay", lambda fills, bins: True)
    rng = np.random.default_rng(3)
    for fills in (np.full(40, 2), rng.integers(2, 65, size=200), np.full(10, 3)):
        mins = _random_minima(rng, len(fills), 960, fills)
        got = mins.copy()
        _densify(got)
        assert (got == _densified_by_definition(mins)).all()
    monkeypatch.setattr(sketch_module, "_MOST_RANKED_ATTEMPTS", 5000)
    mins = _random_minima(rng, 30, 960, np.full(30, 2))
    got = mins.copy()
    _densify(got)
    assert sketch_module._first_hits[960][0] > 300 and (got == _densified_by_definition(mins)).all()


def test_probe_blocks_are_the_probes():
    block = sketch_module._probe_targets(960, 7, 5)
    assert (block == np.stack([_probe(960, a) for a in range(7, 12)], axis=1)).all()
    assert (sketch_module._probe_offsets(960, 9) == _probe(960, 9) - np.arange(960)).all()


def _sketches_by_definition(mins: np.ndarray, scheme: SketchScheme) -> np.ndarray:
    densified = _densified_by_definition(mins)
    fields = (densified * np.uint32(0x9E3779B1)) >> np.uint32(32 - scheme.bits)
    fields[~(mins != _EMPTY).any(axis=1)] = 0
    return sketch_module.pack_fields(fields, scheme.bits)


@pytest.mark.parametrize("bits", [1, 2, 4, 8, 16])
@pytest.mark.parametrize("most_attempts", [1024, 5])
def test_sketches_of_many_rows_equal_the_definition(bits, most_attempts, monkeypatch):
    """Hundreds of rows at once take the bit-sliced path (and, with few attempts allowed, probe on
    from where it stopped): the bytes are those of the definition."""
    monkeypatch.setattr(sketch_module, "_SLICED_ATTEMPTS", most_attempts)
    scheme = SketchScheme(bins=960 // bits * 2 if bits < 16 else 120, bits=bits)
    rng = np.random.default_rng(bits)
    fills = np.minimum(scheme.bins, rng.geometric(rng.choice([0.02, 0.005], size=400)) + 60)
    fills[:40] = rng.integers(0, 70, size=40)
    mins = _random_minima(rng, len(fills), scheme.bins, fills)
    rows, present = sketch_module.sketch_from_minima(mins.copy(), scheme)
    assert present.tolist() == (fills > 0).tolist()
    assert (rows == _sketches_by_definition(mins, scheme)).all()


@pytest.mark.parametrize(("rows_at_once", "characters"), [(7, 50), (3, 10**9), (100, 10), (4096, 128_000)])
def test_many_sketches_do_not_depend_on_where_chunks_and_densifications_end(rows_at_once, characters, monkeypatch):
    from simhash_sqlite.core import fingerprint

    monkeypatch.setattr(sketch_module, "SKETCH_ROWS", rows_at_once)
    monkeypatch.setattr(sketch_module, "CHUNK_CHARACTERS", characters)
    monkeypatch.setattr(fingerprint, "CHUNK_CHARACTERS", characters)
    rng = random.Random(rows_at_once)
    texts = [_text(rng, rng.randrange(0, 30)) if rng.random() < 0.9 else "!!" for _ in range(100)]
    one_by_one = [sketch(text) for text in texts]
    rows, present = sketch_many(texts)
    assert [row.tobytes() if there else None for row, there in zip(rows, present.tolist())] == one_by_one
    assert simhash_and_sketch_many(texts)[1] == one_by_one



@settings(max_examples=400, deadline=None)
@given(st.integers(0, 2**16 - 1), st.floats(0.9, 1.1), st.sampled_from([0.7, 0.8, 0.5, 0.9]),
       st.binary(min_size=DEFAULT_SCHEME.bin_bytes, max_size=DEFAULT_SCHEME.bin_bytes),
       st.lists(st.integers(0, 8 * DEFAULT_SCHEME.bin_bytes - 1), max_size=40))
def test_a_pair_ruled_out_by_its_size_ratio_is_one_whose_estimate_cannot_reach_the_threshold(
        code, near, threshold, bins, flips):
    """dedup drops a spilled candidate by ratio_may_reach before reading its row: that must never drop a pair
    whose estimate (C and reference) reaches the threshold, and it drops those clearly below. The bins of the
    two rows nearly agree, so that the size ratio is what decides: near the threshold (near times it)."""
    ratio_wanted = min(1.0, near * threshold)
    other = min(code + round(2048 * np.log2(1 / ratio_wanted)), 2**16 - 1)  # (codes: 2048 a doubling)
    changed = bytearray(bins)
    for bit in flips:
        changed[bit // 8] ^= 1 << (bit % 8)
    rows = np.frombuffer(bins + np.array([code], "<u2").tobytes() + bytes(changed)
                         + np.array([other], "<u2").tobytes(), dtype=np.uint8).reshape(2, -1)
    a, b = recorded_size_codes(rows[:1]), recorded_size_codes(rows[1:])
    assert a.tolist() == [code] and b.tolist() == [other]
    may = bool(ratio_may_reach(a, b, threshold)[0])
    for got in (estimate_many(rows[:1], rows[1:]), reference_estimate_many(rows[:1], rows[1:])):
        assert may or got[0] < threshold
    ratio = size_ratios(rows[:1], rows[1:])[0]
    if not ratio < threshold:  # (NaN: a size unknown)
        assert may
    elif min(code, other) > 14000 and ratio < 0.99 * threshold:  # sizes over 100: the bound within 1%
        assert not may
