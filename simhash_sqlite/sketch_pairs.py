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

from .features import mix
from .pairs import _groups, fold, within_groups
from .sketch import DEFAULT_SCHEME, SketchScheme, estimate_many

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


def _words(rows: np.ndarray) -> np.ndarray:
    """The rows' bits as 64-bit little-endian words, one contiguous array per word: shape (words, n)."""
    n, nbytes = rows.shape
    padded = np.zeros((n, -(-nbytes // 8) * 8), dtype=np.uint8)
    padded[:, :nbytes] = rows
    return np.ascontiguousarray(padded.view("<u8").T)


def window_keys(words: np.ndarray, start: int, width: int = WINDOW_BITS) -> np.ndarray:
    """Bits [start, start + width) of each row (bit i of a row is bit i % 8 of its byte i // 8), as uint64,
    from the rows' words (_words)."""
    index, shift = divmod(start, 64)
    out = words[index] >> _U64(shift)
    if shift + width > 64 and index + 1 < len(words):
        out |= words[index + 1] << _U64(64 - shift)
    return out & _U64((1 << width) - 1)


def _windows(nbits: int, width: int, step: int) -> list[int]:
    return list(range(0, nbits - width + 1, step))


def candidate_codes(words: np.ndarray, nbits: int, width: int = WINDOW_BITS, step: int = WINDOW_STEP) -> np.ndarray:
    """Every pair of row positions sharing the key of at least one window, as sorted distinct codes
    left * n + right (left < right), from the rows' words (_words). The rows should be distinct."""
    n = words.shape[1]
    position_bits = max(1, (n - 1).bit_length())
    if width + position_bits > 64:
        raise ValueError(f"{n} rows are too many for {width}-bit windows")
    pending: list[np.ndarray] = []
    merged = np.empty(0, dtype=np.int64)
    pending_size = 0
    positions_word = np.arange(n, dtype=_U64)
    for start in _windows(nbits, width, step):
        packed = window_keys(words, start, width)
        packed <<= _U64(position_bits)
        packed |= positions_word
        packed.sort()
        keys = packed >> _U64(position_bits)
        starts, sizes = _groups(keys)
        if not len(starts):
            continue
        positions = (packed & _U64((1 << position_bits) - 1)).astype(np.int64)
        for i, j in within_groups(starts, sizes):
            left, right = positions[i], positions[j]  # ascending positions within a group: left < right
            pending.append(left * n + right)
            pending_size += len(left)
        if pending_size >= MERGE_PAIRS:
            merged = np.unique(np.concatenate([merged, *pending]))
            pending, pending_size = [], 0
    return np.unique(np.concatenate([merged, *pending]))


def _fold_identical(rows: np.ndarray, words: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(order, offsets, counts, first): the positions grouped by identical row, group g being
    order[offsets[g] : offsets[g] + counts[g]] (ascending), and the first position of each group."""
    digest = np.zeros(words.shape[1], dtype=_U64)
    for word in words:
        digest ^= word
        mix(digest)
    folded = fold(digest)
    first = folded.members[folded.offsets]
    # A 64-bit digest shared by different rows would merge them: check, and fall back to comparing rows.
    if folded.has_copies and not (rows[folded.members] == rows[np.repeat(first, folded.counts)]).all():
        as_void = np.ascontiguousarray(rows).view(np.dtype((np.void, rows.shape[1]))).ravel()
        _, value_of = np.unique(as_void, return_inverse=True)
        folded = fold(value_of.ravel().astype(_U64))
        first = folded.members[folded.offsets]
    return folded.members, folded.offsets, folded.counts, first


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
    words = _words(rows)
    order, offsets, counts, first = _fold_identical(rows, words)
    m = len(first)
    copies = np.flatnonzero(counts > 1)
    for i, j in within_groups(offsets[copies], counts[copies]):
        yield EstimatedPairs(order[i], order[j], np.ones(len(i)))  # ascending within a group: order[i] < order[j]
    distinct_words = words[:, first]
    codes = candidate_codes(distinct_words, scheme.bins * scheme.bits, width, step)  # the bins' bits, not the size's
    distinct_rows = rows[first]
    for lo in range(0, len(codes), ESTIMATE_CHUNK):
        a, b = np.divmod(codes[lo : lo + ESTIMATE_CHUNK], m)
        estimate = estimate_many(distinct_rows[a], distinct_rows[b], scheme)
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
