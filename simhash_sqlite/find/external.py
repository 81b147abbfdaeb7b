"""External sort of 64-bit codes in bounded memory, and the scratch folder it writes to.

The codes go to disk in sorted runs (each as large as the memory allows); every run records where each
bucket (a range of the codes' top bits) starts in it. Reading back, one bucket at a time, its slice of
every run is read and merged, so the codes come out in ascending order with at most one bucket (plus
one run while it is written) in RAM. Used by bounded_pairs.py: the LSH window codes of every sketch
(bucketed by table and the key's top bits, so that equal keys meet in one bucket) and the candidate
pairs (bucketed by the pair of row ranges whose sketches must be read to judge them).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from collections.abc import Iterator

import numpy as np

try:
    import fcntl
except ImportError:  # Windows: no flock; the pid in the folder's name says whether its owner lives
    fcntl = None  # type: ignore[assignment]

_U64 = np.uint64


# The scratch folders simq makes in the temporary folder: PREFIX + the owner's pid + "-" + a random tail.
SCRATCH_PREFIXES = ("simq-dupes-", "simq-spill-")
# In each, a file its owner holds an flock on while it lives (the kernel drops it when the process dies, by
# SIGKILL too): a folder whose lock can be taken is a dead run's, and the next run removes it.
LOCK_NAME = ".owner.lock"


def hold_lock(folder: str) -> int:
    """An open descriptor of folder's lock file, flocked (exclusive) until it is closed."""
    fd = os.open(os.path.join(folder, LOCK_NAME), os.O_RDWR | os.O_CREAT, 0o600)
    if fcntl is None:
        return fd
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def lock_held(folder: str) -> bool | None:
    """Whether a live process holds folder's lock; None where it has no lock file (or flock is missing)."""
    if fcntl is None:
        return None
    try:
        fd = os.open(os.path.join(folder, LOCK_NAME), os.O_RDWR)
    except FileNotFoundError:
        return None
    except OSError:
        return True  # not ours to judge
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # the lock, if taken, goes with it
    return False


def owner_alive(folder: str) -> bool:
    """Whether a live process holds folder's lock (a folder without one: whether the pid in its name lives)."""
    held = lock_held(folder)
    return _pid_alive(folder) if held is None else held


def _pid_alive(folder: str) -> bool:
    name = os.path.basename(folder).lstrip(".")
    prefix = next((p for p in SCRATCH_PREFIXES if name.startswith(p)), None)
    pid = name[len(prefix):].split("-", 1)[0] if prefix else ""
    if not pid.isdigit() or os.name == "nt":
        return True  # not a name of ours, or Windows (whose os.kill(pid, 0) sends a Ctrl-C): leave it
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # alive, another user's
    return True


def remove_dead_scratch(parent: str | None = None) -> list[str]:
    """Remove the scratch folders of simq runs that died (SIGKILL, power loss) from the temporary folder (or
    parent): those named SCRATCH_PREFIXES + pid whose lock no live process holds. The folders removed."""
    parent = parent or tempfile.gettempdir()
    try:
        names = os.listdir(parent)
    except OSError:
        return []
    removed = []
    for name in names:
        hidden = name.startswith(".")  # made, not yet locked and renamed (or killed in between)
        if not name.lstrip(".").startswith(SCRATCH_PREFIXES):
            continue
        path = os.path.join(parent, name)
        if not os.path.isdir(path) or os.path.islink(path):
            continue
        if not (_pid_alive(path) if hidden else owner_alive(path)):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _remove(path: str, lock: int) -> None:
    if fcntl is None:  # Windows: an open file cannot be removed (and there is no flock to keep)
        os.close(lock)
        shutil.rmtree(path, ignore_errors=True)
        return
    shutil.rmtree(path, ignore_errors=True)
    os.close(lock)  # after the files: a folder is never seen unlocked while it is still ours


class ScratchFolder:
    """A folder in the system's temporary folder (or under `parent`), made on first use and removed by
    close(), by the end of a `with`, or when the object is collected (a generator closed by Ctrl-C). Its
    owner holds a lock in it while it lives: a run killed outright leaves it, and the next run that makes
    one removes it (remove_dead_scratch), never a live run's."""

    def __init__(self, parent: str | None = None, prefix: str = "simq-dupes-") -> None:
        self.parent, self.prefix = parent, prefix
        self.path: str | None = None
        self.files = 0
        self.bytes = 0  # written so far
        self._finalizer: weakref.finalize | None = None

    def _make(self) -> tuple[str, int]:
        """The folder, made now (the first file is asked for), and its held lock. It is made under a hidden
        name and renamed once locked, so that no other run sees it unlocked."""
        remove_dead_scratch(self.parent)
        hidden = tempfile.mkdtemp(prefix=f".{self.prefix}{os.getpid()}-", dir=self.parent)
        lock = -1
        try:
            lock = hold_lock(hidden)
            path = os.path.join(os.path.dirname(hidden), os.path.basename(hidden)[1:])
            os.rename(hidden, path)
        except BaseException:  # (no finalizer owns it yet)
            if lock >= 0:
                os.close(lock)
            shutil.rmtree(hidden, ignore_errors=True)
            raise
        return path, lock

    def new_file(self, suffix: str) -> str:
        if self.path is None:
            self.path, lock = self._make()
            self._finalizer = weakref.finalize(self, _remove, self.path, lock)
        self.files += 1
        return os.path.join(self.path, f"{self.files}{suffix}")

    def close(self) -> None:
        if self._finalizer is not None:
            self._finalizer()
        self.path, self._finalizer = None, None

    def __enter__(self) -> ScratchFolder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class BucketedRuns:
    """uint64 codes sorted on disk: add() writes the codes given as one sorted run; buckets() gives, for
    each bucket b (the codes whose value >> shift is b, 0 <= b < buckets), its codes in ascending order.
    Memory: the run being added, and one bucket while it is read."""

    def __init__(self, folder: ScratchFolder, shift: int, buckets: int) -> None:
        self.folder, self.shift, self.count = folder, shift, buckets
        self.path = folder.new_file(".runs")
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        self._finalizer = weakref.finalize(self, os.close, self._fd)
        self.starts: list[np.ndarray] = []  # per run: the file offset (in codes) of each bucket's start, and the end
        self.size = 0  # codes written

    def add(self, codes: np.ndarray) -> None:
        """Write the codes (a uint64 array, sorted here in place: no copy) as one run."""
        if not len(codes):
            return
        run = codes if codes.dtype == _U64 else codes.astype(_U64)
        run.sort()
        if int(run[-1]) >> self.shift >= self.count:
            raise ValueError(f"a code's bucket {int(run[-1]) >> self.shift} is past the last, {self.count - 1}")
        starts = np.array([b << self.shift for b in range(self.count)], dtype=_U64)
        edges = np.append(np.searchsorted(run, starts), len(run)).astype(np.int64)
        os.pwrite(self._fd, run.data, self.size * 8)
        self.starts.append(edges + self.size)
        self.size += len(run)
        self.folder.bytes += run.nbytes

    def buckets(self) -> Iterator[tuple[int, np.ndarray]]:
        """(b, its codes in ascending order) for every non-empty bucket, in order."""
        if not self.starts:
            return
        edges = np.stack(self.starts)  # runs x (buckets + 1): small (a run is as large as the memory allows)
        sizes = edges[:, 1:] - edges[:, :-1]
        for b in np.flatnonzero(sizes.sum(axis=0)).tolist():
            parts = [
                np.frombuffer(read_exactly(self._fd, int(sizes[r, b]) * 8, int(edges[r, b]) * 8), dtype=_U64)
                for r in np.flatnonzero(sizes[:, b]).tolist()
            ]
            if len(parts) == 1:
                yield b, parts[0].copy()
                continue
            merged = np.concatenate(parts)
            del parts
            merged.sort(kind="stable")  # sorted runs one after another: a merge (timsort)
            yield b, merged

    def close(self) -> None:
        self._finalizer()
        try:
            os.remove(self.path)
        except OSError:
            pass


def read_exactly(fd: int, size: int, offset: int) -> bytes:
    """Exactly size bytes of a file at offset (pread may return fewer at once)."""
    data = os.pread(fd, size, offset)
    if len(data) == size:
        return data
    parts, got = [data], len(data)
    while got < size:
        more = os.pread(fd, size - got, offset + got)
        if not more:
            raise OSError(f"the scratch file ends {size - got} bytes short")
        parts.append(more)
        got += len(more)
    return b"".join(parts)
