"""dedup in bounded memory: the kept set spilled to disk at a tiny budget keeps what an unbounded run keeps."""

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_dedup import bits_of, brute_force_candidates, brute_force_matches, decisions_of, kept_matches, near_copies

from simhash_sqlite.core.sketch import DEFAULT_SCHEME, size_ratios
from simhash_sqlite.errors import InvalidArgument
from simhash_sqlite.pipeline import spill as spill_module
from simhash_sqlite.pipeline.dedup import KeptSketches
from simhash_sqlite.pipeline.spill import LEAST_MEMORY, SpillFolder, default_memory, parse_memory


def outcome(got):
    return [(d.kept, d.duplicate_of, d.distance, d.checked_by, d.jaccard, d.certainty) for d in got]


@pytest.mark.parametrize("memory", [LEAST_MEMORY, 30_000, 256 << 20, 1 << 30, 3 << 30, (1 << 34) + 12_345])
def test_the_shares_of_dedups_budget_add_up_to_it(memory):
    """--memory holds the labels, the two batches in flight, the three caches of shingle sets and the sketch runs
    (with their merges' copies and the bit map): their shares, as the Deduplicator gives them out, are the budget."""
    from simhash_sqlite import Deduplicator

    deduplicator = Deduplicator(memory=memory)
    try:
        shares = (deduplicator.labels.budget, 2 * deduplicator.batch_bytes, 3 * deduplicator.kept_shingles.most_bytes,
                  deduplicator.sketches.budget)
        assert all(share > 0 for share in shares)
        assert sum(shares) == memory
        assert deduplicator.sketches.budget >= memory // 2  # (most of it for the sketches)
    finally:
        deduplicator.close()


@pytest.mark.parametrize("memory", [30_000, 120_000])
def test_a_spilled_kept_set_keeps_what_an_unbounded_one_keeps(memory):
    texts = near_copies(5, originals=60, copies=400)
    unbounded = decisions_of(texts, 7)
    assert 100 < sum(d.kept for d in unbounded) < 300
    from simhash_sqlite import Deduplicator
    from simhash_sqlite.store.documents import Document

    deduplicator = Deduplicator(batch_size=7, memory=memory)
    got = list(deduplicator.run((Document(str(i), t), None) for i, t in enumerate(texts)))
    # The budget was passed: sketch runs and labels went to disk, and were searched there.
    assert deduplicator.sketches.spilled and deduplicator.spill.bytes > 0
    assert deduplicator.labels.base > 0 or memory > 30_000
    folder = deduplicator.spill.path
    assert outcome(got) == outcome(unbounded)
    deduplicator.close()
    assert not os.path.exists(folder)  # the spill is removed


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 60), st.integers(1, 30), st.sampled_from([0.5, 0.8]),
       st.sampled_from([1, 5000, 20000]), st.sampled_from([512, 3]))
def test_spilled_sketches_find_every_near_duplicate_sharing_a_window(tmp_path_factory, seed, kept_count, queries,
                                                                    threshold, budget, block):
    # block: codes a block on disk, as shipped and so small that one code's entries span several blocks
    rng = np.random.default_rng(seed)
    kept = rng.integers(0, 256, (kept_count, DEFAULT_SCHEME.nbytes), dtype=np.uint8)
    rows = []
    for _ in range(queries):
        bits = bits_of(kept[rng.integers(kept_count)].tobytes())
        bits[rng.choice(len(bits), int(rng.integers(0, 150)), replace=False)] ^= 1
        copy = np.concatenate([np.packbits(bits, bitorder="little"), kept[0, DEFAULT_SCHEME.bin_bytes:]])
        rows.append(copy if rng.random() < 0.8 else rng.integers(0, 256, DEFAULT_SCHEME.nbytes, dtype=np.uint8))
    rows = np.array(rows, dtype=np.uint8)
    folder = SpillFolder(str(tmp_path_factory.mktemp("spill") / "out.jsonl"))
    found = KeptSketches(threshold, budget=budget, folder=folder)
    # (and with small blocks, a search reads one block at a time: spill.READ_BLOCKS)
    spill_module.SpilledRun.BLOCK, spill_module.READ_BLOCKS = block, 1 if block == 3 else 2048
    for lo in range(0, kept_count, 3):
        found.add(kept[lo : lo + 3], np.arange(lo, min(lo + 3, kept_count)) * 10)
    if budget == 1:
        assert not found.runs and sum(len(run) for run in found.spilled) == kept_count  # all of it on disk
    got = kept_matches(found, rows)
    found.close()
    folder.close()
    spill_module.SpilledRun.BLOCK, spill_module.READ_BLOCKS = 512, 2048
    assert got == brute_force_matches(rows, kept, threshold)
    # Its counts: every pair sharing a window a candidate once. Those whose size ratio is below the threshold
    # cannot reach it: of the spilled runs' (all of them at budget 1), they are not estimated and their rows
    # not read (the matches above show that none that could was left out).
    candidates = brute_force_candidates(rows, kept)
    ratio = {pair: size_ratios(rows[pair[0]], kept[pair[1]])[0] for pair in candidates}
    out = {pair for pair, r in ratio.items() if r < 0.99 * threshold}  # (NaN: never out)
    assert found.candidates == len(candidates) and found.rows_read <= found.estimated <= len(candidates)
    assert found.estimated >= len(candidates) - len({pair for pair, r in ratio.items() if r < threshold})
    if budget == 1:
        assert found.estimated <= len(candidates) - len(out)
        assert found.rows_read <= len({j for i, j in candidates - out})


def test_memory_sizes():
    assert parse_memory("512M") == 512 << 20 and parse_memory("2G") == 2 << 30 and parse_memory("1.5GiB") == 3 << 29
    assert parse_memory("3000000") == 3_000_000 and parse_memory("1024k") == LEAST_MEMORY
    for bad in ("", "lots", "2X", "-1G", "1K"):
        with pytest.raises(InvalidArgument):
            parse_memory(bad)
    assert LEAST_MEMORY <= default_memory() <= 1 << 30


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 40), min_size=1, max_size=300), st.lists(st.integers(0, 45), max_size=40),
       st.sampled_from([1, 2, 3, 512]))
def test_a_spilled_run_reads_every_block_that_holds_a_wanted_code(tmp_path_factory, tops, wanted, block):
    """codes_near: all codes with a wanted top (many codes of one top spanning blocks), in order."""
    codes = np.sort(np.array(tops, dtype=np.uint64) << np.uint64(32) | np.arange(len(tops), dtype=np.uint64))
    folder = SpillFolder(str(tmp_path_factory.mktemp("spill") / "out.jsonl"))
    spill_module.SpilledRun.BLOCK = block
    try:
        run = spill_module.SpilledRun(folder, np.zeros((len(tops), 2), np.uint8), np.arange(len(tops)), codes)
        wanted_tops = np.sort(np.array(wanted, dtype=np.uint64)) << np.uint64(32)
        near = run.codes_near(wanted_tops)
        assert np.all(np.diff(near.astype(np.int64)) > 0)  # sorted, each once
        want = codes[np.isin(codes >> np.uint64(32), np.array(wanted, dtype=np.uint64))]
        assert set(want.tolist()) <= set(near.tolist()) <= set(codes.tolist())
        run.close()
    finally:
        spill_module.SpilledRun.BLOCK = 512
        folder.close()


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 20), max_size=200), st.lists(st.integers(0, 20), max_size=200),
       st.sampled_from([1, 3, 512]), st.sampled_from([1, 4, 1 << 20]))
def test_two_spilled_runs_merge_on_disk_into_the_run_of_both(tmp_path_factory, older, newer, block, chunk):
    """SpilledRun.merged, a chunk at a time: the codes of both in order (the newer's positions after the
    older's), the fence of every block's first code, the rows and labels of the older then the newer."""
    folder = SpillFolder(str(tmp_path_factory.mktemp("spill") / "out.jsonl"))
    spill_module.SpilledRun.BLOCK, spill_module.MERGE_CHUNK = block, chunk
    try:
        def run(tops, first_label):
            codes = np.sort(np.array(tops, dtype=np.uint64) << np.uint64(32) | np.arange(len(tops), dtype=np.uint64))
            rows = (np.arange(len(tops) * 2) % 251).astype(np.uint8).reshape(-1, 2)
            return spill_module.SpilledRun(folder, rows, np.arange(len(tops)) + first_label, codes), codes, rows

        a, a_codes, a_rows = run(older, 0)
        b, b_codes, b_rows = run(newer, 1000)
        merged = spill_module.SpilledRun.merged(folder, a, b)
        want = np.sort(np.concatenate((a_codes, b_codes + np.uint64(len(older)))))
        got = np.fromfile(merged.codes_path, dtype=np.uint64)
        assert got.tolist() == want.tolist() and merged.fence.tolist() == want[::block].tolist()
        positions = np.arange(len(older) + len(newer))
        rows, labels = merged.rows_and_labels(positions)
        assert rows.tolist() == np.concatenate((a_rows, b_rows)).tolist()
        assert labels.tolist() == list(range(len(older))) + list(range(1000, 1000 + len(newer)))
        assert not os.path.exists(a.codes_path) and not os.path.exists(b.records_path)
        merged.close()
    finally:
        spill_module.SpilledRun.BLOCK, spill_module.MERGE_CHUNK = 512, 1 << 20
        folder.close()


@pytest.mark.parametrize("chunk", [1 << 16, 3])
def test_kept_labels_in_ram_and_spilled_answer_alike(tmp_path, monkeypatch, chunk):
    """KeptLabels: keys, fingerprints, sizes (NaN kept) and short texts, the same from RAM and from its file
    (written as shipped, and 3 labels at a time: chunks that do not divide a spill)."""
    from simhash_sqlite.pipeline.spill import KeptLabels

    monkeypatch.setattr(spill_module, "LABELS_SPILL_CHUNK", chunk)
    folder = SpillFolder(str(tmp_path / "out.jsonl"))
    spilled, ram = KeptLabels(1, folder), KeptLabels()
    for i in range(50):
        for labels in (spilled, ram):
            labels.append(f"key {i}", (i * 0x9E3779B97F4A7C15) % 2**64, float("nan") if i % 7 == 0 else i / 3,
                          b"short %d" % i if i % 3 == 0 else None, -1 if i % 4 == 0 else 1000 * i)
        if i % 10 == 9:
            spilled.spill_if_over()
    assert spilled.base == 50 and ram.base == 0
    labels = np.array([0, 7, 13, 49, 3, 3])
    assert spilled.values_of(labels).tolist() == ram.values_of(labels).tolist()
    np.testing.assert_array_equal(spilled.sizes_of(labels), ram.sizes_of(labels))
    for label in range(50):
        assert spilled.key_of(label) == ram.key_of(label) == f"key {label}"
        assert spilled.short_of(label) == ram.short_of(label)
        assert spilled.text_at_of(label) == ram.text_at_of(label) == (-1 if label % 4 == 0 else 1000 * label)
        assert np.isnan(spilled.size_of(label)) == (label % 7 == 0)
    spilled.close()
    folder.close()


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0, 1]), st.binary(max_size=3000)), max_size=40),
       st.sampled_from([1, 64, 1 << 20]), st.integers(0, 2**16))
def test_kept_texts_read_back_what_was_appended(tmp_path_factory, records, flush, seed):
    """KeptTexts: each record read back by its offset, from the file or from the buffer not yet written."""
    from simhash_sqlite.pipeline.spill import KeptTexts

    folder = SpillFolder(str(tmp_path_factory.mktemp("texts") / "out.jsonl"))
    texts = KeptTexts(folder)
    texts.FLUSH = flush
    offsets = [texts.append(kind, data) for kind, data in records]
    order = np.random.default_rng(seed).permutation(len(records)).tolist()
    assert [texts.read(offsets[i]) for i in order] == [records[i] for i in order]
    assert texts.read_count == len(records) and texts.bytes == sum(9 + len(data) for _, data in records)
    texts.close()
    folder.close()
