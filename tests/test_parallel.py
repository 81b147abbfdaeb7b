"""Fingerprinting in a process pool gives exactly the fingerprints of one process, in order."""

import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from simhash_sqlite import Document, SimhashIndex
from simhash_sqlite.core import pool as parallel
from simhash_sqlite.core.fingerprint import simhash
from simhash_sqlite.core.settings import FingerprintSettings
from simhash_sqlite.pipeline.dedup import Deduplicator
from simhash_sqlite.store.integrity import problems


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


def test_workers_follow_simq_workers_and_default_to_every_core(monkeypatch):
    # The most processes; how many of them work now is pool.ROOM's (tests/test_workers_follow.py).
    monkeypatch.setenv("SIMQ_WORKERS", "3")
    assert parallel.workers() == 3
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    for bad in ("0", "-2", "many", "", "2.5"):
        monkeypatch.setenv("SIMQ_WORKERS", bad)
        assert parallel.workers() == cores, bad
    # A job bounded by its own loop (dedup: sources.DEDUP_PROCESSES) takes at most `most` of the cores, and
    # SIMQ_WORKERS still decides where it is set.
    monkeypatch.delenv("SIMQ_WORKERS")
    assert parallel.workers(most=1) == 1 and parallel.workers(most=cores + 5) == cores
    assert parallel.workers(most=0) == 1
    monkeypatch.setenv("SIMQ_WORKERS", "3")
    assert parallel.workers(most=1) == 3


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
from simhash_sqlite import Document, SimhashIndex
from simhash_sqlite.core import pool as parallel
from simhash_sqlite.pipeline.dedup import Deduplicator
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


# -- JSONL parsed and fingerprinted in the workers (sources.Reader, jsonl_chunks, map_in_order) ------------


def _pid(item):
    time.sleep(0.01)  # long enough for the pool to hand items to its worker before this process takes them
    return os.getpid()


def test_map_in_order_keeps_order_and_shares_the_work_with_the_workers(monkeypatch):
    _started_pool(monkeypatch)
    monkeypatch.setattr(parallel, "POOL_AFTER_BYTES", 1)
    items = [bytes(1000)] * 40
    done = list(parallel.map_in_order(_pid, iter(items)))
    assert [item for item, _ in done] == items
    pids = {pid for _, pid in done}
    assert len(pids) == 2 and os.getpid() in pids  # the worker and this process both took items
    # local items never go to a worker
    assert {pid for _, pid in parallel.map_in_order(_pid, iter(items), local=lambda item: True)} == {os.getpid()}


def _mixed_jsonl(path, n=400, seed=7, size=(0, 300)):
    """Chinese and English records with near and exact copies, repeated ids, records without ids or with
    integer ids, empty and featureless texts, and bad lines of every kind, as bytes."""
    rng = random.Random(seed)
    han = "数据库索引指纹重复文本近似检测中文分词测试句子的是了在有和人这中大为上个国我以要他时来用们生到作地于出就分对"
    words = "near duplicate detection with simhash fingerprints and sketches in sqlite index search".split()
    texts, lines = [], []
    for i in range(n):
        roll = rng.random()
        if texts and roll < 0.25:  # a near copy of an earlier text
            base = list(rng.choice(texts))
            if base:
                base[rng.randrange(len(base))] = "改"
            text = "".join(base)
        elif roll < 0.55:
            text = "".join(rng.choice(han) for _ in range(rng.randint(*size)))
        elif roll < 0.95:
            text = " ".join(rng.choice(words) for _ in range(rng.randint(*size) // 6))
        else:
            text = rng.choice(["", "!!! ???", "   "])
        texts.append(text)
        record = {"id": f"d{i}", "text": text}
        if rng.random() < 0.05:
            record["id"] = f"d{rng.randrange(max(i, 1))}"  # a repeated id
        elif rng.random() < 0.05:
            del record["id"]  # keyed by file and line
        elif rng.random() < 0.03:
            record["id"] = i  # an integer id
        lines.append(json.dumps(record, ensure_ascii=rng.random() < 0.5).encode())
        if rng.random() < 0.04:
            lines.append(rng.choice([
                b"not json", b'{"id": "x"}', b'{"id": true, "text": "t"}', b"[1, 2]", b"",
                b'{"id": "s", "text": "lone \\ud800"}', b'{"text": "\\udfff and no id"}',
                '{"id": "latin", "text": "café"}'.encode("latin-1"), b"   ",
            ]))
    path.write_bytes(b"\n".join(lines) + b"\n")


def _reader_state(reader):
    return (reader.skipped, reader.skip_count, reader.duplicates, reader.duplicate_count,
            reader.keyed_by_line, reader.first_keyed_by_line, reader.failed)


def test_jsonl_read_in_the_workers_gives_what_one_process_reads(tmp_path, monkeypatch):
    from simhash_sqlite.pipeline import sources

    path = tmp_path / "mixed.jsonl"
    _mixed_jsonl(path)
    monkeypatch.setattr(sources, "CHUNK_BYTES", 16384)  # several chunks a file, cut inside lines
    s = FingerprintSettings()

    other, gone = tmp_path / "other.jsonl", tmp_path / "gone.jsonl"
    _mixed_jsonl(other, seed=8)
    gone.symlink_to(tmp_path / "nowhere")  # a JSONL file that cannot be opened, between two that can
    inputs = [str(path), str(gone), str(other)]

    def read(store_text=False, **options):
        reader = sources.Reader(**options)
        documents = list(reader.documents(reader.expand(inputs), s, store_text))
        return documents, _reader_state(reader)

    for options in ({"require_id": True}, {}):  # the last: records without ids keyed by line
        for store_text in (False, True):
            monkeypatch.setenv("SIMQ_WORKERS", "1")
            serial = read(store_text, **options)
            _started_pool(monkeypatch)
            monkeypatch.setattr(parallel, "POOL_AFTER_BYTES", 1)
            assert read(store_text, **options) == serial
    documents, (skipped, skips, duplicates, repeats, by_line, first, failed) = serial
    assert skips > 5 and repeats > 5 and by_line > 5 and failed  # every case was met
    assert [skip.where for skip in skipped if not skip.where.startswith((f"{path}:", f"{other}:"))] == [str(gone)]
    assert skipped[-1].where.startswith(f"{other}:")  # in input order
    # the same records as the reading without settings (Documents, no workers)
    reader = sources.Reader()
    plain = list(reader.documents(reader.expand(inputs)))
    assert [(d.key, d.text) for d in plain] == [(d.key, d.text) for d in read(True)[0]]
    assert [(d.key, simhash(d.text, s), len(d.text)) for d in plain] == [
        (d.key, d.fingerprint, d.length) for d in read()[0]]


def _big_mixed_jsonl(path):
    """Large enough that a pool starts in the CLI as users run it (chunks past POOL_AFTER_BYTES)."""
    from simhash_sqlite.pipeline import sources

    _mixed_jsonl(path, n=4000, seed=11, size=(100, 900))
    assert path.stat().st_size > parallel.POOL_AFTER_BYTES + 2 * sources.CHUNK_BYTES


def _index_rows(db):
    with SimhashIndex(db) as index:
        return index.conn.execute(
            "SELECT id, key, fingerprint, b0, b1, b2, b3, length, content_hash, text, sketch FROM documents ORDER BY id"
        ).fetchall()


def _simq(args, workers, cwd, stdin=None):
    env = dict(os.environ, SIMQ_WORKERS=str(workers))
    return subprocess.run([sys.executable, "-m", "simhash_sqlite", *args], env=env, cwd=cwd, capture_output=True,
                          timeout=300, stdin=stdin)


def test_simq_add_and_dedup_on_two_processes_write_what_one_writes(tmp_path):
    path = tmp_path / "big.jsonl"
    _big_mixed_jsonl(path)
    results = {}
    for workers in (1, 2):
        here = tmp_path / f"run{workers}"  # the same names in every message: ../big.jsonl, i.db
        here.mkdir()
        add = _simq(["add", "--db", "i.db", "--store-text", "../big.jsonl"], workers, here)
        with open(path, "rb") as stdin:
            piped = _simq(["add", "--db", "stdin.db", "-"], workers, here, stdin)
        dedup = _simq(["dedup", "../big.jsonl", "-o", "kept.jsonl", "--dupes", "dupes.jsonl"], workers, here)
        assert add.returncode == piped.returncode == dedup.returncode == 1  # bad lines: reported, exit 1
        assert b"Traceback" not in add.stderr + piped.stderr + dedup.stderr
        results[workers] = (
            _index_rows(here / "i.db"), add.stdout, add.stderr, _index_rows(here / "stdin.db"), piped.stderr,
            (here / "kept.jsonl").read_bytes(), (here / "dupes.jsonl").read_bytes(), dedup.stderr.split(b"; ")[0],
        )
    assert results[1] == results[2]
    rows, stdout, stderr = results[1][:3]
    assert len(rows) > 3000 and b"repeated ids" in stdout and b"not JSON" in stderr
    assert results[1][6].count(b"\n") > 400  # dedup dropped near copies


def _children(pid):
    """Live processes whose parent is pid (Linux /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            stat = open(f"/proc/{entry}/stat").read()
        except (OSError, ValueError):
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if entry.isdigit() and fields[0] != "Z" and int(fields[1]) == pid:
            found.append(int(entry))
    return found


def _alive(pid):
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_an_add_killed_while_its_workers_run_leaves_no_workers_and_resumes_to_the_same_index(tmp_path):
    path = tmp_path / "big.jsonl"
    _big_mixed_jsonl(path)
    # The numpy reference reads JSONL on worker processes (the C path reads it on threads of this process).
    env = dict(os.environ, SIMQ_WORKERS="2", SIMHASH_SQLITE_CORE="python")
    command = [sys.executable, "-m", "simhash_sqlite", "add", "--db", "i.db", "--batch-size", "50",
               "--progress-json", "big.jsonl"]
    log = tmp_path / "stderr.log"
    with log.open("w") as handle:
        process = subprocess.Popen(command, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=handle)
        deadline, workers = time.monotonic() + 120, []
        while process.poll() is None and time.monotonic() < deadline and not workers:
            workers = _children(process.pid)  # the pool's worker (spawned once 2 MiB are read)
            time.sleep(0.01)
        time.sleep(0.3)
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert "Traceback" not in log.read_text()
    assert workers, "the pool never started"
    deadline = time.monotonic() + 30
    while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(pid) for pid in workers)  # ended with their parent (PR_SET_PDEATHSIG)
    assert problems(tmp_path / "i.db") == []
    finished = _simq(["add", "--db", "i.db", "big.jsonl"], 2, tmp_path)
    assert finished.returncode == 1 and b"Traceback" not in finished.stderr
    serial = _simq(["add", "--db", "serial.db", "big.jsonl"], 1, tmp_path)
    assert serial.returncode == 1

    def content(db):
        return sorted(row[1:] for row in _index_rows(tmp_path / db))

    assert content("i.db") == content("serial.db")


@pytest.mark.parametrize("given", [None, "3"])
def test_simq_imports_no_numpy_before_it_gives_openblas_one_thread(given):
    """simq's entry point (simhash_sqlite.__main__) sets OPENBLAS_NUM_THREADS=1 before numpy is imported
    (OpenBLAS's thread per core cost each process, pool workers too, half of numpy's import), unless the
    user set it; importing the package and its entry point imports no numpy, nor the CLI."""
    script = (
        "import atexit, os, sys\n"
        "import simhash_sqlite.__main__ as entry\n"
        "assert 'numpy' not in sys.modules and 'simhash_sqlite.cli.app' not in sys.modules, sorted(sys.modules)\n"
        "atexit.register(lambda: print('threads', os.environ.get('OPENBLAS_NUM_THREADS')))\n"
        "sys.argv = ['simq', '--version']\n"
        "entry.main()\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if given is not None:
        env["OPENBLAS_NUM_THREADS"] = given
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == f"threads {given or 1}"


def test_dedup_reads_on_at_most_dedup_processes_and_add_on_every_core(tmp_path, monkeypatch):
    """dedup's own loop bounds its speed, so its chunks go to at most sources.DEDUP_PROCESSES processes
    (pool.workers(most)); add's to every core."""
    from simhash_sqlite.pipeline import sources

    path = tmp_path / "mixed.jsonl"
    _mixed_jsonl(path)
    asked = []

    def spy(function, items, **options):
        asked.append((options.get("threads", False), options.get("most")))
        return parallel.map_in_order(function, items, **options)

    monkeypatch.setattr(sources, "map_in_order", spy)
    reader = sources.Reader()
    added = list(reader.documents(reader.expand([str(path)]), FingerprintSettings()))
    reader = sources.Reader()  # (a reader skips an id it met before)
    deduped = list(reader.entries(reader.expand([str(path)]), FingerprintSettings()))
    if asked[0][0]:  # the C core reads the chunks on threads
        assert asked == [(True, None), (True, sources.DEDUP_PROCESSES)]
    else:  # the Python path: processes, as many as the input's size pays for (at most DEDUP_PROCESSES in dedup)
        most = sources.processes_for(path.stat().st_size)
        assert asked == [(False, most), (False, min(most, sources.DEDUP_PROCESSES))]
    assert len(added) == len(deduped) > 0
