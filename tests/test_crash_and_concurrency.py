"""Crashes and concurrent use: SIGKILLed adds, several writer processes with readers, thread pools.

Short versions of bench/crash_kills.py (100 kills) and bench/concurrency.py (4 + 4 for a minute).
"""

import json
import random
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import apsw
import pytest

from simhash_sqlite import Document, IndexNotFound, SimhashIndex
from simhash_sqlite.store.database import open_readonly
from simhash_sqlite.store.integrity import problems
from simhash_sqlite.store.texts import content_hash


def corpus(count, seed=0):
    rng = random.Random(seed)
    vocabulary = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(2, 9))) for _ in range(2000)]
    return [(f"doc{i}", " ".join(rng.choices(vocabulary, k=40))) for i in range(count)]


def write_jsonl(path, records):
    with path.open("w", encoding="utf-8") as handle:
        for key, text in records:
            handle.write(json.dumps({"id": key, "text": text}) + "\n")


def stored(db):
    # (as simq reads: a writer killed inside its first, rollback-journal transaction leaves a hot -journal, which
    # this connection rolls back; a plain read-only one cannot, and failed with ReadOnlyError)
    conn = open_readonly(str(db))
    try:
        return dict(conn.execute("SELECT key, content_hash FROM documents"))
    except apsw.SQLError:
        return {}  # killed before the schema was committed
    finally:
        conn.close()


def test_sigkill_at_random_moments_never_loses_a_committed_batch(tmp_path):
    records = corpus(2000)
    hashes = {key: content_hash(text) for key, text in records}
    data, db = tmp_path / "data.jsonl", tmp_path / "index.db"
    write_jsonl(data, records)
    command = [sys.executable, "-m", "simhash_sqlite", "add", "--db", str(db), "--batch-size", "100",
               "--progress-json", str(data)]
    rng = random.Random(1)
    committed = kills = kills_after_a_commit = 0
    while kills < 10:
        log = tmp_path / "stderr.log"
        with log.open("w") as handle:
            process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=handle)
            # Kill after a random number of fresh commits (0: during start-up or index creation),
            # plus a random moment inside the next batch; counting commits, not seconds, keeps the
            # kills in the middle of adds however loaded the machine is.
            target, deadline = rng.randint(0, 4), time.monotonic() + 60
            while process.poll() is None and time.monotonic() < deadline:
                if log.read_text().count("committed_batches") >= target:
                    break
                time.sleep(0.01)
            time.sleep(rng.uniform(0, 0.3))
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
            process.wait()
        lines = [line for line in log.read_text().splitlines() if line.startswith("{") and line.endswith("}")]
        if lines:
            committed = max(committed, json.loads(lines[-1])["documents"])
        assert "Traceback" not in log.read_text()
        if db.exists():
            assert problems(db) == []
        have = stored(db) if db.exists() else {}
        # Every document of every batch reported committed is there, with its content.
        assert all(have.get(key) == hashes[key] for key, _ in records[:committed])
        assert set(have) <= set(hashes)
        if process.returncode == 0:  # finished before the kill: start again from nothing
            assert len(have) == len(records)
            for suffix in ("", "-wal", "-shm"):
                tmp_path.joinpath(f"index.db{suffix}").unlink(missing_ok=True)
            committed = 0
        else:
            kills += 1
            kills_after_a_commit += committed > 0
    assert kills_after_a_commit >= 3  # the kills did land in the middle of adds, not only at start-up
    finish = subprocess.run(command, capture_output=True, text=True)
    assert finish.returncode == 0, finish.stderr
    assert stored(db) == hashes and problems(db) == []


def test_the_integrity_check_accepts_a_file_killed_before_its_schema_and_nothing_foreign(tmp_path):
    empty = tmp_path / "empty.db"
    conn = apsw.Connection(str(empty))
    conn.pragma("journal_mode", "wal")  # what a kill between opening and migrating leaves
    conn.close()
    assert problems(empty) == []
    with pytest.raises(IndexNotFound, match="never finished"):  # a reader must not choose its settings
        SimhashIndex(empty)
    with SimhashIndex(empty, create=True, ngram=3) as index:  # the next add does
        assert index.settings.ngram == 3
    foreign = tmp_path / "foreign.db"
    conn = apsw.Connection(str(foreign))
    conn.execute("CREATE TABLE documents (key)")
    conn.close()
    assert problems(foreign) == [f"simhash-sqlite file: {foreign} is a SQLite database but not a simhash-sqlite index"]
    with SimhashIndex(tmp_path / "ok.db", create=True) as index:
        index.add([Document("a", "some text here")])
        index.conn.execute("UPDATE documents SET b2 = b2 + 1")
    assert problems(tmp_path / "ok.db") == [
        "blocks match fingerprints: 1 document(s) whose blocks do not match their fingerprint: a"
    ]


def test_writer_processes_and_readers_at_once(tmp_path):
    """Two `simq add` processes on overlapping inputs, two reader processes: no error, exact keys."""
    db = tmp_path / "index.db"
    files, expected = [], set()
    for writer in range(2):
        own = corpus(600, seed=writer + 10)
        own = [(f"w{writer}-{key}", text) for key, text in own]
        path = tmp_path / f"w{writer}.jsonl"
        write_jsonl(path, own)
        files.append(path)
        expected |= {key for key, _ in own}
    shared = tmp_path / "shared.jsonl"
    write_jsonl(shared, corpus(300, seed=99))
    expected |= {key for key, _ in corpus(300, seed=99)}
    SimhashIndex(db, create=True).close()
    reader_code = (
        "import sys, time, random\n"
        "from simhash_sqlite import SimhashIndex\n"
        "rng, last, until = random.Random(), 0, time.monotonic() + float(sys.argv[2])\n"
        "while time.monotonic() < until:\n"
        "    with SimhashIndex(sys.argv[1]) as index:\n"
        "        for _ in range(20):\n"
        "            index.near(fingerprint=rng.getrandbits(64), k=3, check=False)\n"
        "            n = len(index)\n"
        "            assert n >= last, (n, last)\n"
        "            last = n\n"
        "print(last)\n"
    )
    writers = [
        subprocess.Popen([sys.executable, "-m", "simhash_sqlite", "add", "--db", str(db), "--batch-size", "50",
                          str(path), str(shared)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for path in files
    ]
    readers = [
        subprocess.Popen([sys.executable, "-c", reader_code, str(db), "4"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    for process in writers + readers:
        stdout, stderr = process.communicate(timeout=120)
        assert process.returncode == 0, stderr
        assert "locked" not in stderr and "Traceback" not in stderr
    conn = apsw.Connection(str(db))
    keys = [key for (key,) in conn.execute("SELECT key FROM documents")]
    conn.close()
    assert len(keys) == len(set(keys)) and set(keys) == expected
    assert problems(db) == []


# A worker of the test below: opens a new file each round once the test says go, and says how it went.
_OPENER = (
    "import os, sys\n"
    "from simhash_sqlite.store.database import connect\n"
    "folder, rounds = sys.argv[1], int(sys.argv[2])\n"
    "connect(os.path.join(folder, f'warm-{os.getpid()}.db'), create=True).close()  # the first open reads more\n"
    "for round_ in range(rounds):\n"
    "    print('ready', flush=True)\n"
    "    sys.stdin.buffer.read(1)\n"
    "    try:\n"
    "        connect(os.path.join(folder, f'{round_}.db'), create=True).close()\n"
    "        print('ok', flush=True)\n"
    "    except Exception as exc:\n"
    "        print(f'{type(exc).__name__}: {exc}', flush=True)\n"
)


def test_processes_opening_a_new_file_at_the_same_moment_all_open_it(tmp_path):
    """Four processes open the same new file at once, 100 times (each a new file): every open succeeds and
    the file is a migrated WAL index. One of them used to fail now and then with "database is locked"
    when turning the file into WAL while another held the write lock (two adds starting together)."""
    from simhash_sqlite.store.database import APPLICATION_ID, schema_version

    rounds = 100
    openers = [
        subprocess.Popen([sys.executable, "-c", _OPENER, str(tmp_path), str(rounds)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(4)
    ]
    outcomes = []
    try:
        for _ in range(rounds):
            for opener in openers:  # all are waiting for the go
                assert opener.stdout.readline() == b"ready\n", opener.stderr.read().decode()
            for opener in openers:
                opener.stdin.write(b"g")
                opener.stdin.flush()
            outcomes += [opener.stdout.readline().decode().strip() for opener in openers]
    finally:
        for opener in openers:
            opener.stdin.close()
            opener.wait(timeout=60)
    assert [opener.returncode for opener in openers] == [0] * 4
    failed = [outcome for outcome in outcomes if outcome != "ok"]
    assert not failed, f"{len(failed)} of {len(outcomes)} opens failed: {sorted(set(failed))}"
    for round_ in range(rounds):
        conn = apsw.Connection(str(tmp_path / f"{round_}.db"))
        assert conn.pragma("journal_mode") == "wal"
        assert (conn.pragma("application_id"), conn.pragma("user_version")) == (APPLICATION_ID, schema_version())
        conn.close()


def test_a_thread_pool_with_one_index_per_thread(db_path):
    """The documented rule: a SimhashIndex (one connection) per thread, never shared."""
    SimhashIndex(db_path, create=True).close()
    local = threading.local()
    opened = []

    def index():
        if not hasattr(local, "index"):
            local.index = SimhashIndex(db_path)
            opened.append(local.index)
        return local.index

    def work(job):
        if job % 2 == 0:
            index().add([Document(f"t{job}-{i}", f"thread job {job} document {i} " * 5) for i in range(50)],
                        batch_size=10)
            return 50
        index().near(fingerprint=job * 7919, k=6, check=False)
        return 0

    with ThreadPoolExecutor(max_workers=4) as pool:
        added = sum(pool.map(work, range(40)))
    for each in opened:
        each.close()
    with SimhashIndex(db_path) as check:
        assert len(check) == added == 20 * 50
    assert problems(db_path) == []


def test_a_writer_waits_for_a_long_transaction_instead_of_failing(db_path):
    """Another connection holds the write lock for longer than SQLite's busy timeout would allow."""
    from simhash_sqlite.store import database as storage

    SimhashIndex(db_path, create=True).close()
    blocker = apsw.Connection(str(db_path))
    blocker.execute("BEGIN IMMEDIATE")
    released = threading.Timer(1.5, lambda: blocker.execute("COMMIT"))
    with SimhashIndex(db_path) as index:
        index.conn.set_busy_timeout(200)  # so the retry loop, not the busy handler, does the waiting
        released.start()
        started = time.monotonic()
        with storage.write_transaction(index.conn, wait=30):
            index.conn.execute("INSERT INTO simhash_meta VALUES ('probe', '1')")
        assert time.monotonic() - started >= 1.0
    released.join()
    blocker.close()
