"""The search of all pairs with the sketch rows held once (find/resident_pairs.py), the tier between the
in-memory search and the one from disk: its tables equal the words' tables, its pairs and estimates equal
sketch_pairs', and dupes and clusters through it equal the in-memory path's; the plan picks it where it fits."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_bounded_pairs import _corpus

import simhash_sqlite.find.check as check_module
from simhash_sqlite import SimhashIndex
from simhash_sqlite.core.sketch import DEFAULT_SCHEME
from simhash_sqlite.find import resident_pairs
from simhash_sqlite.find.bounded_pairs import (
    DISK_FLOOR,
    IN_MEMORY,
    KEPT_BYTES,
    ON_DISK,
    RESIDENT,
    Plan,
    in_memory_bytes,
    plan,
)
from simhash_sqlite.find.sketch_pairs import _packed_table, _row_packed_table, _words, sketch_pairs

needs_core = pytest.mark.skipif(not resident_pairs.available(), reason="the resident search needs the C core")
NBYTES = DEFAULT_SCHEME.nbytes
NBITS = DEFAULT_SCHEME.bins * DEFAULT_SCHEME.bits


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 300), width=st.integers(20, 27), start=st.integers(0, NBITS),
       nbytes=st.sampled_from([NBYTES, 120]), some=st.booleans())
def test_tables_from_the_rows_equal_the_tables_from_their_words(seed, n, width, start, nbytes, some):
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, 256, (n, nbytes), dtype=np.uint8)
    start = min(start, nbytes * 8 - width)
    first = np.flatnonzero(rng.random(n) < 0.5) if some else None
    chosen = rows if first is None else rows[first]
    numbers = np.arange(n, dtype=np.uint64) if first is None else first.astype(np.uint64)
    low = max(1, (n - 1).bit_length())
    expected = _packed_table(_words(chosen), start, width, low, numbers)
    assert _row_packed_table(rows, first, start, width, low).tolist() == expected.tolist()


def _rows_with_copies(rng: np.random.Generator, n: int) -> np.ndarray:
    """Random sketches, near copies (a few bins flipped) and exact copies, in any order."""
    rows = rng.integers(0, 256, (n, NBYTES), dtype=np.uint8)
    rows[:, NBITS // 8 :] = 0
    for i in range(1, n):
        if rng.random() < 0.4:
            rows[i] = rows[rng.integers(0, i)]
            if rng.random() < 0.6:
                flips = rng.random(NBITS) < rng.uniform(0.0, 0.15)
                rows[i, : NBITS // 8] ^= np.packbits(flips, bitorder="little")
    return rows


def _as_dict(chunks, mapping=None) -> dict:
    out: dict = {}
    for p in chunks:
        left, right = (p.left, p.right) if mapping is None else (mapping[p.left], mapping[p.right])
        for a, b, e in zip(left.tolist(), right.tolist(), p.estimate.tolist()):
            assert a < b and (a, b) not in out
            out[(a, b)] = e
    return out


@needs_core
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 250), threshold=st.floats(0.3, 1.0), some=st.booleans(),
       threads=st.integers(1, 3))
def test_resident_pairs_equal_sketch_pairs(seed, n, threshold, some, threads):
    rng = np.random.default_rng(seed)
    rows = _rows_with_copies(rng, n)
    select = np.flatnonzero(rng.random(n) < 0.7) if some else None
    chosen = rows if select is None else rows[select]
    expected = _as_dict(sketch_pairs(chosen, threshold, DEFAULT_SCHEME), select)
    got = _as_dict(resident_pairs.resident_sketch_pairs(rows, select, threshold, DEFAULT_SCHEME, threads))
    assert got == expected


def _forced(how: str):
    return lambda documents, nbytes, memory, held=0, resident=True: Plan(how, 2, 1 << 30)


@needs_core
@pytest.mark.parametrize("store_text", [False, True])
def test_dupes_and_clusters_through_the_resident_search_equal_the_in_memory_ones(tmp_path, monkeypatch, store_text):
    path = tmp_path / "index.db"
    with SimhashIndex(path, create=True, store_text=store_text) as index:
        index.add(_corpus(11, 150))
    found = {}
    for how in (IN_MEMORY, RESIDENT):
        monkeypatch.setattr(check_module, "plan", _forced(how))
        with SimhashIndex(path) as index:
            search = index.dupes(memory=1 << 30)
            pairs = sorted(map(repr, search))
            assert search.search_plan.how == how
            uncertain = sorted(map(repr, index.dupes(uncertain=True, memory=1 << 30)))
            report = index.clusters(memory=1 << 30)
            table = index.conn.execute("SELECT id, cluster, size, representative FROM clusters ORDER BY id").fetchall()
        found[how] = pairs, uncertain, table, report.clusters, report.largest
    assert found[IN_MEMORY][0], "the corpus has near-duplicates"
    assert found[RESIDENT] == found[IN_MEMORY]


def test_the_plan_takes_the_fastest_search_that_fits():
    ten_million, held = 10_000_000, 150 << 20
    assert plan(ten_million, NBYTES, None).how == IN_MEMORY
    assert plan(ten_million, NBYTES, 64 << 30, held).how == IN_MEMORY
    assert plan(ten_million, NBYTES, in_memory_bytes(ten_million, NBYTES) + held - 1, held).how != IN_MEMORY
    two_gb = plan(ten_million, NBYTES, 2 << 30, held)
    if resident_pairs.available():
        assert two_gb.how == RESIDENT and two_gb.threads >= 1
        assert resident_pairs.resident_bytes(ten_million, NBYTES, two_gb.threads) <= two_gb.work
    else:
        assert two_gb.how == ON_DISK
    assert plan(ten_million, NBYTES, 1 << 30, held).how == ON_DISK
    assert plan(ten_million, NBYTES, 2 << 30, held, resident=False).how == ON_DISK  # near_pairs at a fixed k
    tiny = plan(ten_million, NBYTES, 1, held)  # the tests' forced budgets: the least runs and parts
    assert (tiny.how, tiny.work) == (ON_DISK, 4096) and tiny.least > held + ten_million * 26
    for budget in (held + (200 << 20), held + (400 << 20)):  # the process and a little more: below the least
        scarce = plan(ten_million, NBYTES, budget, held)
        # BoundedPairs takes its arrays out of `work`: what is left for its runs is at least DISK_FLOOR (it was
        # 4 KB here, and the disk search refused 10M documents in 250,000 parts)
        assert scarce.how == ON_DISK and scarce.work - ten_million * KEPT_BYTES >= DISK_FLOOR, budget
