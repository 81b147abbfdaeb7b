"""The web pages' work on an index file, in a process of its own: one SQLite library per process.

SQLite's locks on a file are POSIX locks, which belong to a process, and closing any descriptor of the
file drops all of that process's locks on it. One SQLite library works around this by tracking its
own descriptors; two libraries in one process (Datasette's stdlib `sqlite3` and apsw's bundled SQLite)
do not see each other's, so each close by one dropped the other's locks (SQLite's "How To Corrupt An
SQLite Database File", 2.2.1). Another process then found the file unlocked: a `sqlite3` shell reading
the index during a review took the -wal and -shm files away as it closed, the labels written after
went into a deleted WAL, and a read-only server answered "database disk image is malformed".

So Datasette's process opens the file only with the stdlib's `sqlite3` (Datasette's own connections),
and everything this package does with it (searches and pages, labels and keepers, the checks before
serving and the WAL folded away after) runs here, in one child process that opens it only with apsw.
They talk through a pipe: a call names a lane, a module-level function and its arguments (pickled);
the answer is its result, or its exception. Lanes: `read` (READ_THREADS threads, each with its own
read-only SimhashIndex of each file, so a search's arrays serve the next ones), `labels` (small reads of
labels and keepers, never queued behind a search), `write` (one thread: the labels' own connection,
one transaction a decision) and `sample` (the review sample, drawn once in the background).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import itertools
import multiprocessing
import os
import pickle
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import apsw

from ..errors import SimhashError

READ_THREADS = 2
LANES = {"read": READ_THREADS, "labels": 1, "write": 1, "sample": 1}
_STOP = "stop"


class WorkerStopped(SimhashError):
    """The pages' worker process ended (killed, or out of memory): the page can be reloaded."""


# -- in the worker process ---------------------------------------------------------------------------

_local = threading.local()
_opened: list = []  # every index and connection opened here, closed when the worker stops
_opened_lock = threading.Lock()
_writers: dict[str, apsw.Connection] = {}  # only the write lane's one thread touches it


def index(path: str):
    """This thread's read-only SimhashIndex of the file (one per thread: see SimhashIndex)."""
    from ..index import SimhashIndex

    indexes = _local.__dict__.setdefault("indexes", {})
    if path not in indexes:
        indexes[path] = SimhashIndex(path, readonly=True)
        with _opened_lock:
            _opened.append(indexes[path])
    return indexes[path]


def with_index(path: str, work: Callable, *args, **kwargs):
    """work(index, *args, **kwargs) on this thread's index of `path` (a call of the read or labels lane)."""
    return work(index(path), *args, **kwargs)


def with_writer(path: str, work: Callable, *args, **kwargs):
    """work(connection, *args, **kwargs) on the labels' writing connection to `path` (the write lane):
    opened once, an older index migrated to the labels tables, a read-only file refused in one line."""
    from ..store.labels import open_for_labels

    if path not in _writers:
        _writers[path] = open_for_labels(path)
    return work(_writers[path], *args, **kwargs)


_warming = threading.Barrier(READ_THREADS)


def warm(paths: list[str], k: int) -> None:
    """Open the files on one read thread and read what a search scans (called READ_THREADS times: the
    barrier has each thread take one), so that the first search answers as fast as the next ones."""
    with contextlib.suppress(threading.BrokenBarrierError):
        _warming.wait(timeout=30)
    for path in paths:
        with contextlib.suppress(SimhashError):  # not an index: its pages say so
            index(path).search(fingerprint=0, k=k, check=False, plan="scan")


def fold_wal(path: str) -> None:
    """After the server: the -wal and -shm files its readers used are removed, as the last connection to
    close does when it can write (a read-only one cannot): a connection of ours, opened and closed last."""
    if not any(os.path.exists(path + end) for end in ("-wal", "-shm")):
        return
    with contextlib.suppress(apsw.Error, OSError):
        conn = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READWRITE)
        try:
            conn.set_busy_timeout(2000)
            conn.execute("SELECT count(*) FROM sqlite_schema").get
        finally:
            conn.close()


def _close_everything() -> None:
    for conn in _writers.values():  # the labels' WAL back into the file first
        with contextlib.suppress(Exception):
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    with _opened_lock:
        opened = [*_writers.values(), *_opened]
        _writers.clear()
        _opened.clear()
    for thing in opened:
        with contextlib.suppress(Exception):
            thing.close()


class _Rebuilt:
    """An exception whose pickle does not load back (an __init__ of other arguments): its class and
    message, made again in the server process."""

    def __init__(self, exc: BaseException):
        self.module, self.name, self.message = type(exc).__module__, type(exc).__qualname__, str(exc)

    def exception(self) -> BaseException:
        import importlib

        found: Any = None
        with contextlib.suppress(ImportError, AttributeError):
            found = functools.reduce(getattr, self.name.split("."), importlib.import_module(self.module))
        cls: type[BaseException] = (
            found if isinstance(found, type) and issubclass(found, BaseException) else RuntimeError
        )
        exc = cls.__new__(cls)
        exc.args = (self.message,)
        return exc


def _portable(exc: BaseException) -> Any:
    if not isinstance(exc, SimhashError):  # a fault of ours: its traceback in the server's log
        traceback.print_exception(exc, file=sys.stderr)
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return _Rebuilt(exc)
    return exc


def _serve(conn) -> None:
    """The worker's main loop: run each call on its lane, answer when it is done; at the stop (or when the
    server is gone), finish the calls under way, close every connection and fold the WALs asked for."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the server stops us in order
    lanes = {name: ThreadPoolExecutor(n, thread_name_prefix=f"simhash-{name}") for name, n in LANES.items()}
    sending = threading.Lock()

    def answer(ident: int, future: Future) -> None:
        try:
            reply = (ident, True, future.result())
        except BaseException as exc:
            reply = (ident, False, _portable(exc))
        with sending:
            try:
                conn.send(reply)
            except (EOFError, OSError):
                pass  # the server is gone
            except Exception as exc:  # a result that does not pickle
                conn.send((ident, False, _portable(exc)))

    fold: list[str] = []
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            break  # the server ended (even by SIGKILL): close what is open and go
        if message[0] == _STOP:
            fold = message[1]
            break
        ident, lane, fn, args, kwargs = message
        lanes[lane].submit(fn, *args, **kwargs).add_done_callback(functools.partial(answer, ident))
    for executor in lanes.values():
        executor.shutdown(wait=True)
    _close_everything()
    for path in fold:
        fold_wal(path)
    with sending, contextlib.suppress(Exception):
        conn.send((_STOP, True, None))


# -- in the server process ------------------------------------------------------------------------------


class Worker:
    """The server's handle on its worker process: call() sends work, stop() ends it."""

    def __init__(self) -> None:
        context = multiprocessing.get_context("spawn")  # never fork a process with threads and an event loop
        self._conn, theirs = context.Pipe()
        self._process = context.Process(target=_serve, args=(theirs,), name="simhash-web-worker", daemon=True)
        self._process.start()
        theirs.close()
        self._pending: dict[int, Future] = {}
        self._pending_lock = threading.Lock()
        self._sending = threading.Lock()
        self._ids = itertools.count()
        self._stopped = threading.Event()
        threading.Thread(target=self._receive, name="simhash-web-answers", daemon=True).start()

    def alive(self) -> bool:
        return not self._stopped.is_set() and self._process.is_alive()

    def call(self, lane: str, fn: Callable, *args, **kwargs) -> Future:
        """fn(*args, **kwargs) on the worker's `lane`; a Future of its result."""
        future: Future = Future()
        with self._pending_lock:
            if self._stopped.is_set():
                future.set_exception(WorkerStopped("the pages' worker process has stopped; reload the page"))
                return future
            ident = next(self._ids)
            self._pending[ident] = future
        try:
            with self._sending:
                self._conn.send((ident, lane, fn, args, kwargs))
        except Exception as exc:
            with self._pending_lock:
                self._pending.pop(ident, None)
            future.set_exception(exc if isinstance(exc, (pickle.PicklingError, TypeError, AttributeError))
                                 else WorkerStopped(f"the pages' worker process cannot be reached ({exc})"))
        return future

    def _receive(self) -> None:
        while True:
            try:
                ident, ok, value = self._conn.recv()
            except (EOFError, OSError):
                break
            if ident == _STOP:
                break
            with self._pending_lock:
                future = self._pending.pop(ident, None)
            if future is None:
                continue
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value.exception() if isinstance(value, _Rebuilt) else value)
        with self._pending_lock:
            self._stopped.set()
            pending, self._pending = self._pending, {}
        code = self._process.exitcode
        for future in pending.values():
            future.set_exception(WorkerStopped(
                f"the pages' worker process stopped{'' if code is None else f' (exit code {code})'}; reload the page"))

    def stop(self, fold: Sequence[str] = (), timeout: float = 60.0) -> None:
        """Finish the calls under way, close the worker's connections, fold the WALs of `fold` (the last
        connection to each file, once Datasette's are closed) and end the process."""
        if self._process.is_alive():
            with contextlib.suppress(Exception), self._sending:
                self._conn.send((_STOP, list(fold)))
            self._process.join(timeout)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()
        with contextlib.suppress(Exception):
            self._conn.close()


_worker: Worker | None = None
_worker_lock = threading.Lock()


def get() -> Worker:
    """The server's worker process, started on first use (again, if it ended)."""
    global _worker
    with _worker_lock:
        if _worker is None or not _worker.alive():
            if _worker is None:
                atexit.register(stop)  # a plain `datasette` ends without telling plugins: close in order
            _worker = Worker()
        return _worker


def call(lane: str, fn: Callable, *args, **kwargs) -> Future:
    return get().call(lane, fn, *args, **kwargs)


def stop(fold: Sequence[str] = ()) -> None:
    """Stop the worker, if one runs (simq serve, when Datasette has closed its connections)."""
    global _worker
    with _worker_lock:
        worker, _worker = _worker, None
    if worker is not None:
        worker.stop(fold)
