"""All pairs of sketched documents whose estimated Jaccard reaches a threshold: LSH on the sketch bits.

A sketch is 960 one-bit bins (sketch.py); two documents of Jaccard J agree on each bin with probability
(1 + J) / 2, independently across bins. A table keys every document by a window of WINDOW_BITS
consecutive bits; documents with equal keys are candidates. Windows start every WINDOW_STEP bits (79
tables of 24 bits for 960 bits): a pair at J = 0.8 agrees on a window with probability 0.9**24 = 0.08,
so it is missed by all 79 tables with probability about 0.001 (overlapping windows are not independent,
bench/all_pairs.py measures it); an unrelated pair (J near 0) shares a key with probability 2**-24 per
table. Each table is one numpy sort of packed (key, position) words, so the cost grows linearly with
the number of documents, unlike exact Hamming-distance tables at k = 12 whose keys shrink as k grows.

Candidates are deduplicated across tables and checked by the estimate from the whole sketch.
Identical sketches are folded first (mirrors), so a document copied a thousand times costs its own
pairs, not a thousand times a thousand per table.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

from .pairs import _groups, within_groups
from .sketch import DEFAULT_SCHEME, SketchScheme, agreeing_bins, estimate_from_agreeing

WINDOW_BITS = 24
WINDOW_STEP = 12
# Candidate pairs gathered before they are deduplicated (bounds memory: 8 bytes each, twice).
MERGE_PAIRS = 1 << 24
# Pairs whose estimate is computed at once (bounds the gathered rows: 2 * nbytes each).
ESTIMATE_CHUNK = 1 << 19
_U64 = np.uint64


class EstimatedPairs(NamedTuple):
    """A chunk of pairs: positions (left < right) into the rows, and their estimated Jaccard."""

    left: np.ndarray  # int64
    right: np.ndarray  # int64
    estimate: np.ndarray  # float64


def window_keys(rows: np.ndarray, start: int, width: int = WINDOW_BITS) -> np.ndarray:
    """Bits [start, start + width) of each row (bit i of a row is bit i % 8 of byte i // 8), as uint64."""
    first, shift = divmod(start, 8)
    span = (shift + width + 7) // 8
    out = np.zeros(len(rows), dtype=_U64)
    for j in range(span):
        if first + j < rows.shape[1]:
            out |= rows[:, first + j].astype(_U64) << _U64(8 * j)
    return (out >> _U64(shift)) & _U64((1 << width) - 1)


def _windows(nbits: int, width: int, step: int) -> list[int]:
    return list(range(0, nbits - width + 1, step))


def candidate_codes(rows: np.ndarray, width: int = WINDOW_BITS, step: int = WINDOW_STEP) -> np.ndarray:
    """Every pair of row positions sharing the key of at least one window, as sorted distinct codes
    left * n + right (left < right). The rows should be distinct (see fold)."""
    n = len(rows)
    position_bits = max(1, (n - 1).bit_length())
    if width + position_bits > 64:
        raise ValueError(f"{n} rows are too many for {width}-bit windows")
    pending: list[np.ndarray] = []
    merged = np.empty(0, dtype=np.int64)
    pending_size = 0
    for start in _windows(rows.shape[1] * 8, width, step):
        packed = np.sort((window_keys(rows, start, width) << _U64(position_bits)) | np.arange(n, dtype=_U64))
        keys = packed >> _U64(position_bits)
        positions = (packed & _U64((1 << position_bits) - 1)).astype(np.int64)
        starts, sizes = _groups(keys)
        for i, j in within_groups(starts, sizes):
            left, right = positions[i], positions[j]  # ascending positions within a group: left < right
            pending.append(left * n + right)
            pending_size += len(left)
        if pending_size >= MERGE_PAIRS:
            merged = np.unique(np.concatenate([merged, *pending]))
            pending, pending_size = [], 0
    return np.unique(np.concatenate([merged, *pending]))


def sketch_pairs(
    rows: np.ndarray,
    threshold: float,
    scheme: SketchScheme = DEFAULT_SCHEME,
    *,
    width: int = WINDOW_BITS,
    step: int = WINDOW_STEP,
) -> Iterator[EstimatedPairs]:
    """Pairs of rows (sketches of shape (n, nbytes)) whose estimated Jaccard is >= threshold, in chunks;
    identical rows are pairs with estimate 1.0. Each pair once, left < right, order unspecified."""
    n = len(rows)
    if n < 2:
        return
    # Fold identical sketches (view each row as one opaque value to find the copies): `order` lists the
    # positions grouped by sketch; sketch v's documents are order[offsets[v] : offsets[v] + counts[v]].
    as_void = np.ascontiguousarray(rows).view(np.dtype((np.void, rows.shape[1]))).ravel()
    _, first_of, value_of = np.unique(as_void, return_index=True, return_inverse=True)
    value_of = value_of.ravel()
    m = len(first_of)
    order = np.argsort(value_of, kind="stable")
    counts = np.bincount(value_of, minlength=m)
    offsets = np.cumsum(counts) - counts
    copies = np.flatnonzero(counts > 1)
    for i, j in within_groups(offsets[copies], counts[copies]):
        yield EstimatedPairs(order[i], order[j], np.ones(len(i)))  # ascending positions: order[i] < order[j]
    distinct_rows = rows[first_of]
    codes = candidate_codes(distinct_rows, width, step)
    for lo in range(0, len(codes), ESTIMATE_CHUNK):
        a, b = np.divmod(codes[lo : lo + ESTIMATE_CHUNK], m)
        estimate = estimate_from_agreeing(agreeing_bins(distinct_rows[a], distinct_rows[b], scheme.bits), scheme)
        keep = estimate >= threshold
        a, b, estimate = a[keep], b[keep], estimate[keep]
        if not len(a):
            continue
        plain = (counts[a] == 1) & (counts[b] == 1)
        left, right = order[offsets[a[plain]]], order[offsets[b[plain]]]
        yield EstimatedPairs(np.minimum(left, right), np.maximum(left, right), estimate[plain])
        for x, y, e in zip(a[~plain].tolist(), b[~plain].tolist(), estimate[~plain].tolist()):
            xs, ys = order[offsets[x] : offsets[x] + counts[x]], order[offsets[y] : offsets[y] + counts[y]]
            left, right = np.repeat(xs, len(ys)), np.tile(ys, len(xs))
            yield EstimatedPairs(np.minimum(left, right), np.maximum(left, right), np.full(len(left), e))
