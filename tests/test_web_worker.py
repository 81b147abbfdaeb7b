"""The web pages' worker process (simhash_sqlite/web/worker.py) on its own: answers and errors cross the
process boundary as they were raised, a result that cannot cross says so, a worker that died is told
apart and replaced, and stop() closes the worker's connections and folds the WAL (no -wal, -shm left)."""

from __future__ import annotations

import os
import signal

import pytest

from simhash_sqlite import Document, SimhashIndex
from simhash_sqlite.errors import InvalidMetadata, NotAnIndex
from simhash_sqlite.web import worker


def count(index) -> int:
    return len(index)


def refuse_settings(index) -> None:
    raise InvalidMetadata(index.path, "fingerprint", "made up for the test")


def unpicklable(index):
    return lambda: None


def pid(index) -> int:
    return os.getpid()


def test_answers_errors_and_a_dead_worker(tmp_path):
    db = tmp_path / "index.db"
    with SimhashIndex(db, create=True) as index:
        index.add([Document(f"d{i}", f"text number {i} of a few") for i in range(7)])
    path = str(db)
    try:
        assert worker.call("read", worker.with_index, path, count).result(60) == 7
        error = worker.call("labels", worker.with_index, path, refuse_settings).exception(60)
        assert isinstance(error, InvalidMetadata) and "made up for the test" in str(error)  # (its __init__ differs)
        (tmp_path / "other.txt").write_text("not a database")
        assert isinstance(worker.call("read", worker.with_index, str(tmp_path / "other.txt"), count).exception(60),
                          NotAnIndex)
        assert "pickle" in str(worker.call("read", worker.with_index, path, unpicklable).exception(60)).lower()
        first = worker.call("read", worker.with_index, path, pid).result(60)
        assert first != os.getpid() and (db.parent / "index.db-wal").exists()
        current = worker.get()
        os.kill(first, signal.SIGKILL)
        assert current._stopped.wait(30)  # its answers thread saw the end
        with pytest.raises(worker.WorkerStopped, match="reload the page"):
            current.call("read", worker.with_index, path, count).result(60)
        assert worker.call("read", worker.with_index, path, pid).result(60) not in (first, os.getpid())
    finally:
        worker.stop(fold=[path])
    assert not (db.parent / "index.db-wal").exists() and not (db.parent / "index.db-shm").exists()
