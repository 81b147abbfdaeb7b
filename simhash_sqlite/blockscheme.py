"""Exact candidate keys for all near pairs within k: Manku et al.'s block tables (pure, no I/O).

Split the 64 bits into b blocks. Two fingerprints within k bits differ in at most k blocks, so when
b > k they agree exactly on at least b - k of them. One table per choice of b - k blocks, keyed by
the fingerprint's bits in those blocks: every pair within k shares a key in at least one table, so
joining on (table, key) and checking hamming() <= k finds exactly the pairs a brute force finds.

Wider keys mean fewer chance candidates: with n uniform fingerprints a table of key width w gives
about n**2 / 2 / 2**w of them. The SQLite index keys on 16 bits (4 tables for k <= 3), which is
fine for lookups but explodes in an all-pairs join at scale; 6 blocks choose 3 = 20 tables with
31-33-bit keys (Manku, Jain, Das Sarma, WWW 2007) cut the candidates about 10**4-fold at k = 3.

A pair that agrees on several tables' blocks would be found in each; `first_table` names the one
table that emits it, so each pair comes out once without a de-duplicating shuffle.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from itertools import combinations
from math import comb

import numpy as np

from .errors import InvalidInput

MAX_K = 10  # the default schemes stop here: beyond it keys fall below ~14 bits (near all-pairs)
MAX_BLOCKS = 16
MAX_TABLES = 1000


def default_blocks(k: int) -> int:
    """6 blocks for k <= 3 (20 tables with 31-33-bit keys at k = 3); k + 3 blocks up to k = 10 (3-block keys)."""
    if not isinstance(k, int) or isinstance(k, bool) or k < 0:
        raise InvalidInput(f"k must be a whole number from 0 to {MAX_K}, not {k!r}")
    if k > MAX_K:
        raise InvalidInput(
            f"pairs within k={k} are not supported by the block join (at most k={MAX_K}: beyond it the keys "
            f"are under 14 bits and the join is close to all pairs); pick a smaller k"
        )
    return 6 if k <= 3 else k + 3


@dataclass(frozen=True)
class BlockScheme:
    """b blocks, one table per choice of b - k of them. Exact for this k (and any smaller one)."""

    k: int
    blocks: int

    def __post_init__(self) -> None:
        if not isinstance(self.k, int) or self.k < 0:
            raise InvalidInput(f"k must be a whole number from 0 to {MAX_K}, not {self.k!r}")
        if not self.k < self.blocks <= MAX_BLOCKS:
            raise InvalidInput(
                f"a block scheme for k={self.k} needs more than {self.k} and at most {MAX_BLOCKS} blocks, "
                f"not {self.blocks}"
            )
        if self.tables > MAX_TABLES:
            raise InvalidInput(
                f"{self.blocks} blocks for k={self.k} make {self.tables} tables (at most {MAX_TABLES}); use fewer blocks"
            )

    @classmethod
    def for_k(cls, k: int, blocks: int | None = None) -> BlockScheme:
        return cls(k, default_blocks(k) if blocks is None else blocks)

    @property
    def tables(self) -> int:
        return comb(self.blocks, self.k)

    @cached_property
    def block_masks(self) -> tuple[int, ...]:
        """Unsigned masks of the blocks, most significant first; sizes differ by at most one bit."""
        base, extra = divmod(64, self.blocks)
        sizes = [base + 1] * extra + [base] * (self.blocks - extra)
        masks, top = [], 64
        for size in sizes:
            masks.append(((1 << size) - 1) << (top - size))
            top -= size
        return tuple(masks)

    @cached_property
    def table_masks(self) -> tuple[int, ...]:
        """Unsigned key mask of every table (the union of its b - k blocks), in a fixed order."""
        return tuple(
            sum(self.block_masks[i] for i in chosen)
            for chosen in combinations(range(self.blocks), self.blocks - self.k)
        )

    @property
    def key_bits(self) -> tuple[int, int]:
        """The narrowest and widest key, in bits."""
        widths = [m.bit_count() for m in self.table_masks]
        return min(widths), max(widths)

    def first_table(self, xor: int) -> int | None:
        """The first table whose key two fingerprints with this XOR share (None: no table)."""
        for t, mask in enumerate(self.table_masks):
            if xor & mask == 0:
                return t
        return None

    def keys(self, fingerprints: np.ndarray) -> np.ndarray:
        """uint64 array (tables, n): each fingerprint's key in every table."""
        masks = np.array(self.table_masks, dtype=np.uint64)[:, None]
        return np.asarray(fingerprints, dtype=np.uint64)[None, :] & masks

    def expected_candidates(self, n: int) -> float:
        """Chance candidates (key collisions) for n uniform random distinct fingerprints."""
        return sum(n * (n - 1) / 2 / 2.0 ** m.bit_count() for m in self.table_masks)

    def describe(self) -> str:
        low, high = self.key_bits
        width = f"{low}" if low == high else f"{low}-{high}"
        return f"{self.blocks} blocks choose {self.blocks - self.k} = {self.tables} tables, {width}-bit keys (exact for k <= {self.k})"

    def to_dict(self) -> dict:
        low, high = self.key_bits
        return {"k": self.k, "blocks": self.blocks, "tables": self.tables, "key_bits": [low, high]}
