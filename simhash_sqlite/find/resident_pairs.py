"""All pairs (dupes, clusters) within a memory budget that holds the sketch rows but not twice: the search
between the in-memory one (sketch_pairs.sketch_pairs) and the one from disk (bounded_pairs.py).

sketch_pairs holds a transposed copy of the rows (_words, as large as they are: 1.2 GB at 10M documents)
to cut each LSH table's keys from contiguous words, and folds identical sketches with arrays of a word or
more per document. Here each table's keys are read from the rows themselves (the few bytes a window spans,
sketch_pairs._row_packed_table), and identical sketches are folded by their digests with only the copies'
arrays: per document the rows, the index's arrays (RESIDENT_ARRAYS), the position of its distinct sketch
where some are copies, and the sorted table of each thread (RESIDENT_TABLE), whatever the number of
tables. The tables run in the C core (shc_window_pairs), as sketch_pairs' do, so the pairs and their
estimates are the same, at nearly the same time; without the C core the disk path takes over (the
reference path needs the words).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from .. import native
from ..core.features import mix
from ..core.sketch import SketchScheme
from .pairs import within_groups
from .sketch_pairs import ROW_CHUNK, EstimatedPairs, _words, table_pairs, window_plan

_U64 = np.uint64
# Bytes a document costs here past its sketch row: id and fingerprint (8 each), two flags (1 each: the
# index's arrays, check.load_arrays_and_short), and its distinct sketch's position (8) where copies are
# folded; while folding, its digest and a sorted copy of it and a flag (17) instead of the position.
RESIDENT_ARRAYS = 18
RESIDENT_FOLD = 17
# A sorted LSH table: one word a document, per thread.
RESIDENT_TABLE = 8


def resident_bytes(documents: int, nbytes: int, threads: int) -> int:
    """What resident_sketch_pairs and the arrays it needs hold for this many documents, past the process's
    own (the interpreter and its modules) and the chunks of pairs being judged."""
    return documents * (nbytes + RESIDENT_ARRAYS + max(RESIDENT_FOLD, 8 + RESIDENT_TABLE * threads))


def available() -> bool:
    """Whether the resident search can run here (it needs the C core)."""
    return native.core() is not None


def _digests(rows: np.ndarray, select: np.ndarray | None) -> np.ndarray:
    """sketch_pairs._fold_identical's digest of each row (of rows[select]), a chunk of rows at a time: no
    words copy of them all."""
    n = len(rows) if select is None else len(select)
    digest = np.zeros(n, dtype=_U64)
    for lo in range(0, n, ROW_CHUNK):
        part = digest[lo : lo + ROW_CHUNK]
        for word in _words(rows[lo : lo + ROW_CHUNK] if select is None else rows[select[lo : lo + ROW_CHUNK]]):
            part ^= word
            mix(part)
    return digest


class _Copies:
    """Groups of two or more identical sketches: `heads` the first row of each group (ascending),
    members[offsets[g] : offsets[g] + counts[g]] its rows (ascending); only the copies are held."""

    def __init__(self, heads: np.ndarray, members: np.ndarray, offsets: np.ndarray, counts: np.ndarray) -> None:
        self.heads, self.members, self.offsets, self.counts = heads, members, offsets, counts

    def slot(self, rows: np.ndarray) -> np.ndarray:
        """Each row's group, -1 for a row with no copies."""
        if not len(self.heads):
            return np.full(len(rows), -1, dtype=np.int64)
        at = np.minimum(np.searchsorted(self.heads, rows), len(self.heads) - 1)
        return np.where(self.heads[at] == rows, at, -1)

    def of(self, row: int, slot: int) -> np.ndarray:
        if slot < 0:
            return np.array([row], dtype=np.int64)
        lo = int(self.offsets[slot])
        return self.members[lo : lo + int(self.counts[slot])]


def _fold(rows: np.ndarray, select: np.ndarray | None) -> tuple[np.ndarray | None, _Copies]:
    """(first, copies): the rows of the distinct sketches, ascending (None: every row, none a copy), and
    the groups of identical ones. Equal digests are checked row by row (a digest shared by different rows
    splits them by their bytes)."""
    digest = _digests(rows, select)
    ordered = np.sort(digest)
    repeated = ordered[1:][ordered[1:] == ordered[:-1]]
    del ordered
    if not len(repeated):
        del digest
        empty = np.empty(0, dtype=np.int64)
        return (None if select is None else select), _Copies(empty, empty, empty, empty)
    copied = np.unique(repeated)
    spot = np.zeros(len(digest), dtype=bool)
    for lo in range(0, len(digest), ROW_CHUNK):
        part = digest[lo : lo + ROW_CHUNK]
        at = np.minimum(np.searchsorted(copied, part), len(copied) - 1)
        spot[lo : lo + ROW_CHUNK] = copied[at] == part
    positions = np.flatnonzero(spot)  # the copies only
    del spot
    values = digest[positions]
    del digest
    row_of = positions if select is None else select[positions]
    # Exact groups: by digest, then by the rows' bytes (equal digests of different rows: split).
    gathered = rows[row_of]
    as_void = np.ascontiguousarray(gathered).view(np.dtype((np.void, gathered.shape[1]))).ravel()
    _, exact = np.unique(as_void, return_inverse=True)
    del gathered, as_void
    order = np.lexsort((row_of, exact.ravel()))  # by group, rows ascending within it
    members, group = row_of[order], exact.ravel()[order]
    del values
    starts = np.flatnonzero(np.concatenate(([True], group[1:] != group[:-1])))
    counts = np.diff(np.append(starts, len(members)))
    heads = members[starts]
    several = counts > 1
    # Rows whose sketch is another's copy (not the first of their group) leave the tables.
    later = np.ones(len(members), dtype=bool)
    later[starts] = False
    dropped = np.sort(members[later])
    by_head = np.argsort(heads[several], kind="stable")
    kept_starts, kept_counts = starts[several][by_head], counts[several][by_head]
    members = np.concatenate([members[s : s + c] for s, c in zip(kept_starts.tolist(), kept_counts.tolist())]) \
        if len(kept_starts) else np.empty(0, dtype=np.int64)
    offsets = np.cumsum(kept_counts) - kept_counts
    copies = _Copies(heads[several][by_head], members, offsets, kept_counts)
    everything = np.arange(len(rows), dtype=np.int64) if select is None else select
    keep = np.ones(len(everything), dtype=bool)
    keep[np.searchsorted(everything, dropped)] = False
    return everything[keep], copies


def resident_sketch_pairs(
    rows: np.ndarray, select: np.ndarray | None, threshold: float, scheme: SketchScheme, threads: int,
) -> Iterator[EstimatedPairs]:
    """sketch_pairs.sketch_pairs(rows[select]) as rows (left < right, rows' positions, not select's),
    holding resident_bytes(): the same pairs and estimates. select: ascending rows to pair (None: all)."""
    lib = native.core()
    if lib is None:
        raise RuntimeError("the resident pair search needs the C core")
    first, copies = _fold(rows, select)
    for i, j in within_groups(copies.offsets, copies.counts):
        yield EstimatedPairs(copies.members[i], copies.members[j], np.ones(len(i)))  # ascending in a group
    m = len(rows) if first is None else len(first)
    if m < 2:
        return
    nbits = scheme.bins * scheme.bits
    width, step = window_plan(m, nbits)
    for a, b, estimate in table_pairs(lib, rows, first, None, nbits, threshold, scheme, width, step, threads):
        if not len(a):
            continue
        left, right = (a, b) if first is None else (first[a], first[b])
        slot_a, slot_b = copies.slot(left), copies.slot(right)
        plain = (slot_a < 0) & (slot_b < 0)
        yield EstimatedPairs(np.minimum(left[plain], right[plain]), np.maximum(left[plain], right[plain]),
                             estimate[plain])
        for i in np.flatnonzero(~plain).tolist():
            xs, ys = copies.of(int(left[i]), int(slot_a[i])), copies.of(int(right[i]), int(slot_b[i]))
            lefts, rights = np.repeat(xs, len(ys)), np.tile(ys, len(xs))
            yield EstimatedPairs(np.minimum(lefts, rights), np.maximum(lefts, rights), np.full(len(lefts), estimate[i]))
