"""Exact near-duplicate search plans over the four 16-bit block columns.

Pigeonhole: if two fingerprints differ in at most k bits, at least one of the four blocks differs in
at most floor(k/4) bits (were all four to differ in more, the total would exceed k). So probing each
block with every 16-bit value within radius floor(k/4) of the query's block, then checking the
candidates with hamming(), finds every match (multi-index hashing). For k <= 3 the radius is 0 and
the probes are four plain equality lookups. When the probes would touch most of the table, a full
scan is cheaper and just as exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from math import comb

import apsw
import numpy as np

from .errors import InvalidInput
from .fingerprint import BLOCK_BITS, BLOCKS, blocks, to_signed

# Scan when the probed block values cover more than this share of each block's 65,536 values:
# past it nearly every row is a candidate and the index seeks only add cost.
SCAN_SHARE = 0.25


@dataclass(frozen=True)
class Plan:
    """How a query for distance <= k runs: "blocks" (equality), "probes" (radius > 0) or "scan"."""

    kind: str
    k: int
    radius: int

    @property
    def probes_per_block(self) -> int:
        return sum(comb(BLOCK_BITS, i) for i in range(self.radius + 1))

    def describe(self) -> str:
        if self.kind == "scan":
            return f"full scan with hamming() <= {self.k}"
        return (
            f"{BLOCKS} block lookups x {self.probes_per_block} value(s) within {self.radius} bit(s), "
            f"then hamming() <= {self.k}"
        )


def plan_for(k: int) -> Plan:
    if not isinstance(k, int) or not 0 <= k <= 64:
        raise InvalidInput(f"k must be a whole number from 0 to 64, not {k!r}")
    radius = k // BLOCKS
    kind = "blocks" if radius == 0 else "probes"
    if Plan(kind, k, radius).probes_per_block > SCAN_SHARE * (1 << BLOCK_BITS):
        kind = "scan"
    return Plan(kind, k, radius)


@lru_cache(maxsize=None)
def _masks(radius: int) -> np.ndarray:
    """Every 16-bit value with at most `radius` bits set (XOR masks), fewest bits first."""
    values = np.arange(1 << BLOCK_BITS, dtype=np.int64)
    counts = np.bitwise_count(values)
    return values[np.argsort(counts, kind="stable")][: int((counts <= radius).sum())]


def block_neighbours(value: int, radius: int) -> np.ndarray:
    """All 16-bit values within `radius` bits of `value` (int64, for a carray binding)."""
    return np.bitwise_xor(_masks(radius), value)


_COLUMNS = "key, fingerprint, hamming(fingerprint, :q) AS distance"
_ORDER = "ORDER BY distance, key LIMIT :limit"


def near_sql(plan: Plan) -> str:
    """The SQL a plan runs. Parameters: :q (signed fingerprint), :k, :limit (-1 = all), :exclude
    (a key to leave out, or NULL), and :b0..:b3 (block values, or carray() arrays of them)."""
    if plan.kind == "scan":
        where = "fingerprint IS NOT NULL AND hamming(fingerprint, :q) <= :k"
        return f"SELECT {_COLUMNS} FROM documents\nWHERE {where} AND key IS NOT :exclude\n{_ORDER}"
    test = "= :b{i}" if plan.kind == "blocks" else "IN carray(:b{i})"
    lookups = "\n    UNION\n".join(
        f"    SELECT id FROM documents WHERE b{i} {test.format(i=i)} AND hamming(fingerprint, :q) <= :k"
        for i in range(BLOCKS)
    )
    return f"SELECT {_COLUMNS} FROM documents\nWHERE id IN (\n{lookups}\n) AND key IS NOT :exclude\n{_ORDER}"


def near_params(plan: Plan, fingerprint: int, limit: int | None = None, exclude: str | None = None) -> dict:
    params = {"q": to_signed(fingerprint), "k": plan.k, "limit": -1 if limit is None else limit, "exclude": exclude}
    if plan.kind != "scan":
        for i, value in enumerate(blocks(fingerprint)):
            params[f"b{i}"] = value if plan.kind == "blocks" else apsw.carray(block_neighbours(value, plan.radius))
    return params
