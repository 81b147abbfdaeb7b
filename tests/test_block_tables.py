"""Block tables for the all-pairs search and join: exact for their k, keys as wide as promised (no Spark needed)."""

from itertools import combinations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_sqlite.errors import InvalidInput
from simhash_sqlite.find.block_tables import MAX_K, BlockTables

MASK64 = (1 << 64) - 1


def test_manku_scheme_for_k3_is_20_tables_of_31_to_33_bits():
    scheme = BlockTables.for_k(3)
    assert (scheme.blocks, scheme.tables, scheme.key_bits) == (6, 20, (31, 33))
    assert sum(scheme.block_masks) == MASK64 and all(a & b == 0 for a, b in combinations(scheme.block_masks, 2))
    assert [m.bit_count() for m in scheme.block_masks] == [11, 11, 11, 11, 10, 10]
    # About 1e4 times fewer chance candidates than the index's 4 x 16-bit blocks at 1e9 fingerprints.
    four_by_16 = BlockTables.split(3, 4)
    assert four_by_16.key_bits == (16, 16)
    ratio = four_by_16.expected_candidates(10**9) / scheme.expected_candidates(10**9)
    assert 5e3 < ratio < 5e4, ratio


@pytest.mark.parametrize("k", range(MAX_K + 1))
def test_default_schemes_per_k(k):
    scheme = BlockTables.for_k(k)
    assert scheme.blocks == (6 if k <= 3 else k + 3) and scheme.k == k
    assert len(set(scheme.table_masks)) == scheme.tables


def test_beyond_the_supported_k_is_refused_clearly():
    with pytest.raises(InvalidInput, match="at most k=10"):
        BlockTables.for_k(11)
    with pytest.raises(InvalidInput, match="need more than 3"):
        BlockTables.split(3, 3)
    with pytest.raises(InvalidInput, match="tables"):
        BlockTables.split(8, 16)


@settings(max_examples=300, deadline=None)
@given(
    x=st.integers(0, MASK64),
    k=st.integers(0, MAX_K),
    bits=st.lists(st.integers(0, 63), max_size=MAX_K, unique=True),
    data=st.data(),
)
def test_every_pair_within_k_shares_a_key_in_exactly_one_first_table(x, k, bits, data):
    flips = bits[:k]
    y = x
    for b in flips:
        y ^= 1 << b
    scheme = BlockTables.for_k(k, data.draw(st.one_of(st.none(), st.integers(k + 1, k + 3))))
    t = scheme.first_table(x ^ y)
    assert t is not None
    keys = scheme.keys(np.array([x, y], dtype=np.uint64))
    assert keys[t, 0] == keys[t, 1]
    assert all(keys[u, 0] != keys[u, 1] for u in range(t))  # earlier tables do not emit it again
