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

from collections.abc import Callable, Iterator

import numpy as np

from .. import native
from ..core.features import mix
from ..core.sketch import SketchScheme
from .pairs import slots_in, within_groups
from .sketch_pairs import ROW_CHUNK, EstimatedPairs, _words, table_pairs, window_plan

_U64 = np.uint64
# Bytes a document costs here past its sketch row: id and fingerprint (8 each), two flags (1 each: the
# index's arrays, check.load_arrays_and_short), and its distinct sketch's position (8) where copies are
# folded; while folding, at most 25 instead of the position: its digest (the caller's) and a sorted copy of it
# and a flag (17), and at the end the digest, all positions, a flag and the kept positions (25).
RESIDENT_ARRAYS = 18
RESIDENT_FOLD = 25
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


class Copies:
    """Groups of two or more identical sketches: `heads` the first row of each group (ascending),
    members[offsets[g] : offsets[g] + counts[g]] its rows (ascending); only the copies are held."""

    def __init__(self, heads: np.ndarray, members: np.ndarray, offsets: np.ndarray, counts: np.ndarray) -> None:
        self.heads, self.members, self.offsets, self.counts = heads, members, offsets, counts

    def slot(self, rows: np.ndarray) -> np.ndarray:
        """Each row's group, -1 for a row with no copies."""
        return slots_in(self.heads, rows)

    def of(self, row: int, slot: int) -> np.ndarray:
        if slot < 0:
            return np.array([row], dtype=np.int64)
        lo = int(self.offsets[slot])
        return self.members[lo : lo + int(self.counts[slot])]


def fold_copies(
    digest: np.ndarray, universe: np.ndarray | None, gather: Callable[[np.ndarray], np.ndarray],
) -> tuple[np.ndarray | None, Copies]:
    """(first, copies) of the rows universe[i] (ascending; None: row i) whose digests are digest[i]: the
    rows of the distinct sketches, ascending (None: every row, none a copy), and the groups of identical
    ones. Equal digests are checked by the rows' bytes (gather: rows at ascending positions; a digest shared
    by different rows splits them). Holds the digests, a sorted copy and a flag a row while it works, then
    the copies' arrays only (sketch_pairs._fold_identical holds several words a row)."""
    n = len(digest)
    ordered = np.sort(digest)
    repeated = ordered[1:][ordered[1:] == ordered[:-1]]
    del ordered
    if not len(repeated):
        empty = np.empty(0, dtype=np.int64)
        return universe, Copies(empty, empty, empty, empty)
    copied = np.unique(repeated)
    spot = np.zeros(n, dtype=bool)
    for lo in range(0, n, ROW_CHUNK):
        part = digest[lo : lo + ROW_CHUNK]
        at = np.minimum(np.searchsorted(copied, part), len(copied) - 1)
        spot[lo : lo + ROW_CHUNK] = copied[at] == part
    positions = np.flatnonzero(spot)  # the copies only
    del spot
    row_of = positions if universe is None else universe[positions]
    gathered = gather(row_of)
    as_void = np.ascontiguousarray(gathered).view(np.dtype((np.void, gathered.shape[1]))).ravel()
    _, exact = np.unique(as_void, return_inverse=True)
    del gathered, as_void
    exact = exact.ravel()
    order = np.lexsort((row_of, exact))  # by group, rows ascending within it
    members, group = row_of[order], exact[order]
    starts = np.flatnonzero(np.concatenate(([True], group[1:] != group[:-1])))
    counts = np.diff(np.append(starts, len(members)))
    # Rows whose sketch is an earlier row's (not the first of their group) leave the tables.
    later = np.ones(len(members), dtype=bool)
    later[starts] = False
    dropped = np.sort(members[later])
    several = np.flatnonzero(counts > 1)
    several = several[np.argsort(members[starts[several]], kind="stable")]  # groups by their first row
    sizes = counts[several]
    within = np.arange(int(sizes.sum()), dtype=np.int64) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    copies = Copies(members[starts[several]], members[np.repeat(starts[several], sizes) + within],
                    np.cumsum(sizes) - sizes, sizes)
    everything = np.arange(n, dtype=np.int64) if universe is None else universe
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
    first, copies = fold_copies(_digests(rows, select), select, lambda at: rows[at])
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
