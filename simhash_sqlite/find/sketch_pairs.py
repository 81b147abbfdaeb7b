"""All pairs of sketched documents whose estimated Jaccard reaches a threshold: LSH on the sketch bits.

A sketch is 944 one-bit bins (sketch.py; 960 in a version 1 sketch, which older indexes hold); two
documents of Jaccard J agree on each bin with probability (1 + J) / 2, independently across bins. A
table keys every document by a window of `width` consecutive bits of the bins; documents with equal keys
are candidates. Windows start every `step` bits. Each table is one numpy sort of packed (key, position)
words, so the cost of the tables grows linearly with the number of documents, unlike exact
Hamming-distance tables at k = 12 whose keys shrink as k grows.

The windows (window_plan): up to 2**20 distinct sketches, 24-bit windows, step 12 (WINDOW_BITS,
WINDOW_STEP: the quality figures were measured with them): 77 tables over 944 bins (79 over 960). A pair at
J = 0.8 agrees on a window with probability 0.9**24 = 0.08 and is missed by all 77 tables with
probability 0.0053 (0.0047 for 79; miss_probability, exact: overlapping windows are not independent); an
unrelated pair shares a key with probability 2**-24 per table, so random candidates grow with n**2:
77 * n / 2**25 per document, 2.4 at 2**20. Past 2**20 the window widens by one bit each time the
documents double (the random candidates per table and document stay flat) and the step shrinks to the
largest whose miss probability at J = 0.8 is no more than 24/12's over the same bins: over 944 bins
25/9 (103 tables) to 2**21, 26/7 (132) to 2**22, 27/4 (230) beyond (over 960: 104, 156, 234 tables). It
stops at 27 bits: a 28th needs about twice the tables (step 2) for the same random candidates per
document as 27/4 at any n. So from 2**20 to 2**23 the tables grow 3x, and beyond 2**23 the random
candidates grow with n again (about 8.6 per document at 10M). bench/dupes_model_scale.py measures it to
10M documents.

Candidates are deduplicated across tables and checked by the estimate from the whole sketch.
Identical sketches are folded first (mirrors), so a document copied a thousand times costs its own
pairs, not a thousand times a thousand per table.

simq dedup and spark.py's dedup keep 24/12 at any size (dedup.window_codes): a stream does not know its
size in advance, and its kept documents' codes are stored as they come. Each new document meets about
77 * n / 2**24 random candidates among the n kept before it, so a stream of N pages estimates about
77 * N**2 / 2**25 pairs in all, 77 * N / 2**25 a page (2.3 at 1M; on the synthetic crawl, bench/scale.py
candidates: 0.77, 1.54, 3.10 and 6.20 a page at 250k, 500k, 1M and 2M pages). Once the kept sketches spill,
each estimate reads its row from disk: what bounds a stream's length (docs/scale.md).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from typing import NamedTuple

import numpy as np

from .. import native
from ..core.features import mix
from ..core.pool import workers
from ..core.sketch import DEFAULT_SCHEME, SketchScheme, estimate_many
from .pairs import _groups, fold, position_bits, within_groups

# The windows up to BASE_DOCUMENTS distinct sketches (and of simq dedup at any size).
WINDOW_BITS = 24
WINDOW_STEP = 12
BASE_DOCUMENTS = 1 << 20
# Past it the width grows by a bit per doubling, up to this (see the module's docstring).
MAX_WINDOW_BITS = 27
# How often a pair at the default threshold, J = 0.8, agrees on a bin: the recall the step keeps.
AGREE_AT_THRESHOLD = 0.9
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
    if nbytes % 8 == 0:  # whole words already (120 bytes): one copy, not two (1.2 GB each at 10M)
        return np.ascontiguousarray(np.ascontiguousarray(rows).view("<u8").T)
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


@cache
def miss_probability(nbits: int, width: int, step: int, agree: float = AGREE_AT_THRESHOLD) -> float:
    """The probability that a pair whose bits agree independently with probability `agree` shares no
    window key: exact (the windows overlap, so they are not independent), by the distribution of the
    run of agreeing bits that ends at each bit."""
    ends = np.zeros(nbits, dtype=bool)
    ends[[start + width - 1 for start in _windows(nbits, width, step)]] = True
    run = np.zeros(width + 1)  # run[r]: no window hit so far and the last r bits agree (r capped at width)
    run[0] = 1.0
    for end in ends.tolist():
        grown = np.empty_like(run)
        grown[0] = run.sum() * (1 - agree)
        grown[1:] = run[:-1] * agree
        grown[width] += run[width] * agree
        if end:
            grown[width] = 0.0  # this window's bits all agree: a candidate
        run = grown
    return float(run.sum())


@cache
def window_plan(n: int, nbits: int) -> tuple[int, int]:
    """(width, step) of the LSH windows for n distinct sketches of nbits bits: 24/12 up to
    BASE_DOCUMENTS, then one bit wider per doubling (at most MAX_WINDOW_BITS, and the key and a
    position must fit 64 bits) with the largest step that misses a pair at J = 0.8 no more often."""
    if n <= BASE_DOCUMENTS:
        return WINDOW_BITS, WINDOW_STEP
    doublings = math.ceil(math.log2(n / BASE_DOCUMENTS))
    width = max(WINDOW_BITS, min(WINDOW_BITS + doublings, MAX_WINDOW_BITS, 64 - position_bits(n), nbits))
    allowed = miss_probability(nbits, WINDOW_BITS, WINDOW_STEP)
    step = next(s for s in range(width, 0, -1) if miss_probability(nbits, width, s) <= allowed or s == 1)
    return width, step


def candidate_codes(words: np.ndarray, nbits: int, width: int = WINDOW_BITS, step: int = WINDOW_STEP) -> np.ndarray:
    """Every pair of row positions sharing the key of at least one window, as sorted distinct codes
    left * n + right (left < right), from the rows' words (_words). The rows should be distinct."""
    n = words.shape[1]
    low = position_bits(n)
    if width + low > 64:
        raise ValueError(f"{n} rows are too many for {width}-bit windows")
    runs = [np.empty(0, dtype=np.int64)]  # the merged codes, then the pending ones
    pending_size = 0
    positions_word = np.arange(n, dtype=_U64)
    for start in _windows(nbits, width, step):
        packed = _packed_table(words, start, width, low, positions_word)
        starts, sizes = _groups(packed >> _U64(low))
        if not len(starts):
            continue
        positions = (packed & _U64((1 << low) - 1)).astype(np.int64)
        del packed
        for i, j in within_groups(starts, sizes):
            left, right = positions[i], positions[j]  # ascending positions within a group: left < right
            runs.append(left * n + right)
            pending_size += len(left)
        del positions
        if pending_size >= MERGE_PAIRS:
            runs, pending_size = [_merged(runs)], 0
    return _merged(runs)


def _packed_table(
    words: np.ndarray, start: int, width: int, low: int, low_words: np.ndarray, lib=None, scratch: bool = False,
) -> np.ndarray:
    """One table's (key << low | low_words) words, sorted (by the C core where lib is given: one pass to pack
    them, native.pack_window, and _sorted)."""
    if lib is not None and words.dtype == np.uint64:  # (native byte order: '<u8' on a big-endian host is not)
        packed = native.pack_window(lib, words, start, width, low, low_words)
    else:
        packed = window_keys(words, start, width)
        packed <<= _U64(low)
        packed |= low_words
    _sorted(packed, low, lib, scratch)
    return packed


def _sorted(packed: np.ndarray, low: int, lib, scratch: bool) -> None:
    """packed sorted in place: numpy's sort, or the C core's radix sort where lib is given, the same words.
    scratch: the words are dealt out by key through a second array as large (the rows under the keys ascend,
    so that is the whole sort: 6x numpy's at 1M documents), else sorted in place (2.5x, no more memory)."""
    if lib is None or packed.dtype != np.uint64:
        packed.sort()
    else:
        native.sort_packed(lib, packed, low, np.empty_like(packed) if scratch else None)


# Rows whose window bytes are gathered at once by _row_packed_table (a few MB: in cache while shifted).
ROW_CHUNK = 1 << 16


def _row_packed_table(
    rows: np.ndarray, first: np.ndarray | None, start: int, width: int, low: int, lib=None,
) -> np.ndarray:
    """_packed_table read from the rows themselves, not from a transposed copy of them (_words: as large as
    the rows): the bytes the window spans of each distinct row (rows[first[a]], or rows[a] where first is
    None) laid into one little-endian word, shifted to the window, with the row's number under it; sorted.
    The same words as _packed_table over _words(rows[first]) with first's row numbers under the keys."""
    byte, shift = divmod(start, 8)
    spanned = min(rows.shape[1], (start + width + 7) // 8) - byte  # at most 5 (a key of 27 bits at most)
    m = len(rows) if first is None else len(first)
    packed = np.zeros(m, dtype="<u8")
    as_bytes = packed.view(np.uint8).reshape(m, 8)
    mask = _U64((1 << width) - 1)
    for lo in range(0, m, ROW_CHUNK):
        hi = min(m, lo + ROW_CHUNK)
        part = packed[lo:hi]
        if first is None:
            as_bytes[lo:hi, :spanned] = rows[lo:hi, byte : byte + spanned]
            numbers = np.arange(lo, hi, dtype=_U64)
        else:
            as_bytes[lo:hi, :spanned] = rows[first[lo:hi], byte : byte + spanned]
            numbers = first[lo:hi].astype(_U64)
        part >>= _U64(shift)
        part &= mask
        part <<= _U64(low)
        part |= numbers
    _sorted(packed, low, lib, scratch=False)  # (the search within a budget: no second table's memory)
    return packed


def table_pairs(
    lib, rows: np.ndarray, first: np.ndarray | None, words: np.ndarray | None, nbits: int, threshold: float,
    scheme: SketchScheme, width: int = WINDOW_BITS, step: int = WINDOW_STEP, threads: int | None = None,
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """candidate_codes and their estimates by the C core, table by table: (a, b, estimate) of the
    distinct positions a != b (words' columns; row first[a], or a where first is None) whose estimate is
    >= threshold, each pair once. A pair is its first agreeing window's (shc_window_pairs), so no codes
    are gathered and deduplicated (86M of them at 10M documents, nearly all chance agreements that the
    estimate drops), and tables run on `threads` threads (None: pool.workers()): the sort, numpy's
    operations and the C call release the GIL. The tables pack row numbers, not positions, so the core
    reads rows[p] directly; rows map back to positions at the end (first ascending). words None: each
    table's keys are read from the rows (_row_packed_table), and nothing the size of the documents is
    held but the tables being sorted, one a thread (the search within a budget, bounded_pairs.plan)."""
    low = position_bits(len(rows))
    if width + low > 64:
        raise ValueError(f"{len(rows)} rows are too many for {width}-bit windows")
    row_words = position_of = None
    if words is not None:
        row_words = np.arange(words.shape[1], dtype=_U64) if first is None else first.astype(_U64)
        if first is not None:  # rows to positions by a look-up, 10x the binary search (4 bytes a row, in memory)
            position_of = np.zeros(len(rows), dtype=np.int32 if len(first) < 2**31 else np.int64)
            position_of[first] = np.arange(len(first), dtype=position_of.dtype)
    starts = _windows(nbits, width, step)

    def one(table: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if words is None:
            packed = _row_packed_table(rows, first, starts[table], width, low, lib)
        else:
            assert row_words is not None
            packed = _packed_table(words, starts[table], width, low, row_words, lib, scratch=True)
        a, b, estimate = native.window_pairs(lib, rows, packed, low, width, step, table, threshold, scheme)
        del packed
        if first is None:
            return a, b, estimate
        if position_of is not None:
            return position_of[a].astype(np.int64), position_of[b].astype(np.int64), estimate
        return np.searchsorted(first, a), np.searchsorted(first, b), estimate

    count = max(1, min(threads or workers(), len(starts)))
    if count == 1:
        yield from map(one, range(len(starts)))
        return
    executor = ThreadPoolExecutor(count, thread_name_prefix="lsh-table")
    try:
        yield from executor.map(one, range(len(starts)))
    finally:
        executor.shutdown(wait=True, cancel_futures=True)


def _merged(runs: list[np.ndarray]) -> np.ndarray:
    """The sorted distinct codes of runs[0] (sorted, distinct) and the new codes after it; empties
    runs, so that each array's memory goes as soon as it is joined (the codes are about 0.7 GB at 10M
    documents). The new codes are sorted on their own and then merged: a stable sort of two sorted
    runs is one linear merge (timsort), so merging every MERGE_PAIRS costs the candidates once, not
    once per merge."""
    new = np.concatenate(runs[1:]) if len(runs) > 1 else np.empty(0, dtype=np.int64)
    del runs[1:]
    new.sort()
    both = np.concatenate((runs.pop(), new))
    del new
    both.sort(kind="stable")
    distinct = np.ones(len(both), dtype=bool)
    np.not_equal(both[1:], both[:-1], out=distinct[1:])
    return both[distinct]


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
    if folded.has_copies and not _copies_equal(rows, folded.members, folded.offsets, folded.counts, first):
        as_void = np.ascontiguousarray(rows).view(np.dtype((np.void, rows.shape[1]))).ravel()
        _, value_of = np.unique(as_void, return_inverse=True)
        folded = fold(value_of.ravel().astype(_U64))
        first = folded.members[folded.offsets]
    return folded.members, folded.offsets, folded.counts, first


def _copies_equal(rows: np.ndarray, members, offsets, counts, first) -> bool:
    """Whether every row of a group of two or more equals its group's first row. Only those groups'
    rows are gathered (a few copies among 10M sketches: not 2.4 GB of rows for the 10M members)."""
    copied = np.flatnonzero(counts > 1)
    sizes = counts[copied]
    within = np.arange(int(sizes.sum()), dtype=np.int64) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    mine = members[np.repeat(offsets[copied], sizes) + within]
    return bool((rows[mine] == rows[np.repeat(first[copied], sizes)]).all())


def sketch_pairs(
    rows: np.ndarray,
    threshold: float,
    scheme: SketchScheme = DEFAULT_SCHEME,
    *,
    width: int | None = None,
    step: int | None = None,
) -> Iterator[EstimatedPairs]:
    """Pairs of rows (sketches of shape (n, nbytes)) whose estimated Jaccard is >= threshold, in chunks;
    identical rows are pairs with estimate 1.0. Each pair once, left < right, order unspecified.
    width, step: of the windows (None: window_plan's for the number of distinct rows)."""
    n = len(rows)
    if n < 2:
        return
    words = _words(rows)
    order, offsets, counts, first = _fold_identical(rows, words)
    m = len(first)
    copies = np.flatnonzero(counts > 1)
    for i, j in within_groups(offsets[copies], counts[copies]):
        yield EstimatedPairs(order[i], order[j], np.ones(len(i)))  # ascending within a group: order[i] < order[j]
    # Without copies fold keeps every row in place (first is 0..n-1): no copy of the words (1.2 GB at 10M).
    # The rows are never copied: distinct row a is rows[first[a]].
    distinct_words = words if m == n else words[:, first]
    del words
    # The windows cover the sketch's bins only (a blob may carry more after them).
    nbits = scheme.bins * scheme.bits
    plan = window_plan(m, nbits)
    width, step = plan[0] if width is None else width, plan[1] if step is None else step
    lib = native.core()
    if lib is not None and rows.dtype == np.uint8 and rows.ndim == 2 and rows.shape[1] == scheme.nbytes:
        found = table_pairs(lib, rows, None if m == n else first, distinct_words, nbits, threshold, scheme, width, step)
    else:
        found = _estimated(candidate_codes(distinct_words, nbits, width, step), m, n, rows, first, threshold, scheme)
    del distinct_words
    for a, b, estimate in found:
        if not len(a):
            continue
        plain = (counts[a] == 1) & (counts[b] == 1)
        left, right = order[offsets[a[plain]]], order[offsets[b[plain]]]
        yield EstimatedPairs(np.minimum(left, right), np.maximum(left, right), estimate[plain])
        for x, y, e in zip(a[~plain].tolist(), b[~plain].tolist(), estimate[~plain].tolist()):
            xs, ys = order[offsets[x] : offsets[x] + counts[x]], order[offsets[y] : offsets[y] + counts[y]]
            left, right = np.repeat(xs, len(ys)), np.tile(ys, len(xs))
            yield EstimatedPairs(np.minimum(left, right), np.maximum(left, right), np.full(len(left), e))


def _estimated(
    codes: np.ndarray, m: int, n: int, rows: np.ndarray, first: np.ndarray, threshold: float, scheme: SketchScheme
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The reference: (a, b, estimate) of the candidate codes (a * m + b) whose estimate is >= threshold."""
    for lo in range(0, len(codes), ESTIMATE_CHUNK):
        a, b = np.divmod(codes[lo : lo + ESTIMATE_CHUNK], m)
        row_a, row_b = (a, b) if m == n else (first[a], first[b])
        estimate = estimate_many(rows[row_a], rows[row_b], scheme)
        keep = estimate >= threshold
        yield a[keep], b[keep], estimate[keep]
