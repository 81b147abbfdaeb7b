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
from typing import cast

import numpy as np

from .. import native
from .features import char_units, mix, units_features
from .rule import (
    DEFAULT_SKETCH_BINS,
    DEFAULT_SKETCH_BITS,
    DEFAULT_SKETCH_SIZE_BITS,
    MAX_BINS,
    RATIO_SLACK,
    SKETCH_VERSION,
    SPREAD_FACTOR,
)
from .settings import FingerprintSettings
from .shingles import TRUTH_NGRAM

_U64 = np.uint64
_EMPTY = np.uint32(0xFFFFFFFF)  # the bin saw no shingle (a shingle whose 32-bit value is this is taken for none)
# Texts per vectorized pass: bounds the temporary arrays (about 40 bytes per character).
CHUNK_CHARACTERS = 128_000
# SKETCH_VERSION (the newest) and MAX_BINS (a tampered scheme's bound) are in rule.py, beside the default.
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
        for name in ("bins", "bits", "ngram", "version", "size_bits"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{name} must be a whole number, not {value!r}")
        if not 1 <= self.version <= SKETCH_VERSION:
            raise ValueError(f"version must be from 1 to {SKETCH_VERSION}, not {self.version}")
        if not 1 <= self.ngram <= 16:
            raise ValueError(f"ngram must be from 1 to 16, not {self.ngram}")
        if not 1 <= self.bins <= MAX_BINS:
            raise ValueError(f"bins must be from 1 to {MAX_BINS}, not {self.bins}")
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
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        return cls(**data)

    @classmethod
    def recorded(cls, text: str | None) -> SketchScheme:
        """The scheme an index records in simhash_meta ('sketch'): DEFAULT_SCHEME where none is (an index
        made before sketches has no sketches to read). ValueError where it cannot be read."""
        if text is None:
            return DEFAULT_SCHEME
        try:
            return cls.from_json(text)
        except (TypeError, ValueError, RecursionError) as exc:
            raise ValueError(f"{text}: {exc}") from None

    def describe(self) -> str:
        size = f" and a {self.size_bits}-bit shingle count" if self.size_bits else ""
        return f"one-permutation MinHash, {self.bins} bins of {self.bits} bits{size} ({self.nbytes} bytes)"


# Chosen by bench/sketch_choice.py (BENCHMARKS.md, "Accuracy without texts"): at 120 bytes, 1-bit bins had
# the best F1 near the 0.8 line (0.955 en, 0.942 zh on the tuning set; 4 bits 0.943, 0.928; 8 bits 0.920, 0.902).
# Version 2 gives 16 of the 960 bins to the distinct-shingle count (bench/estimate_rule.py: -0.002 en, -0.000 zh F1 for
# the bins; with the size rule +0.005 en, +0.011 zh over 960 bins alone), in the same 120 bytes.
SCHEME_V1 = SketchScheme(bins=960, bits=1, version=1)
DEFAULT_SCHEME = SketchScheme(
    bins=DEFAULT_SKETCH_BINS, bits=DEFAULT_SKETCH_BITS, version=SKETCH_VERSION,
    size_bits=DEFAULT_SKETCH_SIZE_BITS,
)


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


# Densification probes the empty bins attempt by attempt while many are left; the last few (of sparse
# rows, which may take hundreds of attempts) are probed _TAIL_BLOCK attempts at a pass, so that a pass
# is a few numpy calls over many probes, not over a few.
_TAIL_PROBES = 1024
_TAIL_BLOCK = 64
# A row with at most this many filled bins is densified by ranks (_first_hit_keys) instead: f rows of
# the table per row, where probing takes about bins / f attempts per empty bin. Not for schemes of
# more than _RANKED_BINS bins: the table is bins * bins.
_RANKED_FILL = 64
_RANKED_BINS = 2048
_MOST_RANKED_ATTEMPTS = 1 << 13
_BUFFER_ITEMS = 1 << 21  # items of the largest temporary array (a few MiB)
# Rows of more filled bins, when there are at least _SLICED_ROWS of them, are densified bit-sliced
# (_densify_sliced): the fields of 64 rows in one word, an attempt a few operations on (rows / 64, bins)
# words; their bins still empty after _SLICED_ATTEMPTS are probed on.
_SLICED_ROWS = 256
_SLICED_ATTEMPTS = 1024
# Sketches made at once (sketch_many, fingerprint.simhash_and_sketch_many): many rows for bit slicing,
# their minima 4 bytes a bin.
SKETCH_ROWS = 4096


def _probe_targets(bins: int, first: int, count: int) -> np.ndarray:
    """_probe() of attempts first .. first + count - 1 side by side: (bins, count), row j for empty
    bin j, its attempts in order."""
    j = np.arange(bins, dtype=_U64)[:, None]
    # Wrapping uint64 products: the same as _probe's Python integer product taken mod 2**64.
    attempt = np.arange(first, first + count, dtype=_U64)[None, :] * _U64(0x632BE59BD9B4E019)
    h = mix(j * _U64(0x9E3779B97F4A7C15) ^ attempt)
    # (.view, not .astype: numpy casts uint64 to int64 element by element, several times slower than
    # the arithmetic; the values are below bins.)
    return ((h >> _U64(32)) * _U64(bins) >> _U64(32)).view(np.intp)


@lru_cache(maxsize=1024)
def _probe_offsets(bins: int, attempt: int) -> np.ndarray:
    """_probe() less the bin's own number: added to an empty bin's flat position, the flat position
    of the bin it borrows from (rows of `bins` bins laid end to end)."""
    return _probe_targets(bins, attempt, 1)[:, 0] - np.arange(bins)


@lru_cache(maxsize=32)
def _probe_block(bins: int, first: int) -> np.ndarray:
    """_probe_targets() of _TAIL_BLOCK attempts from `first`."""
    return _probe_targets(bins, first, _TAIL_BLOCK)


_first_hits: dict[int, tuple[int, np.ndarray]] = {}  # bins -> (attempts, table) of _first_hit_keys


def _first_hit_keys(bins: int, attempts: int) -> tuple[int, np.ndarray]:
    """(a, table): table[t, j] = (the first attempt, up to a >= attempts, at which empty bin j probes
    bin t) << shift | t, the largest integer where it does not; the extra row `bins` is all largest.
    The filled bin an empty bin j takes is then the t of the least table[t, j] over the row's filled t."""
    have = _first_hits.get(bins)
    if have is not None and have[0] >= attempts:
        return have
    shift = bins.bit_length()
    grown = max(attempts, 2 * have[0] if have else 256)
    dtype = np.int32 if (grown + 1) << shift <= np.iinfo(np.int32).max else np.int64
    table = np.full((bins + 1, bins), np.iinfo(dtype).max, dtype=dtype)
    done = 0
    if have is not None and have[1].dtype == dtype:  # keep what is known: later attempts only add
        done, table = have[0], have[1].copy()
    step = max(1, _BUFFER_ITEMS // bins)
    for first in range(done + 1, grown + 1, step):
        count = min(step, grown + 1 - first)
        target = _probe_targets(bins, first, count)
        keys = (np.arange(first, first + count, dtype=dtype) << dtype(shift)) | target.astype(dtype)
        np.minimum.at(table.reshape(-1), (target * bins + np.arange(bins)[:, None]).ravel(), keys.ravel())
    _first_hits[bins] = (grown, table)
    return grown, table


def _densify(mins: np.ndarray) -> np.ndarray:
    """Fill each empty bin (in place) with the value of the first non-empty bin its probe sequence hits;
    how many bins of each row were filled before. (sketch_from_minima densifies the fields instead.)"""
    occupied = mins != _EMPTY
    filled = np.count_nonzero(occupied, axis=1)
    _densify_values(mins, occupied, filled)
    return filled


def _densify_values(values: np.ndarray, occupied: np.ndarray, filled: np.ndarray, bits: int | None = None) -> None:
    """_densify() of any values whose filled bins are `occupied` (filled: their count per row); bits:
    how many low bits of the values count (fields of a sketch), None for all."""
    count, bins = values.shape
    # A row with one non-empty bin: every probe sequence ends there.
    single = np.flatnonzero(filled == 1)
    if len(single):
        values[single] = values[single, occupied[single].argmax(axis=1)][:, None]
    sparse = np.flatnonzero((filled > 1) & (filled <= min(_RANKED_FILL, bins - 1)) & (bins <= _RANKED_BINS))
    later, attempt = np.empty(0, dtype=np.intp), 1
    if len(sparse) and _ranks_pay(filled[sparse], bins):
        later, attempt = _densify_by_ranks(values, occupied, filled, sparse)
    else:
        sparse = sparse[:0]
    dense = np.flatnonzero((filled > max(1, _RANKED_FILL)) & (filled < bins))
    sliced, sliced_attempt = np.empty(0, dtype=np.intp), 1
    if bits is not None and bits <= 16 and len(dense) >= _SLICED_ROWS:
        sliced, sliced_attempt = _densify_sliced(values, occupied, filled, dense, bits)
    else:
        dense = dense[:0]
    empty = ~occupied
    empty[(filled <= 1) | (filled == bins)] = False  # rows with nothing to fill, or nothing to fill from
    empty[sparse] = False
    empty[dense] = False
    _densify_by_probes(values, occupied, np.flatnonzero(empty), 1)
    if len(later):
        _densify_by_probes(values, occupied, later, attempt)
    if len(sliced):
        _densify_by_probes(values, occupied, sliced, sliced_attempt)


def _bit_rows(bits: np.ndarray, words: int) -> np.ndarray:
    """(rows, bins) bools as (words, bins) uint64: bit r % 64 of word r // 64 of column j is bits[r, j]."""
    rows, bins = bits.shape
    packed = np.zeros((bins, words * 8), dtype=np.uint8)
    packed[:, : -(-rows // 8)] = np.packbits(np.ascontiguousarray(bits.T), axis=1, bitorder="little")
    return np.ascontiguousarray(packed.view("<u8").T)


def _unpack_bit_rows(words: np.ndarray, rows: int) -> np.ndarray:
    """The (rows, bins) bools of _bit_rows()."""
    count, bins = words.shape
    as_bytes = np.ascontiguousarray(words.view(np.uint8).reshape(count, bins, 8).transpose(0, 2, 1))
    return np.unpackbits(as_bytes.reshape(count * 8, bins), axis=0, bitorder="little")[:rows].view(bool)


def _densify_sliced(
    values: np.ndarray, occupied: np.ndarray, filled: np.ndarray, rows: np.ndarray, bits: int
) -> tuple[np.ndarray, int]:
    """Densify these rows' values of `bits` bits bit-sliced: the flat positions of the empty bins no
    probe filled within _SLICED_ATTEMPTS, and the attempt to probe on from."""
    bins = values.shape[1]
    rows = rows[np.argsort(filled[rows], kind="stable")]  # sparse rows first: their words work longest
    words = -(-len(rows) // 64)
    taken = occupied[rows]
    mine = values[rows]
    filled_bins = _bit_rows(taken, words)
    planes = [_bit_rows(((mine >> np.uint32(b)) & 1).astype(bool) & taken, words) for b in range(bits)]
    got = [plane.copy() for plane in planes]
    pending = _bit_rows(~taken, words)
    attempt, active = 1, words  # words [0, active) may have an empty bin left
    while active and attempt <= _SLICED_ATTEMPTS:
        target = _probe(bins, attempt)
        hit = filled_bins[:active].take(target, axis=1)
        hit &= pending[:active]
        pending[:active] ^= hit
        for plane, out in zip(planes, got):
            out[:active] |= hit & plane[:active].take(target, axis=1)
        attempt += 1
        if attempt % 4 == 0:
            busy = np.flatnonzero(pending[:active].any(axis=1))
            active = int(busy[-1]) + 1 if len(busy) else 0
    densified = np.zeros(mine.shape, dtype=values.dtype)
    for b, out in enumerate(got):
        densified |= _unpack_bit_rows(out, len(rows)).astype(values.dtype) << values.dtype.type(b)
    values[rows] = np.where(taken, mine, densified)
    if not active:
        return np.empty(0, dtype=np.intp), attempt
    r, c = np.nonzero(_unpack_bit_rows(pending, len(rows)))
    return rows[r] * bins + c, attempt


def _ranked_attempts(fills: np.ndarray, bins: int) -> int:
    """Attempts of _first_hit_keys after which about one empty bin of rows of these fills is left."""
    return min(_MOST_RANKED_ATTEMPTS, int(np.log(len(fills) * bins) / -np.log1p(-int(fills.min()) / bins)) + 1)


def _ranks_pay(fills: np.ndarray, bins: int) -> bool:
    """Whether ranks cost less than probes for rows of these fills, counting the table's growth (in
    probes: a probe costs about 7 table items read, and 2 table entries made; the table is kept for
    later calls, so its growth counts a quarter)."""
    probes = float(((bins - fills) * bins / fills).sum())
    known = _first_hits[bins][0] if bins in _first_hits else 0
    growth = max(0, _ranked_attempts(fills, bins) - known) * bins / 2
    return float(fills.sum()) * bins / 7 + growth < probes


def _densify_by_ranks(
    values: np.ndarray, occupied: np.ndarray, filled: np.ndarray, rows: np.ndarray
) -> tuple[np.ndarray, int]:
    """Densify these rows (of few filled bins) from _first_hit_keys: the flat positions of the empty
    bins whose probes hit no filled bin within the table's attempts, and the attempt to probe on from."""
    bins = values.shape[1]
    known, table = _first_hit_keys(bins, _ranked_attempts(filled[rows], bins))
    mask = (1 << bins.bit_length()) - 1
    rows = rows[np.argsort(filled[rows], kind="stable")]  # alike rows together: little padding
    later = []
    step = max(1, _BUFFER_ITEMS // (int(filled[rows[-1]]) * bins))
    for lo in range(0, len(rows), step):
        part = rows[lo : lo + step]
        taken = occupied[part]
        r, t = np.nonzero(taken)
        widths = filled[part]
        filled_bins = np.full((len(part), int(widths[-1])), bins, dtype=np.intp)  # padded: the all-largest row
        filled_bins[r, np.arange(len(r)) - np.repeat(np.cumsum(widths) - widths, widths)] = t
        best = table.take(filled_bins, axis=0).min(axis=1)  # (rows, bins)
        source = (best & mask).astype(np.intp)
        fill = ~taken & ((best >> bins.bit_length()) <= known)
        block = values[part]
        np.copyto(block, np.take_along_axis(block, np.minimum(source, bins - 1), axis=1), where=fill)
        values[part] = block
        left_r, left_c = np.nonzero(~taken & ~fill)
        later.append(part[left_r] * bins + left_c)
    return np.concatenate(later), known + 1


def _densify_by_probes(values: np.ndarray, occupied: np.ndarray, where: np.ndarray, attempt: int) -> None:
    """Fill the empty bins at these flat positions from `attempt` on, one attempt at a pass while many
    are left, then _TAIL_BLOCK attempts at a pass."""
    bins = values.shape[1]
    flat, taken = values.reshape(-1), occupied.reshape(-1)
    cols = where % bins
    # Writes go only to empty bins, reads only from bins filled from the start: the order in which the
    # probes are made does not matter. The bins still empty are gathered anew only once 30% of those
    # probed are filled (a pass over all of them costs about what probing them again does).
    pending, left = np.ones(len(where), dtype=bool), len(where)
    while left > _TAIL_PROBES:
        source = _probe_offsets(bins, attempt).take(cols)
        source += where
        hit = taken.take(source)
        hit &= pending
        done = np.flatnonzero(hit)
        flat[where.take(done)] = flat.take(source.take(done))
        pending ^= hit
        left -= len(done)
        attempt += 1
        if left < 0.7 * len(where):
            still = np.flatnonzero(pending)
            where, cols, pending = where.take(still), cols.take(still), np.ones(len(still), dtype=bool)
    still = np.flatnonzero(pending)
    where, cols = where.take(still), cols.take(still)
    while len(where):
        first = 1 + (attempt - 1) // _TAIL_BLOCK * _TAIL_BLOCK  # blocks start at fixed attempts: cached
        source = _probe_block(bins, first)[:, attempt - first :].take(cols, axis=0)
        source += (where - cols)[:, None]
        hit = taken.take(source)
        at = hit.argmax(axis=1)  # the first attempt that hit (0 also when none did)
        found = hit[np.arange(len(where)), at]
        done = np.flatnonzero(found)
        flat[where.take(done)] = flat.take(source[done, at.take(done)])
        still = np.flatnonzero(~found)
        where, cols = where.take(still), cols.take(still)
        attempt = first + _TAIL_BLOCK


def sketch_hashes(
    docs: np.ndarray, hashes: np.ndarray, count: int, scheme: SketchScheme = DEFAULT_SCHEME, *, distinct: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Sketches of `count` documents from their shingle hashes (docs[i] says whose hashes[i] is; docs
    nondecreasing; repeats allowed unless `distinct` says each document's hashes are distinct already):
    a (count, nbytes) uint8 array and a bool array saying which documents had any shingle (the rows of
    the others are zeros)."""
    mins = empty_minima(count, scheme)
    add_to_minima(mins, docs, hashes)
    sizes = shingle_counts(docs, hashes, count, distinct=distinct) if scheme.size_bits else None
    return sketch_from_minima(mins, scheme, sizes)


def shingle_counts(docs: np.ndarray, hashes: np.ndarray, count: int, *, distinct: bool = False) -> np.ndarray:
    """Each of `count` documents' distinct-shingle count (what a version 2 sketch records): a bincount
    where each document's hashes are distinct already (`distinct`: binary and log weights sort and
    fold them), else distinct_counts()'s sort."""
    return np.bincount(docs, minlength=count) if distinct else distinct_counts(docs, hashes, count)


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
    codes = recorded_size_codes(rows, scheme)
    sizes = np.rint(2.0 ** ((codes.astype(np.float64) - 1) / SIZE_STEPS))
    return np.where(codes > 0, sizes, np.nan)


def recorded_size_codes(rows: np.ndarray, scheme: SketchScheme = DEFAULT_SCHEME) -> np.ndarray:
    """The 16-bit codes (size_codes) of the distinct-shingle counts the sketches record (uint16; 0: unknown or
    not recorded)."""
    rows = np.atleast_2d(rows)
    if not scheme.size_bits:
        return np.zeros(len(rows), dtype=np.uint16)
    return np.ascontiguousarray(rows[:, scheme.bin_bytes : scheme.bin_bytes + 2]).view("<u2").ravel().astype(np.uint16)


def ratio_may_reach(a: np.ndarray, b: np.ndarray, threshold: float) -> np.ndarray:
    """For pairs of recorded_size_codes(), False only where the pair's estimate cannot reach threshold: an estimate with
    both sizes known is at most their ratio (sharpened()), and this is an upper bound of that ratio, whichever
    pow() made the sizes (each size within half of 2 ** ((code - 1) / SIZE_STEPS), that within a relative 1e-9).
    So a pair ruled out here is one estimate_many() would give below threshold, without its rows."""
    low, high = np.minimum(a, b).astype(np.float64), np.maximum(a, b).astype(np.float64)
    smaller = 2.0 ** ((low - 1) / SIZE_STEPS) * (1 + 1e-9) + 0.5
    larger = 2.0 ** ((high - 1) / SIZE_STEPS) * (1 - 1e-9) - 0.5  # at least 0.5: codes start at 1
    return (low == 0) | (smaller >= threshold * larger)


def empty_minima(count: int = 1, scheme: SketchScheme = DEFAULT_SCHEME) -> np.ndarray:
    """Bin minima of `count` documents that have seen no shingle yet: (count, bins) uint32."""
    return np.full((count, scheme.bins), _EMPTY, dtype=np.uint32)


def add_to_minima(mins: np.ndarray, docs: np.ndarray, hashes: np.ndarray) -> None:
    """Fold shingle hashes into the bin minima (in place): a text's minima are those of its pieces'
    minima, so a text too large to hold is sketched piece by piece (core/pieces.py)."""
    count, bins = mins.shape
    # One permutation: the high 32 bits pick the bin, the low 32 bits are the value minimised in it.
    # (.view, not .astype: numpy casts uint64 to int64 element by element, several times slower than the
    # arithmetic; the values are below bins.)
    slot = ((hashes >> _U64(32)) * _U64(bins) >> _U64(32)).view(np.intp)
    slot += docs * bins
    np.minimum.at(mins.reshape(-1), slot, hashes.astype(np.uint32))


def sketch_from_minima(
    mins: np.ndarray, scheme: SketchScheme = DEFAULT_SCHEME, sizes: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Sketches from bin minima (add_to_minima), as sketch_hashes() gives them.
    sizes: each text's distinct-shingle count, for a scheme that records it (None: recorded as unknown)."""
    occupied = mins != _EMPTY
    filled = np.count_nonzero(occupied, axis=1)
    present = filled > 0
    # `bits` bits of each minimum, from the top of its product with an odd constant (every bit of the
    # minimum counts there; the minimum's own high bits are mostly zeros): equal minima give equal
    # bits, different ones random bits. An empty bin takes the bits of the minimum densification gives
    # it, so the fields are densified instead of the minima (the same, and fewer bits to move).
    fields = (mins * np.uint32(0x9E3779B1)) >> np.uint32(32 - scheme.bits)
    _densify_values(fields, occupied, filled, scheme.bits)
    fields[~present] = 0
    packed = pack_fields(fields, scheme.bits)
    if not scheme.size_bits:
        return packed, present
    codes = np.zeros(len(mins), dtype="<u2") if sizes is None else size_codes(sizes)
    codes[~present] = 0
    return np.concatenate([packed, codes.view(np.uint8).reshape(-1, 2)], axis=1), present


class SketchBatches:
    """Sketches of `expected` texts whose shingle hashes come a chunk at a time: the bin minima (and
    distinct-shingle counts) of up to SKETCH_ROWS texts are held and densified together, many rows at
    once being cheaper (bit slicing). distinct: each text's hashes come distinct already (binary and
    log weights), so counting them needs no sort."""

    def __init__(self, expected: int, scheme: SketchScheme = DEFAULT_SCHEME, *, distinct: bool = False) -> None:
        self.expected, self.scheme, self.distinct = expected, scheme, distinct
        self.rows: list[np.ndarray] = [np.zeros((0, scheme.nbytes), np.uint8)]
        self.present: list[np.ndarray] = [np.zeros(0, bool)]
        self.made = 0  # sketches densified so far
        self._hold(min(expected, SKETCH_ROWS))

    def _hold(self, rows: int) -> None:
        self.minima, self.sizes, self.held = empty_minima(rows, self.scheme), np.zeros(rows, np.int64), 0

    def add(self, docs: np.ndarray, hashes: np.ndarray, count: int) -> None:
        """The next `count` texts' shingle hashes (docs[i] says which of them hashes[i] is)."""
        if self.held + count > len(self.minima):
            self._densify_held()
            self._hold(max(count, min(self.expected - self.made, SKETCH_ROWS)))
        add_to_minima(self.minima[self.held : self.held + count], docs, hashes)
        if self.scheme.size_bits:
            self.sizes[self.held : self.held + count] = shingle_counts(docs, hashes, count, distinct=self.distinct)
        self.held += count

    def _densify_held(self) -> None:
        if self.held:
            rows, present = sketch_from_minima(self.minima[: self.held], self.scheme, self.sizes[: self.held])
            self.rows.append(rows)
            self.present.append(present)
            self.made += self.held
            self.held = 0

    def finish(self) -> tuple[np.ndarray, np.ndarray]:
        """(rows, present) of every text added, as sketch_hashes() gives them."""
        self._densify_held()
        return np.concatenate(self.rows), np.concatenate(self.present)


def sketch_many(texts: Sequence[str], scheme: SketchScheme = DEFAULT_SCHEME) -> tuple[np.ndarray, np.ndarray]:
    """sketch() of many texts: (rows, present) as sketch_hashes(). By the C core where it is built (the
    texts it declines by the reference), else by the numpy reference."""
    lib = native.core()
    if lib is None or not texts:
        return reference_sketch_many(texts, scheme)
    _, rows, status = native.batch(lib, texts, scheme=scheme, fingerprints=False)
    assert rows is not None
    present = (status & native.HAS_SKETCH).astype(bool)
    declined = np.flatnonzero(status & native.DECLINED)
    if len(declined):
        rows[declined], present[declined] = reference_sketch_many([texts[i] for i in declined.tolist()], scheme)
    return rows, present


def reference_sketch_many(
    texts: Sequence[str], scheme: SketchScheme = DEFAULT_SCHEME
) -> tuple[np.ndarray, np.ndarray]:
    """sketch_many() by the numpy reference: hashed in vectorized chunks and densified up to SKETCH_ROWS
    at once."""
    batches = SketchBatches(len(texts), scheme)  # repeats kept: counted by a sort
    chunk: list[np.ndarray] = []
    size = 0
    for text in texts:
        chunk.append(char_units(text))
        size += len(chunk[-1])
        if size >= CHUNK_CHARACTERS or len(chunk) >= SKETCH_ROWS:
            batches.add(*units_features(chunk, SKETCH_FEATURES)[:2], len(chunk))
            chunk, size = [], 0
    if chunk:
        batches.add(*units_features(chunk, SKETCH_FEATURES)[:2], len(chunk))
    return batches.finish()


def sketch(text: str, scheme: SketchScheme = DEFAULT_SCHEME) -> bytes | None:
    """The text's sketch (scheme.nbytes bytes), or None when it has no letter or digit (no fingerprint)."""
    rows, present = sketch_many([text], scheme)
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


# How sure an estimate is. The bins' estimate of a pair spreads by the binomial sqrt((1 - J**2) / bins)
# only where both texts fill every bin; a short text fills few and densification copies them. The model
# (docs/quality.md, "How sure an estimate is"): a bin agrees when both sketches take the same minimum of
# the union from the intersection (share J), else by the coin of two unrelated bits. The F bins the union
# fills are F of its u shingles, taken without replacement (variance J(1 - J)(1 - F/u) / F), and each of
# the E = bins - F empty bins copies a filled one drawn at random (J(1 - J) E / bins**2 more). The coins
# of the (1 - J) bins bins that disagree repeat where a pair of sources recurs: N + N**2 / P for N coin
# bins over P = (1 - J) F F_small distinct pairs of sources. Where F = bins this is the binomial.
# Generated pairs (bench/certainty.py) measured the spread 5-12% above the model at 20-6,000 shingles,
# near the line: SPREAD_FACTOR (core/rule.py) covers that rather than fitting each size. A size ratio
# RATIO_SLACK (core/rule.py) below the threshold rules the pair out.


def pair_spread(jaccard, size_a, size_b, scheme: SketchScheme = DEFAULT_SCHEME) -> np.ndarray:
    """The standard deviation of the bins' estimate for two texts of these distinct-shingle counts (NaN:
    unknown, taken as long texts) at a true Jaccard `jaccard` (see the model above); for bins of more
    than one bit, estimate_spread() times SPREAD_FACTOR."""
    j = np.clip(np.asarray(jaccard, dtype=np.float64), 0.0, 1.0)
    a = np.asarray(size_a, dtype=np.float64)
    b = np.asarray(size_b, dtype=np.float64)
    if scheme.bits != 1:
        return SPREAD_FACTOR * estimate_spread(j, scheme) * np.ones(np.broadcast(j, a, b).shape)
    m = float(scheme.bins)
    unknown = np.isnan(a) | np.isnan(b)
    a = np.where(unknown, 1e12, np.maximum(a, 1.0))
    b = np.where(unknown, 1e12, np.maximum(b, 1.0))
    union = (a + b) / (1 + j)
    filled = m * -np.expm1(-union / m)
    filled_small = m * -np.expm1(-np.minimum(a, b) / m)
    sources = j * (1 - j) * (np.clip(1 - filled / union, 0.0, None) / filled + (m - filled) / m**2)
    coins = (1 - j) * m
    repeats = coins**2 / (np.maximum((1 - j) * filled, 1.0) * filled_small)
    return SPREAD_FACTOR * np.sqrt(sources + (coins + repeats) / m**2)


def _normal_cdf(z: np.ndarray) -> np.ndarray:
    """Phi(z), vectorized (Abramowitz and Stegun 7.1.26 for erf: error below 1.5e-7)."""
    x = np.abs(z) / np.sqrt(2.0)
    t = 1.0 / (1.0 + 0.3275911 * x)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    erf = 1.0 - poly * np.exp(-x * x)
    return 0.5 * (1.0 + np.sign(z) * erf)


def certainty(estimate, threshold: float, size_a, size_b, scheme: SketchScheme = DEFAULT_SCHEME) -> np.ndarray:
    """How sure the verdict "estimate >= threshold" (or below) is: the probability that the true Jaccard
    lies on the estimate's side of the threshold, Phi(|estimate - threshold| / spread), the spread
    pair_spread() at the threshold for these sizes (a flat prior on J near the line). 1.0 where the
    sizes alone rule the pair out (J <= min/max, below the threshold)."""
    estimate = np.asarray(estimate, dtype=np.float64)
    # At a threshold of 1 the spread vanishes (J = 1 is estimated without error): take it a bin below,
    # so that only the exact check can say a pair is identical.
    at = min(float(threshold), 1.0 - 1.0 / scheme.bins)
    z = np.abs(estimate - threshold) / pair_spread(at, size_a, size_b, scheme)
    sure = _normal_cdf(z)
    a, b = np.asarray(size_a, dtype=np.float64), np.asarray(size_b, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.minimum(a, b) / np.maximum(a, b)
    ruled_out = (ratio < threshold - RATIO_SLACK) & (estimate < threshold)  # NaN compares False
    return np.where(ruled_out, 1.0, sure)


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
    sharpened by the texts' sizes where the scheme records them. By the C core where it is built (the
    same doubles, bit for bit), else by the numpy reference."""
    lib = native.core()
    if lib is not None:
        a, b = np.atleast_2d(a), np.atleast_2d(b)
        if a.shape == b.shape and a.shape[1:] == (scheme.nbytes,) and a.dtype == b.dtype == np.uint8:
            return native.estimate_many(lib, a, b, scheme)
    return reference_estimate_many(a, b, scheme)


def reference_estimate_many(a: np.ndarray, b: np.ndarray, scheme: SketchScheme = DEFAULT_SCHEME) -> np.ndarray:
    """estimate_many() by numpy."""
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
    nbytes = scheme.nbytes  # (a property: computed each time it is read)
    if blobs and None not in blobs:  # all there (a batch read by the C core), if all of this scheme's size
        whole = cast("Sequence[bytes]", blobs)
        if set(map(len, whole)) == {nbytes}:
            return np.frombuffer(b"".join(whole), dtype=np.uint8).reshape(-1, nbytes).copy(), np.ones(len(whole), bool)
    present = np.fromiter((b is not None and len(b) == nbytes for b in blobs), dtype=bool, count=len(blobs))
    rows = np.zeros((len(blobs), nbytes), dtype=np.uint8)
    if present.any():
        joined = b"".join(b for b in blobs if b is not None and len(b) == nbytes)  # as present says
        rows[present] = np.frombuffer(joined, dtype=np.uint8).reshape(-1, nbytes)
    return rows, present
