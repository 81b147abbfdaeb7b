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

A version 2 sketch also carries the number of distinct shingles of its text (16 bits, log-coded to
within 0.02%), which `add` has anyway (the default binary weights sort each text's shingles). For any
two sets J <= min(|A|, |B|) / max(|A|, |B|), with equality where one contains the other (a cut copy,
a page inside a longer one). So the estimate is clamped to that ratio, and taken to be the ratio where
it lies within two standard deviations of it (the pair looks like a containment; sharpened()):
on the tuning set, +0.005 F1 in English and +0.011 in Chinese over 960 bins alone (bench/estimate_rule.py).
Pure functions, numpy, stable across processes and machines; SketchScheme is the stored format, kept
in every index file's simhash_meta: an index keeps the scheme it was made with.
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
SKETCH_VERSION = 2
# The distinct-shingle count's code: 0 = unknown, else 1 + round(SIZE_STEPS * log2(count)), at most 2**16 - 1
# (counts up to about 2**32; every count below about 2,950 decodes exactly).
SIZE_STEPS = 2048
# Sharpening: the estimate is taken to be the size ratio within this many standard deviations of it.
CONTAINMENT_SDS = 2.0


@dataclass(frozen=True)
class SketchScheme:
    """How a sketch is made: `bins` one-permutation bins, the low `bits` bits of each bin's minimum,
    then (size_bits 16) the text's log-coded distinct-shingle count, little-endian. A sketch is
    bins * bits / 8 + size_bits / 8 bytes. Version 1 (no size) is what older index files hold."""

    bins: int
    bits: int
    ngram: int = TRUTH_NGRAM
    version: int = SKETCH_VERSION
    size_bits: int = 0

    def __post_init__(self) -> None:
        if self.bits not in (1, 2, 4, 8, 16):
            raise ValueError(f"bits must be 1, 2, 4, 8 or 16, not {self.bits}")
        if self.bins < 1 or self.bins * self.bits % 8:
            raise ValueError(f"{self.bins} bins of {self.bits} bits do not fill whole bytes")
        if self.size_bits not in (0, 16):
            raise ValueError(f"size_bits must be 0 or 16, not {self.size_bits}")

    @property
    def bin_bytes(self) -> int:
        """The bytes of the bins (the size code follows them)."""
        return self.bins * self.bits // 8

    @property
    def nbytes(self) -> int:
        return self.bin_bytes + self.size_bits // 8

    def to_json(self) -> str:
        fields = asdict(self)
        if not self.size_bits:  # as version 1 wrote it, so an older index's meta reads back equal
            del fields["size_bits"]
        return json.dumps(fields, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> SketchScheme:
        return cls(**json.loads(text))

    def describe(self) -> str:
        size = f" and a {self.size_bits}-bit shingle count" if self.size_bits else ""
        return f"one-permutation MinHash, {self.bins} bins of {self.bits} bits{size} ({self.nbytes} bytes)"


# Chosen by bench/sketch_choice.py (BENCHMARKS.md, "Accuracy without texts"): at 120 bytes, 1-bit bins had
# the best F1 near the 0.8 line (0.955 en, 0.942 zh on the tuning set; 4 bits 0.943, 0.928; 8 bits 0.920, 0.902).
# Version 2 gives 16 of the 960 bins to the distinct-shingle count (bench/estimate_rule.py: -0.002 en, -0.000 zh F1 for
# the bins; with the size rule +0.005 en, +0.011 zh over 960 bins alone), in the same 120 bytes.
SCHEME_V1 = SketchScheme(bins=960, bits=1, version=1)
DEFAULT_SCHEME = SketchScheme(bins=944, bits=1, version=2, size_bits=16)


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
    docs: np.ndarray, hashes: np.ndarray, count: int, scheme: SketchScheme = DEFAULT_SCHEME, *, distinct: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Sketches of `count` documents from their shingle hashes (docs[i] says whose hashes[i] is; docs
    nondecreasing; repeats allowed unless `distinct` says each document's hashes are distinct already):
    a (count, nbytes) uint8 array and a bool array saying which documents had any shingle (the rows of
    the others are zeros)."""
    mins = empty_minima(count, scheme)
    add_to_minima(mins, docs, hashes)
    sizes = None
    if scheme.size_bits:
        sizes = np.bincount(docs, minlength=count) if distinct else distinct_counts(docs, hashes, count)
    return sketch_from_minima(mins, scheme, sizes)


def distinct_counts(docs: np.ndarray, hashes: np.ndarray, count: int) -> np.ndarray:
    """How many distinct hashes each of `count` documents has (docs[i] says whose hashes[i] is): one sort
    of (document, low 32 bits of the hash) words. Two distinct shingles of a text share the low 32 bits
    with probability 2**-32, which changes a count by one in a few billion pairs."""
    keys = (docs.astype(_U64) << _U64(32)) | (hashes & _U64(0xFFFFFFFF))
    keys.sort()
    new = np.ones(len(keys), dtype=bool)
    np.not_equal(keys[1:], keys[:-1], out=new[1:])
    return np.bincount((keys[new] >> _U64(32)).astype(np.intp), minlength=count)


def size_codes(sizes: np.ndarray) -> np.ndarray:
    """Distinct-shingle counts as 16-bit codes (0 for a count of 0 or unknown)."""
    sizes = np.asarray(sizes, dtype=np.float64)
    codes = 1 + np.rint(SIZE_STEPS * np.log2(np.maximum(sizes, 1)))
    return np.where(sizes >= 1, np.minimum(codes, 0xFFFF), 0).astype("<u2")


def sizes_of(rows: np.ndarray, scheme: SketchScheme = DEFAULT_SCHEME) -> np.ndarray:
    """The distinct-shingle counts the sketches record (float64; NaN where unknown or not recorded)."""
    rows = np.atleast_2d(rows)
    if not scheme.size_bits:
        return np.full(len(rows), np.nan)
    codes = np.ascontiguousarray(rows[:, scheme.bin_bytes : scheme.bin_bytes + 2]).view("<u2").ravel()
    sizes = np.rint(2.0 ** ((codes.astype(np.float64) - 1) / SIZE_STEPS))
    return np.where(codes > 0, sizes, np.nan)


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


def sketch_from_minima(
    mins: np.ndarray, scheme: SketchScheme = DEFAULT_SCHEME, sizes: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Sketches from bin minima (add_to_minima), as sketch_hashes() gives them. `mins` is changed.
    sizes: each text's distinct-shingle count, for a scheme that records it (None: recorded as unknown)."""
    present = (mins != _EMPTY).any(axis=1)
    _densify(mins)
    # `bits` bits of each minimum, from the top of its product with an odd constant (every bit of the
    # minimum counts there; the minimum's own high bits are mostly zeros): equal minima give equal
    # bits, different ones random bits.
    fields = (mins * np.uint32(0x9E3779B1)) >> np.uint32(32 - scheme.bits)
    fields[~present] = 0
    packed = pack_fields(fields, scheme.bits)
    if not scheme.size_bits:
        return packed, present
    codes = np.zeros(len(mins), dtype="<u2") if sizes is None else size_codes(sizes)
    codes[~present] = 0
    return np.concatenate([packed, codes.view(np.uint8).reshape(-1, 2)], axis=1), present


def sketch_units(
    unit_arrays: Sequence[np.ndarray], scheme: SketchScheme = DEFAULT_SCHEME
) -> tuple[np.ndarray, np.ndarray]:
    """Sketches of texts given as their normalized code points (features.char_units)."""
    docs, hashes, _ = units_features(list(unit_arrays), SKETCH_FEATURES)
    return sketch_hashes(docs, hashes, len(unit_arrays), scheme)  # (repeats kept: counted by a sort)


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


@cache
def _bin_mask(nbytes: int, bin_bytes: int) -> np.ndarray:
    """64-bit words that keep the bins' bytes of a sketch of nbytes bytes and clear the size's."""
    return np.frombuffer(bytes([0xFF] * bin_bytes + [0] * (nbytes - bin_bytes)), dtype="<u8")


def agreeing_bins(a: np.ndarray, b: np.ndarray, bits: int, bin_bytes: int | None = None) -> np.ndarray:
    """How many bins two sets of sketches (rows of bytes, same shape) agree on, row by row; only the
    first bin_bytes bytes of a row are bins (None: all of them)."""
    a, b = np.atleast_2d(a), np.atleast_2d(b)
    bin_bytes = a.shape[1] if bin_bytes is None else bin_bytes
    if bits == 1 and a.shape[1] % 8 == 0:  # a popcount of 64-bit words
        xor = np.ascontiguousarray(a).view("<u8") ^ np.ascontiguousarray(b).view("<u8")
        if bin_bytes < a.shape[1]:
            xor &= _bin_mask(a.shape[1], bin_bytes)
        return bin_bytes * 8 - np.bitwise_count(xor).sum(axis=1, dtype=np.int64)
    a, b = a[:, :bin_bytes], b[:, :bin_bytes]
    if bits == 16:
        return np.count_nonzero(np.ascontiguousarray(a).view("<u2") == np.ascontiguousarray(b).view("<u2"), axis=1)
    return _equal_fields_table(bits)[a ^ b].sum(axis=1)


def estimate_from_agreeing(agree: np.ndarray, scheme: SketchScheme) -> np.ndarray:
    """Jaccard estimates from counts of agreeing bins: (share - 2**-bits) / (1 - 2**-bits), within [0, 1]."""
    chance = 2.0**-scheme.bits
    return np.clip((np.asarray(agree) / scheme.bins - chance) / (1.0 - chance), 0.0, 1.0)


def estimate_spread(jaccard: np.ndarray, scheme: SketchScheme) -> np.ndarray:
    """The standard deviation of the estimate at a true Jaccard: a bin agrees with probability
    p = J + (1 - J) 2**-bits, independently (binomial), and the estimate rescales the share."""
    chance = 2.0**-scheme.bits
    p = np.asarray(jaccard) + (1 - np.asarray(jaccard)) * chance
    return np.sqrt(np.clip(p * (1 - p), 0, None) / scheme.bins) / (1 - chance)


def sharpened(estimate: np.ndarray, ratio: np.ndarray, scheme: SketchScheme) -> np.ndarray:
    """The estimate with the size ratio r = min(|A|, |B|) / max(|A|, |B|) of the two shingle sets (NaN:
    unknown, the estimate stays): J <= r always, and J = r where one set contains the other. So r where
    the estimate lies within CONTAINMENT_SDS standard deviations of r (the estimate is what a
    containment would give), else min(estimate, r). Unbiased no more, but right more often at a cut:
    bench/estimate_rule.py."""
    estimate = np.asarray(estimate, dtype=np.float64)
    known = ~np.isnan(ratio)
    r = np.where(known, ratio, 1.0)
    contained = np.abs(estimate - r) <= CONTAINMENT_SDS * estimate_spread(r, scheme) + 1e-12
    return np.where(known, np.where(contained, r, np.minimum(estimate, r)), estimate)


def size_ratios(a: np.ndarray, b: np.ndarray, scheme: SketchScheme = DEFAULT_SCHEME) -> np.ndarray:
    """min / max of the two sketches' distinct-shingle counts, row by row (NaN where either is unknown)."""
    x, y = sizes_of(a, scheme), sizes_of(b, scheme)
    return np.minimum(x, y) / np.maximum(x, y)


def estimate_many(a: np.ndarray, b: np.ndarray, scheme: SketchScheme = DEFAULT_SCHEME) -> np.ndarray:
    """Estimated Jaccard of each pair of rows (uint8 arrays of shape (pairs, nbytes)): the bins' estimate,
    sharpened by the texts' sizes where the scheme records them."""
    estimate = estimate_from_agreeing(agreeing_bins(a, b, scheme.bits, scheme.bin_bytes), scheme)
    if not scheme.size_bits:
        return estimate
    return sharpened(estimate, size_ratios(a, b, scheme), scheme)


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
