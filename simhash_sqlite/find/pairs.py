"""All pairs of fingerprints within Hamming distance k, each pair once, exact for every k (0-64).

The tables of Manku, Jain and Das Sarma ("Detecting near-duplicates for web crawling", WWW 2007):
split the w bits into m blocks. Two fingerprints within k bits differ in at most k blocks, so they
agree exactly on at least r = m - k of them; for every choice of r blocks (a "table") the pair has
the same key (those blocks' bits) in at least one table. Each table is one numpy sort of packed
(key, position) words; equal keys form groups, and the pairs inside a group are the candidates,
checked with a vectorized popcount. A pair whose key also matches in an earlier table is left to that
table, so each pair comes out once. More blocks mean longer keys (fewer candidates) but more tables
(more sorts); the tables with the lowest estimated cost win (block_tables.py), and when none beat comparing
every pair (large k, few fingerprints) the pairs are compared directly, in chunks.

Hot groups (thousands of fingerprints sharing a key: boilerplate, templates) are not expanded into
all their candidate pairs: they share the key bits, so their pairs within k are the pairs within k
of the remaining bits, found by the same method on those (recursion on a narrower width).
Identical fingerprints are folded to one value before the search and expanded again at the end,
so a hot exact duplicate costs only its own output. Everything is streamed as chunks of pairs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..core.features import distinct
from ..core.settings import validate_k
from .block_tables import BlockTables, choose_tables

Progress = Callable[[int, int], None]  # (done, total), for a progress bar

# About this many candidate or output pairs per chunk: bounds memory (a few dozen MB per chunk).
CHUNK = 1 << 21
# Groups larger than this are searched recursively on their remaining bits, not pair by pair.
HOT_GROUP = 2048

_U64 = np.uint64


class Pairs(NamedTuple):
    """A chunk of pairs: positions into the input (left < right) and their Hamming distances."""

    left: np.ndarray  # int64
    right: np.ndarray  # int64
    distance: np.ndarray  # int64


def position_bits(n: int) -> int:
    """Bits that hold a position among n, packed under a key in one 64-bit word."""
    return max(1, (n - 1).bit_length())


def sorted_by(keys: np.ndarray, key_bits: int) -> tuple[np.ndarray, np.ndarray]:
    """(keys in ascending order, positions in that order); ties keep position order."""
    n = len(keys)
    low = position_bits(n)
    if key_bits + low <= 64:
        packed = np.sort((keys << _U64(low)) | np.arange(n, dtype=_U64))
        return packed >> _U64(low), (packed & _U64((1 << low) - 1)).astype(np.int64)
    order = np.argsort(keys, kind="stable")
    return keys[order], order


def _groups(sorted_keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(start, size) of every run of two or more equal values in a sorted array."""
    if len(sorted_keys) < 2:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    # Only the (usually few) positions equal to their successor matter: runs of them are the groups.
    same = np.flatnonzero(sorted_keys[1:] == sorted_keys[:-1])
    if len(same) == 0:
        return same, same
    breaks = np.flatnonzero(np.diff(same) != 1) + 1
    starts = same[np.concatenate(([0], breaks))]
    ends = same[np.concatenate((breaks - 1, [len(same) - 1]))] + 2
    return starts.astype(np.int64), (ends - starts).astype(np.int64)


def slots_in(sorted_values: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Where each of values is in sorted_values (distinct, ascending), -1 where it is not there."""
    if not len(sorted_values):
        return np.full(len(values), -1, dtype=np.int64)
    at = np.minimum(np.searchsorted(sorted_values, values), len(sorted_values) - 1)
    return np.where(sorted_values[at] == values, at, -1)


def within_groups(starts: np.ndarray, sizes: np.ndarray, chunk: int = CHUNK) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Every pair (i, j), i < j, of positions inside each group [start, start + size), in chunks."""
    if len(starts) == 0:
        return
    # Row p of a group pairs with the positions after it: size - 1 - offset of them.
    total = int(sizes.sum())
    group_of = np.repeat(np.arange(len(starts)), sizes)
    offsets = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    rows = starts[group_of] + offsets
    after = sizes[group_of] - 1 - offsets
    keep = after > 0
    rows, after = rows[keep], after[keep]
    ends = np.cumsum(after)
    lo = 0
    while lo < len(rows):
        # Rows up to about `chunk` pairs (at least one row, however long).
        hi = max(lo + 1, int(np.searchsorted(ends, ends[lo] - after[lo] + chunk, side="right")))
        r, a = rows[lo:hi], after[lo:hi]
        left = np.repeat(r, a)
        step = np.arange(len(left), dtype=np.int64) - np.repeat(np.cumsum(a) - a, a) + 1
        yield left, left + step
        lo = hi


def _brute(values: np.ndarray, k: int, chunk: int = CHUNK, on_progress: Progress | None = None) -> Iterator[Pairs]:
    """All pairs within k by comparing every pair, a band of rows at a time."""
    n = len(values)
    rows_per_band = max(1, chunk // max(n, 1))
    for i0 in range(0, n - 1, rows_per_band):
        if on_progress is not None:
            on_progress(i0, n - 1)
        i1 = min(n - 1, i0 + rows_per_band)
        d = np.bitwise_count(values[i0:i1, None] ^ values[None, i0 + 1 :]).astype(np.int64)
        # Column c is position i0 + 1 + c; keep only columns after the row's own position.
        upper = np.arange(i0 + 1, n)[None, :] > np.arange(i0, i1)[:, None]
        r, c = np.nonzero((d <= k) & upper)
        if len(r):
            yield Pairs(r + i0, c + i0 + 1, d[r, c])


def _drop_constant_bits(values: np.ndarray, width: int) -> tuple[np.ndarray, int]:
    """The values with the bits they all share removed (they add nothing to any distance), so keys
    are cut from bits that vary. A shared template half or a hot group's key bits go this way."""
    varying = int(np.bitwise_or.reduce(values ^ values[0]))
    if varying.bit_count() == width:
        return values, width
    out = np.zeros(len(values), dtype=_U64)
    position = filled = 0  # from the low bits up: each run of varying bits lands above the last
    while varying >> position:
        if not (varying >> position) & 1:
            position += 1
            continue
        run = 0
        while (varying >> (position + run)) & 1:
            run += 1
        out |= ((values >> _U64(position)) & _U64((1 << run) - 1)) << _U64(filled)
        position, filled = position + run, filled + run
    return out, varying.bit_count()


def distinct_pairs(
    values: np.ndarray, k: int, width: int = 64, chunk: int = CHUNK, on_progress: Progress | None = None
) -> Iterator[Pairs]:
    """All pairs within k of distinct `width`-bit values (uint64), each once, left < right.
    on_progress(done, total): called before each table (each a like share of the work), or each band
    of rows when every pair is compared."""
    n = len(values)
    if n < 2 or k == 0:
        return  # distinct values are at least 1 apart
    values, width = _drop_constant_bits(values, width)
    tables = choose_tables(width, k, n)
    if tables is None:
        yield from _brute(values, k, chunk, on_progress)
        return
    first = tables.first_table_lookup
    for t, table in enumerate(tables.table_blocks):
        if on_progress is not None:
            on_progress(t, len(tables.table_blocks))
        keys, order = sorted_by(tables.bits(values, table), tables.table_width(table))
        starts, sizes = _groups(keys)
        hot = sizes > HOT_GROUP
        hot_pairs = _hot_groups(values, order, starts[hot], sizes[hot], tables, table, k, width, chunk)
        group_pairs = _small_groups(values, order, starts[~hot], sizes[~hot], k, chunk)
        for left, right, distance in _chain(hot_pairs, group_pairs):
            mine = first[tables.equal_blocks(values[left] ^ values[right])] == t
            if mine.any():
                yield Pairs(left[mine], right[mine], distance[mine])


def _hot_groups(
    values, order, starts, sizes, tables: BlockTables, table, k: int, width: int, chunk: int
) -> Iterator[Pairs]:
    """Pairs inside groups too big to compare pair by pair: they share the key bits, so their pairs
    within k are the pairs within k of the remaining bits, searched the same way (recursion)."""
    rest = tuple(b for b in range(tables.blocks) if b not in table)
    for start, size in zip(starts, sizes):
        members = order[start : start + size]  # ascending positions, one shared key
        narrower = tables.bits(values[members], rest)
        for part in distinct_pairs(narrower, k, width - tables.table_width(table), chunk):
            yield Pairs(members[part.left], members[part.right], part.distance)


def _small_groups(values, order, starts, sizes, k: int, chunk: int) -> Iterator[Pairs]:
    """Pairs inside small groups, compared pair by pair in sorted order (a group's values side by side)."""
    ordered = values[order]
    for i, j in within_groups(starts, sizes, chunk):
        d = np.bitwise_count(ordered[i] ^ ordered[j])
        close = np.flatnonzero(d <= k)
        if len(close):
            yield Pairs(order[i[close]], order[j[close]], d[close].astype(np.int64))


def _chain(*iterables):
    for it in iterables:
        yield from it


def as_unsigned(fingerprints) -> np.ndarray:
    """Fingerprints (unsigned, or the signed int64 SQLite stores) as a uint64 array."""
    array = np.asarray(fingerprints)
    if array.dtype == np.int64:
        return array.view(_U64)
    if array.dtype == _U64:
        return array
    if array.dtype == object or array.size == 0:
        return np.array([int(f) & ((1 << 64) - 1) for f in array.ravel()], dtype=_U64)
    return array.astype(_U64)


@dataclass(frozen=True)
class Folded:
    """Fingerprints with identical values folded: `values` are distinct; value u stands for the input
    positions members[offsets[u] : offsets[u] + counts[u]] (ascending); members lists the values'
    positions in value order, and values are numbered by their first position."""

    values: np.ndarray
    members: np.ndarray
    offsets: np.ndarray
    counts: np.ndarray

    @property
    def has_copies(self) -> bool:
        return len(self.members) != len(self.values)

    def value_of(self) -> np.ndarray:
        """For each input position, the number of its value."""
        out = np.empty(len(self.members), dtype=np.int64)
        out[self.members] = np.repeat(np.arange(len(self.values), dtype=np.int64), self.counts)
        return out


def fold(fingerprints: np.ndarray) -> Folded:
    """Fold identical fingerprints. Values are ordered by their first position (a cheap common case:
    no copies at all costs one sort)."""
    n = len(fingerprints)
    ones = np.ones(n, dtype=np.int64)
    if n < 2:
        return Folded(fingerprints, np.arange(n, dtype=np.int64), np.arange(n, dtype=np.int64), ones)
    ordered = np.sort(fingerprints)
    repeated = ordered[1:][ordered[1:] == ordered[:-1]]
    if len(repeated) == 0:
        return Folded(fingerprints, np.arange(n, dtype=np.int64), np.arange(n, dtype=np.int64), ones)
    copied = distinct(repeated)  # sorted distinct values that occur more than once
    spot = np.minimum(np.searchsorted(copied, fingerprints), len(copied) - 1)
    is_copy = copied[spot] == fingerprints
    copy_positions = np.flatnonzero(is_copy)
    # Group the copies by value, keeping positions ascending inside each group.
    grouped = copy_positions[np.argsort(spot[copy_positions], kind="stable")]
    counts_copied = np.bincount(spot[copy_positions], minlength=len(copied))
    singles = np.flatnonzero(~is_copy)
    # Value order: by first position.
    first_of_copied = grouped[np.cumsum(counts_copied) - counts_copied]
    heads = np.concatenate((singles, first_of_copied))
    counts = np.concatenate((np.ones(len(singles), np.int64), counts_copied))
    member_lists_offsets = np.concatenate(
        (np.arange(len(singles)), len(singles) + np.cumsum(counts_copied) - counts_copied)
    )
    members = np.concatenate((singles, grouped))
    # Number the values by first position and lay their members out in that order.
    order = np.argsort(heads, kind="stable")
    counts, starts = counts[order], member_lists_offsets[order]
    offsets = np.cumsum(counts) - counts
    members = members[np.repeat(starts - offsets, counts) + np.arange(n, dtype=np.int64)]
    return Folded(fingerprints[heads[order]], members, offsets, counts)


def _expand(folded: Folded, part: Pairs, chunk: int) -> Iterator[Pairs]:
    """Pairs of distinct values as pairs of input positions (every member with every member)."""
    c_left, c_right = folded.counts[part.left], folded.counts[part.right]
    plain = (c_left == 1) & (c_right == 1)
    if plain.any():
        yield _ordered(
            folded.members[folded.offsets[part.left[plain]]],
            folded.members[folded.offsets[part.right[plain]]],
            part.distance[plain],
        )
    if plain.all():
        return
    left, right, distance = part.left[~plain], part.right[~plain], part.distance[~plain]
    c_left, c_right = c_left[~plain], c_right[~plain]
    total = c_left * c_right
    ends = np.cumsum(total)
    for lo in range(0, int(ends[-1]), chunk):
        r = np.arange(lo, min(lo + chunk, int(ends[-1])), dtype=np.int64)
        p = np.searchsorted(ends, r, side="right")
        local = r - (ends[p] - total[p])
        a = folded.members[folded.offsets[left[p]] + local // c_right[p]]
        b = folded.members[folded.offsets[right[p]] + local % c_right[p]]
        yield _ordered(a, b, distance[p])


def _ordered(a: np.ndarray, b: np.ndarray, distance: np.ndarray) -> Pairs:
    return Pairs(np.minimum(a, b), np.maximum(a, b), distance)


def near_pairs(fingerprints, k: int, *, chunk: int = CHUNK, on_progress: Progress | None = None) -> Iterator[Pairs]:
    """Every pair of positions (i < j) whose fingerprints are within Hamming distance k, each once,
    in chunks. Identical fingerprints are pairs at distance 0. Order across chunks is unspecified.
    on_progress(done, total): how far the search is (see distinct_pairs)."""
    k = validate_k(k)
    values = as_unsigned(fingerprints)
    folded = fold(values)
    if folded.has_copies:
        copies = np.flatnonzero(folded.counts > 1)
        for i, j in within_groups(folded.offsets[copies], folded.counts[copies], chunk):
            yield Pairs(folded.members[i], folded.members[j], np.zeros(len(i), np.int64))
    for part in distinct_pairs(folded.values, k, chunk=chunk, on_progress=on_progress):
        if folded.has_copies:
            yield from _expand(folded, part, chunk)
        else:
            yield part


def brute_force_pairs(fingerprints, k: int) -> set[tuple[int, int, int]]:
    """The reference: every (i, j, distance) with i < j by comparing all pairs (small inputs only)."""
    values = as_unsigned(fingerprints)
    out: set[tuple[int, int, int]] = set()
    for part in _brute(values, validate_k(k)):
        out.update(zip(part.left.tolist(), part.right.tolist(), part.distance.tolist()))
    return out
