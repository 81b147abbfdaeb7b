"""Fingerprints of many texts on every core: threads or processes for large adds, as many as are free.

Fingerprints are pure functions of (text, settings), so workers give exactly what one process
gives. Small batches stay in the calling process, where starting workers would cost more than it
saves. SIMQ_WORKERS sets the number of workers (threads or processes), the caller included (1: never use a
pool).

Without it, the number of workers follows the machine while a long run goes (Room): every
DECIDE_EVERY seconds, two samples of /proc/stat say how many CPUs were idle in between, plus those
this process and its workers used (they would be idle without us); that, less the CPU this process
needs, is how many workers get work. A run that starts while another job is busy stays in one process
and takes workers when the job ends; a pool that is on gives way when another job starts. It used to be
decided once from the 1-minute load average (a rule kept where there is no /proc/stat): a 10M-page
add started at a load above 1 ran in one process for all of its 18 minutes, and on 2 cores our own
busy process alone holds the load near 1, so nothing could turn a pool on mid-run.

Threads where the C core reads the chunks, processes elsewhere. Where the core's document path is built
(native/documents.c), a chunk of JSONL becomes finished rows in one C call that releases the GIL for all but a
few percent of it, so threads read chunks in parallel with nothing to start and nothing to copy:
pipeline/sources.py passes threads=True to map_in_order (one process, the critical path the main thread's
parsing of results and SQLite writes). Before that path, the C call was a third of a chunk's CPU and the
rest held the GIL: threads could not bring the wall below about 0.68 of one process's, so processes were
used, at a cost: each spawned worker imports numpy and the package (~0.35 CPU-s), and every chunk's rows
come back pickled (issue 40 measured 2.2-2.3x one process's CPU at 16 workers). bench/add_scaling.py on
80k-page crawls (113 and 213 MB, 2 cores): two threads took 0.97-1.02x one process's CPU, for an idle-core
bound of 2.04x (docs/native.md, "Threads or processes"). The process
pool stays for the numpy reference (no C core, another encoding, words features), sized by the input
(sources.processes_for: a worker per 128 MB), and for FingerprintJob's text files.
"""

from __future__ import annotations

import atexit
import ctypes
import functools
import gc
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from .fingerprint import simhash_and_sketch_many, simhash_many
from .settings import FingerprintSettings
from .sketch import SketchScheme

# Below this many characters in a batch the pool's overhead (pickling, waking workers) outweighs it.
PARALLEL_MIN_CHARS = 500_000


def workers(most: int | None = None) -> int:
    """The most processes, the caller included: SIMQ_WORKERS if set, else every core, at most `most` (a
    job whose own loop in the calling process bounds its speed: more workers would wait, each started for
    nothing); Room.spare says how many of them work now."""
    fixed = _fixed_workers()
    if fixed is not None:
        return fixed
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return cores if most is None else max(1, min(cores, most))


def _fixed_workers() -> int | None:
    value = os.environ.get("SIMQ_WORKERS", "")
    return int(value) if value.strip().isdigit() and int(value) >= 1 else None


@dataclass(frozen=True)
class CpuSample:
    """What /proc/stat and /proc/PID/stat say at one moment, in clock ticks."""

    total: int  # every CPU's ticks, idle or not
    idle: int  # ticks idle or waiting for I/O
    cpus: int  # CPUs counted in total
    ours: Mapping[int, int]  # pid -> CPU ticks used so far, for this process and its workers


def spare_workers(before: CpuSample, after: CpuSample, cores: int) -> int:
    """How many workers (0 to cores - 1) there is room for, from two samples: the CPUs idle between
    them, plus the CPUs we used (this process and its workers: idle without us), at most cores, less
    the one this process needs; a worker counts from half a CPU free. Our own share is added back
    because a pool that is on fills the idle time itself: idle alone would turn it off at once.
    Everything else is busy, niced processes too: with autogroup scheduling (the default of many Linux
    systems) a nice value counts only within its session (here a nice 19 job kept 0.6-0.95 of a CPU
    beside a nice 0 add)."""
    ticks_per_cpu = (after.total - before.total) / max(after.cpus, 1)
    if ticks_per_cpu <= 0:
        return 0
    ours = sum(ticks - before.ours.get(pid, 0) for pid, ticks in after.ours.items())
    free = min((after.idle - before.idle + ours) / ticks_per_cpu, cores)
    return max(0, min(cores - 1, int(free - 1 + 0.5)))


def read_sample(pids: Iterable[int] = ()) -> CpuSample | None:
    """This moment's CpuSample, for this process and the worker pids; None where there is no /proc
    (not Linux)."""
    try:
        with open("/proc/stat", "rb") as stat:
            lines = stat.read().split(b"\n")
        fields = [int(x) for x in lines[0].split()[1:9]]  # user nice system idle iowait irq softirq steal
        ours = {pid: _process_ticks(pid) for pid in (os.getpid(), *pids)}
    except (OSError, ValueError, IndexError):
        return None
    cpus = sum(1 for line in lines[1:] if line.startswith(b"cpu"))
    return CpuSample(sum(fields), fields[3] + fields[4], cpus, {p: t for p, t in ours.items() if t >= 0})


def _process_ticks(pid: int) -> int:
    """utime + stime of a process (all its threads), in clock ticks; -1 if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()  # after the command name, which may hold spaces
    except OSError:
        return -1
    return int(fields[11]) + int(fields[12])


DECIDE_EVERY = 2.0  # seconds between decisions: long enough for a fair sample, short against a long run
FIRST_WINDOW = 0.1  # the first decision needs a window this long (10 ticks a CPU); serial until then


class Room:
    """How many workers get work now, re-decided every DECIDE_EVERY seconds (spare_workers of this
    decision's sample and the last one's; the first window begins at import). Shared by everything in
    the process that uses the pool."""

    def __init__(self, read: Callable[[Iterable[int]], CpuSample | None] = read_sample) -> None:
        self.read = read
        self.lock = threading.Lock()
        self.last = read(())
        self.at = time.monotonic()
        self.decided: int | None = None

    def spare(self, size: int) -> int:
        """Workers to give work to now, of at most size - 1 (size: workers())."""
        if size < 2 or _fixed_workers() is not None:
            return size - 1
        now = time.monotonic()
        with self.lock:
            due = DECIDE_EVERY if self.decided is not None else FIRST_WINDOW
            if now - self.at >= due:
                sample = self.read(_worker_pids())
                if sample is None or self.last is None:
                    # No /proc: the old rule, once (the load average would soon count our own workers).
                    if self.decided is None:
                        busy = hasattr(os, "getloadavg") and os.getloadavg()[0] > size - 1
                        self.decided = 0 if busy else size - 1
                else:
                    self.decided = spare_workers(self.last, sample, size)
                self.last, self.at = sample, now
            return min(self.decided or 0, size - 1)


ROOM = Room()


def _worker_pids() -> list[int]:
    if _pool.cache_info().currsize == 0:
        return []
    return [pid for executor in _started for pid in getattr(executor, "_processes", None) or {}]


_started: list[Executor] = []


def keep_freed_memory() -> None:
    """Let glibc keep freed memory for reuse (Linux): chunks of lines and their arrays come and go,
    and with the default thresholds each was given back to the system and faulted in again (twice
    the page faults of reading line by line, 3-5% more CPU). Up to 32 MiB blocks come from the heap,
    and up to 128 MiB free at its top stays. Process-wide: called where chunks are read and computed."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None)
            libc.mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD
            libc.mallopt(-1, 128 << 20)  # M_TRIM_THRESHOLD
        except (OSError, AttributeError):
            pass


# Young objects collected once this many have been made, not 700 (gc's default): the records of a chunk
# come and go by the hundred thousand, and few are ever in a cycle.
COLLECT_AFTER = 50_000


def calm_collector() -> None:
    """For a process that runs one long job (simq, a pool worker), once its imports are made: their objects
    live to the end, so they are frozen (the collector no longer walks them at each full collection), and
    young objects are collected less often. An add of a crawl: 3-4% less CPU."""
    gc.freeze()
    gc.set_threshold(COLLECT_AFTER, 20, 100)


def _start_worker(parent: int) -> None:
    keep_freed_memory()
    # Ctrl-C reaches the whole process group: the parent handles it (committed batches stay) and
    # shuts the pool down; a worker must not print a traceback of its own.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        # A parent killed with SIGKILL cannot shut the pool down, and a worker holds both ends of its
        # queue, so it would wait for work forever: on Linux the kernel ends it with its parent.
        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the parent died while this worker started
        os._exit(0)
    calm_collector()


@lru_cache(maxsize=None)
def _pool(size: int, threads: bool = False) -> tuple[Executor, Future]:
    """The pool, and a future that is done once a worker is ready (imports made, tables built).
    threads: a thread pool instead (bench/threads_vs_pool.py compares them)."""
    # (imported here: multiprocessing and the executors are a tenth of a search's start-up, which never
    # starts a pool; bench/startup.py)
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

    pool: Executor
    if threads:
        pool = ThreadPoolExecutor(size)
    else:
        # spawn, not fork: the parent may hold open SQLite connections and threads.
        pool = ProcessPoolExecutor(
            size, mp_context=multiprocessing.get_context("spawn"), initializer=_start_worker, initargs=(os.getpid(),)
        )
    _started.append(pool)
    atexit.register(pool.shutdown, cancel_futures=True)
    return pool, pool.submit(_warm_up)


def _warm_up() -> None:
    simhash_many(["warm up"], FingerprintSettings())


def _fingerprint_chunk(texts: list[str], settings: FingerprintSettings) -> list[int | None]:
    return simhash_many(texts, settings)


def _fingerprint_and_sketch_chunk(
    texts: list[str], settings: FingerprintSettings, scheme: SketchScheme
) -> list[tuple]:
    """(fingerprint, sketch) of each text, sketched with this scheme."""
    return list(zip(*simhash_and_sketch_many(texts, settings, scheme)))


def _chunks(texts: list[str], parts: int) -> list[list[str]]:
    """Consecutive chunks of about equal total length, order kept."""
    target = sum(map(len, texts)) / parts
    out: list[list[str]] = []
    current: list[str] = []
    size = 0
    for text in texts:
        current.append(text)
        size += len(text)
        if size >= target and len(out) < parts - 1:
            out.append(current)
            current, size = [], 0
    if current:
        out.append(current)
    return out


class FingerprintJob:
    """simhash_many(texts, settings), started now (in a process pool when that pays), in order from
    result(). Several may be under way at once: a caller can prepare the next batch meanwhile.

    The calling process works too: result() takes chunks from the back of the queue (cancelling
    them in the pool before a worker starts them), so n cores need only n - 1 workers.
    """

    chunks: list[list[str]]
    futures: list[Future[list[Any]]] | None  # None: all of it computed by result(), in this process

    def __init__(
        self, texts: list[str], settings: FingerprintSettings, *, start_pool: bool = True,
        sketches: SketchScheme | None = None, most: int | None = None,
    ) -> None:
        """start_pool=False: use the pool if it is running, but do not start it for this batch
        (add() passes it for its first batch: an add of one batch is done before a worker is ready).
        sketches: a sketch scheme (an index's own), and result() gives (fingerprint, sketch) of each text
        (fingerprint.simhash_and_sketch_many); None: fingerprints only. most: processes at most (workers())."""
        self.settings = settings
        # fingerprints, or (fingerprint, sketch) tuples
        self.compute: Callable[[list[str], FingerprintSettings], list[Any]] = _fingerprint_chunk
        if sketches is not None:
            self.compute = functools.partial(_fingerprint_and_sketch_chunk, scheme=sketches)
        self.local: dict[int, list[Any]] = {}  # chunks computed in this process
        size = workers(most)
        spare = ROOM.spare(size)  # decided again for each batch
        if spare < 1 or len(texts) < 2 or sum(map(len, texts)) < PARALLEL_MIN_CHARS:
            self.chunks, self.futures = [texts], None  # small, or no CPU free: computed by result(), here
            return
        if not start_pool and _pool.cache_info().currsize == 0:
            self.chunks, self.futures = [texts], None
            return
        pool, ready = _pool(size - 1)
        if not ready.done():
            # A worker takes ~0.3 s to start (a new interpreter imports numpy and the CLI). Chunks
            # queued before then could not all be taken back (the call queue holds them), and this
            # process would wait for the start: this batch stays here; later ones go to the pool.
            self.chunks, self.futures = [texts], None
            return
        if spare == size - 1:
            self.chunks = _chunks(texts, size * 4)  # a few chunks per process evens out uneven texts
            self.futures = [pool.submit(self.compute, chunk, settings) for chunk in self.chunks]
        else:  # fewer workers than the pool has: one chunk each (else every worker would take some), one here
            self.chunks = _chunks(texts, spare + 1)
            self.futures = [pool.submit(self.compute, chunk, settings) for chunk in self.chunks[:-1]]
            self.futures.append(Future())  # never submitted: result() computes it here

    def result(self, meanwhile: FingerprintJob | None = None) -> list:
        """The fingerprints in order. meanwhile: a batch started after this one; while the workers
        finish their chunks of this one, this process takes chunks of that one instead of waiting."""
        if self.futures is None:
            return self.compute(self.chunks[0], self.settings)
        while self._take_one():
            pass
        if meanwhile is not None:
            while not all(f.done() for f in self.futures) and meanwhile._take_one():
                pass
        parts = (self.local[i] if i in self.local else future.result() for i, future in enumerate(self.futures))
        return [fp for part in parts for fp in part]

    def _take_one(self) -> bool:
        """Compute the last chunk no worker has started, here; False when there is none."""
        if self.futures is None:
            return False
        for i in range(len(self.chunks) - 1, -1, -1):
            if i not in self.local and self.futures[i].cancel():
                self.local[i] = self.compute(self.chunks[i], self.settings)
                return True
        return False


def fingerprint_texts(texts: list[str], settings: FingerprintSettings) -> list[int | None]:
    """simhash_many(texts, settings), in order; in a process pool when that pays."""
    return FingerprintJob(texts, settings).result()


# map_in_order: its input must reach this many bytes (weights) before a pool is started for it; less is
# done sooner in one process than a worker starts (a new interpreter importing numpy: ~0.3 s of CPU).
POOL_AFTER_BYTES = 2 << 20
QUEUED_PER_WORKER = 3  # chunks handed to each worker ahead: they go on while this process writes a batch
_PENDING = object()


class _Slot:
    __slots__ = ("item", "future", "result")

    def __init__(self, item) -> None:
        self.item = item
        self.future: Future[Any] | None = None
        self.result: Any = _PENDING


def map_in_order(
    function: Callable[[Any], Any],
    items: Iterable,
    *,
    weight: Callable[[Any], int] = len,
    local: Callable[[Any], bool] | None = None,
    threads: bool = False,
    most: int | None = None,
) -> Iterator:
    """(item, function(item)) for each item, in order, computed by the pool's workers and by this process.

    function must be pure and picklable (a module-level function), so where an item is computed does
    not change its result. Items are read ahead, a bounded number at a time (memory stays a few
    chunks per process), and handed to the workers; the calling process computes an item itself
    whenever the next result it needs is not ready: the first not yet handed out, else the last one
    handed out that no worker has started (cancelled in the pool). So n processes need n - 1 workers,
    and a caller busy with its own work (writing to SQLite) leaves more to the workers.

    Items are handed out only while ROOM says workers have CPU free (decided again every few seconds):
    with all of them, the whole window ahead; with fewer, one item per worker that may work (the pool
    would start more at once); with none, this process computes everything. The pool starts only once
    an item is read past the first POOL_AFTER_BYTES (by weight) while a worker has room, and until a
    worker is ready everything is done here. local(item) True: always done here (an item too large to
    be worth copying to a worker). threads: a thread pool, for a function that releases the GIL (the C
    document path): a thread per core, and while every core has one the calling thread waits for the next
    result instead of computing it (its own work, writing to SQLite, is the critical path: on 2 cores it
    took a third of the chunks besides and ended last). most: workers at most (workers())."""
    size = workers(most)
    keep_freed_memory()
    items = iter(items)
    window: deque[_Slot] = deque()
    pool: Executor | None = None
    ready: Future[Any] | None = None  # done once a worker is ready
    read, exhausted, beyond = 0, False, False
    limit = QUEUED_PER_WORKER * (size - 1) + 2 if size >= 2 else 1  # one process: nothing to read ahead for
    try:
        while True:
            while not exhausted and len(window) < limit:
                item = next(items, _PENDING)
                if item is _PENDING:
                    exhausted = True
                    break
                beyond = beyond or read >= POOL_AFTER_BYTES  # there is more than POOL_AFTER_BYTES to do
                window.append(_Slot(item))
                read += weight(item)
            if not window:
                return
            spare = ROOM.spare(size)
            if pool is None and spare >= 1 and beyond:
                # Threads: one per core, so that this thread can wait for results instead of computing them (its
                # own work, writing, stays on time; a waiting thread takes no CPU). Processes: one less.
                pool, ready = _pool(size, threads=True) if threads else _pool(size - 1)  # one cache key each
            if pool is not None and ready is not None and ready.done() and spare >= 1:
                _hand_out(pool, window, function, local, len(window) if spare == size - 1 else spare)
            head = window[0]
            if head.result is _PENDING and head.future is not None and not head.future.done():
                waits = threads and spare == size - 1  # every core has a thread of the pool
                if not waits and _take_one(window, function):
                    continue  # look again: the head may be done now
                head.result = head.future.result()  # everything else is under way: wait
            window.popleft()
            if head.result is _PENDING:
                head.result = function(head.item) if head.future is None else head.future.result()
            yield head.item, head.result
    finally:
        for slot in window:  # the caller stopped early (an error, Ctrl-C): drop the work not started
            if slot.future is not None:
                slot.future.cancel()


def _hand_out(
    pool: Executor, window: deque[_Slot], function: Callable[[Any], Any], local: Callable[[Any], bool] | None,
    most: int,
) -> None:
    """Submit the window's items not yet handed out, in order, until most are in the pool unfinished."""
    busy = sum(1 for slot in window if slot.future is not None and not slot.future.done())
    for slot in window:
        if busy >= most:
            return
        if slot.future is None and slot.result is _PENDING and not (local and local(slot.item)):
            slot.future = pool.submit(function, slot.item)
            busy += 1


def _take_one(window: deque[_Slot], function: Callable[[Any], Any]) -> bool:
    """Compute one item of the window here: the first not handed out, else the last no worker has
    started. False when there is none."""
    for slot in window:
        if slot.future is None and slot.result is _PENDING:
            slot.result = function(slot.item)
            return True
    for slot in reversed(window):
        if slot.future is not None and slot.result is _PENDING and slot.future.cancel():
            slot.result = function(slot.item)
            return True
    return False
