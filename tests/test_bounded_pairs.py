"""dupes and clusters past their memory budget (find/bounded_pairs.py, find/external.py): the same pairs,
verdicts and clusters as the in-memory search at any budget, the LSH candidates equal to brute force, and
no scratch file left behind."""

from __future__ import annotations

import os
import random
import tempfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from simhash_sqlite import Document, SimhashIndex
from simhash_sqlite.cli.app import app
from simhash_sqlite.core.sketch import estimate_many
from simhash_sqlite.find.bounded_pairs import BoundedPairs, needs_bound
from simhash_sqlite.find.check import load_arrays
from simhash_sqlite.find.clusters import _compress, _union
from simhash_sqlite.find.external import BucketedRuns, ScratchFolder
from simhash_sqlite.find.sketch_pairs import _windows, _words, window_keys, window_plan

WORDS = [f"w{i}" for i in range(2000)]
# Budgets that force the disk path on these small indexes: the least (one sketch a run, many buckets
# and parts) and one with a few runs and two parts.
TINY, SMALL = 1, 60_000


def _corpus(seed: int, originals: int) -> list[Document]:
    """Originals, lightly edited copies, exact copies (identical sketches) and a few short texts."""
    rng = random.Random(seed)
    docs = []
    for i in range(originals):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(30, 250)))
        docs.append(Document(f"o{i}", text))
        if i % 3 == 0:
            edited = " ".join(w if rng.random() > 0.03 else rng.choice(WORDS) for w in text.split())
            docs.append(Document(f"e{i}", edited))
        if i % 7 == 0:
            docs += [Document(f"c{i}", text), Document(f"d{i}", text)]
        if i % 11 == 0:
            docs.append(Document(f"s{i}", " ".join(text.split()[:6])))
    return docs


@pytest.fixture(scope="module", params=[False, True], ids=["no-texts", "texts"])
def corpus_index(request, tmp_path_factory):
    path = tmp_path_factory.mktemp("bounded") / "index.db"
    with SimhashIndex(path, create=True, store_text=request.param) as index:
        index.add(_corpus(5, 120))
    return path


def _everything(found) -> tuple[list, dict]:
    pairs = sorted(found, key=lambda p: (p.first, p.second))
    report = dict(vars(found.report))
    report.pop("check_seconds")
    return pairs, report


@pytest.mark.parametrize("k", [None, 6])
@pytest.mark.parametrize("memory", [TINY, SMALL])
def test_same_pairs_and_verdicts_at_a_forced_budget(corpus_index, k, memory):
    with SimhashIndex(corpus_index, readonly=True) as index:
        assert needs_bound(len(index), index.sketch_scheme.nbytes, memory)
        unbounded = _everything(index.dupes(k))
        bounded = _everything(index.dupes(k, memory=memory))
        uncertain = _everything(index.dupes(k, uncertain=True)), _everything(index.dupes(k, uncertain=True,
                                                                                          memory=memory))
    assert unbounded[0], "the corpus has near-duplicates"
    assert bounded == unbounded
    assert uncertain[1] == uncertain[0]


def test_within_budget_the_search_stays_in_memory(corpus_index, monkeypatch):
    import simhash_sqlite.find.check as check_module

    def refuse(*args, **kwargs):
        raise AssertionError("the disk path ran within the budget")

    monkeypatch.setattr(check_module, "BoundedPairs", refuse)
    with SimhashIndex(corpus_index, readonly=True) as index:
        assert list(index.dupes(memory=1 << 30))


def test_clusters_identical_at_a_forced_budget(tmp_path):
    path = tmp_path / "index.db"
    with SimhashIndex(path, create=True) as index:
        index.add(_corpus(9, 90))
    tables = []
    for memory in (None, TINY):
        with SimhashIndex(path) as index:
            report = index.clusters(memory=memory)
            rows = index.conn.execute("SELECT id, cluster, size, representative FROM clusters ORDER BY id").fetchall()
        tables.append((rows, report.clusters, report.largest, report.below, sorted(report.chained or {})))
    assert tables[0][1] < len(tables[0][0]), "some documents are clustered"
    assert tables[1] == tables[0]


def _brute_sketch_pairs(rows: np.ndarray, present: np.ndarray, threshold: float, scheme) -> dict:
    """Pairs of sketched positions sharing a window key (or the whole sketch) whose estimate is >= threshold
    (identical sketches: 1.0), by comparing every pair."""
    sketched = np.flatnonzero(present)
    nbits = scheme.bins * scheme.bits
    m = len({bytes(r) for r in rows[sketched]})
    width, step = window_plan(m, nbits)
    words = _words(rows[sketched])
    keys = np.stack([window_keys(words, s, width) for s in _windows(nbits, width, step)], axis=1)
    out = {}
    for i, a in enumerate(sketched.tolist()):
        for j in range(i + 1, len(sketched)):
            b = int(sketched[j])
            if (rows[a] == rows[b]).all():
                out[(a, b)] = 1.0
                continue
            e = float(estimate_many(rows[a : a + 1], rows[b : b + 1], scheme)[0])
            if e >= threshold and (keys[i] == keys[j]).any():
                out[(a, b)] = e
    return out


@pytest.mark.slow
@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10**6), originals=st.integers(0, 14), threshold=st.floats(0.2, 1.0),
       memory=st.sampled_from([TINY, 20_000]))
def test_sketch_candidates_equal_brute_force(seed, originals, threshold, memory):
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "index.db")
        rng = random.Random(seed)
        # A small vocabulary: unrelated texts share windows too, near the threshold or not.
        docs = [Document(f"x{i}", " ".join(rng.choice(WORDS[:40]) for _ in range(rng.randrange(8, 60))))
                for i in range(rng.randrange(0, 8))]
        with SimhashIndex(path, create=True) as index:
            index.add(_corpus(seed, originals) + docs)
            scheme = index.sketch_scheme
            _, _, rows, present = load_arrays(index.conn, scheme)
            search = BoundedPairs(index.conn, scheme, index.short_texts.column, memory, folder)
            try:
                got: dict = {}
                for left, right, estimate, rows_left, rows_right in search.sketch_pairs(threshold):
                    assert (rows_left == rows[left]).all() and (rows_right == rows[right]).all()
                    for a, b, e in zip(left.tolist(), right.tolist(), estimate.tolist()):
                        assert a < b and (a, b) not in got
                        got[(a, b)] = e
            finally:
                search.close()
    assert got == _brute_sketch_pairs(rows, present, threshold, scheme)


def test_scratch_files_go_when_the_search_ends_or_is_interrupted(corpus_index, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with SimhashIndex(corpus_index, readonly=True) as index:
        assert list(index.dupes(memory=TINY))
        assert os.listdir(tmp_path) == []
        pairs = iter(index.dupes(memory=TINY))
        next(pairs)
        assert os.listdir(tmp_path), "the runs are on disk while the search runs"
        pairs.close()  # what Ctrl-C does to the generator (GeneratorExit at the yield)
    assert os.listdir(tmp_path) == []


@settings(max_examples=30, deadline=None)
@given(codes=st.lists(st.integers(0, 2**20 - 1), max_size=300), per_run=st.integers(1, 50), shift=st.integers(0, 20))
def test_bucketed_runs_give_every_code_in_order(codes, per_run, shift):
    with ScratchFolder() as folder:
        runs = BucketedRuns(folder, shift, (2**20 >> shift) + 1)
        for lo in range(0, len(codes), per_run):
            runs.add(np.array(codes[lo : lo + per_run], dtype=np.uint64))
        read = [(b, part.tolist()) for b, part in runs.buckets()]
        runs.close()
    assert [c for _, part in read for c in part] == sorted(codes)
    assert all(c >> shift == b for b, part in read for c in part)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 80), edges=st.lists(st.tuples(st.integers(0, 79), st.integers(0, 79)), max_size=120),
       batch=st.integers(1, 40))
def test_union_find_components_equal_brute_force(n, edges, batch):
    edges = [(a % n, b % n) for a, b in edges]
    parent = np.arange(n, dtype=np.int64)
    for lo in range(0, len(edges), batch):
        chunk = np.array(edges[lo : lo + batch], dtype=np.int64).reshape(-1, 2)
        _union(parent, chunk[:, 0], chunk[:, 1])
    _compress(parent)
    label = list(range(n))  # the lowest member of each component, by repeated relabelling
    changed = True
    while changed:
        changed = False
        for a, b in edges:
            low = min(label[a], label[b])
            if label[a] != low or label[b] != low:
                label[a] = label[b] = low
                changed = True
    assert parent.tolist() == label


def test_cli_memory_option(corpus_index, tmp_path):
    runner = CliRunner()
    plain = runner.invoke(app, ["dupes", "--db", str(corpus_index), "--format", "jsonl"])
    bounded = runner.invoke(app, ["dupes", "--db", str(corpus_index), "--format", "jsonl", "--memory", "1M"])
    assert plain.exit_code == bounded.exit_code == 0
    assert sorted(plain.stdout.splitlines()) == sorted(bounded.stdout.splitlines())
    assert "--memory 1M is below the least this search holds" in bounded.output  # the process alone is more
    assert "below the least" not in plain.output
    refused = runner.invoke(app, ["clusters", "--db", str(corpus_index), "--memory", "lots"])
    assert refused.exit_code == 2 and "--memory must be a size" in refused.output  # a usage error
    assert "Traceback" not in refused.output


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.sampled_from(["rows", "none", "empty"])), max_size=12),
       st.booleans(), st.integers(1, 9))  # fmt: skip
def test_batches_of_pairs_keep_every_pair_and_stay_bounded(chunks, held, size):
    """check._batched joins the search's chunks of pairs into batches of BATCH_PAIRS to twice that (a larger
    chunk cut, so that a batch's rows and keys stay small), every pair once and in order, with its rows (zeros
    where its chunk came without) and its estimate (NaN where none came)."""
    from simhash_sqlite.find import check

    parts, expected, n = [], [], 0
    for length, how in chunks:
        left = np.arange(n, n + length, dtype=np.int64)
        n += length
        rows = np.repeat((left % 251).astype(np.uint8)[:, None], 3, axis=1)
        estimate = None if how == "none" else left / 1000
        kept = rows if how != "empty" else np.zeros((0, 3), np.uint8)
        parts.append((left, left + 1, estimate, None if held else kept, None if held else kept))
        expected += [(a, a + 1, a / 1000 if how != "none" else None, tuple(r) if how != "empty" else (0, 0, 0))
                     for a, r in zip(left.tolist(), rows.tolist())]  # fmt: skip
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(check, "BATCH_PAIRS", size)
        batches = list(check._batched(iter(parts)))
    got = []
    for i, (left, right, estimate, rows_left, rows_right) in enumerate(batches):
        assert len(left) < 2 * size and (len(left) >= size or i == len(batches) - 1)
        assert (rows_left is None) == held and (rows_right is None) == held
        for j, (a, b, e) in enumerate(zip(left.tolist(), right.tolist(), estimate.tolist())):
            got.append((a, b, None if np.isnan(e) else e, (0, 0, 0) if held else tuple(rows_left[j].tolist())))
    if held:
        expected = [(a, b, e, (0, 0, 0)) for a, b, e, _ in expected]
    assert got == expected
