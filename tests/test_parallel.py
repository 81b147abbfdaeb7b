"""Fingerprinting in a process pool gives exactly the fingerprints of one process, in order."""

import os
import random
import subprocess
import sys

from simhash_sqlite import Document, SimhashIndex, parallel
from simhash_sqlite.dedup import Deduplicator
from simhash_sqlite.fingerprint import simhash
from simhash_sqlite.settings import FingerprintSettings


def _texts(n=120, seed=1):
    rng = random.Random(seed)
    pool = "甲乙丙丁 alpha beta gamma 数据库 索引 指纹 near duplicate text 重复 文本".split()
    return [" ".join(rng.choice(pool) for _ in range(rng.randint(0, 60))) for _ in range(n)]


def _started_pool(monkeypatch) -> None:
    """Two processes (one worker), used for any batch, the worker started: batches go to the pool
    only once a worker is ready (until then they stay in the calling process)."""
    monkeypatch.setenv("SIMQ_WORKERS", "2")
    monkeypatch.setattr(parallel, "PARALLEL_MIN_CHARS", 1)
    parallel._pool(1)[1].result(timeout=120)


def test_pool_gives_the_serial_fingerprints_in_order(monkeypatch):
    _started_pool(monkeypatch)
    texts = _texts()
    for s in (FingerprintSettings(), FingerprintSettings(features="words", ngram=2)):
        assert parallel.fingerprint_texts(texts, s) == [simhash(t, s) for t in texts]


def test_chunks_keep_order_and_cover_everything():
    texts = _texts(50)
    chunks = parallel._chunks(texts, 8)
    assert [t for c in chunks for t in c] == texts and 1 <= len(chunks) <= 8


def test_add_through_the_pool_stores_the_serial_fingerprints(tmp_path, monkeypatch):
    texts = _texts(300, seed=2)
    docs = [Document(f"d{i}", t) for i, t in enumerate(texts)]
    monkeypatch.setenv("SIMQ_WORKERS", "1")
    with SimhashIndex(tmp_path / "serial.db", create=True) as index:
        index.add(docs, batch_size=100)
        serial = {k: index.get(k).fingerprint for k in index.keys()}
    _started_pool(monkeypatch)
    with SimhashIndex(tmp_path / "pool.db", create=True) as index:
        report = index.add(docs, batch_size=100)
        pooled = {k: index.get(k).fingerprint for k in index.keys()}
    assert pooled == serial and report.added == 300


def test_workers_follow_simq_workers_and_default_to_at_least_one(monkeypatch):
    monkeypatch.setenv("SIMQ_WORKERS", "3")
    assert parallel.workers() == 3
    for bad in ("0", "-2", "many", ""):
        monkeypatch.setenv("SIMQ_WORKERS", bad)
        assert 1 <= parallel.workers() <= 1024


def test_a_batch_taken_meanwhile_gives_the_same_fingerprints(monkeypatch):
    # While the workers finish batch a, this process takes chunks of batch b; both come out whole.
    _started_pool(monkeypatch)
    s = FingerprintSettings()
    a, b = _texts(200, seed=3), _texts(200, seed=4)
    first, second = parallel.FingerprintJob(a, s), parallel.FingerprintJob(b, s)
    assert first.futures is not None and second.futures is not None  # both went to the pool
    assert first.result(meanwhile=second) == [simhash(t, s) for t in a]
    assert second.result() == [simhash(t, s) for t in b]


def test_a_key_met_again_in_the_next_batch_counts_against_the_batch_not_yet_written(tmp_path, monkeypatch):
    # add() prepares batch i+1 before writing batch i: a key of batch i must still count as stored.
    docs = [Document("a", "alpha text"), Document("b", "beta text"),
            Document("a", "alpha text"), Document("b", "beta text, changed"), Document("c", "gamma")]
    for workers, name in (("1", "serial.db"), ("2", "pool.db")):
        monkeypatch.setenv("SIMQ_WORKERS", workers)
        monkeypatch.setattr(parallel, "PARALLEL_MIN_CHARS", 1)
        if workers == "2":
            _started_pool(monkeypatch)
        with SimhashIndex(tmp_path / name, create=True) as index:
            report = index.add(docs, batch_size=2)
            assert (report.added, report.unchanged, report.updated, report.batches) == (3, 1, 1, 3)
            assert index.get("b").fingerprint == simhash("beta text, changed")
            assert len(index) == 3


def test_batches_stay_in_this_process_until_a_worker_is_ready(monkeypatch):
    monkeypatch.setenv("SIMQ_WORKERS", "3")  # a pool of 2 workers, new in this test
    monkeypatch.setattr(parallel, "PARALLEL_MIN_CHARS", 1)
    s = FingerprintSettings()
    texts = _texts(50, seed=5)
    early = parallel.FingerprintJob(texts, s)  # the pool is created now: its workers are starting
    assert early.futures is None and early.result() == [simhash(t, s) for t in texts]
    parallel._pool(2)[1].result(timeout=120)
    late = parallel.FingerprintJob(texts, s)
    assert late.futures is not None and late.result() == early.result()


def test_an_add_of_one_batch_starts_no_pool(tmp_path):
    # The first batch never waits for a worker (it would be done before one is ready), so an add of
    # one batch must not start a pool; a second batch does. A fresh process: no pool from other tests.
    script = f"""
import sys
from simhash_sqlite import Document, SimhashIndex, parallel
from simhash_sqlite.dedup import Deduplicator
parallel.PARALLEL_MIN_CHARS = 1
docs = [Document(str(i), "some text number " + str(i)) for i in range(10)]
with SimhashIndex({str(tmp_path / "one.db")!r}, create=True) as index:
    index.add(docs, batch_size=10)
print(parallel._pool.cache_info().currsize)
with SimhashIndex({str(tmp_path / "two.db")!r}, create=True) as index:
    index.add(docs, batch_size=5)
print(parallel._pool.cache_info().currsize)
"""
    env = dict(os.environ, SIMQ_WORKERS="2")
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "1"]



def _near_copies(n=400, seed=3):
    """Texts with many near-duplicates (a word changed) and exact repeats, in a mixed order."""
    rng = random.Random(seed)
    base = _texts(n // 4, seed=seed)
    out = []
    for i in range(n):
        words = rng.choice(base).split()
        if words and rng.random() < 0.5:
            words[rng.randrange(len(words))] = "改"
        out.append(" ".join(words))
    return out


def test_dedup_through_the_pool_writes_what_one_process_writes(monkeypatch):
    docs = [Document(f"d{i}", t) for i, t in enumerate(_near_copies())]

    def lines(**options):
        decisions = list(Deduplicator(batch_size=37, **options).run((d, None) for d in docs))
        return [d.output_line() if d.kept else d.dupe_line() for d in decisions]

    for options in ({}, {"check": False, "k": 3}):
        monkeypatch.setenv("SIMQ_WORKERS", "1")
        serial = lines(**options)
        _started_pool(monkeypatch)
        assert lines(**options) == serial
        assert sum(b"duplicate_of" in line for line in serial) > 50  # near-duplicates were dropped
