"""The number of workers follows the machine while a run goes (core/pool.py: Room, spare_workers), and
whatever is decided, and whenever, the results are those of one process, in order."""

import os
import subprocess
import sys
import time

import pytest
from test_parallel import _index_rows, _mixed_jsonl, _pid, _texts
from typer.testing import CliRunner

from simhash_sqlite import Document, SimhashIndex
from simhash_sqlite.cli.app import app
from simhash_sqlite.core import pool as parallel
from simhash_sqlite.core.pool import CpuSample, spare_workers

PID = os.getpid()


def _sample(total, idle, ours, cpus=2):
    return CpuSample(total, idle, cpus, ours)


def test_spare_workers_counts_what_is_idle_and_what_we_used():
    # 2 CPUs, 100 ticks each between the samples.
    start = _sample(1000, 500, {PID: 300})
    # one process, the other CPU idle: room for a worker
    assert spare_workers(start, _sample(1200, 600, {PID: 400}), 2) == 1
    # one process, another job on the other CPU: none
    assert spare_workers(start, _sample(1200, 500, {PID: 400}), 2) == 0
    # a pool on and nothing else running: nothing is idle, but all of it is ours: it stays on
    worker = 4242
    on = _sample(1000, 500, {PID: 300, worker: 50})
    assert spare_workers(on, _sample(1200, 505, {PID: 395, worker: 150}), 2) == 1
    # a pool on and another job started: three share two CPUs, ours get 1.33 of them: it gives way
    assert spare_workers(on, _sample(1200, 500, {PID: 367, worker: 117}), 2) == 0
    # a worker started between the samples counts from nothing; one gone is not counted
    assert spare_workers(start, _sample(1200, 500, {PID: 400, worker: 90}), 2) == 1
    assert spare_workers(on, _sample(1200, 500, {PID: 400}), 2) == 0
    # half a CPU free is enough for a worker; less is not
    assert spare_workers(start, _sample(1200, 550, {PID: 400}), 2) == 1
    assert spare_workers(start, _sample(1200, 540, {PID: 400}), 2) == 0
    # never more than cores - 1 workers, never fewer than none; an empty window decides none
    many = _sample(16000, 8000, {PID: 100}, cpus=16)
    assert spare_workers(many, _sample(17600, 9500, {PID: 200}, cpus=16), 16) == 15
    assert spare_workers(many, _sample(17600, 9500, {PID: 200}, cpus=16), 4) == 3
    assert spare_workers(many, _sample(17600, 8600, {PID: 200}, cpus=16), 16) == 6  # 6 idle + ours 1, less ours 1
    assert spare_workers(start, start, 2) == 0
    assert spare_workers(start, _sample(1200, 600, {PID: 400}), 1) == 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_samples_of_this_machine():
    before = parallel.read_sample()
    assert before is not None and before.cpus >= 1 and set(before.ours) == {PID}
    spent = time.process_time() + 0.3
    while time.process_time() < spent:  # 0.3 s of this process's CPU
        pass
    after = parallel.read_sample()
    assert after is not None
    ticks = os.sysconf("SC_CLK_TCK")
    assert after.ours[PID] - before.ours[PID] >= 0.2 * ticks
    assert after.total - before.total >= 0.3 * ticks and 0 <= after.idle - before.idle <= after.total - before.total
    cores = parallel.workers()
    assert 0 <= spare_workers(before, after, cores) <= cores - 1
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    assert set(parallel.read_sample([int(gone.stdout)]).ours) == {PID}  # a process gone is left out


class Machine:
    """CpuSamples of a made-up machine: each read moves 100 ticks a CPU; this process uses one CPU,
    other jobs `others` CPUs, and the rest is idle. flip: other jobs take every CPU at one read and
    none at the next, and so on."""

    def __init__(self, cores, others=0.0, flip=False):
        self.cores, self.others, self.flip = cores, others, flip
        self.total = self.idle = self.ours = self.reads = 0

    def read(self, pids=()):
        self.reads += 1
        self.total += 100 * self.cores
        self.ours += 100
        if self.flip:
            self.others = self.cores - 1 if self.others == 0 else 0
        self.idle += round(100 * max(0, self.cores - 1 - self.others))
        return CpuSample(self.total, self.idle, self.cores, {PID: self.ours})


def _decided_by(monkeypatch, machine):
    """pool.ROOM reads the made-up machine, and decides again at every call."""
    monkeypatch.delenv("SIMQ_WORKERS", raising=False)
    # raising=False: under the rule of the load average, which had no Room, the test runs and fails
    monkeypatch.setattr(parallel, "ROOM", parallel.Room(machine.read), raising=False)
    monkeypatch.setattr(parallel, "DECIDE_EVERY", 0, raising=False)
    monkeypatch.setattr(parallel, "FIRST_WINDOW", 0, raising=False)


def _ready_pool(size):
    if size < 2:
        pytest.skip("one core: no pool")
    parallel._pool(size - 1)[1].result(timeout=120)


def test_map_in_order_takes_a_worker_when_another_job_ends_and_gives_it_back_when_one_starts(monkeypatch):
    # The old rule decided once at the start from the load average: all in one process when it was
    # above cores - 1 (the first half below fails), else the pool for the whole run (the second fails).
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    _ready_pool(cores)
    monkeypatch.setattr(parallel, "POOL_AFTER_BYTES", 1)
    items = [bytes(1000)] * 60
    ahead = parallel.QUEUED_PER_WORKER * (cores - 1) + 2  # what may be handed out before a decision

    machine = Machine(cores, others=cores - 1)  # busy at the start
    _decided_by(monkeypatch, machine)
    pids = []
    for item, pid in parallel.map_in_order(_pid, iter(items)):
        pids.append(pid)
        if len(pids) == 20:
            machine.others = 0  # the other job ends
    assert set(pids[:20]) == {PID}  # busy: all of it here, no pool started for it
    assert set(pids[20:]) - {PID}  # then the workers take items too

    machine = Machine(cores, others=0)  # free at the start
    _decided_by(monkeypatch, machine)
    pids = []
    for item, pid in parallel.map_in_order(_pid, iter(items)):
        pids.append(pid)
        if len(pids) == 20:
            machine.others = cores - 1  # another job starts
    assert set(pids[:20]) - {PID}
    assert set(pids[20 + ahead :]) == {PID}  # what was handed out finishes; nothing more goes out


def test_a_pool_is_not_started_while_no_cpu_is_free(tmp_path):
    # A fresh process (no pool from other tests): a long map on a machine whose CPUs are all taken.
    script = """
import os
from simhash_sqlite.core import pool as parallel
from simhash_sqlite.core.pool import CpuSample
parallel.POOL_AFTER_BYTES, parallel.DECIDE_EVERY, parallel.FIRST_WINDOW = 1, 0, 0
ticks = [0]
def busy(pids=()):
    ticks[0] += 100
    return CpuSample(2 * ticks[0], 0, 2, {os.getpid(): ticks[0]})
parallel.ROOM = parallel.Room(busy)
assert [r for _, r in parallel.map_in_order(len, iter([bytes(1000)] * 30))] == [1000] * 30
print(parallel._pool.cache_info().currsize)
"""
    env = {k: v for k, v in os.environ.items() if k != "SIMQ_WORKERS"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0"]


def test_an_add_gives_the_same_index_with_the_pool_on_off_some_and_switched_mid_run(tmp_path, monkeypatch):
    from simhash_sqlite.pipeline import sources

    path = tmp_path / "mixed.jsonl"
    _mixed_jsonl(path, n=1500, seed=21, size=(50, 600))
    monkeypatch.setattr(sources, "CHUNK_BYTES", 16384)  # many chunks, so a switch falls inside the run
    monkeypatch.setattr(parallel, "POOL_AFTER_BYTES", 1)
    monkeypatch.setattr(parallel, "PARALLEL_MIN_CHARS", 1)
    documents = [Document(f"t{i}", text) for i, text in enumerate(_texts(600, seed=22))]
    runner = CliRunner()

    def add(name):
        db = tmp_path / f"{name}.db"
        result = runner.invoke(app, ["add", "--db", str(db), str(path)])
        assert result.exit_code == 1 and "Traceback" not in result.output  # its bad lines: reported, exit 1
        with SimhashIndex(db) as index:  # text documents: FingerprintJob, decided again for each batch
            index.add(documents, batch_size=50)
        return _index_rows(db)

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    monkeypatch.setenv("SIMQ_WORKERS", "1")
    off = add("off")
    _ready_pool(cores)
    _decided_by(monkeypatch, Machine(cores, others=0))
    assert add("on") == off
    switched = Machine(cores, flip=True)
    _decided_by(monkeypatch, switched)
    assert add("switched") == off
    assert switched.reads > 20  # decided again and again, on and off
    # Fewer workers than the pool has (one of three): one chunk each and one here, the same rows.
    monkeypatch.setattr(parallel, "workers", lambda most=None: 4)
    _ready_pool(4)
    some = Machine(4, others=2)
    _decided_by(monkeypatch, some)
    assert parallel.ROOM.spare(4) == 1
    assert add("some") == off
    assert len(off) > 1500


def test_without_proc_stat_the_load_average_decides_once(monkeypatch):
    # Elsewhere (no /proc/stat) the old rule: no workers at a load above cores - 1, decided once, since
    # the load average would soon count our own workers.
    monkeypatch.delenv("SIMQ_WORKERS", raising=False)
    monkeypatch.setattr(parallel, "DECIDE_EVERY", 0)
    monkeypatch.setattr(parallel, "FIRST_WINDOW", 0)
    for load, first in ((5.0, 0), (0.2, 3)):
        room = parallel.Room(lambda pids: None)
        monkeypatch.setattr(os, "getloadavg", lambda load=load: (load, load, load))
        assert room.spare(4) == first
        monkeypatch.setattr(os, "getloadavg", lambda: (0.2 if first == 0 else 5.0,) * 3)
        assert room.spare(4) == first
    monkeypatch.setenv("SIMQ_WORKERS", "3")
    assert parallel.Room(lambda pids: None).spare(3) == 2  # SIMQ_WORKERS fixes it
