"""A compact per-document sketch from which the 5-shingle Jaccard of two texts can be estimated.

The check of a near-duplicate is the exact Jaccard of the two texts' character 5-shingle sets
(shingles.py). Where the texts are not at hand, this sketch stands in for them: a one-permutation
MinHash (Li, Owen, Zhang 2012) of the texts' 5-shingles, with optimal densification of empty bins
(Shrivastava 2017), keeping `bits` bits of each bin's minimum (b-bit MinHash, Li and König 2010).
Two sketches agree on a bin with probability J + (1 - J) / 2**bits, so the share of agreeing bins
gives an unbiased estimate of J.

The shingles are those of the normalized text a default fingerprint is made of (features.char_units:
NFKC, case folded, whitespace runs folded; the same splitmix chain as shingles.py), so `add` makes the
sketch from the hashes it already has for the fingerprint instead of hashing every shingle again (a
second pass cost as much as the fingerprint, bench/add_speed.py). The estimate therefore agrees with
the exact Jaccard in expectation except where two texts differ only in letter case or compatibility
forms (full-width letters), which the exact check counts as different and the sketch does not.
Pure functions, numpy, stable across processes and machines; SketchScheme is the stored format.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import cache, lru_cache

import numpy as np

from .features import char_units, mix, units_features
from .settings import FingerprintSettings
from .shingles import TRUTH_NGRAM

_U64 = np.uint64
_EMPTY = np.uint32(0xFFFFFFFF)  # the bin saw no shingle (a shingle whose 32-bit value is this is taken for none)
# Texts per vectorized pass: bounds the temporary arrays (about 40 bytes per character).
CHUNK_CHARACTERS = 128_000
SKETCH_VERSION = 1


@dataclass(frozen=True)
class SketchScheme:
    """How a sketch is made: `bins` one-permutation bins, the low `bits` bits of each bin's minimum.
    A sketch is bins * bits / 8 bytes."""

    bins: int
    bits: int
    ngram: int = TRUTH_NGRAM
    version: int = SKETCH_VERSION

    def __post_init__(self) -> None:
        if self.bits not in (1, 2, 4, 8, 16):
            raise ValueError(f"bits must be 1, 2, 4, 8 or 16, not {self.bits}")
        if self.bins < 1 or self.bins * self.bits % 8:
            raise ValueError(f"{self.bins} bins of {self.bits} bits do not fill whole bytes")

    @property
    def nbytes(self) -> int:
        return self.bins * self.bits // 8

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> SketchScheme:
        return cls(**json.loads(text))

    def describe(self) -> str:
        return f"one-permutation MinHash, {self.bins} bins of {self.bits} bits ({self.nbytes} bytes)"


# Chosen by bench/sketch_choice.py (BENCHMARKS.md, "Accuracy without texts"): at 120 bytes, 1-bit bins had
# the best F1 near the 0.8 line (0.955 en, 0.942 zh on the tuning set; 4 bits 0.943, 0.928; 8 bits 0.920, 0.902).
DEFAULT_SCHEME = SketchScheme(bins=960, bits=1)


# The shingles a sketch is made of: what a default fingerprint's features are (FingerprintSettings()),
# with repeats kept (the minimum of a bin does not care), so `add` makes both from one pass.
SKETCH_FEATURES = FingerprintSettings(features="chars", ngram=TRUTH_NGRAM, weights="count")


def shares_features(settings: FingerprintSettings) -> bool:
    """Whether fingerprints of these settings hash the same shingles the sketch needs."""
    return settings.features == SKETCH_FEATURES.features and settings.ngram == SKETCH_FEATURES.ngram


@lru_cache(maxsize=4096)
def _probe(bins: int, attempt: int) -> np.ndarray:
    """Optimal densification: the bin that empty bin j borrows from at this attempt (the same for every
    document, so two documents with the same shingles fill their empty bins alike)."""
    j = np.arange(bins, dtype=_U64)
    h = mix(j * _U64(0x9E3779B97F4A7C15) ^ _U64(attempt * 0x632BE59BD9B4E019 & (2**64 - 1)))
    return ((h >> _U64(32)) * _U64(bins) >> _U64(32)).astype(np.intp)


def _densify(mins: np.ndarray) -> None:
    """Fill each empty bin (in place) with the value of the first non-empty bin its probe sequence hits."""
    count, bins = mins.shape
    occupied = mins != _EMPTY
    filled = occupied.sum(axis=1)
    partly = np.flatnonzero((filled > 0) & (filled < bins))
    if len(partly) == 0:
        return
    flat, taken = mins.reshape(-1), occupied.reshape(-1)
    rows, cols = np.nonzero(~occupied[partly])
    base = partly[rows] * bins  # where each empty bin's row starts in the flat array
    attempt = 1
    while len(base):
        source = base + _probe(bins, attempt)[cols]
        hit = taken[source]
        flat[base[hit] + cols[hit]] = flat[source[hit]]
        miss = ~hit
        base, cols = base[miss], cols[miss]
        attempt += 1


def sketch_hashes(
    docs: np.ndarray, hashes: np.ndarray, count: int, scheme: SketchScheme = DEFAULT_SCHEME
) -> tuple[np.ndarray, np.ndarray]:
    """Sketches of `count` documents from their shingle hashes (docs[i] says whose hashes[i] is; repeats
    allowed): a (count, nbytes) uint8 array and a bool array saying which documents had any shingle
    (the rows of the others are zeros)."""
    mins = empty_minima(count, scheme)
    add_to_minima(mins, docs, hashes)
    return sketch_from_minima(mins, scheme)


def empty_minima(count: int = 1, scheme: SketchScheme = DEFAULT_SCHEME) -> np.ndarray:
    """Bin minima of `count` documents that have seen no shingle yet: (count, bins) uint32."""
    return np.full((count, scheme.bins), _EMPTY, dtype=np.uint32)


def add_to_minima(mins: np.ndarray, docs: np.ndarray, hashes: np.ndarray) -> None:
    """Fold shingle hashes into the bin minima (in place): a text's minima are those of its pieces'
    minima, so a text too large to hold is sketched piece by piece (streaming.py)."""
    count, bins = mins.shape
    # One permutation: the high 32 bits pick the bin, the low 32 bits are the value minimised in it.
    slot = ((hashes >> _U64(32)) * _U64(bins) >> _U64(32)).astype(np.intp)
    slot += docs * bins
    np.minimum.at(mins.reshape(-1), slot, hashes.astype(np.uint32))


def sketch_from_minima(mins: np.ndarray, scheme: SketchScheme = DEFAULT_SCHEME) -> tuple[np.ndarray, np.ndarray]:
    """Sketches from bin minima (add_to_minima), as sketch_hashes() gives them. `mins` is changed."""
    present = (mins != _EMPTY).any(axis=1)
    _densify(mins)
    # `bits` bits of each minimum, from the top of its product with an odd constant (every bit of the
    # minimum counts there; the minimum's own high bits are mostly zeros): equal minima give equal
    # bits, different ones random bits.
    fields = (mins * np.uint32(0x9E3779B1)) >> np.uint32(32 - scheme.bits)
    fields[~present] = 0
    return pack_fields(fields, scheme.bits), present


def sketch_units(
    unit_arrays: Sequence[np.ndarray], scheme: SketchScheme = DEFAULT_SCHEME
) -> tuple[np.ndarray, np.ndarray]:
    """Sketches of texts given as their normalized code points (features.char_units)."""
    docs, hashes, _ = units_features(list(unit_arrays), SKETCH_FEATURES)
    return sketch_hashes(docs, hashes, len(unit_arrays), scheme)


def sketch_many(texts: Sequence[str], scheme: SketchScheme = DEFAULT_SCHEME) -> tuple[np.ndarray, np.ndarray]:
    """sketch() of many texts, in vectorized chunks: (rows, present) as sketch_hashes()."""
    rows, present = [np.zeros((0, scheme.nbytes), np.uint8)], [np.zeros(0, bool)]
    chunk: list[np.ndarray] = []
    size = 0
    for text in texts:
        chunk.append(char_units(text))
        size += len(chunk[-1])
        if size >= CHUNK_CHARACTERS:
            r, p = sketch_units(chunk, scheme)
            rows.append(r), present.append(p)
            chunk, size = [], 0
    if chunk:
        r, p = sketch_units(chunk, scheme)
        rows.append(r), present.append(p)
    return np.concatenate(rows), np.concatenate(present)


def sketch(text: str, scheme: SketchScheme = DEFAULT_SCHEME) -> bytes | None:
    """The text's sketch (scheme.nbytes bytes), or None when it has no letter or digit (no fingerprint)."""
    rows, present = sketch_units([char_units(text)], scheme)
    return rows[0].tobytes() if present[0] else None


def pack_fields(fields: np.ndarray, bits: int) -> np.ndarray:
    """(n, bins) fields of `bits` bits each to (n, bins * bits / 8) bytes, first field in the low bits."""
    n, bins = fields.shape
    if bits == 16:
        return fields.astype("<u2").view(np.uint8).reshape(n, bins * 2)
    if bits == 1:
        return np.packbits(fields.astype(bool), axis=1, bitorder="little")
    per_byte = 8 // bits
    grouped = fields.astype(np.uint8).reshape(n, bins // per_byte, per_byte)
    out = np.zeros((n, bins // per_byte), dtype=np.uint8)
    for i in range(per_byte):
        out |= grouped[:, :, i] << np.uint8(i * bits)
    return out


@cache
def _equal_fields_table(bits: int) -> np.ndarray:
    """For each byte value of a xor of two sketches: how many of its `bits`-bit fields are zero."""
    values = np.arange(256)
    mask = (1 << bits) - 1
    return sum(((values >> shift) & mask) == 0 for shift in range(0, 8, bits)).astype(np.int32)


def agreeing_bins(a: np.ndarray, b: np.ndarray, bits: int) -> np.ndarray:
    """How many bins two sets of sketches (rows of bytes, same shape) agree on, row by row."""
    a, b = np.atleast_2d(a), np.atleast_2d(b)
    if bits == 1 and a.shape[1] % 8 == 0:  # a popcount of 64-bit words
        differ = np.bitwise_count(np.ascontiguousarray(a).view("<u8") ^ np.ascontiguousarray(b).view("<u8"))
        return a.shape[1] * 8 - differ.sum(axis=1, dtype=np.int64)
    if bits == 16:
        return np.count_nonzero(a.view("<u2") == b.view("<u2"), axis=1)
    return _equal_fields_table(bits)[a ^ b].sum(axis=1)


def estimate_from_agreeing(agree: np.ndarray, scheme: SketchScheme) -> np.ndarray:
    """Jaccard estimates from counts of agreeing bins: (share - 2**-bits) / (1 - 2**-bits), within [0, 1]."""
    chance = 2.0**-scheme.bits
    return np.clip((np.asarray(agree) / scheme.bins - chance) / (1.0 - chance), 0.0, 1.0)


def estimate_many(a: np.ndarray, b: np.ndarray, scheme: SketchScheme = DEFAULT_SCHEME) -> np.ndarray:
    """Estimated Jaccard of each pair of rows (uint8 arrays of shape (pairs, nbytes))."""
    return estimate_from_agreeing(agreeing_bins(a, b, scheme.bits), scheme)


def estimate_jaccard(a: bytes, b: bytes, scheme: SketchScheme = DEFAULT_SCHEME) -> float:
    """Estimated 5-shingle Jaccard of the two texts whose sketches these are."""
    if len(a) != scheme.nbytes or len(b) != scheme.nbytes:
        raise ValueError(f"a sketch of this scheme is {scheme.nbytes} bytes, not {len(a)} and {len(b)}")
    rows = np.frombuffer(a + b, dtype=np.uint8).reshape(2, -1)
    return float(estimate_many(rows[:1], rows[1:], scheme)[0])


def as_rows(blobs: Sequence[bytes | None], scheme: SketchScheme = DEFAULT_SCHEME) -> tuple[np.ndarray, np.ndarray]:
    """Stored sketches (None where missing) as a (n, nbytes) uint8 array and a bool array of which exist."""
    present = np.fromiter((b is not None and len(b) == scheme.nbytes for b in blobs), dtype=bool, count=len(blobs))
    rows = np.zeros((len(blobs), scheme.nbytes), dtype=np.uint8)
    if present.any():
        joined = b"".join(b for b, p in zip(blobs, present.tolist()) if p)
        rows[present] = np.frombuffer(joined, dtype=np.uint8).reshape(-1, scheme.nbytes)
    return rows, present
