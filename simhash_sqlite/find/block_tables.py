"""Manku et al.'s block tables: exact candidate keys for every pair within Hamming distance k (pure, no I/O).

Split w bits into m blocks. Two values within k bits differ in at most k blocks, so when m > k they
agree exactly on at least m - k of them. One table per choice of m - k blocks, keyed by the value's
bits in those blocks: every pair within k shares a key in at least one table, so grouping by (table,
key) and checking the distance finds exactly the pairs a brute force finds (Manku, Jain, Das Sarma,
"Detecting near-duplicates for web crawling", WWW 2007).

Wider keys mean fewer chance candidates: n uniform values give about n**2 / 2 / 2**w of them per table
of key width w. The SQLite index keys on 16 bits (4 tables for k <= 3), fine for lookups but explosive
in an all-pairs join at scale; 6 blocks choose 3 = 20 tables with 31-33-bit keys cut the candidates
about 10**4-fold at k = 3. A pair that agrees on several tables' blocks is left to the first of them
(`first_table`), so each pair comes out once without a de-duplicating pass.

Used by pairs.py and dedup.py (numpy, tables chosen by an estimated cost for n values) and spark.py
(DataFrame joins, tables by k alone: `BlockTables.for_k`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from itertools import combinations
from math import comb

import numpy as np

from ..errors import InvalidInput

MAX_K = 10  # for_k stops here: beyond it keys fall below ~14 bits (near all-pairs)
MAX_BLOCKS = 16  # the first-table lookup has 2**blocks entries
MAX_TABLES = 1000  # for Spark joins; the numpy search chooses by cost, up to CHOOSE_MAX_TABLES
CHOOSE_MAX_TABLES = 4096
# Estimated costs in nanoseconds of the numpy search (measured on the 2-core bench machine, bench/pairs.py):
SORT_NS = 100.0  # per value per table: key, pack, sort, group boundaries
CANDIDATE_NS = 100.0  # per candidate pair from a group: expand, xor, popcount, filter
BRUTE_NS = 15.0  # per pair when comparing all pairs directly

_U64 = np.uint64


def _sizes(width: int, blocks: int) -> tuple[int, ...]:
    """Block sizes, most significant block first, differing by at most one bit (larger ones first)."""
    base, extra = divmod(width, blocks)
    return tuple(base + (1 if i < extra else 0) for i in range(blocks))


@dataclass(frozen=True)
class BlockTables:
    """w-bit values split into blocks (block 0 = top bits); one table per choice of blocks - k of them.
    Exact for this k and any smaller one."""

    width: int
    k: int
    sizes: tuple[int, ...]

    @classmethod
    def split(cls, k: int, blocks: int, width: int = 64, *, max_tables: int = MAX_TABLES) -> BlockTables:
        """`blocks` near-equal blocks of `width` bits for pairs within k, checked to be usable."""
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise InvalidInput(f"k must be a whole number from 0 to {MAX_K}, not {k!r}")
        if not k < blocks <= min(width, MAX_BLOCKS):
            raise InvalidInput(
                f"block tables for k={k} need more than {k} and at most {MAX_BLOCKS} blocks, not {blocks}"
            )
        if comb(blocks, k) > max_tables:
            raise InvalidInput(
                f"{blocks} blocks for k={k} make {comb(blocks, k)} tables (at most {max_tables}); use fewer blocks"
            )
        return cls(width, k, _sizes(width, blocks))

    @classmethod
    def for_k(cls, k: int, blocks: int | None = None) -> BlockTables:
        """Tables for 64-bit fingerprints chosen by k alone (for joins that cannot see n): 6 blocks for
        k <= 3 (20 tables with 31-33-bit keys at k = 3), k + 3 blocks up to k = 10 (3-block keys)."""
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise InvalidInput(f"k must be a whole number from 0 to {MAX_K}, not {k!r}")
        if k > MAX_K:
            raise InvalidInput(
                f"pairs within k={k} are not supported by the block join (at most k={MAX_K}: beyond it the keys "
                f"are under 14 bits and the join is close to all pairs); pick a smaller k"
            )
        return cls.split(k, blocks if blocks is not None else (6 if k <= 3 else k + 3))

    # -- shape ------------------------------------------------------------------------------

    @property
    def blocks(self) -> int:
        return len(self.sizes)

    @property
    def tables(self) -> int:
        return comb(self.blocks, self.k)

    @cached_property
    def table_blocks(self) -> tuple[tuple[int, ...], ...]:
        """The blocks of each table, in a fixed order (the order `first_table` counts in)."""
        return tuple(combinations(range(self.blocks), self.blocks - self.k))

    @cached_property
    def shifts(self) -> tuple[int, ...]:
        ends = np.cumsum(self.sizes)
        return tuple(int(self.width - end) for end in ends)

    def table_width(self, table: tuple[int, ...]) -> int:
        """Key width in bits of the table made of these blocks."""
        return sum(self.sizes[b] for b in table)

    @property
    def key_bits(self) -> tuple[int, int]:
        """The narrowest and widest key, in bits."""
        widths = [self.table_width(t) for t in self.table_blocks]
        return min(widths), max(widths)

    @cached_property
    def block_masks(self) -> tuple[int, ...]:
        """Unsigned masks of the blocks, most significant first."""
        return tuple(((1 << size) - 1) << shift for size, shift in zip(self.sizes, self.shifts))

    @cached_property
    def table_masks(self) -> tuple[int, ...]:
        """Unsigned key mask of every table (the union of its blocks), in table order."""
        return tuple(sum(self.block_masks[b] for b in table) for table in self.table_blocks)

    # -- keys -------------------------------------------------------------------------------

    def first_table(self, xor: int) -> int | None:
        """The first table whose key two values with this XOR share (None: no table)."""
        for t, mask in enumerate(self.table_masks):
            if xor & mask == 0:
                return t
        return None

    @cached_property
    def first_table_lookup(self) -> np.ndarray:
        """first_table for every set of equal blocks (a bit mask over blocks; -1: no table)."""
        masks = np.arange(1 << self.blocks, dtype=np.int64)
        first = np.full(1 << self.blocks, -1, dtype=np.int64)
        for t, table in enumerate(self.table_blocks):
            need = sum(1 << b for b in table)
            first[((masks & need) == need) & (first < 0)] = t
        return first

    def keys(self, values: np.ndarray) -> np.ndarray:
        """uint64 array (tables, n): each value's key (its masked bits) in every table."""
        masks = np.array(self.table_masks, dtype=np.uint64)[:, None]
        return np.asarray(values, dtype=np.uint64)[None, :] & masks

    def bits(self, values: np.ndarray, blocks: tuple[int, ...]) -> np.ndarray:
        """The given blocks of each value, packed together (first block in the high bits)."""
        out = np.zeros(len(values), dtype=_U64)
        for b in blocks:
            size, shift = self.sizes[b], self.shifts[b]
            out <<= _U64(size)
            out |= (values >> _U64(shift)) & _U64((1 << size) - 1)
        return out

    def equal_blocks(self, xor: np.ndarray) -> np.ndarray:
        """For each XOR, the bit mask of the blocks in which the two values agree."""
        mask = np.zeros(len(xor), dtype=np.int64)
        for b, (size, shift) in enumerate(zip(self.sizes, self.shifts)):
            mask |= (((xor >> _U64(shift)) & _U64((1 << size) - 1)) == 0).astype(np.int64) << b
        return mask

    # -- cost -------------------------------------------------------------------------------

    def expected_candidates(self, n: int) -> float:
        """Chance candidates (key collisions) for n uniform random distinct values."""
        return sum(n * (n - 1) / 2 / 2.0 ** self.table_width(t) for t in self.table_blocks)

    def describe(self) -> str:
        low, high = self.key_bits
        width = f"{low}" if low == high else f"{low}-{high}"
        return (
            f"{self.blocks} blocks choose {self.blocks - self.k} = {self.tables} tables, "
            f"{width}-bit keys (exact for k <= {self.k})"
        )

    def to_dict(self) -> dict:
        low, high = self.key_bits
        return {"k": self.k, "blocks": self.blocks, "tables": self.tables, "key_bits": [low, high]}


def choose_tables(width: int, k: int, n: int) -> BlockTables | None:
    """The cheapest exact tables for n distinct w-bit values, or None when comparing all pairs is cheaper."""
    all_pairs = n * (n - 1) / 2
    best, best_cost = None, all_pairs * BRUTE_NS
    for m in range(k + 1, min(width, MAX_BLOCKS) + 1):
        tables = comb(m, k)
        if tables > CHOOSE_MAX_TABLES:
            break
        sizes = _sizes(width, m)
        shortest = sum(sorted(sizes)[: m - k])  # the narrowest key: the m - k smallest blocks
        candidates = tables * all_pairs / 2.0**shortest
        cost = tables * n * SORT_NS + candidates * CANDIDATE_NS
        if cost < best_cost:
            best, best_cost = BlockTables(width, k, sizes), cost
    return best
