"""An index growing by bulk adds: every search surface stays exact at every committed batch, for a reader
in another connection meanwhile and for the writer after, and a SIGKILLed bulk add keeps its committed
batches and finishes when run again. Answers are compared with brute force over what is committed."""

import contextlib
import gc
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import weakref

import apsw
import numpy as np
import pytest
from test_index import MASK, brute_force
from typer.testing import CliRunner

from simhash_sqlite import Document, SimhashIndex
from simhash_sqlite.cli.app import app
from simhash_sqlite.core.fingerprint import to_signed
from simhash_sqlite.find.search import near_params
from simhash_sqlite.index import FingerprintedDocument
from simhash_sqlite.store import writer as writer_module
from simhash_sqlite.store.database import search_indexes
from simhash_sqlite.store.integrity import problems
from simhash_sqlite.store.writer import ADD_CACHE_MIB, BULK_CHECKPOINT_PAGES

BATCH = 400
KS = (0, 3, 8, 17)  # equality lookups, radius-1 and radius-2 probes, and a k the planner scans for


def clustered(count, centres, rng, prefix):
    """count (key, fingerprint) pairs near the centres (0-9 flipped bits), so every k has matches."""
    items = []
    for i in range(count):
        fp = centres[i % len(centres)]
        for _ in range(rng.randint(0, 9)):
            fp ^= 1 << rng.randrange(64)
        items.append((f"{prefix}{i:05}", fp))
    return items


def check_exact(index, stored, queries):
    """near (forced plans and the planner's choice), near_many, near_sql and simhash_near against brute force."""
    for k in KS:
        want = {q: brute_force(stored, q, k) for q in queries}
        for plan in ("index", "scan", None):
            for q in queries:
                got = [(m.distance, m.key) for m in index.near(fingerprint=q, k=k, plan=plan, check=False)]
                assert got == want[q], (k, plan, q)
        answers = list(index.near_many(queries, k=k, check=False))
        assert [[(m.distance, m.key) for m in a.matches] for _, a in answers] == [want[q] for q in queries]
        sql, plan = index.near_sql(k), index.plan(k)
        for q in queries[:4]:
            rows = index.conn.execute(sql, near_params(plan, q)).fetchall()
            assert sorted((distance, key) for key, _fp, distance in rows) == want[q], (k, "near_sql")
            rows = index.conn.execute("SELECT key, distance FROM simhash_near(?, ?, 0)", (to_signed(q), k))
            assert sorted((distance, key) for key, distance in rows) == want[q], (k, "simhash_near")


def old_and_new(seed, old, new):
    """(centres, old items, new items near the same 30 centres) for a killed add."""
    rng = random.Random(seed)
    centres = [rng.getrandbits(64) for _ in range(30)]
    return centres, clustered(old, centres, rng, "old"), clustered(new, centres, rng, "new")


def brute_pairs(stored, k):
    """Every pair within k, by numpy XOR and popcount of each fingerprint against those after it."""
    keys = list(stored)
    fps = np.array([stored[key] for key in keys], dtype=np.uint64)
    pairs = set()
    for i in range(len(keys) - 1):
        close = np.flatnonzero(np.bitwise_count(fps[i + 1 :] ^ fps[i]) <= k) + i + 1
        pairs.update(frozenset((keys[i], keys[j])) for j in close.tolist())
    return pairs


def test_every_search_is_exact_at_every_batch_of_a_bulk_add_and_after(tmp_path):
    rng = random.Random(16)
    centres = [rng.getrandbits(64) for _ in range(60)] + [0, MASK]
    base = clustered(1500, centres, rng, "old")
    # New documents near old ones, new centres, and updates: an existing key gets a new fingerprint.
    new = clustered(2600, centres + [rng.getrandbits(64) for _ in range(20)], rng, "new")
    updates = [(key, fp ^ 0xFFFF) for key, fp in rng.sample(base, 150)]
    added = new[:1300] + updates + new[1300:]
    queries = [flip for c in centres[:4] for flip in (c, c ^ 0b1011, c ^ (0xFF << 40))] + [0, MASK, rng.getrandbits(64)]
    path = tmp_path / "growing.db"
    with SimhashIndex(path, create=True) as writer:
        writer.add_fingerprints(base)
    committed = dict(base)
    checked_batches = []
    reader = SimhashIndex(path, readonly=True)  # one connection throughout: its cached scan arrays must follow
    try:

        def items():
            for i, item in enumerate(added):
                if i and i % BATCH == 0:  # the batches before this item are committed; this one is not
                    committed.update(added[i - BATCH : i])
                    assert len(reader) == len(committed)
                    check_exact(reader, committed, queries)
                    checked_batches.append(i)
                yield item

        with SimhashIndex(path) as writer:
            assert writer.add_fingerprints(items(), batch_size=BATCH) == len(added)
            committed.update(added)
            check_exact(writer, committed, queries)
            check_exact(reader, committed, queries)
            for k in (2, 6):
                got = {frozenset((p.first, p.second)) for p in writer.dupes(k, check=False)}
                assert got == brute_pairs(committed, k)
    finally:
        reader.close()
    assert len(checked_batches) == len(added) // BATCH
    assert problems(path) == []


KILLED_ADD = textwrap.dedent("""
    import os, signal, sys
    from simhash_sqlite import Document, SimhashIndex
    path, items, kill_at, batch = sys.argv[1], eval(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    def feed():
        for i, item in enumerate(items):
            if i == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            yield item
    with SimhashIndex(path) as index:
        index.add_fingerprints(feed(), batch_size=batch)
""")


def test_a_sigkilled_bulk_add_keeps_its_committed_batches_and_finishes_when_run_again(tmp_path):
    centres, base, new = old_and_new(7, 800, 1000)
    path = tmp_path / "killed.db"
    with SimhashIndex(path, create=True) as index:
        index.add_fingerprints(base)
    batch, kill_at = 150, 150 * 4 + 37  # killed while reading the fifth batch: four are committed
    done = subprocess.run([sys.executable, "-c", KILLED_ADD, str(path), repr(new), str(kill_at), str(batch)])
    assert done.returncode == -signal.SIGKILL
    assert problems(path) == []
    committed = dict(base + new[: 150 * 4])
    queries = [c ^ 0b101 for c in centres[:8]]
    with SimhashIndex(path) as index:
        assert {key: index.get(key).fingerprint for key in index.keys()} == committed
        check_exact(index, committed, queries)
        assert index.add_fingerprints(new, batch_size=batch) == len(new)  # the same add again finishes it
        committed.update(new)
        assert len(index) == len(committed)
        check_exact(index, committed, queries)
    assert problems(path) == []


def test_adds_checkpoint_less_often_while_they_run_and_leave_the_settings_and_the_file_as_before(tmp_path):
    rng = random.Random(3)
    with SimhashIndex(tmp_path / "settings.db", create=True) as index:
        index.add_fingerprints(clustered(200, [rng.getrandbits(64)], rng, "old"))
        index.conn.pragma("wal_autocheckpoint", 10)  # the user's setting: the add's WAL will exceed it
        index.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        before = index.conn.pragma("cache_size"), index.conn.pragma("wal_autocheckpoint")
        file_size = os.path.getsize(index.path)
        seen = []

        def on_batch(_report):
            seen.append((index.conn.pragma("cache_size"), index.conn.pragma("wal_autocheckpoint")))

        texts = [Document(f"t{i}", f"text number {i} " + " ".join(rng.choices("abcdefgh", k=50))) for i in range(3000)]
        index.add(texts, batch_size=100, on_batch=on_batch)
        # checkpoints less often than the user's 10 pages, as often as the file has pages (up to the bulk bound)
        assert {cache for cache, _ in seen} == {-ADD_CACHE_MIB * 1024}
        assert all(10 < pages <= BULK_CHECKPOINT_PAGES for _, pages in seen), seen
        assert seen[-1][1] > seen[0][1]  # it grew with the file
        assert (index.conn.pragma("cache_size"), index.conn.pragma("wal_autocheckpoint")) == before
        assert os.path.getsize(index.path) > file_size  # the add's WAL was folded into the file at its end
        index.add_fingerprints([(f"n{i}", rng.getrandbits(64)) for i in range(2000)], batch_size=100)
        assert (index.conn.pragma("cache_size"), index.conn.pragma("wal_autocheckpoint")) == before


KILLED_TEXT_ADD = textwrap.dedent("""
    import os, signal, sys
    from simhash_sqlite import Document, SimhashIndex
    path, count, kill_at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    def feed():
        for i in range(count):
            if i == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            yield Document(f"text{i:05}", f"document {i} " + " ".join(str(i * j % 997) for j in range(40)))
    with SimhashIndex(path) as index:
        index.add(feed())
""")


def test_adds_into_a_large_index_commit_more_documents_at_a_time_and_report_only_what_is_committed(tmp_path):
    rng = np.random.default_rng(16)
    path = tmp_path / "large.db"
    with SimhashIndex(path, create=True) as index:
        index.add_fingerprints((f"old{i:06}", int(fp)) for i, fp in enumerate(rng.integers(0, 2**63, 250_000)))
        assert index.transaction_size() == 2500  # one per 100 stored documents (1000 below 100k)
    texts = [Document(f"new{i:05}", f"text {i} " + " ".join(map(str, rng.integers(0, 500, 30)))) for i in range(6500)]
    counter = SimhashIndex(path, readonly=True)  # another connection sees only what is committed
    try:
        for batch_size, commits in ((None, [3000, 6000, 6500]), (1000, [1000 * i for i in range(1, 7)] + [6500])):
            seen = []

            def on_batch(report):
                seen.append((report.documents, len(counter) - 250_000))

            made = []  # weak references: the documents of a written batch must go, not wait for the COMMIT

            def renamed(batch_size=batch_size, made=made):
                for i, doc in enumerate(texts):
                    if i == 2500:  # reading the third batch: the first is written, in the open transaction
                        gc.collect()
                        assert made[0]() is None and made[999]() is None
                    made.append(weakref.ref(new := Document(f"{batch_size}-{doc.key}", doc.text)))
                    yield new

            with SimhashIndex(path) as index:
                report = index.add(renamed(), batch_size=batch_size, on_batch=on_batch)
                assert report.added == 6500 and report.batches == 7
            assert [documents for documents, _ in seen] == commits
            assert all(documents == visible - (6500 if batch_size else 0) for documents, visible in seen)
    finally:
        counter.close()
    assert problems(path) == []
    # The same through simq add (JSONL, read by the pool's code path): a progress line per commit.
    data = tmp_path / "more.jsonl"
    data.write_text("".join(json.dumps({"id": f"cli-{d.key}", "text": d.text}) + "\n" for d in texts))
    done = subprocess.run([sys.executable, "-m", "simhash_sqlite", "add", "--db", str(path), "--progress-json",
                           str(data)], capture_output=True, text=True, check=True)
    lines = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    assert [line["documents"] for line in lines] == [3000, 6000, 6500]

    # SIGKILLed while reading the seventh batch of 1000: the first three were committed together (3000 >=
    # 2500), the fourth and fifth written into the next transaction (lost), the sixth not yet written.
    done = subprocess.run([sys.executable, "-c", KILLED_TEXT_ADD, str(path), "6500", str(6037)])
    assert done.returncode == -signal.SIGKILL
    assert problems(path) == []
    with SimhashIndex(path) as index:
        assert len(index) == 250_000 + 3 * 6500 + 3000
        subprocess.run([sys.executable, "-c", KILLED_TEXT_ADD, str(path), "6500", "-1"], check=True)  # finishes it
        assert len(index) == 250_000 + 4 * 6500
        stored = [index.get(f"text{i:05}") for i in (0, 2999, 3000, 6499)]
        assert all(doc is not None and doc.fingerprint is not None for doc in stored)
    assert problems(path) == []


def fingerprinted(items):
    """FingerprintedDocuments as a JSONL add makes them (content hash of the key: distinct per key)."""
    return [
        FingerprintedDocument(key, fp, 50, hashlib.blake2b(f"{key} {fp}".encode(), digest_size=16).digest())
        for key, fp in items
    ]


def search_index_names(path):
    with contextlib.closing(apsw.Connection(str(path))) as conn:
        return {name for (name,) in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'index'")}


SEARCH_INDEXES = {name for name, _sql in search_indexes()}


def test_an_add_past_what_the_index_held_drops_the_search_indexes_stays_exact_and_builds_them_as_it_ends(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(writer_module, "BULK_AFTER", 600)
    rng = random.Random(26)
    centres = [rng.getrandbits(64) for _ in range(40)] + [0, MASK]
    base = clustered(500, centres, rng, "old")
    updates = [(key, fp ^ 0xFF00) for key, fp in rng.sample(base, 100)]
    added = clustered(1400, centres + [rng.getrandbits(64) for _ in range(10)], rng, "new") + updates
    queries = [flip for c in centres[:4] for flip in (c, c ^ 0b1011, c ^ (0xFF << 40))] + [0, MASK]
    paths = {"bulk": tmp_path / "bulk.db", "rows": tmp_path / "rows.db"}
    for path in paths.values():
        with SimhashIndex(path, create=True) as index:
            index.add(fingerprinted(base))
    assert SEARCH_INDEXES <= search_index_names(paths["bulk"]) and len(SEARCH_INDEXES) == 5
    committed = dict(base)
    seen_dropped = []
    reader = SimhashIndex(paths["bulk"], readonly=True)
    try:

        def items():
            for i, item in enumerate(fingerprinted(added)):
                # add() reads a batch ahead: as batch n begins, the batches up to n - 2 are committed
                if i >= 2 * BATCH and i % BATCH == 0:
                    committed.update(added[i - 2 * BATCH : i - BATCH])
                    dropped = not SEARCH_INDEXES & search_index_names(paths["bulk"])
                    seen_dropped.append(dropped)
                    assert problems(paths["bulk"]) == []  # being built by a running loader: not a problem
                    check_exact(reader, committed, queries)
                yield item

        with SimhashIndex(paths["bulk"]) as index:
            report = index.add(items(), batch_size=BATCH)
        assert (report.added, report.updated) == (1400, 100)
    finally:
        reader.close()
    # Row by row up to 600 written documents (the first batch), without the indexes after, built at the end.
    assert seen_dropped == [False, True]
    assert SEARCH_INDEXES <= search_index_names(paths["bulk"])
    assert problems(paths["bulk"]) == []
    monkeypatch.setattr(writer_module, "BULK_AFTER", 10**9)
    with SimhashIndex(paths["rows"]) as index:
        index.add(fingerprinted(added), batch_size=BATCH)
    columns = "key, fingerprint, b0, b1, b2, b3, length, content_hash, text, sketch, short_text"
    tables = []
    for path in paths.values():
        with contextlib.closing(apsw.Connection(str(path))) as conn:
            tables.append(conn.execute(f"SELECT {columns} FROM documents ORDER BY key").fetchall())
            assert conn.execute("SELECT count(*) FROM simhash_meta WHERE key = 'bulk_load'").get == 0
    assert tables[0] == tables[1]
    committed.update(added)
    with SimhashIndex(paths["bulk"], readonly=True) as index:
        check_exact(index, committed, queries)


KILLED_BULK_ADD = textwrap.dedent("""
    import os, signal, sys
    from simhash_sqlite import SimhashIndex
    from simhash_sqlite.store import writer
    from test_growing_index import fingerprinted
    writer.BULK_AFTER = 300
    path, items, kill_at = sys.argv[1], eval(sys.argv[2]), int(sys.argv[3])
    def feed():
        for i, document in enumerate(fingerprinted(items)):
            if i == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            yield document
    with SimhashIndex(path) as index:
        index.add(feed(), batch_size=100)
""")


def test_a_bulk_add_killed_before_it_built_the_indexes_leaves_an_exact_index_that_the_next_writer_mends(tmp_path):
    centres, base, new = old_and_new(8, 200, 900)
    path = tmp_path / "killed.db"
    with SimhashIndex(path, create=True) as index:
        index.add(fingerprinted(base))
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.path.dirname(__file__),
                                                                              os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", KILLED_BULK_ADD, str(path), repr(new), "750"], env=environment)
    assert done.returncode == -signal.SIGKILL
    assert not SEARCH_INDEXES & search_index_names(path)
    found = problems(path)
    assert len(found) == 1 and found[0].startswith("search indexes: missing: a bulk load that began"), found
    committed = dict(base + new[:600])  # killed reading batch 7: batch 6 was read, not yet written
    queries = [c ^ 0b101 for c in centres[:8]] + [c ^ (0xFFF << 30) for c in centres[:4]]
    with SimhashIndex(path, readonly=True) as index:  # a reader neither refuses the file nor writes it
        check_exact(index, committed, queries)
    assert not SEARCH_INDEXES & search_index_names(path)
    result = CliRunner().invoke(app, ["integrity", "--db", str(path)])
    assert result.exit_code == 1 and "the next command that writes (simq add) builds them" in result.output
    with SimhashIndex(path) as index:  # a writer builds them as it opens the file
        assert SEARCH_INDEXES <= search_index_names(path)
        check_exact(index, committed, queries)
    assert problems(path) == []


def test_a_bulk_add_that_fails_builds_the_indexes_it_dropped_and_keeps_its_committed_batches(tmp_path, monkeypatch):
    monkeypatch.setattr(writer_module, "BULK_AFTER", 300)
    rng = random.Random(9)
    items = clustered(1000, [rng.getrandbits(64) for _ in range(20)], rng, "doc")
    path = tmp_path / "failed.db"

    def feed():
        for i, document in enumerate(fingerprinted(items)):
            if i == 650:
                raise KeyboardInterrupt
            yield document

    with SimhashIndex(path, create=True) as index:
        with pytest.raises(KeyboardInterrupt):
            index.add(feed(), batch_size=100)
        assert SEARCH_INDEXES <= search_index_names(path)
        assert len(index) == 600  # six whole batches read before the interrupt (as with a smaller add)
        check_exact(index, dict(items[:600]), [fp ^ 0b11 for _, fp in items[:10]])
    assert problems(path) == []
